"""The daily write quota.

Writes are counted in the write statement itself (`usage_counter`, sharded); the check
before a write reads the tenant's total for today at most once a second per process and
adds what this process wrote since. Across several API processes the check may let
through up to a second's worth of writes over the limit; nothing already written is
ever lost or undone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime

import asyncpg

from app.db import Conn
from app.errors import TooManyRequests
from app.kit.clock import utcnow
from app.tenants import repository

REFRESH_SECONDS = 1.0


@dataclass
class _Seen:
    day: date
    fetched: float
    used: int


class QuotaExceeded(TooManyRequests):
    """The tenant used its daily FHIR writes (not the live-run limit: app/runs/errors.py)."""


def resets_at(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), dtime.min, UTC)


async def used_today(pool: asyncpg.Pool | Conn, tenant_id: uuid.UUID, day: date) -> int:
    return await repository.writes_on(pool, tenant_id=tenant_id, day=day)


class QuotaGuard:
    """The check before a write. `clock` (monotonic seconds) decides when the cached total
    is re-read: a test moves it on rather than waiting for the refresh."""

    def __init__(
        self, pool: asyncpg.Pool, limit: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._pool = pool
        self.limit = limit
        self.clock = clock
        self._seen: dict[uuid.UUID, _Seen] = {}

    async def check(self, tenant_id: uuid.UUID, adding: int, conn: Conn | None = None) -> None:
        """Raise QuotaExceeded when `adding` writes would go over today's quota. `conn`:
        read through the caller's connection (one inside a transaction must not wait for
        a second from the pool)."""
        day = utcnow().date()
        seen = self._seen.get(tenant_id)
        now = self.clock()
        if seen is None or seen.day != day or now - seen.fetched > REFRESH_SECONDS:
            used = await used_today(conn if conn is not None else self._pool, tenant_id, day)
            seen = _Seen(day, now, used)
            self._seen[tenant_id] = seen
        if seen.used + adding > self.limit:
            reset = resets_at(day)
            raise QuotaExceeded(
                f"daily write quota exceeded: {seen.used} of {self.limit} FHIR writes used "
                f"today; it resets at {reset.isoformat().replace('+00:00', 'Z')}",
                headers={"Retry-After": str(int((reset - utcnow()).total_seconds()) + 1)},
            )

    def note(self, tenant_id: uuid.UUID, written: int) -> None:
        seen = self._seen.get(tenant_id)
        if seen is not None:
            seen.used += written


@dataclass(frozen=True)
class RunLimits:
    """What bounds a tenant's run starts, wherever they come from (REST, reference run,
    eval promotion, scenario check): its live runs, and its daily writes."""

    max_live: int
    quota: QuotaGuard
    # The configured model of the simulated patient and judges (None: none configured, the
    # scripted patient answers and rubrics are not judged), recorded in each run's
    # provenance.
    llm_model: str | None = None
