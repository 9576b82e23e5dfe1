"""The SQL of the booking rules (`app.fhir.booking_rules`): a practitioner's Schedules,
their Slots, the Appointments that hold the practitioner's time, and the name to show.

Each read sees what the context sees: with a run, the tenant's own resources and the
run's, never another run's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.db import Conn
from app.fhir.repository import index_keys


@dataclass(frozen=True, slots=True)
class SlotRow:
    id: str
    resource: str  # the Slot's JSON


@dataclass(frozen=True, slots=True)
class HoldingRow:
    """An Appointment of the practitioner that is not in a status that frees its time."""

    id: str
    start: str  # Appointment.start and .end as stored (FHIR instants)
    end: str
    status: str | None


async def fetch_schedule_ids(
    conn: Conn, tenant_id: uuid.UUID, run_id: str | None, practitioner: str
) -> list[str]:
    """The ids of the live Schedules whose actor is the practitioner."""
    rows = await conn.fetch(
        """SELECT id FROM fhir_resource WHERE tenant_id = $1 AND resource_type = 'Schedule'
        AND NOT deleted AND refs && $2::text[]
        AND ($3::text IS NULL OR run_id IS NULL OR run_id = $3)""",
        tenant_id,
        index_keys(tenant_id, "Schedule", [f"actor={practitioner}"]),
        run_id,
    )
    return [r["id"] for r in rows]


async def fetch_slots(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str | None,
    schedule_ids: Sequence[str],
    low: datetime,
    high: datetime,
    claimed_ids: Sequence[str],
) -> list[SlotRow]:
    """The live Slots of those Schedules starting in [low, high) that are free, or that
    are among `claimed_ids` whatever their status."""
    # Each Slot's start is looked up by its own id: a scalar subquery, which PostgreSQL
    # runs per row as an index probe and never turns into a join. As `id IN (SELECT …)`
    # it was a join, and with a tenant's keys missing from the planner's statistics (a
    # new tenant, or a small one in a big table) it estimated one Slot and joined every
    # Slot to every date row of the tenant: 330 ms for 640 Slots, where this is 3-5 ms
    # whatever the statistics (EXPLAIN ANALYZE on a never-analyzed database, 2026-12-04;
    # it was most of `understudy scenarios check`'s database time).
    rows = await conn.fetch(
        """SELECT r.id, r.resource FROM fhir_resource r WHERE r.tenant_id = $1
        AND r.resource_type = 'Slot' AND NOT r.deleted AND r.refs && $2::text[]
        AND (r.tokens @> $5::text[] OR r.id = ANY($7::text[]))
        AND ($6::text IS NULL OR r.run_id IS NULL OR r.run_id = $6)
        AND (SELECT true FROM fhir_date d WHERE d.tenant_id = $1 AND d.resource_type = 'Slot'
            AND d.id = r.id AND d.param = 'start' AND d.low >= $3 AND d.low < $4 LIMIT 1)""",
        tenant_id,
        index_keys(tenant_id, "Slot", [f"schedule=Schedule/{i}" for i in schedule_ids]),
        low,
        high,
        index_keys(tenant_id, "Slot", ["status=free"]),
        run_id,
        list(claimed_ids),
    )
    return [SlotRow(r["id"], r["resource"]) for r in rows]


async def fetch_holding_appointments(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str | None,
    practitioner: str,
    not_holding: Sequence[str],
    exclude: str | None,
) -> list[HoldingRow]:
    """The live Appointments with a start and an end that name the practitioner, in none
    of the `not_holding` statuses, except `exclude`."""
    rows = await conn.fetch(
        """SELECT id, resource->>'start' AS s, resource->>'end' AS e,
            resource->>'status' AS status FROM fhir_resource
        WHERE tenant_id = $1 AND resource_type = 'Appointment' AND NOT deleted
        AND refs && $2::text[] AND NOT tokens && $3::text[]
        AND resource ? 'start' AND resource ? 'end'
        AND ($4::text IS NULL OR run_id IS NULL OR run_id = $4)
        AND ($5::text IS NULL OR id <> $5)""",
        tenant_id,
        index_keys(
            tenant_id,
            "Appointment",
            [f"practitioner={practitioner}", f"actor={practitioner}"],
        ),
        index_keys(tenant_id, "Appointment", [f"status={s}" for s in not_holding]),
        run_id,
        exclude,
    )
    return [HoldingRow(r["id"], r["s"], r["e"], r["status"]) for r in rows]
