"""The SQL of the webhook tables: subscriptions, events (the outbox), deliveries and
their attempts. Every function takes the connection it runs on and the tenant
explicitly; the retention and sweeper ones span tenants and say so.

At the top, this feature's parts of the FHIR write statement (composed by
`app.runs.fhir_writes`); below, its own queries.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn
from app.fhir.repository import WriteCall, WritePart, version_join_sql

# --- Parts of the FHIR write statement ----------------------------------------------------
# The FHIR store writes every resource in one statement (`app.fhir.repository`); this is
# the outbox's share of it, composed in by `app.runs.fhir_writes`.


def _outbox_args(call: WriteCall) -> tuple[object, ...]:
    return (call.fhir_root, call.now)


# The outbox: events commit with the write, or not at all. Only written while the tenant
# has an enabled subscription (nobody could receive them otherwise); one delivery per
# matching subscription, enqueued after commit.
OUTBOX = WritePart(
    sql="""ev AS (
    INSERT INTO webhook_event (
        tenant_id, id, type, resource_type, resource_id, version_id, run_id, occurred_at,
        fhir_root
    )
    SELECT $1, 'evt_' || replace(gen_random_uuid()::text, '-', ''), e.type, d.rtype, d.rid,
        d.vid, d.owner, d.ts, {fhir_root}::text
    FROM done d CROSS JOIN LATERAL unnest(string_to_array(d.events, {sep})) AS e(type)
    WHERE d.events <> '' AND EXISTS (
        SELECT 1 FROM webhook_subscription s WHERE s.tenant_id = $1 AND s.enabled)
    RETURNING id, type, resource_type, resource_id, seq
), dl AS (
    INSERT INTO webhook_delivery (
        tenant_id, id, subscription_id, event_id, seq, resource_ref, status, attempts,
        next_attempt_at, created_at
    )
    SELECT $1, 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, ev.id, ev.seq,
        ev.resource_type || '/' || ev.resource_id, 'pending', 0, {now}::timestamptz,
        {now}::timestamptz
    FROM ev JOIN webhook_subscription s ON s.tenant_id = $1 AND s.enabled
        AND (ev.type = ANY(s.events) OR '*' = ANY(s.events))
        AND (s.resource_types IS NULL OR ev.resource_type = ANY(s.resource_types))
    RETURNING id
)""",
    params=("fhir_root", "now"),
    args=_outbox_args,
    deliveries="dl",
)


# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool


# An event about something other than a FHIR resource (an eval's): its body in `payload`,
# `resource_ref` (Type/id) keeping one thing's events in order. Written only when an
# enabled subscription names it (or '*'), with one delivery per such subscription; a
# subscription's resource types filter resource events only.
_PAYLOAD_EVENT_SQL = """
WITH ev AS (
    INSERT INTO webhook_event (
        tenant_id, id, type, resource_type, resource_id, version_id, run_id, occurred_at,
        fhir_root, payload
    )
    SELECT $1, 'evt_' || replace(gen_random_uuid()::text, '-', ''), $2, $3, $4, 0, NULL, $5,
        $6, $7::jsonb
    WHERE EXISTS (
        SELECT 1 FROM webhook_subscription s WHERE s.tenant_id = $1 AND s.enabled
            AND ($2 = ANY(s.events) OR '*' = ANY(s.events)))
    RETURNING id, type, resource_type, resource_id, seq
), dl AS (
    INSERT INTO webhook_delivery (
        tenant_id, id, subscription_id, event_id, seq, resource_ref, status, attempts,
        next_attempt_at, created_at
    )
    SELECT $1, 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, ev.id, ev.seq,
        ev.resource_type || '/' || ev.resource_id, 'pending', 0, $5, $5
    FROM ev JOIN webhook_subscription s ON s.tenant_id = $1 AND s.enabled
        AND (ev.type = ANY(s.events) OR '*' = ANY(s.events))
    RETURNING id
)
SELECT count(*) FROM dl
"""


async def insert_payload_event(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    event_type: str,
    resource_type: str,
    resource_id: str,
    occurred_at: datetime,
    root: str,
    payload_json: str,
) -> int:
    """Write the event and its deliveries in one statement; returns the deliveries."""
    count: int = await conn.fetchval(
        _PAYLOAD_EVENT_SQL,
        tenant_id,
        event_type,
        resource_type,
        resource_id,
        occurred_at,
        root,
        payload_json,
    )
    return count


async def insert_subscription(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    subscription_id: str,
    url: str,
    events: list[str],
    resource_types: list[str] | None,
    secret: str,
    enabled: bool,
    headers_json: str,
) -> asyncpg.Record:
    row = await conn.fetchrow(
        """INSERT INTO webhook_subscription (tenant_id, id, url, events, resource_types, secret,
            enabled, headers) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb) RETURNING *""",
        tenant_id,
        subscription_id,
        url,
        events,
        resource_types,
        secret,
        enabled,
        headers_json,
    )
    assert row is not None
    return row


async def subscriptions(conn: Reader, *, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT * FROM webhook_subscription WHERE tenant_id = $1 ORDER BY created_at", tenant_id
    )


async def subscription(
    conn: Reader, *, tenant_id: uuid.UUID, subscription_id: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM webhook_subscription WHERE tenant_id = $1 AND id = $2",
        tenant_id,
        subscription_id,
    )


async def subscription_target(
    conn: Reader, *, tenant_id: uuid.UUID, subscription_id: str
) -> asyncpg.Record | None:
    """What a ping needs: the URL, the signing secret, the static headers."""
    return await conn.fetchrow(
        "SELECT url, secret, headers FROM webhook_subscription WHERE tenant_id = $1 AND id = $2",
        tenant_id,
        subscription_id,
    )


async def delete_subscription(conn: Conn, *, tenant_id: uuid.UUID, subscription_id: str) -> bool:
    status = await conn.execute(
        "DELETE FROM webhook_subscription WHERE tenant_id = $1 AND id = $2",
        tenant_id,
        subscription_id,
    )
    return not status.endswith(" 0")


async def disable_gone_subscription(
    conn: Conn, *, tenant_id: uuid.UUID, subscription_id: str
) -> None:
    await conn.execute(
        """UPDATE webhook_subscription SET enabled = false,
                disabled_reason = 'the receiver answered 410 Gone'
            WHERE tenant_id = $1 AND id = $2""",
        tenant_id,
        subscription_id,
    )


async def deliveries_of(
    conn: Reader, *, tenant_id: uuid.UUID, subscription_id: str, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT d.*, e.type, e.run_id FROM webhook_delivery d
        JOIN webhook_event e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
        WHERE d.tenant_id = $1 AND d.subscription_id = $2
        ORDER BY d.created_at DESC, d.seq DESC LIMIT $3""",
        tenant_id,
        subscription_id,
        limit,
    )


async def attempts_of(
    conn: Reader, *, tenant_id: uuid.UUID, delivery_ids: list[str]
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT * FROM webhook_attempt WHERE tenant_id = $1 AND delivery_id = ANY($2::text[])
        ORDER BY delivery_id, attempt""",
        tenant_id,
        delivery_ids,
    )


async def reset_delivery(
    conn: Conn, *, tenant_id: uuid.UUID, subscription_id: str, delivery_id: str, at: datetime
) -> int | None:
    """Make a delivery pending again, due at `at`; its attempts so far, None if unknown."""
    row = await conn.fetchrow(
        """UPDATE webhook_delivery SET status = 'pending', next_attempt_at = $4,
            lease_until = NULL
        WHERE tenant_id = $1 AND subscription_id = $2 AND id = $3 RETURNING attempts""",
        tenant_id,
        subscription_id,
        delivery_id,
        at,
    )
    return None if row is None else int(row["attempts"])


async def next_retry_at(conn: Reader, *, tenant_id: uuid.UUID, after: datetime) -> datetime | None:
    due: datetime | None = await conn.fetchval(
        """SELECT min(next_attempt_at) FROM webhook_delivery
        WHERE tenant_id = $1 AND status = 'pending' AND next_attempt_at > $2""",
        tenant_id,
        after,
    )
    return due


_FINISH_SQL = """
WITH attempt AS (
    INSERT INTO webhook_attempt (tenant_id, delivery_id, attempt, at, status_code, latency_ms,
        error, response_excerpt)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
)
UPDATE webhook_delivery SET status = $9, lease_until = NULL,
    delivered_at = CASE WHEN $9 = 'delivered' THEN $4 ELSE delivered_at END,
    next_attempt_at = coalesce($10, next_attempt_at)
WHERE tenant_id = $1 AND id = $2
"""


async def finish_delivery(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    delivery_id: str,
    status: str,
    attempt: int,
    at: datetime,
    status_code: int | None,
    latency_ms: float,
    error: str | None,
    excerpt: str | None,
    next_at: datetime | None,
) -> None:
    """Record the attempt and the delivery's new state in one statement."""
    await conn.execute(
        _FINISH_SQL,
        tenant_id,
        delivery_id,
        attempt,
        at,
        status_code,
        latency_ms,
        error,
        excerpt,
        status,
        next_at,
    )


async def stale_pending(
    conn: Reader, *, due_before: datetime, now: datetime, limit: int
) -> list[asyncpg.Record]:
    """Every tenant's pending deliveries due before `due_before` and not leased at `now`."""
    return await conn.fetch(
        """SELECT tenant_id, id, attempts FROM webhook_delivery
        WHERE status = 'pending' AND next_attempt_at <= $1
            AND (lease_until IS NULL OR lease_until < $2)
        ORDER BY next_attempt_at LIMIT $3""",
        due_before,
        now,
        limit,
    )


async def delivered_for_run(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT d.delivered_at, e.type, e.resource_type || '/' || e.resource_id AS ref
        FROM webhook_event e JOIN webhook_delivery d
            ON d.tenant_id = e.tenant_id AND d.event_id = e.id
        WHERE e.tenant_id = $1 AND e.run_id = $2 AND d.status = 'delivered'""",
        tenant_id,
        run_id,
    )


async def delivered_versions_for_run(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str
) -> list[asyncpg.Record]:
    """The resource versions the run's delivered events carried: resource_type,
    resource_id, version_id (each once)."""
    return await conn.fetch(
        """SELECT DISTINCT e.resource_type, e.resource_id, e.version_id
        FROM webhook_event e JOIN webhook_delivery d
            ON d.tenant_id = e.tenant_id AND d.event_id = e.id
        WHERE e.tenant_id = $1 AND e.run_id = $2 AND d.status = 'delivered'""",
        tenant_id,
        run_id,
    )


async def latest_fhir_root(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> str | None:
    """The server root the run's latest event was written under."""
    root: str | None = await conn.fetchval(
        """SELECT fhir_root FROM webhook_event WHERE tenant_id = $1 AND run_id = $2
        ORDER BY seq DESC LIMIT 1""",
        tenant_id,
        run_id,
    )
    return root


async def purge_finished(conn: Conn, *, before: datetime) -> int:
    """Every tenant's finished deliveries created before `before`, their attempts, and
    the events left without a delivery; returns the deliveries removed."""
    await conn.execute(
        """DELETE FROM webhook_attempt a USING webhook_delivery d
            WHERE a.tenant_id = d.tenant_id AND a.delivery_id = d.id
                AND d.status <> 'pending' AND d.created_at < $1""",
        before,
    )
    status = await conn.execute(
        "DELETE FROM webhook_delivery WHERE status <> 'pending' AND created_at < $1", before
    )
    await conn.execute(
        """DELETE FROM webhook_event e WHERE e.occurred_at < $1 AND NOT EXISTS (
                SELECT 1 FROM webhook_delivery d
                WHERE d.tenant_id = e.tenant_id AND d.event_id = e.id)""",
        before,
    )
    return int(status.split()[-1])


# The event's resource version, for the payload (the FHIR store owns the SQL).
_EVENT_VERSION_JOIN = version_join_sql(
    "h",
    tenant_id="e.tenant_id",
    resource_type="e.resource_type",
    resource_id="e.resource_id",
    version_id="e.version_id",
)
_BATCH_CLAIM_SQL = f"""
WITH picked AS (
    SELECT d.tenant_id, d.id FROM webhook_delivery d
    WHERE d.tenant_id = $1 AND d.status = 'pending' AND d.next_attempt_at <= $3
        AND (d.lease_until IS NULL OR d.lease_until < $3)
        AND NOT EXISTS (
            SELECT 1 FROM webhook_delivery e
            WHERE e.tenant_id = d.tenant_id AND e.subscription_id = d.subscription_id
                AND e.resource_ref = d.resource_ref AND e.seq < d.seq AND e.status = 'pending')
    ORDER BY d.seq LIMIT $4
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE webhook_delivery d SET lease_until = $2, attempts = d.attempts + 1
    FROM picked p WHERE d.tenant_id = p.tenant_id AND d.id = p.id
    RETURNING d.*
)
SELECT c.id, c.attempts, c.subscription_id, s.url, s.secret, s.enabled, s.headers,
    e.id AS event_id, e.type, e.occurred_at, e.run_id, e.fhir_root, e.payload, h.resource
FROM claimed c
JOIN webhook_event e ON e.tenant_id = c.tenant_id AND e.id = c.event_id
LEFT JOIN webhook_subscription s ON s.tenant_id = c.tenant_id AND s.id = c.subscription_id
{_EVENT_VERSION_JOIN}
ORDER BY c.seq
"""


async def claim_due_batch(
    pool: asyncpg.Pool, *, tenant_id: uuid.UUID, lease_until: datetime, now: datetime, limit: int
) -> list[asyncpg.Record]:
    """Lease up to `limit` of the tenant's due deliveries (each the oldest pending one of
    its subscription and resource), in one statement, with what sending them needs."""
    return await pool.fetch(_BATCH_CLAIM_SQL, tenant_id, lease_until, now, limit)
