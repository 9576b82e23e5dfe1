"""Enqueueing jobs by name. Only this module, worker.py and tasks import arq."""

from __future__ import annotations

import time
import uuid
from urllib.parse import urlsplit

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings

GRADE_JOB = "grade_run"
DELIVER_JOB = "deliver_webhook"
# Writes to one run within this window share one grading job.
GRADE_DEBOUNCE_SECONDS = 0.5
# Deliveries enqueued within this window share one drain job.
DELIVERY_WINDOW_SECONDS = 0.02


def redis_settings(url: str) -> RedisSettings:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return RedisSettings(unix_socket_path=parts.path)
    return RedisSettings(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 6379,
        database=int(parts.path.lstrip("/") or 0),
        password=parts.password,
        username=parts.username,
    )


async def connect_jobs(redis_url: str, queue_name: str) -> Jobs:
    return Jobs(await create_pool(redis_settings(redis_url)), queue_name)


class Jobs:
    def __init__(self, redis: ArqRedis, queue_name: str) -> None:
        self.redis = redis
        self.queue_name = queue_name

    async def close(self) -> None:
        await self.redis.aclose()

    async def deliver_soon(self, tenant_id: uuid.UUID, delay: float = 0.0) -> None:
        """Drain the tenant's due webhook deliveries soon. Calls within one short window
        share a job (its id names the window), so a burst of writes costs few jobs."""
        bucket = int((time.time() + delay) / DELIVERY_WINDOW_SECONDS)
        await self.redis.enqueue_job(
            DELIVER_JOB,
            str(tenant_id),
            _job_id=f"deliver:{tenant_id}:{bucket}",
            _defer_by=delay or None,
            _queue_name=self.queue_name,
        )

    async def grade_soon(self, tenant_id: uuid.UUID, run_id: str) -> None:
        """Grade the run about half a second from now; repeated calls within that window
        collapse into one job (its id names the window)."""
        bucket = int(time.time() / GRADE_DEBOUNCE_SECONDS)
        await self.redis.enqueue_job(
            GRADE_JOB,
            str(tenant_id),
            run_id,
            _job_id=f"grade:{run_id}:{bucket}",
            _defer_by=GRADE_DEBOUNCE_SECONDS,
            _queue_name=self.queue_name,
        )
