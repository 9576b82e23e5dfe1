"""Search (`GET [type]?params`: a page, its total, `_include`d resources and the paging
links) and the single match a conditional interaction looks for (`conditional_match`).

The SQL is `app.fhir.search_repository`'s; what a query means is `app.fhir.search`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from app.db import Conn
from app.errors import BadRequest
from app.fhir import repository, search_repository
from app.fhir.checks import check_type
from app.fhir.context import FhirContext, WriteResult
from app.fhir.errors import AmbiguousMatch
from app.fhir.search.query import Include, SearchError, SearchQuery, has_criteria, parse_search
from app.fhir.search.sql import compile_search
from app.fhir.search_repository import Match


def parse_query(resource_type: str, items: list[tuple[str, str]], *, lenient: bool) -> SearchQuery:
    try:
        return parse_search(resource_type, items, lenient=lenient)
    except SearchError as exc:
        raise BadRequest(str(exc), exc.issues) from None


@dataclass
class SearchPage:
    total: int
    rows: list[Match]
    included: list[repository.StoredResource]
    next_params: list[tuple[str, str]] | None
    previous_params: list[tuple[str, str]] | None
    query: SearchQuery


async def search(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    items: list[tuple[str, str]],
    *,
    lenient: bool = False,
) -> SearchPage:
    check_type(resource_type)
    query = parse_query(resource_type, items, lenient=lenient)
    _touch_query(ctx, items)
    compiled = compile_search(ctx.tenant_id, query, ctx.visibility)
    if query.summary_count or query.count == 0:
        total = await search_repository.count_matches(conn, compiled)
        return SearchPage(total, [], [], None, None, query)
    before = query.before
    page = await search_repository.fetch_page(conn, compiled, query, before)
    rows, total, has_more = page.matches, page.total, page.has_more
    ctx.touch(*(f"{resource_type}/{r.id}" for r in rows))
    included = await _includes(ctx, conn, query, rows)
    base = list(query.used)
    next_params: list[tuple[str, str]] | None = None
    previous_params: list[tuple[str, str]] | None = None
    if compiled.keyset:
        if rows and (has_more or before is not None):
            next_params = [*base, ("_after", rows[-1].id)]
        if rows and (query.after is not None or (before is not None and has_more)):
            previous_params = [*base, ("_before", rows[0].id)]
    else:
        if has_more:
            next_params = [*base, ("_offset", str(query.offset + query.count))]
        if query.offset > 0:
            previous_params = [*base, ("_offset", str(max(0, query.offset - query.count)))]
    return SearchPage(total, rows, included, next_params, previous_params, query)


async def _includes(
    ctx: FhirContext,
    conn: Conn,
    query: SearchQuery,
    rows: list[Match],
) -> list[repository.StoredResource]:
    """The resources `_include` and `_revinclude` add to the page: each once, none of
    the page's own, none another run's in a run's view."""
    if not query.includes or not rows:
        return []
    wanted: list[tuple[str, str]] = []
    found: list[repository.StoredResource] = []
    for inc in query.includes:
        if inc.reverse:
            if inc.target_type in (None, query.resource_type):
                found.extend(await _revincluded(ctx, conn, query, inc, rows))
        elif inc.source_type == query.resource_type:
            wanted.extend(_referenced(inc, rows))
    if wanted:
        found.extend(await repository.fetch_many(conn, ctx.tenant_id, sorted(set(wanted))))
    own = {(query.resource_type, r.id) for r in rows}
    unique: dict[tuple[str, str], repository.StoredResource] = {}
    for res in found:
        key = (res.resource_type, res.id)
        hidden = ctx.run_id is not None and res.run_id not in (None, ctx.run_id)
        if key not in own and not hidden:
            unique.setdefault(key, res)
    ctx.touch(*(f"{t}/{i}" for t, i in unique))
    return list(unique.values())


async def _revincluded(
    ctx: FhirContext, conn: Conn, query: SearchQuery, inc: Include, rows: list[Match]
) -> list[repository.StoredResource]:
    """The resources of `inc.source_type` whose `inc.param` references a row."""
    refs = repository.index_keys(
        ctx.tenant_id,
        inc.source_type,
        [f"{inc.param}={query.resource_type}/{r.id}" for r in rows],
    )
    return await repository.fetch_referencing(conn, ctx.tenant_id, inc.source_type, refs)


def _referenced(inc: Include, rows: list[Match]) -> list[tuple[str, str]]:
    """(type, id) of what the rows' `inc.param` references (of `inc.target_type`)."""
    prefix = f"{inc.param}="
    out: list[tuple[str, str]] = []
    for row in rows:
        for key in row.refs or ():
            entry = repository.strip_key(key)
            if not entry.startswith(prefix) or "/" not in entry:
                continue
            rtype, _, rid = entry[len(prefix) :].partition("/")
            if inc.target_type is None or inc.target_type == rtype:
                out.append((rtype, rid))
    return out


def _touch_query(ctx: FhirContext, items: list[tuple[str, str]]) -> None:
    for _, value in items:
        for part in value.split(","):
            if "/" in part and not part.startswith("http"):
                ctx.touch(part)


async def conditional_match(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    criteria: str,
    interaction: str = "conditional create",
) -> WriteResult | None:
    """The resource a conditional interaction (`If-None-Exist: criteria`, or the criteria
    of a conditional update) finds among those the context sees: None if none, 412 if
    more than one."""
    criteria = criteria.split("?", 1)[-1]
    items = parse_qsl(criteria, keep_blank_values=True)
    if not has_criteria(items):
        where = "If-None-Exist" if interaction == "conditional create" else f"a {interaction}"
        raise BadRequest(f"{where} needs search criteria, e.g. identifier=sys|123")
    query = parse_query(resource_type, items, lenient=False)
    query.count = 2
    compiled = compile_search(ctx.tenant_id, query, ctx.visibility)
    rows = await search_repository.fetch_matches(conn, compiled, query)
    if not rows:
        return None
    if len(rows) > 1:
        raise AmbiguousMatch(
            f"{interaction}: {len(rows)} {resource_type} resources match '{criteria}'"
        )
    row = rows[0]
    ctx.touch(f"{resource_type}/{row.id}")
    return WriteResult(200, resource_type, row.id, row.version_id, row.last_updated, row.resource)
