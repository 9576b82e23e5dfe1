"""Which runs of a tenant are live, and which fixture references they own.

Read on every API request (to decide whether to record the trace and which run a call
belongs to), so it is cached per process for a second; starting or ending a run here
drops the tenant's entry at once. A cache that can be dropped, nothing more.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import asyncpg

from app.runs import repository

TTL_SECONDS = 1.0


@dataclass(frozen=True)
class LiveInfo:
    runs: frozenset[str] = frozenset()
    refs: dict[str, str] = field(default_factory=dict)  # "Type/id" -> run id

    @property
    def any(self) -> bool:
        return bool(self.runs)

    def run_for(self, refs: list[str]) -> str | None:
        for ref in refs:
            run = self.refs.get(ref)
            if run is not None:
                return run
        return None


NONE = LiveInfo()


class LiveRuns:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._cache: dict[uuid.UUID, tuple[float, LiveInfo]] = {}

    async def get(self, tenant_id: uuid.UUID) -> LiveInfo:
        now = time.monotonic()
        hit = self._cache.get(tenant_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        rows = await repository.live_runs_with_refs(self._pool, tenant_id=tenant_id)
        info = (
            LiveInfo(
                frozenset(r["id"] for r in rows),
                {r["ref"]: r["id"] for r in rows if r["ref"] is not None},
            )
            if rows
            else NONE
        )
        self._cache[tenant_id] = (now + TTL_SECONDS, info)
        return info

    def forget(self, tenant_id: uuid.UUID) -> None:
        self._cache.pop(tenant_id, None)
