"""Statements that lock several runs lock them in (tenant, id) order, so two of them can
never each hold a run the other waits for. The fuzzer found a deadlock (a 500) between an
eval's cancel, which locks its live runs in id order, and a write marking runs changed,
which locked them in the order it was given them."""

from __future__ import annotations

import asyncio

import asyncpg

from app.db import Conn, Database
from app.runs import repository
from tests.conftest import TenantHandle
from tests.runs.test_run_flow import api, start
from tests.waiting import blocked_on_a_lock


async def _locked_elsewhere(conn: Conn, tenant: TenantHandle, run_id: str) -> bool:
    """Whether another transaction holds the run's row lock (NOWAIT answers at once)."""
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT 1 FROM run WHERE tenant_id = $1 AND id = $2 FOR UPDATE NOWAIT",
                tenant.id,
                run_id,
            )
    except asyncpg.LockNotAvailableError:
        return True
    return False


async def test_marking_runs_changed_locks_them_in_id_order(
    tenant: TenantHandle, db: Database
) -> None:
    """(`mark_runs_changed`, the worker's, takes the same CTE; with its `id = ANY` the
    order a scan meets the rows in cannot be set up reliably here, so it is not tested.)"""
    # Two runs written higher id first, so a scan in the table's order meets `high` first.
    while True:
        first, second = (await start(tenant))["id"], (await start(tenant))["id"]
        if first > second:
            break
        await _cancel(tenant, first, second)
    high, low = first, second
    async with db.pool.acquire() as holder, db.pool.acquire() as marker, db.pool.acquire() as probe:
        # Whatever plan the planner picks for a big table: here a scan in table order
        # (with few rows it would walk the primary key, in id order by chance).
        await marker.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
        holding = holder.transaction()
        await holding.start()
        await holder.execute(
            "SELECT 1 FROM run WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenant.id, low
        )
        # Locking in the order found would take `high`, then wait for `low`; in id order
        # it waits for `low` holding nothing.
        marking = repository.mark_changed(
            marker,
            tenant_ids=[tenant.id, tenant.id],
            run_ids=[high, low],
            shared_tenants=[],
            at=await marker.fetchval("SELECT now()"),
        )
        task = asyncio.create_task(marking)
        try:
            await blocked_on_a_lock(probe, task, pid=marker.get_server_pid())  # for `low`
            assert not await _locked_elsewhere(probe, tenant, high)
        finally:
            await holding.rollback()
        marked = await task
        await marker.execute("RESET enable_indexscan; RESET enable_bitmapscan")
    assert sorted(r["id"] for r in marked) == [low, high]
    await _cancel(tenant, low, high)


async def _cancel(tenant: TenantHandle, *run_ids: str) -> None:
    async with api(tenant) as client:
        for run_id in run_ids:
            await client.post(f"/runs/{run_id}/cancel")
