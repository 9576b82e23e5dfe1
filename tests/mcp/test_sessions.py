"""The session → current run store: shared through Redis between instances (API
processes), and degrading to the tenant's one live run when Redis cannot be reached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from redis.asyncio import Redis

from app.mcp.sessions import CurrentRuns
from tests.conftest import REDIS_URL, TenantHandle
from tests.threaded_server import free_port


async def _start(tenant: TenantHandle) -> str:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        r = await http.post(
            f"{tenant.server}/api/testing/runs", json={"scenarioId": "results.followup-task"}
        )
    assert r.status_code == 201, r.text
    run_id: str = r.json()["id"]
    return run_id


async def _cancel(tenant: TenantHandle, run_id: str) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        r = await http.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel")
    assert r.status_code == 200, r.text


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client: Redis = Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


async def test_instances_share_the_current_run(tenant: TenantHandle, db: Any, redis: Redis) -> None:
    one, other = CurrentRuns(db.pool, redis), CurrentRuns(db.pool, redis)
    run = await _start(tenant)
    await one.remember(tenant.id, "session-a", run)
    assert await other.current(tenant.id, "session-a") == run
    assert await other.current(tenant.id, "session-b") is None
    await other.forget(tenant.id, "session-a", "another-run")  # not its current run
    assert await one.current(tenant.id, "session-a") == run
    await other.end_session(tenant.id, "session-a")
    assert await one.current(tenant.id, "session-a") is None

    # Stateless clients: the one live run they started, whichever instance started it.
    await one.remember(tenant.id, None, run)
    assert await other.current(tenant.id, None) == run
    second = await _start(tenant)
    await other.remember(tenant.id, None, second)
    with pytest.raises(ToolError, match="pass run_id"):
        await one.current(tenant.id, None)
    await _cancel(tenant, run)
    assert await one.current(tenant.id, None) == second
    await _cancel(tenant, second)
    assert await other.current(tenant.id, None) is None


async def test_without_redis_the_one_live_run_is_current(tenant: TenantHandle, db: Any) -> None:
    unreachable: Redis = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    runs = CurrentRuns(db.pool, unreachable)
    try:
        run = await _start(tenant)
        await runs.remember(tenant.id, "session-a", run)  # logged, not raised
        assert await runs.current(tenant.id, "session-a") == run
        assert await runs.current(tenant.id, None) == run
        second = await _start(tenant)
        with pytest.raises(ToolError, match="session store is unavailable: pass run_id"):
            await runs.current(tenant.id, "session-a")
        await _cancel(tenant, run)
        await _cancel(tenant, second)
        assert await runs.current(tenant.id, "session-a") is None
        await runs.forget(tenant.id, "session-a", run)
        await runs.end_session(tenant.id, "session-a")
    finally:
        await unreachable.aclose()
