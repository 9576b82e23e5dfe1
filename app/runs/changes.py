"""Marking runs changed, so they are regraded soon, and the worker's sweep for the
runs due a grading. A run's own FHIR writes mark it in the write statement itself
(`TOUCH_LIVE_RUNS`, `app/runs/repository.py`); these are the other changes."""

from __future__ import annotations

import uuid

import asyncpg

from app.db import Tx
from app.kit.clock import utcnow
from app.runs import repository


async def runs_needing_grades(pool: asyncpg.Pool) -> list[tuple[uuid.UUID, str]]:
    """Live runs with something new since their last grading, or past their deadline."""
    rows = await repository.runs_due_grading(pool, now=utcnow())
    return [(r["tenant_id"], r["id"]) for r in rows]


async def mark_changed(
    tx: Tx, attributed: set[tuple[uuid.UUID, str]], shared_tenants: set[uuid.UUID]
) -> None:
    """Traced calls happened: mark the runs they belong to (a shared call: every live run
    of its tenant) as changed, to be regraded soon."""
    if not attributed and not shared_tenants:
        return
    rows = await repository.mark_changed(
        tx.conn,
        tenant_ids=[t for t, _ in attributed],
        run_ids=[r for _, r in attributed],
        shared_tenants=list(shared_tenants),
        at=utcnow(),
    )
    for r in rows:
        tx.after.grade(r["tenant_id"], r["id"])


async def mark_runs_changed(tx: Tx, tenant_id: uuid.UUID, run_ids: set[str]) -> None:
    """Something the runs' expectations watch changed outside their FHIR writes (a webhook
    delivery ended): have the live ones regraded soon."""
    rows = await repository.mark_runs_changed(tx.conn, tenant_id=tenant_id, run_ids=sorted(run_ids))
    for r in rows:
        tx.after.grade(tenant_id, r["id"])
