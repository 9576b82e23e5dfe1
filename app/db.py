"""Database access: one asyncpg pool per process.

Every query of the app runs through asyncpg with hand-written SQL: the FHIR store's hot
path (read, search, one-statement versioned writes) needs statements prepared once per
connection and no per-row object construction, and the rest (runs, evals, webhooks)
leans on PostgreSQL features — `FOR UPDATE SKIP LOCKED`, `RETURNING`, CTEs, COPY —
that read most plainly as SQL. SQLAlchemy is used for what it does best here: the ORM
models in `app/models/` declare the schema, alembic migrates it (`sqlalchemy_url` is
for migrations/env.py), and a test walks `Base.metadata` for the tenancy rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import asyncpg

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
    pool: asyncpg.Pool

    async def close(self) -> None:
        await self.pool.close()


async def _reset_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    # asyncpg's default reset costs a round trip on every release (RESET ALL, UNLISTEN,
    # advisory unlocks). We set no session state, so only an open transaction — a bug
    # or a cancelled request — needs undoing.
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def open_database(url: str, pool_size: int = 10) -> Database:
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
    return Database(pool=pool)
