"""Reading runs: one by id, a page of them, several by id, the live ones, a run's
scheduling setting and the marker its page polls. Typed values out, never rows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn, like_prefix
from app.runs import repository
from app.runs.errors import RunNotFound
from app.runs.row import RunRow


async def get_run(conn: Conn, tenant_id: uuid.UUID, run_id: str) -> RunRow:
    row = await repository.run(conn, tenant_id=tenant_id, run_id=run_id)
    if row is None:
        raise RunNotFound(f"no run '{run_id}'")
    return RunRow.from_record(row)


async def list_runs(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    *,
    label: str | None,
    status: str | None,
    scenario_id: str | None,
    limit: int,
    before: tuple[datetime, str] | None = None,
    revision: str | None = None,
    label_prefix: str | None = None,
) -> list[RunRow]:
    """Newest first; `label` exact, `label_prefix` a prefix; `before`: the (started_at, id)
    of the last run of the previous page."""
    rows = await repository.runs(
        pool,
        tenant_id=tenant_id,
        label=label,
        label_like=like_prefix(label_prefix) if label_prefix else None,
        status=status,
        scenario_id=scenario_id,
        limit=limit,
        before=before,
        revision=revision,
    )
    return [RunRow.from_record(r) for r in rows]


async def run_scheduling(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> str:
    """The run's scheduling rules (`strict` or `lenient`, recorded at start); RunNotFound
    unless the tenant has that run."""
    setting = await repository.run_scheduling(conn, tenant_id=tenant_id, run_id=run_id)
    if setting is None:
        raise RunNotFound(f"no run '{run_id}'")
    return setting


async def runs_by_id(
    conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_ids: list[str]
) -> dict[str, RunRow]:
    """The tenant's runs among `run_ids`, by id (unknown ids are left out)."""
    if not run_ids:
        return {}
    rows = await repository.runs_by_id(conn, tenant_id=tenant_id, run_ids=run_ids)
    return {r["id"]: RunRow.from_record(r) for r in rows}


@dataclass(frozen=True, slots=True)
class LiveRunRef:
    run_id: str
    scenario_id: str
    started_at: datetime


async def live_runs(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID) -> list[LiveRunRef]:
    """The tenant's live runs, oldest first, as the database has them now."""
    rows = await repository.live_runs(conn, tenant_id=tenant_id)
    return [LiveRunRef(r["id"], r["scenario_id"], r["started_at"]) for r in rows]


async def run_marker(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> str:
    """A short text that changes whenever what the run's page shows may have changed (a
    write or traced call of the run, a grading pass, its end), read from the run's row:
    the same in every API process. RunNotFound unless the tenant has the run."""
    row = await repository.run_marker(conn, tenant_id=tenant_id, run_id=run_id)
    if row is None:
        raise RunNotFound(f"no run '{run_id}'")
    parts = (
        row["status"],
        row["changed_at"],
        row["graded_at"],
        row["progress"],
        row["finished_at"],
    )
    return "|".join("" if p is None else str(p) for p in parts)
