"""The SQL of a search (`app.fhir.searching`): a page of matches with its total, over
the WHERE and ORDER BY that `app.fhir.search.sql.compile_search` built.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn
from app.fhir.search.query import SearchQuery
from app.fhir.search.sql import CompiledSearch


@dataclass(frozen=True, slots=True)
class Match:
    """A resource a search found, at its current version."""

    id: str
    version_id: int
    last_updated: datetime
    resource: str
    # The scoped keys of its search references, read only when `_include` needs them.
    refs: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Page:
    matches: list[Match]
    total: int
    has_more: bool


_SELECT = "SELECT r.id, r.version_id, r.last_updated, r.resource"
# The extracted references ride along only when `_include` needs them.
_SELECT_WITH_REFS = _SELECT + ", r.refs"


def _select(query: SearchQuery) -> str:
    return _SELECT_WITH_REFS if _with_refs(query) else _SELECT


def _with_refs(query: SearchQuery) -> bool:
    return any(not i.reverse for i in query.includes)


def _match(row: asyncpg.Record, with_refs: bool) -> Match:
    return Match(
        row["id"],
        row["version_id"],
        row["last_updated"],
        row["resource"],
        row["refs"] if with_refs else None,
    )


async def fetch_matches(conn: Conn, compiled: CompiledSearch, query: SearchQuery) -> list[Match]:
    """The first `query.count` matches, in the search's order."""
    rows = await conn.fetch(
        f"{_select(query)} FROM fhir_resource r WHERE {compiled.where} "
        f"ORDER BY {compiled.order_by} LIMIT {query.count}",
        *compiled.args,
    )
    with_refs = _with_refs(query)
    return [_match(r, with_refs) for r in rows]


async def count_matches(conn: Conn, compiled: CompiledSearch) -> int:
    total: int = await conn.fetchval(
        f"SELECT count(*) FROM fhir_resource r WHERE {compiled.where}", *compiled.args
    )
    return total


async def fetch_page(
    conn: Conn,
    compiled: CompiledSearch,
    query: SearchQuery,
    before: str | None,
) -> Page:
    """One page plus one row to know whether there is more; the total in the same trip
    on a first page (a window count), by a second query on later pages."""
    if compiled.keyset and (query.after is not None or before is not None):
        return await _keyset_page(conn, compiled, query, before)
    return await _offset_page(conn, compiled, query)


async def _keyset_page(
    conn: Conn, compiled: CompiledSearch, query: SearchQuery, before: str | None
) -> Page:
    """The page after `query.after`, or before `before`, in id order."""
    args = list(compiled.args)
    where = compiled.where
    order = compiled.order_by
    args.append(query.after if query.after is not None else before)
    if query.after is not None:
        where += f" AND r.id > ${len(args)}"
    else:
        where += f" AND r.id < ${len(args)}"
        order = "r.id DESC"
    rows = list(
        await conn.fetch(
            f"{_select(query)} FROM fhir_resource r WHERE {where} "
            f"ORDER BY {order} LIMIT {query.count + 1}",
            *args,
        )
    )
    total = await count_matches(conn, compiled)
    has_more = len(rows) > query.count
    rows = rows[: query.count]
    if before is not None:
        rows.reverse()
    with_refs = _with_refs(query)
    return Page([_match(r, with_refs) for r in rows], total, has_more)


async def _offset_page(conn: Conn, compiled: CompiledSearch, query: SearchQuery) -> Page:
    """The page at `query.offset`, with a window count of the total."""
    offset = query.offset
    rows = list(
        await conn.fetch(
            f"{_select(query)}, count(*) OVER () AS total FROM fhir_resource r "
            f"WHERE {compiled.where} ORDER BY {compiled.order_by} "
            f"LIMIT {query.count + 1} OFFSET {offset}",
            *compiled.args,
        )
    )
    if rows:
        total = rows[0]["total"]
    elif offset:
        total = await count_matches(conn, compiled)
    else:
        total = 0
    with_refs = _with_refs(query)
    return Page([_match(r, with_refs) for r in rows[: query.count]], total, len(rows) > query.count)
