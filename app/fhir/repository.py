"""The FHIR store's repository: versioned resource storage on asyncpg, and every SQL
statement over its tables (`fhir_resource`, `fhir_history`, `fhir_date`); other features
reach them through `app.fhir.service`.

Every write — one resource or a whole transaction Bundle — is a single statement:
the new current rows (`fhir_resource`), their history rows, and their date-index rows
go in together through data-modifying CTEs over `unnest`ed arrays. The upsert is
guarded by the expected previous version, so two concurrent updates of one resource
cannot both win: the loser sees fewer rows written and gets a conflict.

The same statement writes other features' rows (run ownership, the usage counter, the
webhook outbox) so that they commit with the write in one round trip. fhir sits below
those features and imports none of them: each owner's repository defines its share as
a `WritePart` (CTE text, its parameters and how to compute them), and the composition
root builds the statement once with `write_statement` (`app.runs.fhir_writes`) and
hands it in through `FhirContext.write_statement`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from app.db import Conn, generic_plans
from app.fhir.errors import VersionConflict
from app.fhir.search.index import IndexValues

# Array elements travel joined by the ASCII unit separator: it never occurs in FHIR
# search values, and `unnest` cannot take a ragged two-dimensional array.
SEP = "\x1f"


def key_prefix(tenant_id: uuid.UUID, resource_type: str | None) -> str:
    """The scope every stored search key starts with.

    The GIN indexes cover the key arrays alone, and each key carries its tenant (the
    first 32 bits of its id) and resource type, so a lookup touches only its own
    tenant's and type's postings: a multi-column GIN over (tenant_id, …) would scan a
    posting list as long as the tenant on every query. A prefix clash between two
    tenants costs only a recheck; `tenant_id = $1` stays in every WHERE clause.
    """
    return f"{tenant_id.hex[:8]}{resource_type or ''}|"


def index_keys(
    tenant_id: uuid.UUID, resource_type: str | None, entries: Sequence[str]
) -> list[str]:
    prefix = key_prefix(tenant_id, resource_type)
    return [prefix + e for e in entries]


def strip_key(key: str) -> str:
    return key.split("|", 1)[1]


@dataclass(slots=True)
class StoredResource:
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    deleted: bool
    json: str | None
    run_id: str | None = None


@dataclass(slots=True)
class PreparedWrite:
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    interaction: str  # create | update | delete
    body: str | None  # the resource JSON, None for a delete
    index: IndexValues | None
    run_id: str | None = None
    source: str | None = None  # "setup" | "stimulus" | "sim"; None for a client's write
    events: list[str] = field(default_factory=list)  # webhook event types this write emits


@dataclass(frozen=True, slots=True)
class WriteCall:
    """What the parameters of a statement part are computed from, once per statement."""

    now: datetime  # the moment of the writes (every entry's lastUpdated)
    count_usage: bool  # whether the writes count toward the tenant's daily quota
    fhir_root: str  # the API root the client used (for links in webhook payloads)


@dataclass(frozen=True, slots=True)
class WritePart:
    """Data-modifying CTEs another feature adds to the write statement (fhir imports
    none of the features whose tables they write; the composition root hands them in).

    `sql` is one or more CTEs, `name AS (...)` separated by commas. It may read `$1` (the
    tenant), `up` (resource_type, id, version_id: the rows written), `done` (the written
    entries: rtype, rid, vid, ts, interaction, source, owner — the run each belongs to —
    and events, the webhook event types it emits joined by `{sep}`, the separator
    literal), and its own parameters, named in `params` and written `{name}` with their
    type cast (braces meant literally are doubled). `args` gives their values for each
    statement, in the order of `params`.
    `deliveries`, if set, names one of its CTEs whose `id`s are webhook deliveries to
    enqueue after commit.
    """

    sql: str
    params: tuple[str, ...] = ()
    args: Callable[[WriteCall], tuple[Any, ...]] = field(default=lambda call: ())
    deliveries: str | None = None


@dataclass(frozen=True, slots=True)
class WriteStatement:
    """The one statement every write goes through: the store's own rows and the parts
    the composition root added. Build it once with `write_statement`."""

    sql: str
    parts: tuple[WritePart, ...]


# Up to this many writes, the write statement runs on a cached generic plan (its plan is
# key lookups whatever the values; planning it was half its server time for one
# resource); a larger batch is planned with its values, planning spread over its rows.
GENERIC_PLAN_WRITES = 10

# The statement's own parameters: $1 the tenant, $2-$15 and $21 the entries, $16-$20 their
# date index rows; the parts' parameters follow.
_OWN_PARAMS = 21

_HEAD = """
WITH d AS (
    SELECT * FROM unnest(
        $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
        $14::text[], $15::text[], $21::text[]
    ) AS t(rtype, rid, vid, ts, interaction, body, tokens, refs, strings, all_refs, sort,
           run_id, owner_refs, source, events)
), owned AS (
    -- A write belongs to the run whose view it came through, else to the run owning a
    -- fixture resource it is or references (the run_owner part), else to no run.
    SELECT d.*, coalesce(d.run_id, {run_owner}) AS owner
    FROM d
), up AS (
    INSERT INTO fhir_resource AS r (
        tenant_id, resource_type, id, version_id, last_updated, deleted, resource,
        tokens, refs, strings, all_refs, sort, run_id
    )
    SELECT $1, rtype, rid, vid, ts, body IS NULL, body::jsonb,
        string_to_array(tokens, {sep}), string_to_array(refs, {sep}),
        string_to_array(strings, {sep}), string_to_array(all_refs, {sep}),
        coalesce(sort::jsonb, '{{}}'::jsonb), owner
    FROM owned
    ON CONFLICT (tenant_id, resource_type, id) DO UPDATE SET
        version_id = excluded.version_id,
        last_updated = excluded.last_updated,
        deleted = excluded.deleted,
        resource = excluded.resource,
        tokens = excluded.tokens,
        refs = excluded.refs,
        strings = excluded.strings,
        all_refs = excluded.all_refs,
        sort = excluded.sort
        -- run_id stays: a resource belongs to the run that created it. A run that
        -- updates a shared resource (a canonical Slot) must not hide it from others.
    WHERE r.version_id = excluded.version_id - 1
    RETURNING r.resource_type, r.id, r.version_id
), done AS (
    -- What was written, with the run each change is attributed to.
    SELECT o.* FROM owned o JOIN up ON up.resource_type = o.rtype AND up.id = o.rid
), hist AS (
    INSERT INTO fhir_history (
        tenant_id, resource_type, id, version_id, last_updated, interaction, run_id, source,
        resource
    )
    SELECT $1, rtype, rid, vid, ts, interaction, owner, source, body::jsonb FROM done
), old_dates AS (
    DELETE FROM fhir_date fd USING up
    WHERE fd.tenant_id = $1 AND fd.resource_type = up.resource_type AND fd.id = up.id
        AND up.version_id > 1
), new_dates AS (
    INSERT INTO fhir_date (tenant_id, resource_type, id, param, low, high)
    SELECT $1, x.rtype, x.rid, x.param, x.low, x.high
    FROM unnest($16::text[], $17::text[], $18::text[], $19::timestamptz[], $20::timestamptz[])
        AS x(rtype, rid, param, low, high)
    JOIN up ON up.resource_type = x.rtype AND up.id = x.rid
)"""

_TAIL = """
SELECT count(*), array_remove(array_agg(DISTINCT owner), NULL),
    {deliveries}
FROM done
"""

_SEP_LITERAL = f"E'{SEP}'"


def write_statement(
    *, run_owner: str | None = None, parts: Sequence[WritePart] = ()
) -> WriteStatement:
    """Compose the write statement from other features' parts.

    `run_owner` is an SQL expression for the run owning an entry written outside any run
    view, or NULL: it may read `$1` and `{refs}`, the text[] of the entry's own reference
    and the references it holds. Each part's CTEs follow the store's, in order.
    """
    sep = _SEP_LITERAL
    owner = (
        "NULL"
        if run_owner is None
        else run_owner.format(refs=f"string_to_array(d.owner_refs, {sep})")
    )
    sql = _HEAD.format(run_owner=owner, sep=sep)
    number = _OWN_PARAMS
    deliveries: list[str] = []
    for part in parts:
        names: dict[str, str] = {}
        for name in part.params:
            number += 1
            names[name] = f"${number}"
        sql += ", " + part.sql.format(sep=sep, **names).strip()
        if part.deliveries is not None:
            deliveries.append(part.deliveries)
    if len(deliveries) > 1:
        raise ValueError(f"only one part may create deliveries, not {deliveries}")
    sql += _TAIL.format(
        deliveries=f"(SELECT array_agg(id) FROM {deliveries[0]})" if deliveries else "NULL"
    )
    return WriteStatement(sql, tuple(parts))


@dataclass(slots=True)
class WriteOutcome:
    runs: list[str]  # the runs the written resources belong to
    deliveries: list[str]  # webhook deliveries created (to enqueue after commit)


def _joined(prefix: str, values: Sequence[str]) -> str:
    return SEP.join(prefix + v for v in values)


@dataclass(slots=True)
class _Columns:
    """The write statement's arrays, one element per write ($2-$15 and $21) and one per
    date index row ($16-$20), in the order of its parameters."""

    rtypes: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    vids: list[int] = field(default_factory=list)
    stamps: list[datetime] = field(default_factory=list)
    interactions: list[str] = field(default_factory=list)
    bodies: list[str | None] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    all_refs: list[str] = field(default_factory=list)
    sorts: list[str | None] = field(default_factory=list)
    run_ids: list[str | None] = field(default_factory=list)
    owner_refs: list[str] = field(default_factory=list)
    sources: list[str | None] = field(default_factory=list)
    d_rtype: list[str] = field(default_factory=list)
    d_id: list[str] = field(default_factory=list)
    d_param: list[str] = field(default_factory=list)
    d_low: list[datetime] = field(default_factory=list)
    d_high: list[datetime] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def add(self, tenant_id: uuid.UUID, w: PreparedWrite) -> None:
        self.rtypes.append(w.resource_type)
        self.ids.append(w.id)
        self.vids.append(w.version_id)
        self.stamps.append(w.last_updated)
        self.interactions.append(w.interaction)
        self.bodies.append(w.body)
        self.run_ids.append(w.run_id)
        self.sources.append(w.source)
        self.events.append(SEP.join(w.events))
        own = f"{w.resource_type}/{w.id}"
        idx = w.index
        if idx is None:
            self.tokens.append("")
            self.refs.append("")
            self.strings.append("")
            self.all_refs.append("")
            self.sorts.append(None)
            self.owner_refs.append(own)
            return
        scoped = key_prefix(tenant_id, w.resource_type)
        self.tokens.append(_joined(scoped, idx.tokens))
        self.refs.append(_joined(scoped, idx.refs))
        self.strings.append(_joined(scoped, idx.strings))
        self.all_refs.append(_joined(key_prefix(tenant_id, None), idx.all_refs))
        self.sorts.append(_sort_json(idx.sort))
        self.owner_refs.append(SEP.join([own, *idx.all_refs]))
        for param, low, high in idx.dates:
            self.d_rtype.append(w.resource_type)
            self.d_id.append(w.id)
            self.d_param.append(param)
            self.d_low.append(low)
            self.d_high.append(high)

    def args(self) -> tuple[Any, ...]:
        """$2 to $21."""
        return (
            self.rtypes,
            self.ids,
            self.vids,
            self.stamps,
            self.interactions,
            self.bodies,
            self.tokens,
            self.refs,
            self.strings,
            self.all_refs,
            self.sorts,
            self.run_ids,
            self.owner_refs,
            self.sources,
            self.d_rtype,
            self.d_id,
            self.d_param,
            self.d_low,
            self.d_high,
            self.events,
        )


async def write_versions(
    conn: Conn,
    tenant_id: uuid.UUID,
    writes: Sequence[PreparedWrite],
    statement: WriteStatement,
    *,
    count_usage: bool = True,
    fhir_root: str = "",
) -> WriteOutcome:
    """Write new versions; raise VersionConflict unless every one was written.

    Each write's `version_id` must be the current version + 1 (1 for a new resource;
    a conflict on a brand-new id means it already exists). Run inside a transaction
    when writing more than one row, so a conflict rolls back all of them. The same
    statement runs the parts `statement` was composed with (as the server composes it:
    it counts the writes toward the tenant's daily quota unless `count_usage` is false,
    marks the runs they belong to as changed and writes the webhook outbox).
    """
    if not writes:
        return WriteOutcome([], [])
    columns = _Columns()
    for w in writes:
        columns.add(tenant_id, w)
    call = WriteCall(writes[0].last_updated, count_usage, fhir_root)
    args = (
        tenant_id,
        *columns.args(),
        *[arg for part in statement.parts for arg in part.args(call)],
    )
    if len(writes) <= GENERIC_PLAN_WRITES:
        async with generic_plans(conn):
            row = await conn.fetchrow(statement.sql, *args)
    else:
        row = await conn.fetchrow(statement.sql, *args)
    assert row is not None
    written: int = row[0]
    if written != len(writes):
        raise VersionConflict(f"{len(writes) - written} of {len(writes)} writes lost a race")
    return WriteOutcome(list(row[1] or ()), list(row[2] or ()))


def _sort_json(sort: dict[str, str]) -> str | None:
    if not sort:
        return None
    from app.kit.jsontext import dumps

    return dumps(sort)


_CURRENT_SQL = """
SELECT version_id, last_updated, deleted, resource, run_id FROM fhir_resource
WHERE tenant_id = $1 AND resource_type = $2 AND id = $3
"""
_CURRENT_FOR_UPDATE_SQL = _CURRENT_SQL + " FOR UPDATE"


async def fetch_current(
    conn: Conn,
    tenant_id: uuid.UUID,
    resource_type: str,
    resource_id: str,
    *,
    for_update: bool = False,
) -> StoredResource | None:
    row = await conn.fetchrow(
        _CURRENT_FOR_UPDATE_SQL if for_update else _CURRENT_SQL,
        tenant_id,
        resource_type,
        resource_id,
    )
    if row is None:
        return None
    return StoredResource(
        resource_type,
        resource_id,
        row["version_id"],
        row["last_updated"],
        row["deleted"],
        row["resource"],
        row["run_id"],
    )


async def fetch_version(
    conn: Conn,
    tenant_id: uuid.UUID,
    resource_type: str,
    resource_id: str,
    version_id: int,
) -> StoredResource | None:
    row = await conn.fetchrow(
        """SELECT last_updated, interaction, resource, run_id FROM fhir_history
        WHERE tenant_id = $1 AND resource_type = $2 AND id = $3 AND version_id = $4""",
        tenant_id,
        resource_type,
        resource_id,
        version_id,
    )
    if row is None:
        return None
    return StoredResource(
        resource_type,
        resource_id,
        version_id,
        row["last_updated"],
        row["interaction"] == "delete",
        row["resource"],
        row["run_id"],
    )


@dataclass(slots=True)
class HistoryEntry:
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    interaction: str
    json: str | None


async def fetch_history(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    resource_type: str | None,
    resource_id: str | None,
    since: datetime | None,
    limit: int,
    offset: int,
) -> tuple[int, list[HistoryEntry]]:
    """Versions newest first, with the total count; scoped to a type or one resource."""
    where = ["tenant_id = $1"]
    args: list[Any] = [tenant_id]
    if resource_type is not None:
        args.append(resource_type)
        where.append(f"resource_type = ${len(args)}")
    if resource_id is not None:
        args.append(resource_id)
        where.append(f"id = ${len(args)}")
    if since is not None:
        args.append(since)
        where.append(f"last_updated >= ${len(args)}")
    clause = " AND ".join(where)
    total = await conn.fetchval(f"SELECT count(*) FROM fhir_history WHERE {clause}", *args)
    args.extend([limit, offset])
    rows = await conn.fetch(
        f"""SELECT resource_type, id, version_id, last_updated, interaction, resource
        FROM fhir_history WHERE {clause}
        ORDER BY last_updated DESC, version_id DESC
        LIMIT ${len(args) - 1} OFFSET ${len(args)}""",
        *args,
    )
    return total, [
        HistoryEntry(
            r["resource_type"],
            r["id"],
            r["version_id"],
            r["last_updated"],
            r["interaction"],
            r["resource"],
        )
        for r in rows
    ]


async def fetch_many(
    conn: Conn, tenant_id: uuid.UUID, refs: Sequence[tuple[str, str]]
) -> list[StoredResource]:
    """Current, non-deleted versions of the given (type, id) pairs (for `_include`)."""
    if not refs:
        return []
    rows = await conn.fetch(
        """SELECT r.resource_type, r.id, r.version_id, r.last_updated, r.resource, r.run_id
        FROM fhir_resource r
        JOIN unnest($2::text[], $3::text[]) AS k(rtype, rid)
            ON r.resource_type = k.rtype AND r.id = k.rid
        WHERE r.tenant_id = $1 AND NOT r.deleted""",
        tenant_id,
        [t for t, _ in refs],
        [i for _, i in refs],
    )
    return [_stored(r) for r in rows]


def _stored(r: asyncpg.Record) -> StoredResource:
    return StoredResource(
        r["resource_type"],
        r["id"],
        r["version_id"],
        r["last_updated"],
        False,
        r["resource"],
        r["run_id"],
    )


# Cap on resources one `_revinclude` adds to a page.
REVINCLUDE_MAX = 1000


async def fetch_referencing(
    conn: Conn, tenant_id: uuid.UUID, resource_type: str, keys: Sequence[str]
) -> list[StoredResource]:
    """Current resources of `resource_type` whose reference keys overlap `keys`
    (already scoped with index_keys), for `_revinclude`."""
    rows = await conn.fetch(
        f"""SELECT resource_type, id, version_id, last_updated, resource, run_id
        FROM fhir_resource WHERE tenant_id = $1 AND resource_type = $2 AND NOT deleted
        AND refs && $3::text[] LIMIT {REVINCLUDE_MAX}""",
        tenant_id,
        resource_type,
        list(keys),
    )
    return [_stored(r) for r in rows]


async def resource_is_live(
    conn: Conn, tenant_id: uuid.UUID, resource_type: str, resource_id: str
) -> bool:
    """Whether the resource exists and is not deleted (whatever run it belongs to)."""
    live = await conn.fetchval(
        "SELECT NOT deleted FROM fhir_resource WHERE tenant_id = $1 AND resource_type = $2 "
        "AND id = $3",
        tenant_id,
        resource_type,
        resource_id,
    )
    return bool(live)


async def fetch_live_body(
    conn: Conn, tenant_id: uuid.UUID, resource_type: str, resource_id: str
) -> str | None:
    """The JSON of the resource, None when it does not exist or is deleted."""
    body: str | None = await conn.fetchval(
        "SELECT resource FROM fhir_resource WHERE tenant_id = $1 "
        "AND resource_type = $2 AND id = $3 AND NOT deleted",
        tenant_id,
        resource_type,
        resource_id,
    )
    return body


@dataclass(frozen=True, slots=True)
class IdAndBody:
    id: str
    resource: str


async def fetch_visible_referencing(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str | None,
    resource_type: str,
    keys: Sequence[str],
) -> list[IdAndBody]:
    """The live resources of `resource_type` whose reference keys overlap `keys` (scoped
    with index_keys) that a run's view sees (any, without a run), by id."""
    rows = await conn.fetch(
        """SELECT id, resource FROM fhir_resource WHERE tenant_id = $1
        AND resource_type = $2 AND NOT deleted AND refs && $3::text[]
        AND ($4::text IS NULL OR run_id IS NULL OR run_id = $4)
        ORDER BY id""",
        tenant_id,
        resource_type,
        list(keys),
        run_id,
    )
    return [IdAndBody(r["id"], r["resource"]) for r in rows]


# --- Fragments of other features' statements that must stay one round trip ------------


def live_count_sql(tenant_id: str) -> str:
    """A scalar subquery for another feature's statement: how many live resources the
    tenant whose id is the SQL expression `tenant_id` holds."""
    return (
        f"(SELECT count(*) FROM fhir_resource r WHERE r.tenant_id = {tenant_id} AND NOT r.deleted)"
    )


def version_join_sql(
    alias: str, *, tenant_id: str, resource_type: str, resource_id: str, version_id: str
) -> str:
    """A LEFT JOIN for another feature's statement: `{alias}.resource` is the JSON of the
    version the SQL expressions name (NULL for a delete or an unknown version)."""
    return (
        f"LEFT JOIN fhir_history {alias} ON {alias}.tenant_id = {tenant_id} "
        f"AND {alias}.resource_type = {resource_type}\n"
        f"    AND {alias}.id = {resource_id} AND {alias}.version_id = {version_id}"
    )
