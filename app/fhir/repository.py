"""Versioned resource storage on asyncpg.

Every write — one resource or a whole transaction Bundle — is a single statement:
the new current rows (`fhir_resource`), their history rows, and their date-index rows
go in together through data-modifying CTEs over `unnest`ed arrays. The upsert is
guarded by the expected previous version, so two concurrent updates of one resource
cannot both win: the loser sees fewer rows written and gets a conflict.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from app.db import Conn
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


_WRITE_SQL = f"""
WITH d AS (
    SELECT * FROM unnest(
        $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
        $14::text[], $15::text[], $25::text[]
    ) AS t(rtype, rid, vid, ts, interaction, body, tokens, refs, strings, all_refs, sort,
           run_id, owner_refs, source, events)
), owned AS (
    -- A write belongs to the run whose view it came through, else to the run owning a
    -- fixture resource it is, or references (run_ref), else to no run.
    SELECT d.*, coalesce(d.run_id, (
        SELECT rr.run_id FROM run_ref rr
        WHERE rr.tenant_id = $1 AND rr.ref = ANY(string_to_array(d.owner_refs, E'{SEP}'))
        LIMIT 1
    )) AS owner
    FROM d
), up AS (
    INSERT INTO fhir_resource AS r (
        tenant_id, resource_type, id, version_id, last_updated, deleted, resource,
        tokens, refs, strings, all_refs, sort, run_id
    )
    SELECT $1, rtype, rid, vid, ts, body IS NULL, body::jsonb,
        string_to_array(tokens, E'{SEP}'), string_to_array(refs, E'{SEP}'),
        string_to_array(strings, E'{SEP}'), string_to_array(all_refs, E'{SEP}'),
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
), usage AS (
    INSERT INTO usage_counter AS u (tenant_id, day, shard, writes)
    SELECT $1, $21::date, $22::smallint, count(*) FROM up HAVING $23::bool AND count(*) > 0
    ON CONFLICT (tenant_id, day, shard) DO UPDATE SET writes = u.writes + excluded.writes
), touched AS (
    UPDATE run SET changed_at = $24::timestamptz
    WHERE tenant_id = $1 AND status = 'live'
        AND id IN (SELECT DISTINCT owner FROM done WHERE owner IS NOT NULL)
), ev AS (
    -- The outbox: events commit with the write, or not at all. Only written while the
    -- tenant has an enabled subscription (nobody could receive them otherwise).
    INSERT INTO webhook_event (
        tenant_id, id, type, resource_type, resource_id, version_id, run_id, occurred_at,
        fhir_root
    )
    SELECT $1, 'evt_' || replace(gen_random_uuid()::text, '-', ''), e.type, d.rtype, d.rid,
        d.vid, d.owner, d.ts, $26
    FROM done d CROSS JOIN LATERAL unnest(string_to_array(d.events, E'{SEP}')) AS e(type)
    WHERE d.events <> '' AND EXISTS (
        SELECT 1 FROM webhook_subscription s WHERE s.tenant_id = $1 AND s.enabled)
    RETURNING id, type, resource_type, resource_id, seq
), dl AS (
    INSERT INTO webhook_delivery (
        tenant_id, id, subscription_id, event_id, seq, resource_ref, status, attempts,
        next_attempt_at, created_at
    )
    SELECT $1, 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, ev.id, ev.seq,
        ev.resource_type || '/' || ev.resource_id, 'pending', 0, $24, $24
    FROM ev JOIN webhook_subscription s ON s.tenant_id = $1 AND s.enabled
        AND (ev.type = ANY(s.events) OR '*' = ANY(s.events))
        AND (s.resource_types IS NULL OR ev.resource_type = ANY(s.resource_types))
    RETURNING id
)
SELECT count(*), array_remove(array_agg(DISTINCT owner), NULL),
    (SELECT array_agg(id) FROM dl)
FROM done
"""

# Concurrent writers of one tenant spread their usage increments over this many rows.
USAGE_SHARDS = 16


@dataclass(slots=True)
class WriteOutcome:
    runs: list[str]  # the runs the written resources belong to
    deliveries: list[str]  # webhook deliveries created (to enqueue after commit)


def _joined(prefix: str, values: Sequence[str]) -> str:
    return SEP.join(prefix + v for v in values)


async def write_versions(
    conn: Conn,
    tenant_id: uuid.UUID,
    writes: Sequence[PreparedWrite],
    *,
    count_usage: bool = True,
    fhir_root: str = "",
) -> WriteOutcome:
    """Write new versions; raise VersionConflict unless every one was written.

    Each write's `version_id` must be the current version + 1 (1 for a new resource;
    a conflict on a brand-new id means it already exists). Run inside a transaction
    when writing more than one row, so a conflict rolls back all of them. The same
    statement counts the writes toward the tenant's daily quota (unless `count_usage`
    is false) and marks the runs they belong to as changed.
    """
    if not writes:
        return WriteOutcome([], [])
    rtypes: list[str] = []
    ids: list[str] = []
    vids: list[int] = []
    stamps: list[datetime] = []
    interactions: list[str] = []
    bodies: list[str | None] = []
    tokens: list[str] = []
    refs: list[str] = []
    strings: list[str] = []
    all_refs: list[str] = []
    sorts: list[str | None] = []
    run_ids: list[str | None] = []
    owner_refs: list[str] = []
    sources: list[str | None] = []
    events: list[str] = []
    d_rtype: list[str] = []
    d_id: list[str] = []
    d_param: list[str] = []
    d_low: list[datetime] = []
    d_high: list[datetime] = []
    for w in writes:
        rtypes.append(w.resource_type)
        ids.append(w.id)
        vids.append(w.version_id)
        stamps.append(w.last_updated)
        interactions.append(w.interaction)
        bodies.append(w.body)
        run_ids.append(w.run_id)
        sources.append(w.source)
        events.append(SEP.join(w.events))
        own = f"{w.resource_type}/{w.id}"
        idx = w.index
        if idx is None:
            tokens.append("")
            refs.append("")
            strings.append("")
            all_refs.append("")
            sorts.append(None)
            owner_refs.append(own)
            continue
        scoped = key_prefix(tenant_id, w.resource_type)
        tokens.append(_joined(scoped, idx.tokens))
        refs.append(_joined(scoped, idx.refs))
        strings.append(_joined(scoped, idx.strings))
        all_refs.append(_joined(key_prefix(tenant_id, None), idx.all_refs))
        sorts.append(_sort_json(idx.sort))
        owner_refs.append(SEP.join([own, *idx.all_refs]))
        for param, low, high in idx.dates:
            d_rtype.append(w.resource_type)
            d_id.append(w.id)
            d_param.append(param)
            d_low.append(low)
            d_high.append(high)
    now = writes[0].last_updated
    row = await conn.fetchrow(
        _WRITE_SQL,
        tenant_id,
        rtypes,
        ids,
        vids,
        stamps,
        interactions,
        bodies,
        tokens,
        refs,
        strings,
        all_refs,
        sorts,
        run_ids,
        owner_refs,
        sources,
        d_rtype,
        d_id,
        d_param,
        d_low,
        d_high,
        now.date(),
        random.randrange(USAGE_SHARDS),
        count_usage,
        now,
        events,
        fhir_root,
    )
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
