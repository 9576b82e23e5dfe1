"""Database access: an SQLAlchemy async engine for the app, and an asyncpg pool.

The FHIR store's hot path (read, search, versioned writes) talks to asyncpg directly
with hand-written SQL: no ORM identity map, no per-row object construction, and
statements prepared once per connection. Everything else goes through SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    # A connection as handed out by the pool, or a bare one: both speak the same API.
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
else:
    Conn = asyncpg.Connection


def sqlalchemy_url(url: str) -> str:
    """`postgresql://…` → `postgresql+asyncpg://…` (idempotent)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return urlunsplit(("postgresql+asyncpg", *parts[1:]))


def asyncpg_dsn(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(("postgresql", *parts[1:]))


@dataclass
class Database:
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    pool: asyncpg.Pool

    async def close(self) -> None:
        await self.pool.close()
        await self.engine.dispose()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """One transaction: commits when the block ends cleanly, rolls back otherwise."""
        async with self.sessions() as session, session.begin():
            yield session


async def _reset_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    # asyncpg's default reset costs a round trip on every release (RESET ALL, UNLISTEN,
    # advisory unlocks). We set no session state, so only an open transaction — a bug
    # or a cancelled request — needs undoing.
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def open_database(url: str, pool_size: int = 10) -> Database:
    engine = create_async_engine(sqlalchemy_url(url), pool_size=max(2, pool_size // 2))
    pool = await asyncpg.create_pool(
        asyncpg_dsn(url),
        min_size=min(2, pool_size),
        max_size=pool_size,
        # A FHIR write is one statement; the server-side timeout guards against runaway
        # searches holding a connection forever.
        # Search statements are prepared once per connection; a generic plan cannot see
        # how selective a search key is and may scan a whole tenant, so plan each call.
        server_settings={
            "statement_timeout": "30000",
            "timezone": "UTC",
            "plan_cache_mode": "force_custom_plan",
        },
        reset=_reset_connection,
    )
    return Database(
        engine=engine,
        sessions=async_sessionmaker(engine, expire_on_commit=False),
        pool=pool,
    )
