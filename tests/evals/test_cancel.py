"""Cancelling an eval while its items are being started: no run of a cancelled eval stays
live, and no item is ever started twice, whatever the promoters are doing."""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import httpx

from app.db import Database, Scopes
from app.errors import AppError
from app.evals import service as evals_service
from app.jobs import Jobs, connect_jobs
from app.tenants.quota import QuotaGuard, RunLimits
from tests.conftest import REDIS_URL, TenantHandle

SCENARIO = "scheduling.noshow-outreach"
MAX_LIVE = 20
QUOTA = 20_000


def _scopes(db: Database) -> Scopes:
    """Units of work with no queue and no promotion hook: the tests promote themselves."""
    return Scopes(db.pool)


async def _plan(db: Database, tenant_id: uuid.UUID, label: str, repeats: int) -> str:
    async with _scopes(db).transaction() as tx:
        return await evals_service.create_eval(
            tx,
            tenant_id,
            evals_service.EvalRequest(
                mode="workflow",
                label=label,
                scenarios=[SCENARIO],
                repeats=repeats,
                personas="all",  # baseline + 2 personas
                timeout_seconds=None,
            ),
            root_url="http://127.0.0.1:9",
        )


async def _promote(db: Database, tenant_id: uuid.UUID, jobs: Jobs | None = None) -> list[str]:
    limits = RunLimits(MAX_LIVE, QuotaGuard(db.pool, QUOTA))
    return await evals_service.promote(Scopes(db.pool, jobs), tenant_id, limits=limits)


async def _cancel(db: Database, tenant_id: uuid.UUID, eval_id: str) -> None:
    async with _scopes(db).transaction() as tx:
        await evals_service.cancel_eval(tx, tenant_id, eval_id)


async def _live_runs_of(db: Database, tenant_id: uuid.UUID, eval_id: str) -> int:
    count: int = await db.pool.fetchval(
        """SELECT count(*) FROM run r WHERE r.tenant_id = $1 AND r.status = 'live'
            AND r.id IN (SELECT run_id FROM eval_item WHERE tenant_id = $1 AND eval_id = $2)""",
        tenant_id,
        eval_id,
    )
    return count


async def _runs_labelled(db: Database, tenant_id: uuid.UUID, label: str) -> int:
    count: int = await db.pool.fetchval(
        "SELECT count(*) FROM run WHERE tenant_id = $1 AND label = $2", tenant_id, label
    )
    return count


async def _items_with_runs(db: Database, tenant_id: uuid.UUID, eval_id: str) -> int:
    count: int = await db.pool.fetchval(
        """SELECT count(*) FROM eval_item WHERE tenant_id = $1 AND eval_id = $2
            AND run_id IS NOT NULL""",
        tenant_id,
        eval_id,
    )
    return count


async def test_cancel_while_promoters_start_items(db: Database, tenant: TenantHandle) -> None:
    rng = random.Random(20261201)
    for round_no in range(25):
        label = f"race-{round_no}"
        eval_id = await _plan(db, tenant.id, label, repeats=2)  # 6 items

        async def cancel_soon(eval_id: str = eval_id) -> None:
            await asyncio.sleep(rng.uniform(0, 0.04))
            await _cancel(db, tenant.id, eval_id)

        # Three promoters race each other and the cancel.
        await asyncio.gather(
            _promote(db, tenant.id),
            _promote(db, tenant.id),
            _promote(db, tenant.id),
            cancel_soon(),
        )
        await _promote(db, tenant.id)  # a promoter after the cancel starts nothing of it
        assert await _live_runs_of(db, tenant.id, eval_id) == 0, f"round {round_no}"
        states = await db.pool.fetch(
            "SELECT state FROM eval_item WHERE tenant_id = $1 AND eval_id = $2",
            tenant.id,
            eval_id,
        )
        assert {r["state"] for r in states} <= {"cancelled", "started"}
        # Every run of this eval belongs to exactly one item: nothing started twice.
        assert await _runs_labelled(db, tenant.id, label) == await _items_with_runs(
            db, tenant.id, eval_id
        )


async def test_a_failure_while_marking_an_item_started_starts_nothing(
    db: Database, tenant: TenantHandle
) -> None:
    """The run's writes and the item's 'started' mark are one transaction: a failure
    between them (a trigger refusing the mark, standing in for a crash) rolls the run back
    and sends none of its jobs, and the next promotion starts each item exactly once."""
    queue = f"understudy:test-crash:{uuid.uuid4().hex[:8]}"  # read by no worker
    jobs = await connect_jobs(REDIS_URL, queue)
    try:
        await _crash_between_steps(db, tenant, jobs)
    finally:
        await jobs.redis.delete(queue)
        await jobs.close()


async def _crash_between_steps(db: Database, tenant: TenantHandle, jobs: Jobs) -> None:
    label = f"crash-{uuid.uuid4().hex[:6]}"
    eval_id = await _plan(db, tenant.id, label, repeats=1)  # 3 items
    trigger = f"refuse_{uuid.uuid4().hex[:8]}"
    await db.pool.execute(
        f"""CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.eval_id = '{eval_id}' AND NEW.state = 'started' THEN
                RAISE EXCEPTION 'injected failure before the item is marked started';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER {trigger} BEFORE UPDATE ON eval_item
            FOR EACH ROW EXECUTE FUNCTION {trigger}();"""
    )
    try:
        try:
            await _promote(db, tenant.id, jobs)
        except Exception as exc:
            assert "injected failure" in str(exc)
            assert not isinstance(exc, AppError)
        else:
            raise AssertionError("the injected failure did not surface")
        assert await _runs_labelled(db, tenant.id, label) == 0  # rolled back with the mark
        queued = await db.pool.fetchval(
            """SELECT count(*) FROM eval_item WHERE tenant_id = $1 AND eval_id = $2
                AND state = 'queued'""",
            tenant.id,
            eval_id,
        )
        assert queued == 3
        assert await jobs.redis.queued_jobs(queue_name=jobs.queue_name) == []
    finally:
        await db.pool.execute(f"DROP TRIGGER {trigger} ON eval_item; DROP FUNCTION {trigger}();")
    started = await _promote(db, tenant.id, jobs)
    assert await _runs_labelled(db, tenant.id, label) == 3
    assert await _items_with_runs(db, tenant.id, eval_id) == 3
    # Each run this promotion started (the session's worker may have started some of
    # them first, on its own queue) had its grading sent once its start committed.
    graded = {j.args[1] for j in await jobs.redis.queued_jobs(queue_name=jobs.queue_name)}
    assert graded == set(started)
    await _cancel(db, tenant.id, eval_id)


async def test_cancel_right_after_create_over_http(tenant: TenantHandle) -> None:
    """The probe that found the bug: evals cancelled right after creating them, with the
    worker promoting meanwhile, leave no run live."""
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    ) as client:
        ids = []
        for n in range(12):
            created = await client.post(
                "/evals",
                json={
                    "mode": "workflow",
                    "label": f"probe {n}",
                    "scenarios": [SCENARIO],
                    "repeats": 2,
                    "personas": "all",
                },
            )
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
            cancelled = await client.post(f"/evals/{ids[-1]}/cancel")
            assert cancelled.status_code == 200, cancelled.text
        # Give the worker's promotion ticks (every 2 s) a chance to act on stale state.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            live = (await client.get("/runs", params={"status": "live"})).json()
            assert live["runs"] == [], live
            await asyncio.sleep(0.5)
        for eval_id in ids:
            view = (await client.get(f"/evals/{eval_id}")).json()
            assert view["status"] in ("cancelled", "completed"), view["status"]
