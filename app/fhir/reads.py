"""What other features read or delete of the FHIR store (runs, the console, judges, the
canonical directory). They call these, through `app.fhir.service`, never a repository:
the SQL over the FHIR tables stays in app/fhir's repository modules. Each answers typed
values (`app.fhir.reads_repository`'s rows), not asyncpg Records.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from app.db import Conn
from app.fhir import reads_repository, repository
from app.fhir.reads_repository import (
    ChangedByRun,
    ChartResource,
    CurrentBody,
    Origin,
    Queryable,
    StoredVersion,
    ThreadMessage,
)

__all__ = [
    "ChangedByRun",
    "ChartResource",
    "CurrentBody",
    "Origin",
    "Queryable",
    "StoredVersion",
    "ThreadMessage",
    "communications_of",
    "current_or_deleted",
    "current_version",
    "delete_run_resources",
    "ids_like",
    "live_count_sql",
    "origins_of",
    "patient_chart",
    "resources_changed_by_run",
    "version_join_sql",
    "versions_of",
    "written_by_run",
]


async def current_version(
    conn: Conn, tenant_id: uuid.UUID, resource_type: str, resource_id: str
) -> repository.StoredResource | None:
    """The current version of one resource (deleted or not), whatever run it belongs to."""
    return await repository.fetch_current(conn, tenant_id, resource_type, resource_id)


async def current_or_deleted(
    conn: Conn, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[CurrentBody]:
    """The current state of those of the (type, id) pairs that exist."""
    return await reads_repository.fetch_current_or_deleted(conn, tenant_id, refs)


async def resources_changed_by_run(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    own_types: list[str] | None,
    tenant_types: list[str] | None,
    since: datetime,
    with_before: bool = False,
) -> list[ChangedByRun]:
    """What clients wrote for a run: see `reads_repository.fetch_changed_by_run`."""
    return await reads_repository.fetch_changed_by_run(
        conn,
        tenant_id,
        run_id,
        own_types=own_types,
        tenant_types=tenant_types,
        since=since,
        with_before=with_before,
    )


async def delete_run_resources(conn: Conn, tenant_id: uuid.UUID, run_id: str) -> int:
    """Delete a run's resources and their history (in the caller's transaction)."""
    return await reads_repository.delete_run_resources(conn, tenant_id, run_id)


async def written_by_run(
    db: Queryable, tenant_id: uuid.UUID, run_id: str, resource_types: list[str]
) -> list[str]:
    """The current JSON of the live resources of those types clients wrote in the run."""
    return await reads_repository.fetch_written_by_run(db, tenant_id, run_id, resource_types)


async def communications_of(
    db: Queryable, tenant_id: uuid.UUID, run_id: str, ref: str
) -> list[ThreadMessage]:
    """The run's live Communications referencing `ref`, oldest first."""
    return await reads_repository.fetch_communications_of(db, tenant_id, run_id, ref)


async def ids_like(conn: Conn, tenant_id: uuid.UUID, pattern: str) -> set[tuple[str, str]]:
    """(resource_type, id) of the tenant's resources whose id is LIKE `pattern`."""
    return await reads_repository.fetch_ids_like(conn, tenant_id, pattern)


async def patient_chart(
    db: Queryable, tenant_id: uuid.UUID, patient_id: str
) -> list[ChartResource]:
    """The patient's chart: the Patient and every live resource referencing it, newest
    first (empty when the tenant has no such patient)."""
    return await reads_repository.fetch_patient_chart(db, tenant_id, patient_id)


async def versions_of(
    db: Queryable, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[StoredVersion]:
    """Every version of those resources, newest first (their history, in one query)."""
    return await reads_repository.fetch_versions_of(db, tenant_id, refs)


async def origins_of(
    db: Queryable, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[Origin]:
    """The current body of those resources and who wrote each first (setup, stimulus,
    sim, or None for a client)."""
    return await reads_repository.fetch_origins(db, tenant_id, refs)


# SQL fragments for statements of other features that must stay one round trip.
live_count_sql = repository.live_count_sql
version_join_sql = repository.version_join_sql
