"""Which run each MCP session is working on, kept where every API process can read it.

The SDK runs stateless (no session lives in process memory), so any API process behind
a round-robin load balancer answers any request. The session → current run mapping is
kept in Redis (a key per session, expiring a day after its last start_test_run). Redis
is a cache that can be lost: when it cannot be reached, the current run is the one
live run of the tenant (with several, a tool asks for run_id rather than guess), the
rule stateless clients had before. Without Redis configured at all (an in-process
check), the mapping is held in this process.

Sessions of the initialize-handshake protocol have an id (the endpoint issues it);
stateless (2026 protocol) clients have none, so for them the current run is the one
run a stateless client of the tenant started that is still live; with several live, a
tool must be told which (run_id).
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from mcp.server.mcpserver.exceptions import ToolError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.runs import service as runs_service

log = logging.getLogger("understudy.mcp")

KEY_PREFIX = "understudy:mcp:"
# A session's current run is forgotten this long after its last start_test_run (runs
# last 30 minutes at most, so this only drops sessions nobody will come back to).
SESSION_TTL_SECONDS = 24 * 3600
# In-process fallback only: sessions remembered, the oldest forgotten beyond this.
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    scenario_id: str
    started_at: datetime


T = TypeVar("T")


async def _done(result: Awaitable[T] | T) -> T:
    """redis-py types its set commands for its sync and async clients at once."""
    return await result if isinstance(result, Awaitable) else result


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class CurrentRuns:
    def __init__(self, pool: asyncpg.Pool, redis: Redis | None) -> None:
        self._pool = pool
        self._redis = redis
        self._sessions: OrderedDict[tuple[uuid.UUID, str], str] = OrderedDict()
        self._stateless: dict[uuid.UUID, set[str]] = {}

    @staticmethod
    def _session_key(tenant_id: uuid.UUID, session: str) -> str:
        return f"{KEY_PREFIX}run:{tenant_id}:{session}"

    @staticmethod
    def _stateless_key(tenant_id: uuid.UUID) -> str:
        return f"{KEY_PREFIX}stateless:{tenant_id}"

    async def remember(self, tenant_id: uuid.UUID, session: str | None, run_id: str) -> None:
        """`run_id` is the session's current run from now on."""
        if self._redis is None:
            self._remember_here(tenant_id, session, run_id)
            return
        try:
            if session is None:
                key = self._stateless_key(tenant_id)
                await _done(self._redis.sadd(key, run_id))
                await self._redis.expire(key, SESSION_TTL_SECONDS)
            else:
                key = self._session_key(tenant_id, session)
                await self._redis.set(key, run_id, ex=SESSION_TTL_SECONDS)
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=remember error=%s", exc)

    def _remember_here(self, tenant_id: uuid.UUID, session: str | None, run_id: str) -> None:
        if session is None:
            self._stateless.setdefault(tenant_id, set()).add(run_id)
            return
        self._sessions[(tenant_id, session)] = run_id
        self._sessions.move_to_end((tenant_id, session))
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    async def forget(self, tenant_id: uuid.UUID, session: str | None, run_id: str) -> None:
        """The run ended: it stops being the session's current run."""
        if self._redis is None:
            if session is None:
                self._stateless.get(tenant_id, set()).discard(run_id)
            elif self._sessions.get((tenant_id, session)) == run_id:
                del self._sessions[(tenant_id, session)]
            return
        try:
            if session is None:
                await _done(self._redis.srem(self._stateless_key(tenant_id), run_id))
                return
            key = self._session_key(tenant_id, session)
            if _text(await self._redis.get(key)) == run_id:
                await self._redis.delete(key)
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=forget error=%s", exc)

    async def end_session(self, tenant_id: uuid.UUID, session: str) -> None:
        """The client ended its session (DELETE /mcp)."""
        if self._redis is None:
            self._sessions.pop((tenant_id, session), None)
            return
        try:
            await self._redis.delete(self._session_key(tenant_id, session))
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=end error=%s", exc)

    async def current(self, tenant_id: uuid.UUID, session: str | None) -> str | None:
        """The session's current run, or None (tools then say so and list live runs)."""
        try:
            if session is not None:
                if self._redis is None:
                    return self._sessions.get((tenant_id, session))
                return _text(await self._redis.get(self._session_key(tenant_id, session)))
            if self._redis is None:
                started = set(self._stateless.get(tenant_id, set()))
            else:
                members = await _done(self._redis.smembers(self._stateless_key(tenant_id)))
                started = {t for t in (_text(m) for m in members) if t is not None}
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=current error=%s", exc)
            return self._only_one(await self.live(tenant_id), "the session store is unavailable")
        if not started:
            return None
        live = [r for r in await self.live(tenant_id) if r.run_id in started]
        ended = started - {r.run_id for r in live}
        if ended:
            await self._drop_stateless(tenant_id, ended)
        return self._only_one(live, "this client has no MCP session to tell them apart")

    async def _drop_stateless(self, tenant_id: uuid.UUID, ended: set[str]) -> None:
        if self._redis is None:
            self._stateless.get(tenant_id, set()).difference_update(ended)
            return
        try:
            await _done(self._redis.srem(self._stateless_key(tenant_id), *ended))
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=drop error=%s", exc)

    @staticmethod
    def _only_one(live: list[LiveRun], why: str) -> str | None:
        if len(live) > 1:
            runs = ", ".join(r.run_id for r in live)
            raise ToolError(f"{len(live)} runs are live ({runs}) and {why}: pass run_id.")
        return live[0].run_id if live else None

    async def live(self, tenant_id: uuid.UUID) -> list[LiveRun]:
        """The tenant's live runs, oldest first, read from the database (not the
        per-process live-run cache, which another process's start leaves stale)."""
        found = await runs_service.live_runs(self._pool, tenant_id)
        return [LiveRun(r.run_id, r.scenario_id, r.started_at) for r in found]
