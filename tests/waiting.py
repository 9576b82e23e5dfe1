"""Waiting on a condition instead of sleeping: PostgreSQL says when a backend is blocked."""

from __future__ import annotations

import asyncio
from typing import Any

from app.db import Conn


async def blocked_on_a_lock(
    probe: Conn,
    task: asyncio.Task[Any],
    *,
    pid: int | None = None,
    query: str | None = None,
    within: float = 10.0,
) -> None:
    """Until a backend of this database is seen waiting on a lock (pg_stat_activity):
    the one `pid`, or any whose query contains `query`. Fails if `task`, the work that
    should block, ends first, or if nothing blocks within `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        waiting = await probe.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND ($1::int IS NULL OR pid = $1) "
            "AND ($2::text IS NULL OR strpos(query, $2) > 0)",
            pid,
            query,
        )
        if waiting:
            return
        assert not task.done(), "it did not wait for the locked row"
        assert loop.time() < deadline, "nothing waited on a lock"
        await asyncio.sleep(0.01)
