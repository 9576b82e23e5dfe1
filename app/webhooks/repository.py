"""The webhooks feature's SQL."""

from __future__ import annotations

from app.fhir.repository import WriteCall, WritePart

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
