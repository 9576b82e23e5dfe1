"""Test fixtures: a scratch database on the real PostgreSQL, the real Redis, and the API
served by uvicorn on 127.0.0.1 in a background thread (so sync clients such as
fhirclient work too). Each test gets its own tenant."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from app.cli import loop_factory, migrate, serve_beside
from app.db import Database, Scopes, open_database
from app.main import create_app
from app.runs.fhir_writes import FHIR_WRITES
from app.settings import Settings
from app.tenants import service as tenants
from app.worker import WorkerThread
from tests.threaded_server import free_port

# The fake chat-completions server fixture, shared by every test folder.
pytest_plugins = ["tests.llm.fake_llm"]

PG_SERVER = os.environ.get("UNDERSTUDY_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("UNDERSTUDY_TEST_REDIS", "redis://127.0.0.1:6379/15")
# Fewer weeks of canonical Slots than production keeps: tenants are made per test.
TEST_SLOT_WEEKS = 2


async def _recreate_database(name: str) -> str:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return f"{PG_SERVER}/{name}"


async def _drop_database(name: str) -> None:
    conn = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    name = f"understudy_test_{os.getpid()}"
    url = asyncio.run(_recreate_database(name))
    migrate(url)
    yield url
    asyncio.run(_drop_database(name))


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        redis_url=REDIS_URL,
        slot_weeks=TEST_SLOT_WEEKS,
        # The console's session secret: set, so no test writes one into the data directory.
        secret_key="understudy-test-secret-key-0123456789",
        # A queue of this session's own: parallel test sessions share the Redis server.
        queue_name=f"understudy:test:{os.getpid()}",
        grade_interval_seconds=5,
        # Shorter than the default quiet before a pass, still long enough for the tests of
        # work that lands after the job is done.
        settle_seconds=1.0,
        # Webhook retries and timeouts fast enough for tests of retry, timeout and failure.
        webhook_retry_seconds=[0.2, 0.2, 0.2, 0.2, 0.2],
        webhook_timeout_seconds=1.0,
    )


class _ServerThread(threading.Thread):
    """The API on an event loop of its own in this thread, and the worker on a thread and
    loop of its own beside it: `serve`'s way (app/cli.py `serve_beside`)."""

    def __init__(self, server: uvicorn.Server, settings: Settings) -> None:
        super().__init__(daemon=True, name="test-api")
        self.server = server
        # Supervised as `serve` runs it: a Redis or PostgreSQL hiccup (a command past its
        # 2 s timeout on a loaded machine) restarts the worker instead of leaving every
        # later test of the session without one.
        self.worker = WorkerThread(settings, loop_factory=loop_factory())
        self.loop: asyncio.AbstractEventLoop | None = None

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await serve_beside(self.server, self.worker, asyncio.Event())


@pytest.fixture(scope="session")
def server_app(settings: Settings) -> FastAPI:
    """The test server's app: its `state` holds what its lifespan built (once it started,
    through `server_url`), for tests that move an injected clock on."""
    return create_app(settings)


@pytest.fixture
def quota_clock(
    server_url: str, server_app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> Callable[[float], None]:
    """Move the test server's quota clock on by some seconds: its cached total of the
    tenant's writes is re-read on the next check (instead of sleeping out the refresh)."""
    ahead = [0.0]
    monkeypatch.setattr(server_app.state.quota, "clock", lambda: time.monotonic() + ahead[0])

    def advance(seconds: float) -> None:
        ahead[0] += seconds

    return advance


@pytest.fixture(scope="session")
def server_thread(settings: Settings, server_app: FastAPI) -> Iterator[_ServerThread]:
    """The session's test server (API and worker threads), started and answering."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(server_app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = _ServerThread(server, settings)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    yield thread
    server.should_exit = True
    # The API stops, then the worker: its running jobs' grace and closing its clients.
    thread.join(timeout=20)


@pytest.fixture(scope="session")
def server_url(server_thread: _ServerThread) -> str:
    return f"http://127.0.0.1:{server_thread.server.config.port}"


@pytest.fixture(scope="session")
async def db(settings: Settings) -> AsyncIterator[Database]:
    assert settings.database_url is not None
    database = await open_database(settings.database_url, pool_size=4)
    yield database
    await database.close()


@dataclass
class TenantHandle:
    id: uuid.UUID
    name: str
    key: str
    server: str

    @property
    def fhir_base(self) -> str:
        return f"{self.server}/api/fhir/r4"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def make_tenant(db: Database, server_url: str, prefix: str = "t") -> TenantHandle:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    async with Scopes(db.pool).transaction() as tx:
        info, key = await tenants.create_tenant(
            tx, name, slot_weeks=TEST_SLOT_WEEKS, write_statement=FHIR_WRITES
        )
    return TenantHandle(info.id, name, key, server_url)


@pytest.fixture
async def tenant(db: Database, server_url: str) -> TenantHandle:
    return await make_tenant(db, server_url)


@pytest.fixture
async def client(tenant: TenantHandle) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=tenant.fhir_base, headers=tenant.headers, timeout=30
    ) as c:
        yield c


@pytest.fixture
def tenant_server(server_url: str) -> str:
    return server_url
