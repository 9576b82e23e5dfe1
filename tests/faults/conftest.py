"""Fixtures of the fault suite: one private PostgreSQL and Redis for the module, a fresh
database per case, Understudy processes started by the case itself."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.db import Database, open_database
from app.embedded import ensure_database
from tests.faults.services import PrivatePostgres, PrivateRedis
from tests.webhooks.receiver import Receiver


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    # Directly under /tmp: the `postgres` user must reach it (pytest's tmp dirs are 0700).
    directory = Path(tempfile.mkdtemp(prefix="understudy-faults-pg-"))
    server = PrivatePostgres(directory)
    try:
        server.init()
        server.start()
        yield server
        server.stop("immediate")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def database_url(postgres: PrivatePostgres) -> str:
    """A database of this case's own on the private server (migrated by `serve`)."""
    name = f"faults_{uuid.uuid4().hex[:8]}"
    await ensure_database(postgres.url, name)
    return postgres.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
async def open_db(database_url: str) -> AsyncIterator[list[Database]]:
    """Databases the case opens (after `serve` migrated it), closed at its end."""
    opened: list[Database] = []
    yield opened
    for db in opened:
        await db.close()


async def connect(url: str, opened: list[Database]) -> Database:
    db = await open_database(url, pool_size=2)
    opened.append(db)
    return db


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
