"""The arq worker: background and periodic jobs.

Event-driven: `grade_run` (the simulated patient answers, then the run is graded, soon
after something it owns changed) and `deliver_webhook` (a tenant's due deliveries).
Periodic: the grading tick, eval promotion and completion (with its events), scheduled
evals, the delivery sweeper, planner statistics, the canonical Slots rolled forward, trace
and delivery retention. Every job logs one line when it fails or runs slow (app/logs.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import stamina

from app.db import Database, Scopes, open_database
from app.evals import events as eval_events
from app.evals import service as evals_service
from app.fhir import maintenance
from app.job_queue import QueueWorker, Scheduled, job, redis_pool, run_worker
from app.job_queue import build_worker as queue_worker
from app.job_queue import stop_worker as stop_queue_worker
from app.jobs import DELIVER_JOB, GRADE_JOB, SMS_REPLY_JOB, Jobs, connect_jobs
from app.kit.clock import utcnow
from app.llm.client import LlmClient
from app.logs import timed_job, timed_jobs
from app.outage import OutageLog, is_outage
from app.runs import service as runs_service
from app.runs import simulated_patient as patient_sim_service
from app.runs import sms_patient
from app.runs.fhir_writes import FHIR_WRITES
from app.schedules import service as schedules_service
from app.settings import Settings
from app.tenants import service as tenants_service
from app.trace import service as trace_service
from app.webhooks import service as webhooks_service
from app.wiring import wire_units_of_work

log = logging.getLogger("understudy.worker")

TRACE_RETENTION = timedelta(days=7)
POLL_SECONDS = 0.05
# Jobs in flight per worker, and the connections they share: deliveries and regrades are
# short and mostly wait on I/O, so a backlog should not form behind a pool of 4.
MAX_JOBS = 32
WORKER_POOL_SIZE = 12
# Runs graded concurrently by one tick.
TICK_CONCURRENCY = 8


async def roll_directory(ctx: dict[str, Any]) -> int:
    """Keep every tenant's canonical Slots filled for the coming weeks."""
    db: Database = ctx["db"]
    scopes: Scopes = ctx["scopes"]
    settings: Settings = ctx["settings"]
    written = 0
    for tenant_id in await tenants_service.all_tenant_ids(db.pool):
        # One unit per tenant; the directory's writes open their own transaction.
        async with scopes.transaction(autocommit=True) as tx:
            written += await tenants_service.roll_directory(
                tx, tenant_id, weeks=settings.slot_weeks, write_statement=FHIR_WRITES
            )
    log.info("directory_rolled written=%d", written)
    return written


async def purge_trace(ctx: dict[str, Any]) -> int:
    scopes: Scopes = ctx["scopes"]
    async with scopes.transaction(autocommit=True) as tx:
        deleted = await trace_service.purge_calls(tx, utcnow() - TRACE_RETENTION)
    log.info("trace_purged deleted=%d", deleted)
    return deleted


async def purge_deliveries(ctx: dict[str, Any]) -> int:
    """Finished webhook deliveries, their attempts and events are kept 7 days."""
    scopes: Scopes = ctx["scopes"]
    async with scopes.transaction() as tx:
        return await webhooks_service.purge_deliveries(tx, utcnow() - TRACE_RETENTION)


async def refresh_statistics(ctx: dict[str, Any]) -> int:
    """Autovacuum may be off: keep planner statistics fresh and dead rows in check."""
    db: Database = ctx["db"]
    return len(await maintenance.refresh_statistics(db.pool, vacuum=True))


async def _simulate(ctx: dict[str, Any], tenant_id: uuid.UUID, run_id: str) -> None:
    """Let the simulated patient answer new messages (portal, then SMS) before the run is
    graded."""
    await patient_sim_service.reply_to_messages(ctx["scopes"], ctx["llm"], tenant_id, run_id)
    await sms_patient.answer_texts(ctx["scopes"], ctx["llm"], tenant_id, run_id)


class OnePassPerRun:
    """At most one grading pass per run at a time in this worker: the grading tick, a
    queued regrade and a settle timer may all pick the same run at once, and each pass
    that ends it would judge its rubrics with a model (paid twice, and the pass that
    lost the race wasted). A later pass waits for the one in flight, then usually finds
    the run ended. Passes in other workers are not held back: the verdict is one
    conditional UPDATE, so the first to end the run wins there."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, run: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(run, asyncio.Lock())
        self._waiting[run] += 1
        try:
            async with lock:
                yield
        finally:
            self._waiting[run] -= 1
            if not self._waiting[run]:
                del self._waiting[run], self._locks[run]


def _passes(ctx: dict[str, Any]) -> OnePassPerRun:
    # Made once by `startup`: arq hands each job a copy of the worker's context, so one
    # made here on first use would be the job's own, and hold back nothing.
    passes: OnePassPerRun = ctx["passes"]
    return passes


async def grade_run(
    ctx: dict[str, Any], tenant_id: str, run_id: str, window_end: float | None = None
) -> str:
    """Answer as the simulated patient, then grade one run, soon after something it owns
    changed (debounced by job id). The grading is skipped when one taken since
    `window_end` (epoch seconds: all the job's changes had committed by then) saw them
    and nothing changed after it.
    A run it ends frees a slot: queued eval items are promoted once the verdict commits."""
    async with _passes(ctx).hold(f"{tenant_id}/{run_id}"):
        await _simulate(ctx, uuid.UUID(tenant_id), run_id)
        run = await runs_service.grade_run(
            ctx["scopes"],
            uuid.UUID(tenant_id),
            run_id,
            llm=ctx["llm"],
            settle_seconds=ctx["settings"].settle_seconds,
            unless_graded_since=(
                None if window_end is None else datetime.fromtimestamp(window_end, UTC)
            ),
        )
    return run.status


# At most this many runs wait on the worker's own settle timers; more go to Redis.
MAX_SETTLE_TIMERS = 10_000


class SettleTimers:
    """Runs whose pass waits for the quiet, graded again by this worker when the quiet
    ends: an in-process timer, so that pass does not wait behind every due job in the
    queue (under load that wait doubled the time to a verdict). The run also stores
    when its quiet ends (`run.settle_until`): if this process dies, the grading tick ends
    the run instead."""

    def __init__(self, ctx: dict[str, Any]) -> None:
        self._ctx = ctx
        self._timers: dict[tuple[uuid.UUID, str], asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._limit = asyncio.Semaphore(TICK_CONCURRENCY)

    def schedule(self, tenant_id: uuid.UUID, run_id: str, delay: float) -> bool:
        key = (tenant_id, run_id)
        if key not in self._timers and len(self._timers) >= MAX_SETTLE_TIMERS:
            return False
        if (previous := self._timers.pop(key, None)) is not None:
            previous.cancel()
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._fire, key)
        return True

    def _fire(self, key: tuple[uuid.UUID, str]) -> None:
        self._timers.pop(key, None)
        task = asyncio.create_task(self._grade(*key), name=f"settle:{key[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _grade(self, tenant_id: uuid.UUID, run_id: str) -> None:
        async with self._limit:
            try:
                await _grade_one(self._ctx, tenant_id, run_id)
            except Exception as exc:
                # The run's settle_until stands: the grading tick ends it.
                if not is_outage(exc):
                    log.exception("settle_grade_failed run=%s", run_id)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _grade_one(ctx: dict[str, Any], tenant_id: uuid.UUID, run_id: str) -> None:
    """Answer as the simulated patient, then grade the run (the tick's pass)."""
    async with _passes(ctx).hold(f"{tenant_id}/{run_id}"):
        await _simulate(ctx, tenant_id, run_id)
        await runs_service.grade_run(
            ctx["scopes"],
            tenant_id,
            run_id,
            llm=ctx["llm"],
            settle_seconds=ctx["settings"].settle_seconds,
        )


async def _promote(ctx: dict[str, Any], tenant_id: uuid.UUID) -> int:
    started = await evals_service.promote(ctx["scopes"], tenant_id, limits=ctx["limits"])
    return len(started)


async def promote_evals(ctx: dict[str, Any]) -> int:
    """Start queued eval runs wherever live slots are free (every few seconds)."""
    db: Database = ctx["db"]
    started = 0
    for tenant_id in await evals_service.tenants_with_queued(db.pool):
        try:
            started += await _promote(ctx, tenant_id)
        except Exception:
            log.exception("promote_failed tenant=%s", tenant_id)
    return started


async def start_schedules(ctx: dict[str, Any]) -> int:
    """Start (or skip) the scheduled evals due now, once per due time across workers."""
    return len(await schedules_service.tick(ctx["scopes"], utcnow()))


async def complete_evals(ctx: dict[str, Any]) -> int:
    """Mark completed the evals whose runs have all ended, with their webhook events
    (every few seconds; a run's end does it at once, this catches what that missed)."""
    db: Database = ctx["db"]
    marked = 0
    for tenant_id in await eval_events.tenants_with_unfinished(db.pool):
        try:
            marked += len(await eval_events.complete_evals(ctx["scopes"], tenant_id))
        except Exception:
            log.exception("complete_evals_failed tenant=%s", tenant_id)
    return marked


async def grade_live_runs(ctx: dict[str, Any]) -> int:
    """The periodic tick: every live run with news since its last grading, or past its
    deadline. A failure in one run is logged and does not stop the others."""
    db: Database = ctx["db"]
    due = await runs_service.runs_needing_grades(db.pool)
    limit = asyncio.Semaphore(TICK_CONCURRENCY)

    async def one(tenant_id: uuid.UUID, run_id: str) -> None:
        async with limit:
            try:
                await _grade_one(ctx, tenant_id, run_id)
            except Exception:
                log.exception("grade_failed run=%s", run_id)

    await asyncio.gather(*(one(t, r) for t, r in due))
    return len(due)


async def deliver_webhook(ctx: dict[str, Any], tenant_id: str) -> int:
    """Send a tenant's due webhook deliveries; schedule the next drain for retries (or
    for deliveries still waiting behind an earlier one for the same resource)."""
    settings: Settings = ctx["settings"]
    scopes: Scopes = ctx["scopes"]
    tenant = uuid.UUID(tenant_id)
    result = await webhooks_service.drain_deliveries(
        scopes,
        ctx["http"],
        tenant,
        retry_seconds=settings.webhook_retry_seconds,
        attempt_timeout=settings.webhook_timeout_seconds,
    )
    async with scopes.transaction(autocommit=True) as tx:
        if result.next_due_in is not None:
            tx.after.deliver(tenant, delay=result.next_due_in)
        # A webhook expectation may now hold: regrade the runs the events belong to.
        runs = {s.run_id for s in result.sent if s.run_id and s.status in ("delivered", "failed")}
        if runs:
            await runs_service.mark_runs_changed(tx, tenant, runs)
    return len(result.sent)


async def deliver_sms_reply(
    ctx: dict[str, Any], tenant_id: str, run_id: str, effect_id: str
) -> str:
    """Post one of the simulated patient's SMS replies to the run's reply URL (one
    attempt; a failed one queues the next with backoff)."""
    return await sms_patient.deliver_reply(
        ctx["scopes"], ctx["http"], ctx["settings"], uuid.UUID(tenant_id), run_id, effect_id
    )


async def sweep_sms_replies(ctx: dict[str, Any]) -> int:
    """Re-enqueue SMS reply deliveries whose job was lost."""
    return await sms_patient.sweep_replies(ctx["scopes"])


async def sweep_deliveries(ctx: dict[str, Any]) -> int:
    """Re-enqueue pending deliveries whose job was lost (a crash between commit and
    enqueue, a dropped job); the job id dedupes against a job still queued."""
    db: Database = ctx["db"]
    jobs: Jobs = ctx["jobs"]
    due = await webhooks_service.due_deliveries(db.pool)
    for tenant_id in {tenant_id for tenant_id, _, _ in due}:
        await jobs.deliver_soon(tenant_id)
    return len(due)


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx["settings"]
    assert settings.database_url is not None
    ctx["db"] = await open_database(settings.database_url, pool_size=WORKER_POOL_SIZE)
    ctx["http"] = httpx.AsyncClient(follow_redirects=False)
    assert settings.redis_url is not None
    ctx["jobs"] = await connect_jobs(settings.redis_url, settings.queue_name)
    ctx["llm"] = LlmClient(ctx["http"], settings, ctx["db"].pool)
    pool = ctx["db"].pool
    # Run starts here (eval promotion) are held to the same quota as the API's; this
    # process keeps its own cache of the tenant's writes. The API's live-run cache lives
    # in another process (or another app): it expires within a second.
    ctx["passes"] = OnePassPerRun()
    ctx["settle_timers"] = timers = SettleTimers(ctx)
    wired = wire_units_of_work(pool, ctx["jobs"], settings, grade_later=timers.schedule)
    ctx["scopes"], ctx["limits"] = wired.scopes, wired.limits
    _BACKENDS.ok()


async def shutdown(ctx: dict[str, Any]) -> None:
    if "settle_timers" in ctx:
        await ctx["settle_timers"].close()
    db: Database | None = ctx.get("db")
    if db is not None:
        await db.close()
    if "http" in ctx:
        await ctx["http"].aclose()
    if "jobs" in ctx:
        await ctx["jobs"].close()


# Periodic jobs that are also registered by name (to be enqueued outside their tick).
PERIODIC_JOBS: list[Callable[..., Any]] = [
    roll_directory,
    purge_trace,
    refresh_statistics,
    sweep_deliveries,
    sweep_sms_replies,
    purge_deliveries,
    promote_evals,
    complete_evals,
    start_schedules,
]


def _scheduled(queue_name: str, job: Callable[..., Any], **when: Any) -> Scheduled:
    # A cron job is keyed by its name alone, across queues: the queue name in it keeps
    # two deployments (or test sessions) on one Redis from taking each other's ticks.
    run_at_startup = bool(when.pop("run_at_startup", False))
    return Scheduled(timed_job(job), f"cron:{job.__name__}:{queue_name}", when, run_at_startup)


def build_worker(
    settings: Settings, *, handle_signals: bool = True, burst: bool = False
) -> QueueWorker:
    assert settings.redis_url is not None
    queue = settings.queue_name
    return queue_worker(
        jobs=[
            *(job(j) for j in timed_jobs(PERIODIC_JOBS)),
            job(timed_job(grade_run), GRADE_JOB),
            job(timed_job(deliver_webhook), DELIVER_JOB),
            job(timed_job(deliver_sms_reply), SMS_REPLY_JOB),
        ],
        scheduled=[
            _scheduled(queue, roll_directory, hour={0}, minute={5}, run_at_startup=True),
            _scheduled(queue, purge_trace, hour={3}, minute={17}),
            _scheduled(queue, purge_deliveries, hour={3}, minute={27}),
            _scheduled(queue, refresh_statistics, minute=set(range(0, 60, 5))),
            _scheduled(queue, sweep_deliveries, second=set(range(0, 60, 5))),
            _scheduled(queue, sweep_sms_replies, second=set(range(2, 60, 5))),
            _scheduled(queue, promote_evals, second=set(range(0, 60, 2))),
            _scheduled(queue, complete_evals, second=set(range(1, 60, 2))),
            _scheduled(queue, start_schedules, second={0, 15, 30, 45}),
            _scheduled(
                queue,
                grade_live_runs,
                second=set(range(0, 60, settings.grade_interval_seconds)),
                run_at_startup=True,
            ),
        ],
        # Our client, not arq's: it has a socket timeout, so a stuck Redis fails the
        # worker's poll (and the supervisor restarts it) instead of hanging it.
        redis=redis_pool(settings.redis_url),
        queue_name=queue,
        on_startup=startup,
        on_shutdown=shutdown,
        ctx={"settings": settings},
        handle_signals=handle_signals,
        burst=burst,
        # How often the worker looks for due jobs: webhook deliveries and regrades should
        # start within tens of milliseconds, and a Redis poll costs ~0.1 ms.
        poll_delay=POLL_SECONDS,
        max_jobs=MAX_JOBS,
    )


# How long a stopping in-process worker lets running jobs finish before cancelling them.
STOP_GRACE_SECONDS = 5.0


# The worker's Redis or PostgreSQL away: logged once by the supervisor, once back.
_BACKENDS = OutageLog(log, "worker_backend")


async def supervise(settings: Settings, stopping: asyncio.Event) -> None:
    """Run the worker until `stopping` is set. When Redis or PostgreSQL goes away (the
    worker's poll fails, or its start-up cannot connect) it is stopped and started again
    with backoff (0.2 s doubling to 5 s) until they are back: the process never exits for
    an outage. Jobs cut short run again (they are idempotent) and the sweeps redo what
    was missed. Anything else that ends the worker is raised."""
    # stamina would log every retry; the outage is logged once, by _BACKENDS.
    stamina.instrumentation.set_on_retry_hooks([])
    async for attempt in stamina.retry_context(
        on=is_outage, attempts=None, timeout=None, wait_initial=0.2, wait_max=5.0
    ):
        with attempt:
            worker = build_worker(settings, handle_signals=False)
            background = asyncio.create_task(run_worker(worker), name="worker")
            stop = asyncio.create_task(stopping.wait(), name="worker-stop")
            try:
                await asyncio.wait({background, stop}, return_when=asyncio.FIRST_COMPLETED)
                if background.done() and (failure := background.exception()) is not None:
                    if is_outage(failure):
                        _BACKENDS.failed(failure, "the worker restarts once it is back")
                    raise failure
            finally:
                stop.cancel()
                await stop_worker(worker, background)
            # Asked to stop, or a burst ended: done. (An outage raised above, and the
            # attempt swallowed it: the loop starts the worker again after its wait.)
            return


async def stop_worker(
    worker: QueueWorker, background: asyncio.Task[Any], grace: float = STOP_GRACE_SECONDS
) -> None:
    """Stop a worker running as `background`: running jobs get `grace` seconds, the rest
    are cancelled (they run again: jobs are idempotent), what it opened is closed."""
    await stop_queue_worker(
        worker, background, grace=grace, is_outage=is_outage, on_shutdown=shutdown
    )


WORKER_THREAD_NAME = "understudy-worker"
# How long `wait` gives the thread to return once `ended` resolved (microseconds, normally).
THREAD_EXIT_SECONDS = 5.0


class WorkerThread:
    """The worker of `serve`, supervised, on a thread with an event loop of its own: the
    API's requests and the worker's jobs then queue on separate loops, so a burst of one
    does not hold up the other (the GIL still runs one thread's Python at a time: this
    is fairness of scheduling, not CPU parallelism). Everything the worker opens — its
    PostgreSQL pool, its Redis clients, its HTTP client — is made on that loop, by
    `build_worker` and `startup`, as asyncpg pools and redis clients belong to the loop
    that made them; nothing of the API's is shared with it.

    `start` returns once the loop runs; `stop` may be called from any thread, any number
    of times, before or after the worker ended; `ended` resolves when the thread is done,
    with what `supervise` raised (an outage is not raised: it restarts the worker)."""

    def __init__(
        self,
        settings: Settings,
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    ) -> None:
        self._settings = settings
        self._loop_factory = loop_factory
        self._thread = threading.Thread(target=self._run, name=WORKER_THREAD_NAME, daemon=True)
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_asked = False
        self.ended: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Running from the start, so an awaiter's cancellation cannot cancel it.
        self.ended.set_running_or_notify_cancel()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The worker's loop while it runs."""
        return self._loop

    def start(self) -> None:
        self._thread.start()
        self._running.wait()

    def stop(self) -> None:
        """Ask the worker to stop: no new jobs, running ones get STOP_GRACE_SECONDS."""
        with self._lock:
            self._stop_asked = True
            loop, stopping = self._loop, self._stopping
            if loop is not None and stopping is not None:
                with contextlib.suppress(RuntimeError):  # its loop closed: it has ended
                    loop.call_soon_threadsafe(stopping.set)

    async def wait(self) -> None:
        """Until the thread is done; raises what ended it. `ended` resolves a few
        statements before the thread's function returns, so the thread is joined too (a
        caller that checks right after saw it alive under load)."""
        try:
            await asyncio.wrap_future(self.ended)
        finally:
            if self.ended.done() and self._thread.ident is not None:
                await asyncio.to_thread(self._thread.join, THREAD_EXIT_SECONDS)

    def _run(self) -> None:
        try:
            with asyncio.Runner(loop_factory=self._loop_factory) as runner:
                runner.run(self._supervise())
        except BaseException as exc:
            self.ended.set_exception(exc)
        else:
            self.ended.set_result(None)
        finally:
            with self._lock:
                self._loop = self._stopping = None
            self._running.set()  # a loop that failed to start must not hang `start`

    async def _supervise(self) -> None:
        stopping = asyncio.Event()
        with self._lock:
            self._loop, self._stopping = asyncio.get_running_loop(), stopping
            if self._stop_asked:
                stopping.set()
        self._running.set()
        await supervise(self._settings, stopping)
