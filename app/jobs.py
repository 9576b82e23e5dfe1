"""Enqueueing jobs by name, buffered until commit (through app/job_queue.py, the only
module that imports arq).

A unit of work (app/db.py's `Scopes.transaction`) collects its jobs and in-process cache
drops in an `AfterCommit`; they are sent only once its transaction committed, so a job
never sees uncommitted (or rolled back) data and a rollback sends nothing. No job is the
only record of its work: what it is for was committed with the transaction (the run's
`changed_at`, a `webhook_delivery` row, a queued `eval_item`), and the worker's periodic
sweeps (grading tick, delivery sweeper, eval promotion) are the relay that hands what a
lost job (a crash between commit and send, Redis away) was for back to arq.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from app.job_queue import QueueRedis, enqueue, redis_pool
from app.outage import OutageLog

log = logging.getLogger("understudy.jobs")

GRADE_JOB = "grade_run"
DELIVER_JOB = "deliver_webhook"
SMS_REPLY_JOB = "deliver_sms_reply"
# Writes to one run within this window share one grading job.
GRADE_DEBOUNCE_SECONDS = 0.5
# How many earlier windows a write looks back for a grading job still waiting to start.
GRADE_LOOKBACK_WINDOWS = 10
# Deliveries enqueued within this window share one drain job.
DELIVERY_WINDOW_SECONDS = 0.02
# After a failed send, how long sends are skipped before Redis is tried again.
BREAKER_SECONDS = 1.0
REDIS_ERRORS = (RedisError, OSError, TimeoutError)
# At most this many skipped sends are remembered for resending (the sweeps cover the rest).
MAX_SKIPPED = 10_000


async def connect_jobs(redis_url: str, queue_name: str) -> Jobs:
    return Jobs(redis_pool(redis_url), queue_name)


class Jobs:
    """Enqueues jobs. When Redis is away a send is skipped, never raised: what it was for
    is already committed (the run's change, the delivery row, the queued eval item) and the
    worker's sweeps hand it to arq once Redis is back. After a failure sends are skipped
    for BREAKER_SECONDS, so writes during an outage do not each wait on a dead socket."""

    def __init__(self, redis: QueueRedis, queue_name: str) -> None:
        self.redis = redis
        self.queue_name = queue_name
        self._outage = OutageLog(log, "redis")
        self._retry_at = 0.0
        # What this process skipped while Redis was away, sent again as soon as a send
        # gets through (the sweeps would find it too, a tick later; a crash loses only
        # this shortcut). Keyed, so a burst of writes to one run is one regrade.
        self._skipped: dict[tuple[str, uuid.UUID, str], None] = {}

    async def close(self) -> None:
        await self.redis.aclose()

    async def _send(
        self, key: tuple[str, uuid.UUID, str], send: Callable[[], Awaitable[object]]
    ) -> bool:
        """Run one send; False when Redis is away (now, or within the breaker's pause)."""
        if self._outage.down and time.monotonic() < self._retry_at:
            self._skip(key)
            return False
        try:
            await send()
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "jobs wait in the database for the worker's sweeps")
            self._retry_at = time.monotonic() + BREAKER_SECONDS
            self._skip(key)
            return False
        if self._outage.down:
            self._outage.ok()
            await self._resend()
        return True

    def _skip(self, key: tuple[str, uuid.UUID, str]) -> None:
        if len(self._skipped) < MAX_SKIPPED:
            self._skipped[key] = None

    async def _resend(self) -> None:
        skipped, self._skipped = self._skipped, {}
        for kind, tenant_id, run_id in skipped:
            if kind == "grade":
                await self.grade_soon(tenant_id, run_id)
            elif kind == "sms":
                run, _, effect = run_id.partition("/")
                await self.deliver_sms_reply(tenant_id, run, effect)
            else:
                await self.deliver_soon(tenant_id)

    async def deliver_soon(self, tenant_id: uuid.UUID, delay: float = 0.0) -> None:
        """Drain the tenant's due webhook deliveries soon. Calls within one short window
        share a job (its id names the window), so a burst of writes costs few jobs."""
        bucket = int((time.time() + delay) / DELIVERY_WINDOW_SECONDS)
        await self._send(
            ("deliver", tenant_id, ""),
            lambda: enqueue(
                self.redis,
                DELIVER_JOB,
                str(tenant_id),
                job_id=f"deliver:{tenant_id}:{bucket}",
                defer_by=delay,
                queue_name=self.queue_name,
            ),
        )

    async def deliver_sms_reply(
        self,
        tenant_id: uuid.UUID,
        run_id: str,
        effect_id: str,
        attempt: int = 0,
        delay: float = 0.0,
    ) -> None:
        """Post the simulated patient's SMS reply `effect_id` to the run's reply URL, its
        attempt `attempt + 1` (the job id names it, so each attempt is queued once)."""
        await self._send(
            ("sms", tenant_id, f"{run_id}/{effect_id}"),
            lambda: enqueue(
                self.redis,
                SMS_REPLY_JOB,
                str(tenant_id),
                run_id,
                effect_id,
                job_id=f"sms-reply:{effect_id}:{attempt}",
                defer_by=delay,
                queue_name=self.queue_name,
            ),
        )

    async def grade_soon(self, tenant_id: uuid.UUID, run_id: str, delay: float = 0.0) -> None:
        """Grade the run about half a second (plus `delay`) from now; repeated calls
        within that window collapse into one job (its id names the window). The job is
        told when its window ends (epoch seconds): everything it is to grade committed
        before then, so a grading of the run taken since, with no change after it, covers
        it (the job then grades nothing).

        Without `delay`, a job of one of the run's previous windows that has not started
        yet (a worker behind: due, still queued) takes this change too, as it reads the
        run only once it starts: no further job is queued behind it. A run written to
        every 100 ms then has one job waiting, not one per window."""
        # A delayed regrade (the end of a quiet) is due at its delay: no debounce on top.
        defer = delay or GRADE_DEBOUNCE_SECONDS
        bucket = int((time.time() + delay) / GRADE_DEBOUNCE_SECONDS)

        # Unless a grading job of the run from one of the GRADE_LOOKBACK_WINDOWS windows
        # before `bucket` is queued and not started (arq marks a job in progress, in one
        # transaction, before it runs it): checked in the enqueue's own round trip.
        earlier = (
            ()
            if delay
            else [f"grade:{run_id}:{b}" for b in range(bucket - GRADE_LOOKBACK_WINDOWS, bucket)]
        )

        async def send() -> None:
            await enqueue(
                self.redis,
                GRADE_JOB,
                str(tenant_id),
                run_id,
                (bucket + 1) * GRADE_DEBOUNCE_SECONDS,
                job_id=f"grade:{run_id}:{bucket}",
                defer_by=defer,
                queue_name=self.queue_name,
                unless_waiting=earlier,
            )

        await self._send(("grade", tenant_id, run_id), send)


def _no_op(*_: object) -> None:
    return None


@dataclass
class InProcess:
    """What this process keeps in memory and must be told once a write has committed.
    Plain callables, wired up by main.py (the API) and the worker's startup, so this
    bottom layer imports nothing of the features."""

    # A run of the tenant started or ended: drop its cached live-run set.
    live_changed: Callable[[uuid.UUID], None] = _no_op
    # The tenant made this many quota-counted FHIR writes (quota cache, autoanalyze).
    wrote: Callable[[uuid.UUID, int], None] = _no_op
    # A live slot freed or an eval was queued: start what fits now, and mark the evals
    # whose runs have all ended completed (with their events).
    promote: Callable[[uuid.UUID], Awaitable[object]] | None = None
    # A regrade due in `delay` seconds (a pass waiting for the quiet): the worker keeps a
    # timer of its own, so the pass that ends the run does not queue behind every due
    # job; False when it cannot (then it goes to Redis like any other).
    grade_later: Callable[[uuid.UUID, str, float], bool] | None = None


@dataclass
class AfterCommit:
    """The side effects of one transaction, held in memory until it commits and then sent
    in one place (`flush`); a rollback drops them. Jobs are deduplicated here (one grade
    per run, one drain per tenant) before they reach Redis."""

    grades: dict[tuple[uuid.UUID, str], float] = field(default_factory=dict)  # -> delay
    deliveries: dict[uuid.UUID, float] = field(default_factory=dict)
    live: set[uuid.UUID] = field(default_factory=set)
    writes: Counter[uuid.UUID] = field(default_factory=Counter)
    promotions: dict[uuid.UUID, None] = field(default_factory=dict)
    # SMS replies to post: (tenant, run, capture) -> (attempts made, delay).
    sms_replies: dict[tuple[uuid.UUID, str, str], tuple[int, float]] = field(default_factory=dict)

    def grade(self, tenant_id: uuid.UUID, run_id: str, delay: float = 0.0) -> None:
        key = (tenant_id, run_id)
        self.grades[key] = min(delay, self.grades.get(key, delay))

    def deliver(self, tenant_id: uuid.UUID, delay: float = 0.0) -> None:
        self.deliveries[tenant_id] = min(delay, self.deliveries.get(tenant_id, delay))

    def deliver_sms_reply(
        self,
        tenant_id: uuid.UUID,
        run_id: str,
        effect_id: str,
        attempt: int = 0,
        delay: float = 0.0,
    ) -> None:
        self.sms_replies[(tenant_id, run_id, effect_id)] = (attempt, delay)

    def live_changed(self, tenant_id: uuid.UUID) -> None:
        self.live.add(tenant_id)

    def wrote(self, tenant_id: uuid.UUID, count: int) -> None:
        if count:
            self.writes[tenant_id] += count

    def promote(self, tenant_id: uuid.UUID) -> None:
        self.promotions[tenant_id] = None

    def merge(self, other: AfterCommit) -> None:
        """Take over the effects of an inner unit that committed with this one."""
        for (tenant_id, run_id), delay in other.grades.items():
            self.grade(tenant_id, run_id, delay)
        for tenant_id, delay in other.deliveries.items():
            self.deliver(tenant_id, delay)
        self.live |= other.live
        self.writes.update(other.writes)
        self.promotions.update(other.promotions)
        self.sms_replies.update(other.sms_replies)

    async def flush(self, jobs: Jobs | None, hooks: InProcess) -> None:
        """Send everything, in-process caches first (the next request must see the
        change), then the jobs, then promotions (each a transaction of its own)."""
        for tenant_id in self.live:
            hooks.live_changed(tenant_id)
        for tenant_id, count in self.writes.items():
            hooks.wrote(tenant_id, count)
        for (tenant_id, run_id), delay in self.grades.items():
            later = hooks.grade_later
            if delay > 0 and later is not None and later(tenant_id, run_id, delay):
                continue
            if jobs is not None:
                await jobs.grade_soon(tenant_id, run_id, delay)
        if jobs is not None:
            for tenant_id, delay in self.deliveries.items():
                await jobs.deliver_soon(tenant_id, delay)
            for (tenant_id, run_id, effect_id), (attempt, delay) in self.sms_replies.items():
                await jobs.deliver_sms_reply(tenant_id, run_id, effect_id, attempt, delay)
        if hooks.promote is not None:
            for tenant_id in self.promotions:
                try:
                    await hooks.promote(tenant_id)
                except Exception:
                    # What committed stands; the worker's promotion tick starts them.
                    log.exception("promote_after_commit_failed tenant=%s", tenant_id)
