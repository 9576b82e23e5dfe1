"""The SQL of what other features read or delete of the FHIR store (they call
`app.fhir.reads`, through `app.fhir.service`, never this module): each read answers
typed rows, not asyncpg Records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn
from app.fhir.repository import index_keys

Queryable = asyncpg.Pool | Conn


@dataclass(frozen=True, slots=True)
class CurrentBody:
    """A resource's current state: deleted or not, and its JSON (None for a deletion)."""

    resource_type: str
    id: str
    deleted: bool
    resource: str | None


@dataclass(frozen=True, slots=True)
class Origin:
    """A resource's current state and who wrote its first version (setup, stimulus, sim,
    or None for a client)."""

    resource_type: str
    id: str
    deleted: bool
    resource: str | None
    source: str | None


@dataclass(frozen=True, slots=True)
class ChangedByRun:
    """A resource clients wrote for a run (`fetch_changed_by_run`)."""

    resource_type: str
    id: str
    first_at: datetime  # the first and last of those writes
    last_at: datetime
    created: bool  # one of them created it
    first_version: int
    via_run: bool  # some of them were the run's (through its view, or attributed to it)
    deleted: bool  # the current version's
    resource: str | None
    all_refs: list[str] | None  # scoped keys (`index_keys`) of every reference it holds
    run_id: str | None
    # The body of the version before the first of those writes, when asked for and the
    # writes did not create it.
    before: str | None


@dataclass(frozen=True, slots=True)
class ThreadMessage:
    """One Communication of a run's thread."""

    id: str
    resource: str
    last_updated: datetime


@dataclass(frozen=True, slots=True)
class ChartResource:
    """A live resource on a patient's chart, at its current version."""

    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    resource: str
    run_id: str | None


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """One stored version of a resource (its history row)."""

    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    interaction: str
    run_id: str | None
    source: str | None
    resource: str | None  # None for a deletion


async def fetch_current_or_deleted(
    conn: Conn, tenant_id: uuid.UUID, refs: Sequence[tuple[str, str]]
) -> list[CurrentBody]:
    """The current state of those of the given (type, id) pairs that exist."""
    rows = await conn.fetch(
        """SELECT r.resource_type, r.id, r.deleted, r.resource FROM fhir_resource r
        JOIN unnest($2::text[], $3::text[]) AS k(t, i) ON r.resource_type = k.t AND r.id = k.i
        WHERE r.tenant_id = $1""",
        tenant_id,
        [t for t, _ in refs],
        [i for _, i in refs],
    )
    return [CurrentBody(r["resource_type"], r["id"], r["deleted"], r["resource"]) for r in rows]


async def fetch_changed_by_run(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    own_types: Sequence[str] | None,
    tenant_types: Sequence[str] | None,
    since: datetime,
    with_before: bool = False,
) -> list[ChangedByRun]:
    """Resources clients wrote (not setup, stimulus or the simulator): the run's own of
    `own_types`, and of `tenant_types` any since `since` not owned by another run (None:
    every type; an empty list: none); with `with_before`, also the body of the version
    before the first of those writes, for a resource not created by them."""
    before_sql = (
        """, (SELECT b.resource FROM fhir_history b WHERE b.tenant_id = $1
            AND b.resource_type = h.resource_type AND b.id = h.id
            AND b.version_id = h.first_version - 1 AND NOT h.created) AS before"""
        if with_before
        else ", NULL AS before"
    )
    rows = await conn.fetch(
        f"""WITH h AS (
            SELECT resource_type, id, min(last_updated) AS first_at,
                max(last_updated) AS last_at, bool_or(interaction = 'create') AS created,
                min(version_id) AS first_version, bool_or(coalesce(run_id = $2, false)) AS via_run
            FROM fhir_history
            WHERE tenant_id = $1 AND source IS NULL AND (
                (run_id = $2 AND ($6 OR resource_type = ANY($3::text[])))
                OR (($7 OR resource_type = ANY($4::text[])) AND last_updated >= $5
                    AND (run_id IS NULL OR run_id = $2))
            )
            GROUP BY resource_type, id
        )
        SELECT h.*, r.deleted, r.resource, r.all_refs, r.run_id{before_sql}
        FROM h JOIN fhir_resource r
            ON r.tenant_id = $1 AND r.resource_type = h.resource_type AND r.id = h.id""",
        tenant_id,
        run_id,
        list(own_types or ()),
        list(tenant_types or ()),
        since,
        own_types is None,
        tenant_types is None,
    )
    return [
        ChangedByRun(
            r["resource_type"],
            r["id"],
            r["first_at"],
            r["last_at"],
            r["created"],
            r["first_version"],
            r["via_run"],
            r["deleted"],
            r["resource"],
            r["all_refs"],
            r["run_id"],
            r["before"],
        )
        for r in rows
    ]


async def delete_run_resources(conn: Conn, tenant_id: uuid.UUID, run_id: str) -> int:
    """Delete the run's resources with their date index and history; return how many."""
    await conn.execute(
        """DELETE FROM fhir_date d USING fhir_resource r
        WHERE r.tenant_id = $1 AND r.run_id = $2 AND d.tenant_id = $1
            AND d.resource_type = r.resource_type AND d.id = r.id""",
        tenant_id,
        run_id,
    )
    await conn.execute(
        """DELETE FROM fhir_history h USING fhir_resource r
        WHERE r.tenant_id = $1 AND r.run_id = $2 AND h.tenant_id = $1
            AND h.resource_type = r.resource_type AND h.id = r.id""",
        tenant_id,
        run_id,
    )
    status = await conn.execute(
        "DELETE FROM fhir_resource WHERE tenant_id = $1 AND run_id = $2", tenant_id, run_id
    )
    return int(status.split()[-1])


async def fetch_written_by_run(
    db: Queryable, tenant_id: uuid.UUID, run_id: str, resource_types: Sequence[str]
) -> list[str]:
    """The current JSON of the live resources of `resource_types` that clients wrote in
    the run (not setup, stimulus or the simulator), one per resource."""
    rows = await db.fetch(
        """SELECT DISTINCT ON (r.resource_type, r.id) r.resource FROM fhir_history h
        JOIN fhir_resource r ON r.tenant_id = h.tenant_id AND r.resource_type = h.resource_type
            AND r.id = h.id
        WHERE h.tenant_id = $1 AND h.run_id = $2 AND h.source IS NULL
            AND h.resource_type = ANY($3::text[]) AND NOT r.deleted""",
        tenant_id,
        run_id,
        list(resource_types),
    )
    return [r["resource"] for r in rows]


async def fetch_communications_of(
    db: Queryable, tenant_id: uuid.UUID, run_id: str, ref: str
) -> list[ThreadMessage]:
    """The run's live Communications referencing `ref`, oldest first."""
    rows = await db.fetch(
        """SELECT id, resource, last_updated FROM fhir_resource
        WHERE tenant_id = $1 AND resource_type = 'Communication' AND NOT deleted
            AND run_id = $2 AND all_refs && $3::text[]
        ORDER BY last_updated, id""",
        tenant_id,
        run_id,
        index_keys(tenant_id, None, [ref]),
    )
    return [ThreadMessage(r["id"], r["resource"], r["last_updated"]) for r in rows]


async def fetch_ids_like(conn: Conn, tenant_id: uuid.UUID, pattern: str) -> set[tuple[str, str]]:
    """(resource_type, id) of the tenant's resources (deleted ones too) whose id is LIKE
    `pattern`."""
    rows = await conn.fetch(
        "SELECT resource_type, id FROM fhir_resource WHERE tenant_id = $1 AND id LIKE $2",
        tenant_id,
        pattern,
    )
    return {(r["resource_type"], r["id"]) for r in rows}


# Cap on the resources one chart shows: a patient of a test run has tens; the canonical
# directory's busiest practitioner is not a patient.
CHART_MAX = 2000


async def fetch_patient_chart(
    db: Queryable, tenant_id: uuid.UUID, patient_id: str
) -> list[ChartResource]:
    """The patient's current resources: the Patient and every live resource referencing
    it, newest first."""
    rows = await db.fetch(
        f"""SELECT resource_type, id, version_id, last_updated, resource, run_id
        FROM fhir_resource
        WHERE tenant_id = $1 AND NOT deleted AND (
            (resource_type = 'Patient' AND id = $2) OR all_refs && $3::text[])
        ORDER BY last_updated DESC, resource_type, id LIMIT {CHART_MAX}""",
        tenant_id,
        patient_id,
        index_keys(tenant_id, None, [f"Patient/{patient_id}"]),
    )
    return [
        ChartResource(
            r["resource_type"],
            r["id"],
            r["version_id"],
            r["last_updated"],
            r["resource"],
            r["run_id"],
        )
        for r in rows
    ]


async def fetch_versions_of(
    db: Queryable, tenant_id: uuid.UUID, refs: Sequence[tuple[str, str]]
) -> list[StoredVersion]:
    """Every stored version of the given (type, id) pairs, newest first."""
    if not refs:
        return []
    rows = await db.fetch(
        """SELECT h.resource_type, h.id, h.version_id, h.last_updated, h.interaction,
                h.run_id, h.source, h.resource
        FROM fhir_history h
        JOIN unnest($2::text[], $3::text[]) AS k(t, i) ON h.resource_type = k.t AND h.id = k.i
        WHERE h.tenant_id = $1
        ORDER BY h.last_updated DESC, h.version_id DESC""",
        tenant_id,
        [t for t, _ in refs],
        [i for _, i in refs],
    )
    return [
        StoredVersion(
            r["resource_type"],
            r["id"],
            r["version_id"],
            r["last_updated"],
            r["interaction"],
            r["run_id"],
            r["source"],
            r["resource"],
        )
        for r in rows
    ]


async def fetch_origins(
    db: Queryable, tenant_id: uuid.UUID, refs: Sequence[tuple[str, str]]
) -> list[Origin]:
    """The current state of those of the given (type, id) pairs that exist, and who wrote
    the first version of each."""
    if not refs:
        return []
    rows = await db.fetch(
        """SELECT r.resource_type, r.id, r.deleted, r.resource,
            (SELECT h.source FROM fhir_history h WHERE h.tenant_id = $1
                AND h.resource_type = r.resource_type AND h.id = r.id
                ORDER BY h.version_id LIMIT 1) AS source
        FROM fhir_resource r
        JOIN unnest($2::text[], $3::text[]) AS k(t, i) ON r.resource_type = k.t AND r.id = k.i
        WHERE r.tenant_id = $1""",
        tenant_id,
        [t for t, _ in refs],
        [i for _, i in refs],
    )
    return [
        Origin(r["resource_type"], r["id"], r["deleted"], r["resource"], r["source"]) for r in rows
    ]
