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
    direction: str = "outbound",
) -> asyncpg.Record:
    row = await conn.fetchrow(
        """INSERT INTO captured_effect (tenant_id, id, run_id, kind, direction, at,
            to_address, from_address, subject, body, data, status)
        VALUES ($1, $2, $3, $4, $12, $5, $6, $7, $8, $9, $10::jsonb, $11)
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
        direction,
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


async def sms_in_order(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> list[asyncpg.Record]:
    """A run's SMS, both ways, oldest first."""
    return list(
        await conn.fetch(
            """SELECT * FROM captured_effect
            WHERE tenant_id = $1 AND run_id = $2 AND kind = 'sms'
            ORDER BY seq""",
            tenant_id,
            run_id,
        )
    )


# An inbound SMS's delivery to the run's reply URL lives in its `data.delivery`:
# {url, status: pending | delivered | failed, attempts, nextAttemptAt, leaseUntil}, each
# attempt appended to `data.deliveries`. Times are ISO 8601 text (jsonb has no timestamp).
_DUE = """d.data->'delivery'->>'status' = 'pending'
    AND (d.data->'delivery'->>'nextAttemptAt')::timestamptz <= {now}
    AND coalesce((d.data->'delivery'->>'leaseUntil')::timestamptz, '-infinity') < {now}"""


async def claim_delivery(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    effect_id: str,
    now: datetime,
    lease_until: datetime,
) -> asyncpg.Record | None:
    """Take the inbound SMS's due delivery for one attempt (None: not due, not pending, or
    another worker holds it)."""
    return await conn.fetchrow(
        f"""UPDATE captured_effect d
        SET data = jsonb_set(d.data, '{{delivery,leaseUntil}}', to_jsonb($5::text))
        WHERE d.tenant_id = $1 AND d.run_id = $2 AND d.id = $3 AND d.direction = 'inbound'
            AND {_DUE.format(now="$4::timestamptz")}
        RETURNING *""",
        tenant_id,
        run_id,
        effect_id,
        now,
        lease_until.isoformat(),
    )


async def finish_delivery(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    effect_id: str,
    lease: str,
    delivery: str,
    attempt: str,
) -> bool:
    """Record one attempt (`attempt`, JSON) and the delivery's state after it (`delivery`,
    JSON) if the claim `lease` is still the row's; False when it is not."""
    done = await conn.fetchval(
        """UPDATE captured_effect
        SET data = jsonb_set(
            jsonb_set(data, '{delivery}', $5::jsonb),
            '{deliveries}',
            coalesce(data->'deliveries', '[]'::jsonb) || jsonb_build_array($6::jsonb))
        WHERE tenant_id = $1 AND run_id = $2 AND id = $3
            AND data->'delivery'->>'leaseUntil' = $4
        RETURNING 1""",
        tenant_id,
        run_id,
        effect_id,
        lease,
        delivery,
        attempt,
    )
    return done is not None


async def due_deliveries(conn: Reader, *, due_before: datetime, limit: int) -> list[asyncpg.Record]:
    """Every tenant's inbound SMS whose delivery is due since `due_before` and not held:
    the sweeper's (its job may have been lost). Spans tenants."""
    return list(
        await conn.fetch(
            f"""SELECT d.tenant_id, d.run_id, d.id,
                (d.data->'delivery'->>'attempts')::int AS attempts
            FROM captured_effect d
            WHERE d.kind = 'sms' AND d.direction = 'inbound'
                AND {_DUE.format(now="$1::timestamptz")}
            ORDER BY d.at LIMIT $2""",
            due_before,
            limit,
        )
    )
