"""History: `[type]/[id]/_history`, `[type]/_history` and `_history`, newest first."""

from __future__ import annotations

from app.db import Conn
from app.errors import BadRequest, Issue
from app.fhir import repository
from app.fhir.checks import check_type, require_id, require_visible
from app.fhir.context import FhirContext


async def history(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str | None,
    resource_id: str | None,
    items: list[tuple[str, str]],
) -> tuple[int, list[repository.HistoryEntry], int, int]:
    if resource_type is not None:
        check_type(resource_type)
    count, offset, since = 20, 0, None
    for key, value in items:
        try:
            if key == "_count":
                count = min(max(int(value), 0), 500)
            elif key == "_offset":
                offset = max(int(value), 0)
            elif key == "_since":
                from app.fhir.search.index import parse_date_range

                since = parse_date_range(value)[0]
            elif key not in ("_format", "_pretty"):
                raise BadRequest(
                    f"unknown history parameter '{key}' (supported: _count, _since, _offset)",
                    [Issue("unknown parameter", expression=key, code="not-supported")],
                )
        except ValueError as exc:
            raise BadRequest(f"invalid value for '{key}': {exc}") from None
    if resource_id is not None and resource_type is not None:
        require_id(resource_type, resource_id)
        ctx.touch(f"{resource_type}/{resource_id}")
        current = await repository.fetch_current(conn, ctx.tenant_id, resource_type, resource_id)
        require_visible(ctx, current, resource_type, resource_id)
    total, entries = await repository.fetch_history(
        conn,
        ctx.tenant_id,
        resource_type=resource_type,
        resource_id=resource_id,
        since=since,
        limit=count,
        offset=offset,
    )
    return total, entries, count, offset
