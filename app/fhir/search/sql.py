"""From a parsed search to SQL over one tenant's slice of `fhir_resource`.

Token, reference and string conditions are array overlaps (`&&`) on the extracted
key columns, answered by GIN indexes over the key arrays alone: each key embeds its
tenant and resource type (`repository.key_prefix`), so a lookup reads only its own slice's
postings (a multi-column btree_gin index scanned a whole tenant's posting list per
query), and `tenant_id = $1` stays in every WHERE clause. Date conditions are
`id IN (…)` over the `fhir_date` side table of half-open UTC ranges [low, high).
Nothing is filtered in Python.

Paging: with the default order (by id) the `next`/`previous` links carry a keyset
cursor (`_after`/`_before`), so concurrent inserts never shift a page; with `_sort`
they carry `_offset`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.fhir.repository import index_keys
from app.fhir.search.query import AnyDate, ArrayFilter, DateFilter, IdFilter, SearchQuery

# (resource low, resource high) vs (search low sl, search high sh); ranges are half-open.
_DATE_SQL = {
    "eq": "low >= {sl} AND high <= {sh}",
    "ne": "NOT (low >= {sl} AND high <= {sh})",
    "lt": "low < {sl}",
    "le": "low < {sh}",
    "gt": "high > {sh}",
    "ge": "high > {sl}",
    "sa": "low >= {sh}",
    "eb": "high <= {sl}",
    "ap": "low < {sh} AND high > {sl}",
}
_LAST_UPDATED_SQL = {
    "eq": "r.last_updated >= {sl} AND r.last_updated < {sh}",
    "ne": "NOT (r.last_updated >= {sl} AND r.last_updated < {sh})",
    "lt": "r.last_updated < {sl}",
    "le": "r.last_updated < {sh}",
    "gt": "r.last_updated >= {sh}",
    "ge": "r.last_updated >= {sl}",
    "sa": "r.last_updated >= {sh}",
    "eb": "r.last_updated < {sl}",
    "ap": "r.last_updated >= {sl} AND r.last_updated < {sh}",
}


# Token parameters with a handful of values each (status, gender, …): their GIN posting
# lists cover large parts of a tenant. Next to any other condition they only filter the
# rows that condition found, instead of being intersected through the index (a
# BitmapAnd with `status=booked` cost 1.5 ms of a 1.7 ms search).
LOW_CARDINALITY_TOKENS = frozenset(
    {
        "status",
        "intent",
        "priority",
        "gender",
        "active",
        "part-status",
        "clinical-status",
        "verification-status",
        "criticality",
        "business-status",
        "_security",
    }
)


def _drives_index(f: object) -> bool:
    return not (
        isinstance(f, ArrayFilter)
        and f.column == "tokens"
        and (f.param in LOW_CARDINALITY_TOKENS or f.negate)
    )


@dataclass
class CompiledSearch:
    where: str
    args: list[Any]
    order_by: str
    keyset: bool


@dataclass(frozen=True, slots=True)
class Visibility:
    """Which run-owned resources a search may see (run views hide other runs' data).

    `run_id=None` sees everything (the tenant base)."""

    run_id: str | None = None


def compile_search(
    tenant_id: uuid.UUID, query: SearchQuery, visibility: Visibility | None = None
) -> CompiledSearch:
    args: list[Any] = [tenant_id, query.resource_type]

    def arg(value: Any) -> str:
        args.append(value)
        return f"${len(args)}"

    def date_condition(f: DateFilter) -> str:
        template = (_LAST_UPDATED_SQL if f.param == "_lastUpdated" else _DATE_SQL)[f.prefix]
        # Bind only the bounds the template uses: PostgreSQL cannot type an unused one.
        sl = arg(f.low) if "{sl}" in template else ""
        sh = arg(f.high) if "{sh}" in template else ""
        if f.param == "_lastUpdated":
            return "(" + template.format(sl=sl, sh=sh) + ")"
        if keyed:
            # A key or id filter finds the candidates: each one's dates are probed by its
            # own id (a scalar subquery, never a join). As `id IN (SELECT …)`, with the
            # tenant's keys missing from the planner's statistics (a new tenant, a small
            # one in a big table), it joined every candidate to every date row of the
            # tenant: 206 ms for `Slot?schedule=…&status=free&start=…` on a fresh tenant,
            # 10.8 ms as a probe (app/fhir/booking_repository.py fetch_slots, the same).
            return (
                "(SELECT true FROM fhir_date d WHERE d.tenant_id = $1 AND d.resource_type = $2 "
                f"AND d.id = r.id AND d.param = {arg(f.param)} "
                f"AND {template.format(sl=sl, sh=sh)} LIMIT 1)"
            )
        # The dates alone narrow the search: their range index drives it.
        return (
            "r.id IN (SELECT id FROM fhir_date WHERE tenant_id = $1 AND resource_type = $2 "
            f"AND param = {arg(f.param)} AND {template.format(sl=sl, sh=sh)})"
        )

    conditions = ["r.tenant_id = $1", "r.resource_type = $2", "NOT r.deleted"]
    if visibility is not None and visibility.run_id is not None:
        conditions.append(f"(r.run_id IS NULL OR r.run_id = {arg(visibility.run_id)})")
    others_drive = any(_drives_index(f) for f in query.filters)
    # A filter whose index finds the candidates by itself: a key (not a low-cardinality
    # token, not negated) or the id.
    keyed = any(
        isinstance(f, IdFilter)
        or (isinstance(f, ArrayFilter) and not f.negate and _drives_index(f))
        for f in query.filters
    )
    for f in query.filters:
        if isinstance(f, ArrayFilter):
            keys = index_keys(tenant_id, query.resource_type, f.entries)
            column = f"r.{f.column}"
            if others_drive and not _drives_index(f):
                # An expression the planner cannot match to the GIN index: a plain filter.
                column = f"array_cat(r.{f.column}, '{{}}'::text[])"
            cond = f"{column} && {arg(keys)}::text[]"
            conditions.append(f"NOT ({cond})" if f.negate else cond)
        elif isinstance(f, IdFilter):
            conditions.append(f"r.id = ANY({arg(list(f.ids))}::text[])")
        elif isinstance(f, DateFilter):
            conditions.append(date_condition(f))
        elif isinstance(f, AnyDate):
            conditions.append("(" + " OR ".join(date_condition(d) for d in f.filters) + ")")
    order_parts: list[str] = []
    for key in query.sort:
        direction = "DESC" if key.descending else "ASC"
        if key.key == "_id":
            order_parts.append(f"r.id {direction}")
        elif key.key == "_lastUpdated":
            order_parts.append(f"r.last_updated {direction}")
        else:
            order_parts.append(f"r.sort->>{arg(key.key)} {direction} NULLS LAST")
    keyset = not query.sort
    if not any(k.key == "_id" for k in query.sort):
        order_parts.append("r.id ASC")
    return CompiledSearch(" AND ".join(conditions), args, ", ".join(order_parts), keyset)
