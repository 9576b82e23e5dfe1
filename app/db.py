"""Database access: one asyncpg pool per process.

Every query of the app runs through asyncpg with hand-written SQL: the FHIR store's hot
path (read, search, one-statement versioned writes) needs statements prepared once per
connection and no per-row object construction, and the rest (runs, evals, webhooks)
leans on PostgreSQL features — `FOR UPDATE SKIP LOCKED`, `RETURNING`, CTEs, COPY —
that read most plainly as SQL. SQLAlchemy is used for what it does best here: the ORM
models in `app/models/` declare the schema, alembic migrates it (`sqlalchemy_url` is
for migrations/env.py), and a test walks `Base.metadata` for the tenancy rules.

Units of work. A service that writes takes the `Tx` it runs in (`tx.conn`, inside the
caller's transaction, and `tx.after`, where it notes the jobs and cache drops its writes
call for); it never begins, commits or sends. The caller owns the scope: a route opens
one with `scopes_of(request).transaction()` (app/tenants/auth.py), a job with
`ctx["scopes"].transaction()`; leaving the block commits, then flushes `tx.after`
(app/jobs.py), and an exception rolls back and sends nothing. Two kinds of work open
several units, through the `Scopes` they are given: eval promotion (each item starts in
a transaction of its own, so one bad item does not hold up the rest) and work that
waits on the network between statements (grading judges with a model, the simulated
patient answers, webhook deliveries are sent): no transaction stays open across a model
or HTTP call. The FHIR REST write path asks for `autocommit=True`: its writes are one
statement each (or open their own transaction), so a BEGIN/COMMIT would only add round
trips; its effects still wait for the block to finish.

Reads take a pool or a connection (`Conn`), whichever the caller has: one statement, or
a few whose staleness between them does not matter, gain nothing from a transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from app.jobs import AfterCommit, InProcess, Jobs

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


def like_prefix(text: str) -> str:
    """A LIKE pattern matching values that start with `text` (its %, _ and \\ escaped; the
    default escape character)."""
    return text.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_") + "%"


def asyncpg_dsn(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(("postgresql", *parts[1:]))


@dataclass
class Database:
    pool: asyncpg.Pool

    async def ping(self) -> None:
        """Raise unless PostgreSQL answers."""
        await self.pool.fetchval("SELECT 1")

    async def close(self) -> None:
        await self.pool.close()


@dataclass
class Tx:
    """A connection inside a transaction its owner commits, and the effects to send after."""

    conn: Conn
    after: AfterCommit = field(default_factory=AfterCommit)


@dataclass
class Scopes:
    """Opens units of work on the pool; sends their effects through `jobs` (None: no
    Redis, as in some tools) and `hooks` (this process's caches) after each commit."""

    pool: asyncpg.Pool
    jobs: Jobs | None = None
    hooks: InProcess = field(default_factory=InProcess)

    @asynccontextmanager
    async def transaction(self, *, autocommit: bool = False) -> AsyncIterator[Tx]:
        async with self.pool.acquire() as conn:
            tx = Tx(conn)
            if autocommit:
                yield tx
            else:
                async with conn.transaction():
                    yield tx
        # Committed and the connection is back in the pool (a promotion needs one).
        await tx.after.flush(self.jobs, self.hooks)


@asynccontextmanager
async def generic_plans(conn: Conn) -> AsyncIterator[None]:
    """Run the block's statements on cached generic plans. The pool plans every statement
    with its values (`plan_cache_mode=force_custom_plan`: searches need it); a statement
    whose plan does not depend on them, such as the FHIR write statement of one resource,
    only pays for it: planning was half of that statement's server time. Costs two short
    round trips. Inside a transaction the setting is LOCAL (a rollback undoes it too);
    outside, it is reset after the block, and a connection where that fails is closed
    rather than handed out again with generic plans."""
    if conn.is_in_transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        try:
            yield
        except asyncpg.PostgresError:
            raise  # the transaction failed: rolling it (or its savepoint) back undoes it
        except BaseException:
            await conn.execute("RESET plan_cache_mode")
            raise
        await conn.execute("RESET plan_cache_mode")
        return
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        yield
    finally:
        try:
            await conn.execute("RESET plan_cache_mode")
        except BaseException as exc:
            conn.terminate()
            if not isinstance(exc, Exception):
                raise


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
