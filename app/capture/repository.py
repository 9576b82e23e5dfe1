"""The SQL of `captured_effect`. Every function takes the connection and the tenant
explicitly, and every statement filters on both the tenant and the run."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn

Reader = Conn | asyncpg.Pool


async def insert_effect(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    effect_id: str,
    kind: str,
    at: datetime,
    to_address: str | None,
    from_address: str | None,
    subject: str | None,
    body: str | None,
    data: str,
    status: str,
) -> asyncpg.Record:
    row = await conn.fetchrow(
        """INSERT INTO captured_effect (tenant_id, id, run_id, kind, direction, at,
            to_address, from_address, subject, body, data, status)
        VALUES ($1, $2, $3, $4, 'outbound', $5, $6, $7, $8, $9, $10::jsonb, $11)
        RETURNING *""",
        tenant_id,
        effect_id,
        run_id,
        kind,
        at,
        to_address,
        from_address,
        subject,
        body,
        data,
        status,
    )
    assert row is not None
    return row


async def effect(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str, effect_id: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM captured_effect WHERE tenant_id = $1 AND run_id = $2 AND id = $3",
        tenant_id,
        run_id,
        effect_id,
    )


async def effects_in_order(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str, after: int, limit: int
) -> list[asyncpg.Record]:
    """Oldest first, from the one after `after` (its `seq`)."""
    return list(
        await conn.fetch(
            """SELECT * FROM captured_effect
            WHERE tenant_id = $1 AND run_id = $2 AND seq > $3
            ORDER BY seq LIMIT $4""",
            tenant_id,
            run_id,
            after,
            limit,
        )
    )


async def messages_newest_first(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    to_address: str | None,
    from_address: str | None,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    """A run's SMS, newest first (Twilio's order), optionally to or from one number."""
    return list(
        await conn.fetch(
            """SELECT * FROM captured_effect
            WHERE tenant_id = $1 AND run_id = $2 AND kind = 'sms'
                AND ($3::text IS NULL OR to_address = $3)
                AND ($4::text IS NULL OR from_address = $4)
            ORDER BY seq DESC OFFSET $5 LIMIT $6""",
            tenant_id,
            run_id,
            to_address,
            from_address,
            offset,
            limit,
        )
    )


async def sent_texts(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> list[asyncpg.Record]:
    """A run's outbound SMS and e-mail with a body, oldest first."""
    return list(
        await conn.fetch(
            """SELECT * FROM captured_effect
            WHERE tenant_id = $1 AND run_id = $2 AND kind IN ('sms', 'email')
                AND direction = 'outbound' AND body IS NOT NULL
            ORDER BY seq""",
            tenant_id,
            run_id,
        )
    )
