"""`enqueue`, arq's enqueue as one script (app/job_queue.py): the job it writes is the
one arq writes (its payload, expiry and place in the queue), a second of the same id is
a no-op, and `unless_waiting` collapses it into an earlier job that has not started."""

from __future__ import annotations

import time
import uuid
from typing import Any

from arq.constants import in_progress_key_prefix, job_key_prefix
from arq.jobs import deserialize_job

from app.job_queue import EXISTS, QUEUED, WAITING, enqueue, redis_pool
from app.settings import Settings

# What both payloads hold: the job, its arguments, no kwargs, no try set (arq's job_try).
EXPECTED: tuple[Any, ...] = ("a_job", ("x", 2), {}, None)


async def test_the_script_enqueues_as_arq_does(settings: Settings) -> None:
    assert settings.redis_url is not None
    redis = redis_pool(settings.redis_url)
    queue = f"understudy:test-enqueue:{uuid.uuid4().hex}"
    mine, theirs, later = (f"{name}-{uuid.uuid4().hex}" for name in ("mine", "theirs", "later"))
    try:
        before = time.time() * 1000
        assert (
            await enqueue(redis, "a_job", "x", 2, job_id=mine, queue_name=queue, defer_by=1.5)
            == QUEUED
        )
        ours = await redis.get(job_key_prefix + mine)
        ttl_ms = await redis.pttl(job_key_prefix + mine)
        score = await redis.zscore(queue, mine)
        assert (
            await redis.enqueue_job(
                "a_job", "x", 2, _job_id=theirs, _queue_name=queue, _defer_by=1.5
            )
            is not None
        )
        arqs = await redis.get(job_key_prefix + theirs)
        ours_job, arqs_job = deserialize_job(ours), deserialize_job(arqs)
        assert (ours_job.function, ours_job.args, ours_job.kwargs, ours_job.job_try) == (
            arqs_job.function, arqs_job.args, arqs_job.kwargs, arqs_job.job_try,
        ) == EXPECTED  # fmt: skip
        # arq keeps whole milliseconds, read back through a datetime: a millisecond's slack.
        assert before - 1 <= ours_job.enqueue_time.timestamp() * 1000 <= time.time() * 1000 + 1
        assert score == round(ours_job.enqueue_time.timestamp() * 1000) + 1500
        assert abs(ttl_ms - await redis.pttl(job_key_prefix + theirs)) < 1000
        assert 86_400_000 < ttl_ms <= 86_400_000 + 1500

        # The same id again: nothing written.
        assert await enqueue(redis, "a_job", "y", job_id=mine, queue_name=queue) == EXISTS
        assert deserialize_job(await redis.get(job_key_prefix + mine)).args == ("x", 2)
        # An earlier job queued and not started takes the new one's place...
        assert (
            await enqueue(redis, "a_job", job_id=later, queue_name=queue, unless_waiting=[mine])
            == WAITING
        )
        assert await redis.zscore(queue, later) is None
        # ...but not once the worker started it: then the new job is queued.
        await redis.set(in_progress_key_prefix + mine, b"1", px=10_000)
        assert (
            await enqueue(redis, "a_job", job_id=later, queue_name=queue, unless_waiting=[mine])
            == QUEUED
        )
        assert await redis.zscore(queue, later) is not None
    finally:
        await redis.delete(
            queue,
            *(job_key_prefix + i for i in (mine, theirs, later)),
            in_progress_key_prefix + mine,
        )
        await redis.aclose()
