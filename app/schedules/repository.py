"""The SQL of `eval_schedule` and `eval_schedule_fire`. Every function takes the
connection it runs on and the tenant explicitly; the worker's sweep spans tenants and
says so."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn

Reader = Conn | asyncpg.Pool


async def count(conn: Conn, *, tenant_id: uuid.UUID) -> int:
    n: int = await conn.fetchval(
        "SELECT count(*) FROM eval_schedule WHERE tenant_id = $1", tenant_id
    )
    return n


async def lock_tenant(conn: Conn, *, tenant_id: uuid.UUID) -> None:
    """Creations of one tenant take turns (until commit), so two cannot both pass the
    limit's count."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"schedules:{tenant_id}")


async def insert(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    schedule_id: str,
    name: str,
    cron: str,
    request_json: str,
    label_prefix: str,
    revision: str | None,
    root_url: str,
    next_due_at: datetime,
    at: datetime,
) -> None:
    await conn.execute(
        """INSERT INTO eval_schedule (tenant_id, id, name, cron, request, label_prefix,
            revision, root_url, paused, next_due_at, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, false, $9, $10, $10)""",
        tenant_id,
        schedule_id,
        name,
        cron,
        request_json,
        label_prefix,
        revision,
        root_url,
        next_due_at,
        at,
    )


async def get(conn: Reader, *, tenant_id: uuid.UUID, schedule_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM eval_schedule WHERE tenant_id = $1 AND id = $2", tenant_id, schedule_id
    )


async def all_of(conn: Reader, *, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT * FROM eval_schedule WHERE tenant_id = $1 ORDER BY created_at, id", tenant_id
    )


async def set_paused(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    schedule_id: str,
    paused: bool,
    next_due_at: datetime | None,
    at: datetime,
) -> asyncpg.Record | None:
    """Pause, or resume from `next_due_at` (None: keep it)."""
    return await conn.fetchrow(
        """UPDATE eval_schedule SET paused = $3, next_due_at = coalesce($4, next_due_at),
            updated_at = $5
        WHERE tenant_id = $1 AND id = $2 RETURNING *""",
        tenant_id,
        schedule_id,
        paused,
        next_due_at,
        at,
    )


async def delete(conn: Conn, *, tenant_id: uuid.UUID, schedule_id: str) -> bool:
    deleted = await conn.fetchval(
        "DELETE FROM eval_schedule WHERE tenant_id = $1 AND id = $2 RETURNING id",
        tenant_id,
        schedule_id,
    )
    await conn.execute(
        "DELETE FROM eval_schedule_fire WHERE tenant_id = $1 AND schedule_id = $2",
        tenant_id,
        schedule_id,
    )
    return deleted is not None


async def due(conn: Reader, *, now: datetime, tenant_id: uuid.UUID | None) -> list[asyncpg.Record]:
    """Across tenants (or of `tenant_id`): the schedules not paused whose next due time
    has come."""
    return await conn.fetch(
        """SELECT tenant_id, id, cron, next_due_at FROM eval_schedule
        WHERE NOT paused AND next_due_at <= $1 AND ($2::uuid IS NULL OR tenant_id = $2)
        ORDER BY next_due_at""",
        now,
        tenant_id,
    )


async def take_due(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    schedule_id: str,
    seen: datetime,
    next_due_at: datetime,
    at: datetime,
) -> asyncpg.Record | None:
    """Move the schedule on from the due time `seen` to `next_due_at`, only if it is still
    at `seen` and not paused: of two workers that read the same due time, one gets the
    row back (the other waits for its commit, then matches nothing)."""
    return await conn.fetchrow(
        """UPDATE eval_schedule SET next_due_at = $4, updated_at = $5
        WHERE tenant_id = $1 AND id = $2 AND next_due_at = $3 AND NOT paused
        RETURNING *""",
        tenant_id,
        schedule_id,
        seen,
        next_due_at,
        at,
    )


async def insert_fire(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    schedule_id: str,
    due_at: datetime,
    outcome: str,
    reason: str | None,
    eval_id: str | None,
    at: datetime,
) -> None:
    await conn.execute(
        """INSERT INTO eval_schedule_fire (tenant_id, schedule_id, due_at, outcome, reason,
            eval_id, at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        tenant_id,
        schedule_id,
        due_at,
        outcome,
        reason,
        eval_id,
        at,
    )


async def fires(
    conn: Reader, *, tenant_id: uuid.UUID, schedule_id: str, limit: int
) -> list[asyncpg.Record]:
    """Newest due time first."""
    return await conn.fetch(
        """SELECT due_at, outcome, reason, eval_id FROM eval_schedule_fire
        WHERE tenant_id = $1 AND schedule_id = $2 ORDER BY due_at DESC LIMIT $3""",
        tenant_id,
        schedule_id,
        limit,
    )
