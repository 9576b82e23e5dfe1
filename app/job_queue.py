"""The adapter to arq, the job queue on Redis: the only module that imports it
(pyproject.toml's import contract), so what we rely on of arq is in one place — its Redis
client, how a job is enqueued and found waiting, how a worker is built, run and stopped.

app/jobs.py enqueues by name through it; app/worker.py declares its jobs and cron
schedule with `job` and `scheduled` and runs them with `build_worker` / `stop_worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from arq import cron, func
from arq.connections import ArqRedis, RedisSettings
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from arq.cron import CronJob
from arq.jobs import serialize_job
from arq.typing import StartupShutdown, WorkerCoroutine
from arq.utils import timestamp_ms
from arq.worker import Function, Worker
from redis.commands.core import AsyncScript

# A Redis command that takes longer has failed (Redis is away or stuck).
REDIS_TIMEOUT_SECONDS = 2.0

# The queue's Redis client (a redis-py client with arq's job commands) and its worker.
QueueRedis = ArqRedis
QueueWorker = Worker
JobFunction = Callable[..., Coroutine[Any, Any, Any]]
Hook = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


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


def redis_pool(url: str) -> QueueRedis:
    """A Redis client that connects on first use (so a process starts while Redis is
    away) and gives up on a command after REDIS_TIMEOUT_SECONDS (arq's own pool sets no
    socket timeout: a Redis that stops answering would hang the caller)."""
    settings = redis_settings(url)
    return ArqRedis(
        host=settings.host if isinstance(settings.host, str) else "127.0.0.1",
        port=settings.port,
        unix_socket_path=settings.unix_socket_path,
        db=settings.database,
        username=settings.username,
        password=settings.password,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        encoding="utf8",
    )


# arq's enqueue (WATCH the job's key; EXISTS of it and of its result; MULTI, PSETEX the
# job, ZADD it to the queue, EXEC) as one script: one round trip instead of three, and,
# with `unless_waiting`, the look for an earlier job still queued in the same one. Every
# FHIR write to a live run enqueues its regrade, and at 5 tenants x 20 live runs on two
# cores those round trips were a quarter of the API's samples (each write to Redis woke
# it and gave it the CPU). Atomic as a script is, so no WATCH is needed.
# KEYS: the job, its result, the queue, then (job, in-progress) of each earlier id.
# ARGV: the serialized job, its expiry (ms), its score (ms), its id.
# Returns 1 queued, 0 a job of that id queued or its result kept, 2 an earlier job waits.
_ENQUEUE = """
for i = 4, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('EXISTS', KEYS[i + 1]) == 0 then
    return 2
  end
end
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  return 0
end
redis.call('PSETEX', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""
QUEUED, EXISTS, WAITING = 1, 0, 2


async def enqueue(
    redis: QueueRedis,
    name: str,
    *args: Any,
    job_id: str,
    queue_name: str,
    defer_by: float | None = None,
    unless_waiting: Sequence[str] = (),
) -> int:
    """Queue job `name` with `args`, as arq's `enqueue_job` does, in one round trip; a
    job of the same id still queued (or its result kept) makes this a no-op (EXISTS),
    which is how callers collapse a burst into one job, and so does a job of one of the
    `unless_waiting` ids that is queued and not started (WAITING: arq marks a job in
    progress, in one transaction, before it runs it)."""
    enqueued_ms = timestamp_ms()
    defer_ms = round(defer_by * 1000) if defer_by else 0
    score = enqueued_ms + defer_ms
    job = serialize_job(name, args, {}, None, enqueued_ms, serializer=redis.job_serializer)
    keys = [job_key_prefix + job_id, result_key_prefix + job_id, queue_name]
    for earlier in unless_waiting:
        keys += [job_key_prefix + earlier, in_progress_key_prefix + earlier]
    expires_ms = defer_ms + redis.expires_extra_ms
    result = await _ENQUEUE_SCRIPT(keys=keys, args=[job, expires_ms, score, job_id], client=redis)
    return int(result)


# Sent by its SHA (EVALSHA), loaded into a Redis that does not know it yet.
_ENQUEUE_SCRIPT = AsyncScript(cast(Any, None), _ENQUEUE.encode())


@dataclass(frozen=True, slots=True)
class Scheduled:
    """A periodic job: `function` at the times `when` names (arq's cron fields: month,
    day, weekday, hour, minute, second as sets), under a name unique to the queue."""

    function: JobFunction
    name: str
    when: dict[str, set[int]]
    run_at_startup: bool = False


def job(function: JobFunction, name: str | None = None) -> Function:
    """A job the worker runs when it is enqueued by `name` (default: the function's)."""
    named = name or getattr(function, "__name__", None)
    return func(cast(WorkerCoroutine, function), name=named, keep_result=0)


def build_worker(
    *,
    jobs: Iterable[Function],
    scheduled: Iterable[Scheduled],
    redis: QueueRedis,
    queue_name: str,
    on_startup: Hook,
    on_shutdown: Hook,
    ctx: dict[str, Any],
    handle_signals: bool,
    burst: bool,
    poll_delay: float,
    max_jobs: int,
) -> QueueWorker:
    """A worker of `queue_name`; no job result is kept (callers record what they did in
    PostgreSQL)."""
    crons: list[CronJob] = [
        cron(
            cast(WorkerCoroutine, s.function),
            name=s.name,
            unique=True,
            run_at_startup=s.run_at_startup,
            **s.when,  # type: ignore[arg-type]
        )
        for s in scheduled
    ]
    return Worker(
        functions=list(jobs),
        cron_jobs=crons,
        redis_pool=redis,
        queue_name=queue_name,
        on_startup=cast(StartupShutdown, on_startup),
        on_shutdown=cast(StartupShutdown, on_shutdown),
        ctx=ctx,
        handle_signals=handle_signals,
        burst=burst,
        keep_result=0,
        poll_delay=poll_delay,
        max_jobs=max_jobs,
    )


async def run_worker(worker: QueueWorker) -> None:
    await worker.async_run()


# How long a cancelled worker gets to end before it is cancelled again.
CANCEL_AGAIN_SECONDS = 0.5


async def stop_worker(
    worker: QueueWorker,
    background: asyncio.Task[Any],
    *,
    grace: float,
    is_outage: Callable[[BaseException], bool],
    on_shutdown: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """Stop a worker running as `background` in this loop: take no new jobs, let running
    ones finish for up to `grace` seconds (one cut short runs again: jobs are idempotent),
    cancel the rest, close. arq's own close() gathers cancelled jobs without
    return_exceptions, so it would raise CancelledError and leave its Redis pool open."""
    worker.allow_pick_jobs = False
    running = [t for t in worker.tasks.values() if not t.done()]
    if running:
        await asyncio.wait(running, timeout=grace)
    background.cancel()
    for task in worker.tasks.values():
        task.cancel()
    while not background.done():
        # A cancellation can be lost: seen on uvloop when it lands as the worker's poll
        # reconnects to Redis (just back after an outage); the worker then polls on,
        # taking no jobs, and this would wait forever. Cancel again until it ends.
        await asyncio.wait({background}, timeout=CANCEL_AGAIN_SECONDS)
        background.cancel()
    await asyncio.gather(background, *worker.tasks.values(), return_exceptions=True)
    worker.tasks.clear()
    try:
        await worker.close()
    except Exception as exc:
        # Redis away: arq's close stops at its health-check key; close what we opened.
        if not is_outage(exc):
            raise
        await on_shutdown(worker.ctx)
        with contextlib.suppress(Exception):
            await worker.pool.aclose()
