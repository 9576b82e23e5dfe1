"""The client → current run store: shared through Redis between instances (API
processes), keyed by owner (MCP session or Mcp-Client-Id) so that owners never see each
other's run, and refusing to guess when Redis cannot be reached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from app.mcp.sessions import CurrentRuns, Owner, StoreUnavailable
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
    a, b = Owner("session", "session-a"), Owner("session", "session-b")
    run = await _start(tenant)
    assert await one.remember(tenant.id, a, run)
    assert await other.current(tenant.id, a) == run
    assert await other.current(tenant.id, b) is None
    await other.forget(tenant.id, a, "another-run")  # not its current run
    assert await one.current(tenant.id, a) == run
    await other.end_session(tenant.id, "session-a")
    assert await one.current(tenant.id, a) is None

    # A stateless client that names itself (Mcp-Client-Id) has a current run of its own,
    # whichever instance it reaches; a session of the same id is someone else.
    x, y = Owner("client", "client-x"), Owner("client", "client-y")
    await one.remember(tenant.id, x, run)
    assert await other.current(tenant.id, x) == run
    assert await other.current(tenant.id, y) is None
    assert await other.current(tenant.id, Owner("session", "client-x")) is None
    second = await _start(tenant)
    await other.remember(tenant.id, x, second)  # the last one started or adopted
    assert await one.current(tenant.id, x) == second
    await one.forget(tenant.id, x, second)
    assert await other.current(tenant.id, x) is None

    # Without an identity no run is the caller's, however many are live (one included).
    await _cancel(tenant, second)
    assert [r.run_id for r in await one.live(tenant.id)] == [run]
    assert await one.current(tenant.id, None) is None
    await _cancel(tenant, run)


async def test_without_redis_no_run_is_guessed(tenant: TenantHandle, db: Any) -> None:
    """Redis unreachable: which live run is the caller's is unknown, so a tool without
    run_id is refused (even with one live run: it may be another client's)."""
    unreachable: Redis = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    runs = CurrentRuns(db.pool, unreachable)
    a = Owner("session", "session-a")
    try:
        assert await runs.current(tenant.id, a) is None  # nothing live: nothing to guess
        run = await _start(tenant)
        assert not await runs.remember(tenant.id, a, run)  # logged, not raised
        with pytest.raises(StoreUnavailable, match="session store is unavailable") as raised:
            await runs.current(tenant.id, a)
        assert run in str(raised.value) and "pass run_id" in str(raised.value)
        assert [r.run_id for r in raised.value.live] == [run]
        with pytest.raises(StoreUnavailable):
            await runs.current(tenant.id, Owner("client", "client-x"))
        assert await runs.current(tenant.id, None) is None  # no identity: never a run
        await _cancel(tenant, run)
        assert await runs.current(tenant.id, a) is None
        await runs.forget(tenant.id, a, run)
        await runs.end_session(tenant.id, "session-a")
    finally:
        await unreachable.aclose()


async def test_without_redis_configured_the_process_keeps_owners_apart(
    tenant: TenantHandle, db: Any
) -> None:
    runs = CurrentRuns(db.pool, None)
    a, x = Owner("session", "same"), Owner("client", "same")
    await runs.remember(tenant.id, a, "run-1")
    assert await runs.current(tenant.id, a) == "run-1"
    assert await runs.current(tenant.id, x) is None
    assert await runs.current(tenant.id, None) is None
    await runs.forget(tenant.id, a, "run-1")
    assert await runs.current(tenant.id, a) is None
