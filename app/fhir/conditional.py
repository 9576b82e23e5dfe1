"""The conditional interactions (docs/fhir-api.md): `PUT`, `PATCH` and `DELETE` on
`[type]?criteria`, each the plain interaction on the one match.

Conditional create (`If-None-Exist`) is `interactions.create`'s, over the same
`conditional_match`.
"""

from __future__ import annotations

from typing import Any

from app.db import Conn
from app.errors import BadRequest, NotFound
from app.fhir.checks import check_type
from app.fhir.context import FhirContext, WriteResult
from app.fhir.interactions import Deferred, create, delete, patch, update
from app.fhir.searching import conditional_match


async def conditional_update(
    ctx: FhirContext, conn: Conn, resource_type: str, criteria: str, resource: Any
) -> WriteResult:
    """`PUT [type]?criteria`: one match is updated (the body's id, if any, must be the
    match's); none is created (with the body's id when it has one, as PUT with a client
    id does, else a new one); more than one is a 412 (FHIR's conditional update)."""
    check_type(resource_type)
    if not isinstance(resource, dict):
        raise BadRequest("the body must be a JSON object (a FHIR resource)")
    found = await conditional_match(ctx, conn, resource_type, criteria, "conditional update")
    body_id = resource.get("id") if isinstance(resource, dict) else None
    if found is not None:
        if body_id is not None and body_id != found.id:
            raise BadRequest(
                f"the body's id '{body_id}' is not the matching {resource_type}'s ({found.id})"
            )
        return await update(ctx, conn, resource_type, found.id, {**resource, "id": found.id})
    if isinstance(body_id, str):
        return await update(ctx, conn, resource_type, body_id, resource)
    return await create(ctx, conn, resource_type, resource)


async def conditional_patch(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    criteria: str,
    document: Any,
    content_type: str,
    *,
    if_match: str | None = None,
    deferred: Deferred | None = None,
) -> WriteResult:
    """`PATCH [type]?criteria`: the one match is patched as `PATCH [type]/[id]` would
    patch it; none is a 404, more than one a 412 (FHIR's conditional patch)."""
    check_type(resource_type)
    found = await conditional_match(ctx, conn, resource_type, criteria, "conditional patch")
    if found is None:
        raise NotFound(
            f"conditional patch: no {resource_type} matches '{criteria.split('?', 1)[-1]}'"
        )
    return await patch(
        ctx,
        conn,
        resource_type,
        found.id,
        document,
        content_type,
        if_match=if_match,
        deferred=deferred,
    )


async def conditional_delete(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    criteria: str,
    *,
    deferred: Deferred | None = None,
) -> str | None:
    """`DELETE [type]?criteria`: the one match is deleted (its id is returned); none
    deletes nothing and succeeds; more than one is a 412 (FHIR R4's single-match
    conditional delete)."""
    check_type(resource_type)
    found = await conditional_match(ctx, conn, resource_type, criteria, "conditional delete")
    if found is None:
        return None
    await delete(ctx, conn, resource_type, found.id, deferred=deferred)
    return found.id
