"""Which run each MCP client is working on, kept where every API process can read it.

A run belongs to the MCP client that started it (`start_test_run`) or adopted it
(`start_test_run` with `run_id`); every other client acts on it only by naming it
(`run_id`). Tools never fall back to "the tenant's only live run": that run may be
another client's.

What identifies a client (an `Owner`):

- a session of the initialize-handshake (2025) protocol: its `Mcp-Session-Id`, issued by
  the endpoint on the initialize answer (random, so another client cannot guess it);
- a stateless (2026 protocol) client: its `Mcp-Client-Id` header, an opaque id the
  client chooses (a random one per client instance). Nothing else in a stateless
  request tells two clients apart: `clientInfo` in `_meta` names the client software
  ("mcp" for every client of the Python SDK), and the API key and User-Agent are shared
  by every copy of an agent. A stateless client that sends no `Mcp-Client-Id` has no
  current run: it passes `run_id` to the tools.

The SDK runs stateless (no session lives in process memory), so any API process behind
a round-robin load balancer answers any request. The owner → current run mapping is
kept in Redis (a key per owner and tenant, expiring a day after its last
start_test_run). Redis is a cache that can be lost: when it cannot be reached, which
live run is the caller's is unknown, so a tool without `run_id` is refused while the
tenant has live runs (`StoreUnavailable`) rather than guess. Without Redis configured at
all (an in-process check), the mapping is held in this process.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
from mcp.server.mcpserver.exceptions import ToolError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.runs import service as runs_service

log = logging.getLogger("understudy.mcp")

KEY_PREFIX = "understudy:mcp:"
# A client's current run is forgotten this long after its last start_test_run (runs
# last 30 minutes at most, so this only drops clients nobody will come back to).
SESSION_TTL_SECONDS = 24 * 3600
# In-process fallback only: owners remembered, the oldest forgotten beyond this.
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    scenario_id: str
    started_at: datetime


@dataclass(frozen=True)
class Owner:
    """Who a current run belongs to: an MCP session or a self-named stateless client."""

    kind: Literal["session", "client"]
    id: str

    @property
    def described(self) -> str:
        return "this MCP session" if self.kind == "session" else "this client (Mcp-Client-Id)"


class StoreUnavailable(ToolError):
    """The session store cannot be reached while runs are live: which is the caller's
    is unknown, and guessing could act on another client's run."""

    def __init__(self, live: list[LiveRun]) -> None:
        self.live = live
        runs = ", ".join(r.run_id for r in live)
        super().__init__(
            f"the session store is unavailable, so which of the tenant's live runs ({runs}) "
            "is yours is unknown: pass run_id."
        )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class CurrentRuns:
    def __init__(self, pool: asyncpg.Pool, redis: Redis | None) -> None:
        self._pool = pool
        self._redis = redis
        self._here: OrderedDict[tuple[uuid.UUID, Owner], str] = OrderedDict()

    @staticmethod
    def _key(tenant_id: uuid.UUID, owner: Owner) -> str:
        if owner.kind == "session":
            return f"{KEY_PREFIX}run:{tenant_id}:{owner.id}"
        return f"{KEY_PREFIX}client-run:{tenant_id}:{owner.id}"

    async def remember(self, tenant_id: uuid.UUID, owner: Owner, run_id: str) -> bool:
        """`run_id` is the owner's current run from now on; False when the session store
        could not keep it (the caller then has to pass run_id)."""
        if self._redis is None:
            self._here[(tenant_id, owner)] = run_id
            self._here.move_to_end((tenant_id, owner))
            while len(self._here) > MAX_SESSIONS:
                self._here.popitem(last=False)
            return True
        try:
            await self._redis.set(self._key(tenant_id, owner), run_id, ex=SESSION_TTL_SECONDS)
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=remember error=%s", exc)
            return False
        return True

    async def forget(self, tenant_id: uuid.UUID, owner: Owner, run_id: str) -> None:
        """The run ended: it stops being the owner's current run (if it was)."""
        if self._redis is None:
            if self._here.get((tenant_id, owner)) == run_id:
                del self._here[(tenant_id, owner)]
            return
        try:
            key = self._key(tenant_id, owner)
            if _text(await self._redis.get(key)) == run_id:
                await self._redis.delete(key)
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=forget error=%s", exc)

    async def end_session(self, tenant_id: uuid.UUID, session: str) -> None:
        """The client ended its session (DELETE /mcp)."""
        owner = Owner("session", session)
        if self._redis is None:
            self._here.pop((tenant_id, owner), None)
            return
        try:
            await self._redis.delete(self._key(tenant_id, owner))
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=end error=%s", exc)

    async def current(self, tenant_id: uuid.UUID, owner: Owner | None) -> str | None:
        """The owner's current run, or None (tools then act on the tenant base, or ask for
        run_id, and list the live runs). Never another owner's run: a client without an
        identity has none. Raises `StoreUnavailable` when the store cannot be read and
        the tenant has live runs."""
        if owner is None:
            return None
        if self._redis is None:
            return self._here.get((tenant_id, owner))
        try:
            return _text(await self._redis.get(self._key(tenant_id, owner)))
        except (RedisError, OSError) as exc:
            log.warning("mcp_session_store_unavailable op=current error=%s", exc)
        live = await self.live(tenant_id)
        if live:
            raise StoreUnavailable(live)
        return None  # no live run in the tenant: none can be the owner's

    async def live(self, tenant_id: uuid.UUID) -> list[LiveRun]:
        """The tenant's live runs, oldest first, read from the database (not the
        per-process live-run cache, which another process's start leaves stale)."""
        found = await runs_service.live_runs(self._pool, tenant_id)
        return [LiveRun(r.run_id, r.scenario_id, r.started_at) for r in found]
