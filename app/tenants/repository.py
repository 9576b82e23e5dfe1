"""The SQL of `tenant`, `api_key` and `usage_counter`. Tenant rows are keyed by their
own id; the lookups by name or key hash are how a tenant is found in the first place.

At the top, this feature's parts of the FHIR write statement (composed by
`app.runs.fhir_writes`); below, its own queries.
"""

from __future__ import annotations

import random
import uuid
from datetime import date

import asyncpg

from app.db import Conn
from app.fhir.repository import WriteCall, WritePart, live_count_sql

# --- Parts of the FHIR write statement ----------------------------------------------------
# The FHIR store writes every resource in one statement (`app.fhir.repository`); this is
# the usage counter's share of it, composed in by `app.runs.fhir_writes`.

# Concurrent writers of one tenant spread their usage increments over this many rows.
USAGE_SHARDS = 16
# Its own generator, not the `random` module's shared one: a process that also draws from
# that one (a property-based test generating requests) must not see it move underneath.
_shard_rng = random.Random()


def _usage_args(call: WriteCall) -> tuple[object, ...]:
    return (call.now.date(), _shard_rng.randrange(USAGE_SHARDS), call.count_usage)


# The writes count toward the tenant's daily quota (unless the caller says they do not).
COUNT_WRITES = WritePart(
    sql="""usage AS (
    INSERT INTO usage_counter AS u (tenant_id, day, shard, writes)
    SELECT $1, {day}::date, {shard}::smallint, count(*) FROM up
    HAVING {counted}::bool AND count(*) > 0
    ON CONFLICT (tenant_id, day, shard) DO UPDATE SET writes = u.writes + excluded.writes
)""",
    params=("day", "shard", "counted"),
    args=_usage_args,
)


# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool


async def insert_tenant(
    conn: Conn, *, tenant_id: uuid.UUID, name: str, trace_enabled: bool
) -> uuid.UUID:
    """Raises asyncpg.UniqueViolationError when the name is taken."""
    created: uuid.UUID = await conn.fetchval(
        "INSERT INTO tenant (id, name, trace_enabled) VALUES ($1, $2, $3) RETURNING id",
        tenant_id,
        name,
        trace_enabled,
    )
    return created


async def insert_key(
    conn: Conn, *, tenant_id: uuid.UUID, key_id: uuid.UUID, key_hash: str, prefix: str
) -> None:
    await conn.execute(
        "INSERT INTO api_key (id, tenant_id, key_hash, prefix) VALUES ($1, $2, $3, $4)",
        key_id,
        tenant_id,
        key_hash,
        prefix,
    )


async def tenant_id_named(conn: Reader, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = await conn.fetchval("SELECT id FROM tenant WHERE name = $1", name)
    return found


async def set_trace(conn: Conn, *, tenant_id: uuid.UUID, enabled: bool) -> None:
    await conn.execute("UPDATE tenant SET trace_enabled = $2 WHERE id = $1", tenant_id, enabled)


async def set_trace_by_name(conn: Conn, name: str, enabled: bool) -> bool:
    status = await conn.execute(
        "UPDATE tenant SET trace_enabled = $2 WHERE name = $1", name, enabled
    )
    return bool(status.endswith(" 1"))


async def all_tenant_ids(conn: Reader) -> list[uuid.UUID]:
    return [r["id"] for r in await conn.fetch("SELECT id FROM tenant")]


async def tenant_of_key(conn: Reader, key_hash: str) -> asyncpg.Record | None:
    """The tenant (id, name, trace_enabled) holding an unrevoked key with that hash."""
    return await conn.fetchrow(
        """SELECT t.id, t.name, t.trace_enabled FROM api_key k JOIN tenant t ON t.id = k.tenant_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL""",
        key_hash,
    )


async def writes_on(conn: Reader, *, tenant_id: uuid.UUID, day: date) -> int:
    used: int = await conn.fetchval(
        """SELECT coalesce(sum(writes), 0)::bigint FROM usage_counter
        WHERE tenant_id = $1 AND day = $2""",
        tenant_id,
        day,
    )
    return used


async def key_of_hash(conn: Reader, key_hash: str) -> asyncpg.Record | None:
    """The unrevoked key with that hash: its id and its tenant (id, name, trace_enabled)."""
    return await conn.fetchrow(
        """SELECT k.id AS key_id, t.id, t.name, t.trace_enabled
        FROM api_key k JOIN tenant t ON t.id = k.tenant_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL""",
        key_hash,
    )


async def insert_console_session(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    key_id: uuid.UUID,
    lifetime_seconds: float,
) -> None:
    # Expired sessions are of no further use: drop the tenant's as a new one is made.
    await conn.execute(
        "DELETE FROM console_session WHERE tenant_id = $1 AND expires_at < now()", tenant_id
    )
    await conn.execute(
        """INSERT INTO console_session (tenant_id, id, key_id, expires_at)
        VALUES ($1, $2, $3, now() + make_interval(secs => $4))""",
        tenant_id,
        session_id,
        key_id,
        lifetime_seconds,
    )


async def tenant_of_session(
    conn: Reader, *, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> asyncpg.Record | None:
    """The tenant (id, name, trace_enabled) while the session is open and the key it was
    signed in with is unrevoked."""
    return await conn.fetchrow(
        """SELECT t.id, t.name, t.trace_enabled
        FROM console_session s
        JOIN api_key k ON k.tenant_id = s.tenant_id AND k.id = s.key_id
        JOIN tenant t ON t.id = s.tenant_id
        WHERE s.tenant_id = $1 AND s.id = $2 AND s.expires_at > now()
          AND k.revoked_at IS NULL""",
        tenant_id,
        session_id,
    )


async def delete_console_session(
    conn: Reader, *, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    await conn.execute(
        "DELETE FROM console_session WHERE tenant_id = $1 AND id = $2", tenant_id, session_id
    )


async def delete_key(conn: Conn, *, tenant_id: uuid.UUID, key_id: uuid.UUID) -> None:
    await conn.execute("DELETE FROM api_key WHERE tenant_id = $1 AND id = $2", tenant_id, key_id)


async def insert_signin_token(
    conn: Conn,
    *,
    token_hash: str,
    tenant_id: uuid.UUID,
    key_id: uuid.UUID,
    lifetime_seconds: float,
) -> None:
    # Spent and expired links are of no further use: drop them as new ones are made.
    await conn.execute("DELETE FROM signin_token WHERE expires_at < now() OR used_at IS NOT NULL")
    await conn.execute(
        """INSERT INTO signin_token (token_hash, tenant_id, key_id, expires_at)
        VALUES ($1, $2, $3, now() + make_interval(secs => $4))""",
        token_hash,
        tenant_id,
        key_id,
        lifetime_seconds,
    )


async def use_signin_token(conn: Reader, token_hash: str) -> asyncpg.Record | None:
    """Mark the token used, once, if it has not expired; its tenant and key (unrevoked)."""
    return await conn.fetchrow(
        """WITH used AS (
            UPDATE signin_token SET used_at = now()
            WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
            RETURNING tenant_id, key_id
        )
        SELECT u.key_id, t.id, t.name, t.trace_enabled
        FROM used u JOIN api_key k ON k.id = u.key_id AND k.tenant_id = u.tenant_id
        JOIN tenant t ON t.id = u.tenant_id
        WHERE k.revoked_at IS NULL""",
        token_hash,
    )


# Every tenant with its unrevoked keys and live resources (the FHIR store owns that count).
TENANTS_WITH_COUNTS = f"""
SELECT t.id, t.name, t.created_at,
    (SELECT count(*) FROM api_key k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL) AS keys,
    {live_count_sql("t.id")} AS resources
FROM tenant t ORDER BY t.created_at
"""


async def tenants_with_counts(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return await pool.fetch(TENANTS_WITH_COUNTS)
