"""Ending runs by hand and removing an ended run's data: cancelling live runs (one, or
those of a list still live) and deleting a run's resources. A run that ends frees a
live slot (`slot_freed`)."""

from __future__ import annotations

import uuid

from app.db import Tx
from app.fhir import service as fhir_service
from app.kit.clock import utcnow
from app.runs import repository
from app.runs.errors import RunNotLive, RunStillLive
from app.runs.reads import get_run
from app.runs.row import RunRow, RunStatus


async def cancel_live_runs(tx: Tx, tenant_id: uuid.UUID, run_ids: list[str]) -> list[str]:
    """Cancel those of the runs still live, in the caller's transaction (locked first, so
    a concurrent finish or grading waits). Returns the runs cancelled."""
    cancelled: list[str] = []
    for run_id in await repository.lock_live_runs(tx.conn, tenant_id=tenant_id, run_ids=run_ids):
        await cancel_run(tx, tenant_id, run_id)
        cancelled.append(run_id)
    return cancelled


def slot_freed(tx: Tx, tenant_id: uuid.UUID) -> None:
    """A run ended: once committed, the live-run cache is dropped and queued eval items
    are promoted into the slot."""
    tx.after.live_changed(tenant_id)
    tx.after.promote(tenant_id)


async def cancel_run(tx: Tx, tenant_id: uuid.UUID, run_id: str) -> RunRow:
    conn = tx.conn
    row = await repository.cancel_live_run(conn, tenant_id=tenant_id, run_id=run_id, at=utcnow())
    if row is None:
        run = await get_run(conn, tenant_id, run_id)
        raise RunNotLive(f"run '{run_id}' already ended as {run.status}")
    slot_freed(tx, tenant_id)
    return RunRow.from_record(row)


async def delete_run_data(tx: Tx, tenant_id: uuid.UUID, run_id: str) -> int:
    """Remove the run's resources (its fixture patients and everything it created) with
    their history, in the caller's transaction. Returns how many resources were removed."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("delete_run_data runs inside the caller's transaction")
    run = await get_run(conn, tenant_id, run_id)
    if run.status == RunStatus.LIVE:
        raise RunStillLive(f"run '{run_id}' is live: finish or cancel it before deleting its data")
    removed = await fhir_service.delete_run_resources(conn, tenant_id, run_id)
    await repository.delete_refs(conn, tenant_id=tenant_id, run_id=run_id)
    return removed
