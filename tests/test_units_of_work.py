"""The unit of work (app/db.py `Scopes.transaction`): what a service notes in `tx.after`
is sent only once its transaction committed, after the commit is visible to everyone,
and a rollback sends nothing. Real PostgreSQL and Redis; the in-process hooks are the
test's own callables, as main.py wires its caches."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from app.db import Database, Scopes
from app.jobs import GRADE_DEBOUNCE_SECONDS, GRADE_JOB, InProcess, Jobs, connect_jobs
from tests.conftest import REDIS_URL


@pytest.fixture
async def jobs() -> AsyncIterator[Jobs]:
    # A queue no worker reads: the test looks at what was enqueued.
    queue = f"understudy:test-uow:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    connected = await connect_jobs(REDIS_URL, queue)
    yield connected
    await connected.redis.delete(queue)
    await connected.close()


async def _queued(jobs: Jobs) -> list[tuple[str, tuple[object, ...]]]:
    return [(j.function, j.args) for j in await jobs.redis.queued_jobs(queue_name=jobs.queue_name)]


async def test_effects_are_sent_after_commit_and_see_it(db: Database, jobs: Jobs) -> None:
    tenant_id = uuid.uuid4()  # a tenant of its own: the row below touches no one else
    seen: list[tuple[str, object]] = []

    async def committed() -> bool:
        # Another connection: only a committed row is visible from it.
        value = await db.pool.fetchval(
            "SELECT writes FROM usage_counter WHERE tenant_id = $1", tenant_id
        )
        return value is not None

    async def promote(t: uuid.UUID) -> None:
        seen.append(("promote", await committed()))

    hooks = InProcess(
        live_changed=lambda t: seen.append(("live", t)),
        wrote=lambda t, n: seen.append(("wrote", n)),
        promote=promote,
    )
    scopes = Scopes(db.pool, jobs, hooks)
    try:
        async with scopes.transaction() as tx:
            await tx.conn.execute(
                "INSERT INTO usage_counter (tenant_id, day, shard, writes) "
                "VALUES ($1, current_date, 0, 1)",
                tenant_id,
            )
            tx.after.grade(tenant_id, "run_a")
            tx.after.grade(tenant_id, "run_a")  # one job per run
            tx.after.wrote(tenant_id, 3)
            tx.after.live_changed(tenant_id)
            tx.after.promote(tenant_id)
            assert seen == [] and await _queued(jobs) == []  # nothing before the commit
            assert not await committed()
        assert seen == [("live", tenant_id), ("wrote", 3), ("promote", True)]
        ((name, (tenant, run, window_end)),) = await _queued(jobs)
        assert (name, tenant, run) == (GRADE_JOB, str(tenant_id), "run_a")
        # The job is told when its debounce window ends: just ahead, on the window grid.
        assert isinstance(window_end, float)
        assert 0 < window_end - time.time() <= GRADE_DEBOUNCE_SECONDS
        assert (window_end / GRADE_DEBOUNCE_SECONDS).is_integer()
    finally:
        await db.pool.execute("DELETE FROM usage_counter WHERE tenant_id = $1", tenant_id)


async def test_a_rollback_sends_nothing(db: Database, jobs: Jobs) -> None:
    tenant_id = uuid.uuid4()
    seen: list[uuid.UUID] = []
    scopes = Scopes(db.pool, jobs, InProcess(live_changed=seen.append))
    with pytest.raises(RuntimeError, match="refused"):
        async with scopes.transaction() as tx:
            tx.after.grade(tenant_id, "run_b")
            tx.after.deliver(tenant_id)
            tx.after.live_changed(tenant_id)
            raise RuntimeError("refused")
    assert seen == [] and await _queued(jobs) == []


async def test_a_grading_job_still_waiting_takes_later_changes(jobs: Jobs) -> None:
    """A change to a run whose grading job of an earlier window is queued and not started
    queues nothing more (that job reads the run once it starts); once that job is marked
    in progress, the next change queues a job of its own window."""
    tenant_id = uuid.uuid4()
    run_id, other = (f"run_{uuid.uuid4().hex[:12]}" for _ in range(2))
    bucket = int(time.time() / GRADE_DEBOUNCE_SECONDS) - 3  # a job three windows back
    earlier = f"grade:{run_id}:{bucket}"
    await jobs.redis.enqueue_job(
        GRADE_JOB, str(tenant_id), run_id, 0.0, _job_id=earlier, _queue_name=jobs.queue_name
    )
    try:
        await jobs.grade_soon(tenant_id, run_id)
        assert [j.job_id for j in await jobs.redis.queued_jobs(queue_name=jobs.queue_name)] == [
            earlier
        ]
        await jobs.redis.set(f"arq:in-progress:{earlier}", b"1", px=60_000)  # a worker took it
        await jobs.grade_soon(tenant_id, run_id)
        queued = {j.job_id for j in await jobs.redis.queued_jobs(queue_name=jobs.queue_name)}
        assert len(queued) == 2 and earlier in queued
        await jobs.grade_soon(tenant_id, other)  # another run: its own job
        assert len(await jobs.redis.queued_jobs(queue_name=jobs.queue_name)) == 3
    finally:
        keys = [
            key
            for run in (run_id, other)
            async for key in jobs.redis.scan_iter(match=f"arq:*:grade:{run}:*")
        ]
        if keys:
            await jobs.redis.delete(*keys)
