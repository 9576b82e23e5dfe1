"""A new version of a resource, ready for the write statement: validated, stamped,
indexed, with the events it emits (`prepare_write`, `deletion`); and whether it would
store the same resource again (`unchanged`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.fhir import repository, writes
from app.fhir.context import RUN_TAG, SIM_TAG, FhirContext, WriteResult
from app.fhir.events import events_for
from app.fhir.search.index import extract_index
from app.kit import jsontext


def prepare_write(
    ctx: FhirContext,
    resource_type: str,
    resource: dict[str, Any],
    resource_id: str,
    version_id: int,
    interaction: str,
    now: datetime,
    previous: Any = None,
) -> repository.PreparedWrite:
    """Validate and stamp a resource; extract its search values. Mutates `resource`.

    Every write of a resource goes through here, so this is the one place it is
    validated (callers check only what they need before it: the type, the id)."""
    writes.validated(resource_type, resource)
    tag = None if ctx.run_id is None else SIM_TAG if ctx.source == "sim" else RUN_TAG
    writes.stamp(resource, resource_id, version_id, now, tag)
    index = extract_index(resource_type, resource)
    ctx.touch(f"{resource_type}/{resource_id}", *index.all_refs)
    return repository.PreparedWrite(
        resource_type=resource_type,
        id=resource_id,
        version_id=version_id,
        last_updated=now,
        interaction=interaction,
        body=jsontext.dumps(resource),
        index=index,
        run_id=ctx.run_id,
        source=ctx.source,
        events=events_for(ctx, resource_type, interaction, resource, previous),
    )


def deletion(
    ctx: FhirContext, current: repository.StoredResource, now: datetime
) -> repository.PreparedWrite:
    ctx.touch(f"{current.resource_type}/{current.id}")
    return repository.PreparedWrite(
        resource_type=current.resource_type,
        id=current.id,
        version_id=current.version_id + 1,
        last_updated=now,
        interaction="delete",
        body=None,
        index=None,
        run_id=ctx.run_id,
        source=ctx.source,
        events=events_for(ctx, current.resource_type, "delete", None),
    )


def _without_version(document: dict[str, Any]) -> dict[str, Any]:
    meta = {
        k: v
        for k, v in (document.get("meta") or {}).items()
        if k not in ("versionId", "lastUpdated")
    }
    return (
        {**document, "meta": meta} if meta else {k: v for k, v in document.items() if k != "meta"}
    )


def unchanged(
    current: repository.StoredResource | None, write: repository.PreparedWrite
) -> WriteResult | None:
    """The current version, when the write would store the same resource again (FHIR: an
    update that changes nothing need not make a version; clients that PUT back what they
    read, or PATCH a value to what it is, must not bump it)."""
    if current is None or current.deleted or current.json is None or write.body is None:
        return None
    if _without_version(jsontext.loads(current.json)) != _without_version(
        jsontext.loads(write.body)
    ):
        return None
    return WriteResult(
        200,
        current.resource_type,
        current.id,
        current.version_id,
        current.last_updated,
        current.json,
    )


def result_of(write: repository.PreparedWrite, status: int) -> WriteResult:
    return WriteResult(
        status, write.resource_type, write.id, write.version_id, write.last_updated, write.body
    )
