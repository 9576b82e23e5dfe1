"""FHIR interactions: create, read, vread, update, patch, delete, history, search.

Callers (the REST router, later the MCP tools) pass a `FhirContext` naming the tenant,
the absolute base URL for links, and the run view if any; every resource reference the
interaction touches is appended to `ctx.touched` for the request trace.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import asyncpg

from app.db import Conn
from app.errors import (
    BadRequest,
    Gone,
    Issue,
    NotFound,
)
from app.fhir import repository, writes
from app.fhir import scheduling as scheduling_rules
from app.fhir.errors import AmbiguousMatch, StaleVersion, VersionConflict
from app.fhir.search.index import extract_index
from app.fhir.search.query import SearchError, SearchQuery, has_criteria, parse_search
from app.fhir.search.sql import CompiledSearch, Visibility, compile_search
from app.fhir.validation import is_known_type
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.ids import new_resource_id

# FHIR's id rule: 1–64 of [A-Za-z0-9-.].
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")
_ID_MAX = 64


RUN_TAG = writes.RUN_TAG
SIM_TAG = writes.SIM_TAG


@dataclass
class FhirContext:
    tenant_id: uuid.UUID
    base_url: str
    run_id: str | None = None
    touched: list[str] = field(default_factory=list)
    # Set by writes: the runs whose resources changed (to regrade them soon).
    changed_runs: set[str] = field(default_factory=set)
    # Who writes when not the client ("setup", "stimulus", "sim"), and whether the
    # writes count toward the daily quota (setup writes of built-in scenarios do not).
    source: str | None = None
    count_usage: bool = True
    writes: int = 0
    # The API root the client used (for links in webhook payloads), and the webhook
    # deliveries the writes created (enqueued after commit).
    root_url: str = ""
    deliveries: list[str] = field(default_factory=list)
    # The statement writes go through, composed with the parts of the features whose
    # tables it also writes (fhir imports none of them): `app.runs.fhir_writes`.
    write_statement: repository.WriteStatement = field(kw_only=True)
    # The scheduling rules (`app.fhir.scheduling`): "lenient" in the view of a run whose
    # scenario says so; on the tenant base, `lenient_lookup` tells whether a refused
    # booking belongs to such a run.
    scheduling: str = "strict"
    lenient_lookup: scheduling_rules.LenientLookup | None = None

    @property
    def visibility(self) -> Visibility:
        return Visibility(self.run_id)

    def touch(self, *refs: str) -> None:
        self.touched.extend(refs)

    async def write(self, conn: Conn, writes: list[repository.PreparedWrite]) -> None:
        outcome = await repository.write_versions(
            conn,
            self.tenant_id,
            writes,
            self.write_statement,
            count_usage=self.count_usage,
            fhir_root=self.root_url,
        )
        self.changed_runs.update(outcome.runs)
        self.deliveries.extend(outcome.deliveries)
        self.writes += len(writes)


@dataclass(slots=True)
class WriteResult:
    status: int  # 200 or 201
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    json: str | None

    def headers(self, base_url: str) -> dict[str, str]:
        return {
            "ETag": f'W/"{self.version_id}"',
            "Last-Modified": http_date(self.last_updated),
            "Location": f"{base_url}/{self.resource_type}/{self.id}/_history/{self.version_id}",
        }


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(moment: datetime) -> str:
    """RFC 9110's IMF-fixdate (what email.utils.format_datetime(usegmt=True) gives, at a
    fifth of its cost: it is on every read's and write's headers)."""
    m = moment.astimezone(UTC)
    return (
        f"{_WEEKDAYS[m.weekday()]}, {m.day:02d} {_MONTHS[m.month - 1]} {m.year:04d} "
        f"{m.hour:02d}:{m.minute:02d}:{m.second:02d} GMT"
    )


def check_type(resource_type: str) -> None:
    if not is_known_type(resource_type):
        raise NotFound(f"unknown resource type '{resource_type}'")


def is_valid_id(resource_id: str) -> bool:
    return 0 < len(resource_id) <= _ID_MAX and set(resource_id) <= _ID_CHARS


def check_id(resource_id: str) -> None:
    if not is_valid_id(resource_id):
        raise BadRequest(
            f"invalid id '{resource_id[:80]}': 1-64 characters of A-Z, a-z, 0-9, '-' and '.'",
            [Issue("invalid id", expression="id")],
        )


def parse_body(body: bytes) -> Any:
    if not body.strip():
        raise BadRequest("the request body is empty; a FHIR JSON resource is expected")
    try:
        return jsontext.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}", [Issue(f"malformed JSON: {exc}")]) from None


_FINAL = ("final", "amended")
_INTERACTION_EVENT = {"create": "created", "update": "updated", "delete": "deleted"}


def events_for(
    ctx: FhirContext,
    resource_type: str,
    interaction: str,
    resource: dict[str, Any] | None,
    previous_status: Any = None,
) -> list[str]:
    """The webhook events a write emits: `<Type>.created|updated|deleted` and the named
    events. Setup writes of a run emit nothing."""
    if ctx.source == "setup":
        return []
    out = [f"{resource_type}.{_INTERACTION_EVENT[interaction]}"]
    if resource is None:
        return out
    status = resource.get("status")
    if resource_type == "Communication" and interaction == "create":
        sender = resource.get("sender")
        if isinstance(sender, dict) and str(sender.get("reference", "")).startswith("Patient/"):
            out.append("message.received")
    elif resource_type == "Appointment" and status == "noshow" and previous_status != "noshow":
        out.append("appointment.noshow")
    elif (
        resource_type in ("DiagnosticReport", "Observation")
        and status in _FINAL
        and previous_status not in _FINAL
    ):
        out.append("result.final")
    return out


# The types whose named events depend on the status a write changes.
_STATUS_EVENT_TYPES = frozenset({"Appointment", "DiagnosticReport", "Observation"})


def previous_status(resource_type: str, current: repository.StoredResource | None) -> Any:
    if current is None or current.deleted or current.json is None:
        return None
    if resource_type not in _STATUS_EVENT_TYPES:
        return None
    return jsontext.loads(current.json).get("status")


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


async def _check_scheduling(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource: dict[str, Any],
    previous: dict[str, Any] | None,
    deferred: Deferred | None,
) -> None:
    """The scheduling rules, for an Appointment the system under test writes (setup,
    stimulus and the simulated patient are exempt); costs queries only for an Appointment
    that holds a practitioner's time."""
    if resource_type != "Appointment" or ctx.source is not None:
        return
    held = deferred.held_appointments() if deferred is not None else None
    await scheduling_rules.check_appointment(
        conn,
        ctx.tenant_id,
        ctx.run_id,
        resource,
        previous,
        lenient=ctx.scheduling == "lenient",
        lenient_lookup=ctx.lenient_lookup,
        held=held,
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


def _unchanged(
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


def _result(write: repository.PreparedWrite, status: int) -> WriteResult:
    return WriteResult(
        status, write.resource_type, write.id, write.version_id, write.last_updated, write.body
    )


# --- writes ------------------------------------------------------------------------------
#
# Each interaction below is the one implementation of itself, for a single request and for
# every entry of a batch or transaction Bundle. A single request runs in a transaction of
# its own and writes at once. A transaction Bundle passes a `Deferred`: the interaction
# then runs in the caller's transaction (on the caller's connection) and holds its write
# back, so the whole Bundle is written by one statement at `flush`.


@dataclass
class Deferred:
    """Writes held back until `flush`, all inside the caller's open transaction."""

    writes: list[repository.PreparedWrite] = field(default_factory=list)
    keys: set[tuple[str, str]] = field(default_factory=set)
    # The held Appointments for the scheduling rules, read from `writes[:_read]` so far.
    _held: scheduling_rules.Held = field(default_factory=scheduling_rules.Held)
    _read: int = 0

    def holds(self, resource_type: str, resource_id: str) -> bool:
        return (resource_type, resource_id) in self.keys

    def held_appointments(self) -> scheduling_rules.Held:
        """The Appointments held back so far, each parsed once however many entries of
        the Bundle are checked against them."""
        for w in self.writes[self._read :]:
            if w.resource_type == "Appointment" and w.body is not None:
                self._held.add(jsontext.loads(w.body))
        self._read = len(self.writes)
        return self._held

    def take(self) -> list[repository.PreparedWrite]:
        """The writes held, leaving it empty."""
        writes = self.writes
        self.writes, self.keys = [], set()
        self._held, self._read = scheduling_rules.Held(), 0
        return writes


async def flush(ctx: FhirContext, conn: Conn, deferred: Deferred) -> None:
    """Write what `deferred` holds (one statement) and empty it."""
    writes = deferred.take()
    await _write_or_conflict(conn, ctx, writes)


def _transaction(conn: Conn, deferred: Deferred | None) -> AbstractAsyncContextManager[Any]:
    """A transaction of the interaction's own, unless it runs in the caller's."""
    if deferred is None:
        return conn.transaction()
    if not conn.is_in_transaction():
        raise RuntimeError("deferred writes need the caller's open transaction")
    return nullcontext()


async def _commit(
    ctx: FhirContext, conn: Conn, write: repository.PreparedWrite, deferred: Deferred | None
) -> None:
    if deferred is None:
        await _write_or_conflict(conn, ctx, [write])
    else:
        deferred.writes.append(write)
        deferred.keys.add((write.resource_type, write.id))


async def _current_for_update(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    deferred: Deferred | None,
) -> repository.StoredResource | None:
    """The current version, locked; what `deferred` holds of it is written first (so the
    version read is the one the held-back write made)."""
    if deferred is not None and deferred.holds(resource_type, resource_id):
        await flush(ctx, conn, deferred)
    return await repository.fetch_current(
        conn, ctx.tenant_id, resource_type, resource_id, for_update=True
    )


async def create(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource: Any,
    *,
    if_none_exist: str | None = None,
    resource_id: str | None = None,
    deferred: Deferred | None = None,
) -> WriteResult:
    """Create; with `if_none_exist`, answer the one match instead (200) if there is one.

    `resource_id` is for a transaction Bundle, which names every new resource before
    writing any (so entries can refer to each other): a fresh id it chose."""
    check_type(resource_type)
    if resource_id is not None:
        check_id(resource_id)
    if if_none_exist:
        existing = await conditional_match(ctx, conn, resource_type, if_none_exist)
        if existing is not None:
            return existing
    write = prepare_write(
        ctx,
        resource_type,
        writes.require_shape(resource_type, resource),
        resource_id or new_resource_id(),
        1,
        "create",
        utcnow(),
    )
    await _check_scheduling(ctx, conn, resource_type, resource, None, deferred)
    await _commit(ctx, conn, write, deferred)
    return _result(write, 201)


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
    query = _parse(resource_type, items, lenient=False)
    query.count = 2
    rows = await _search_rows(ctx, conn, query)
    if not rows:
        return None
    if len(rows) > 1:
        raise AmbiguousMatch(
            f"{interaction}: {len(rows)} {resource_type} resources match '{criteria}'"
        )
    row = rows[0]
    ctx.touch(f"{resource_type}/{row['id']}")
    return WriteResult(
        200, resource_type, row["id"], row["version_id"], row["last_updated"], row["resource"]
    )


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


async def read(
    ctx: FhirContext, conn: Conn, resource_type: str, resource_id: str
) -> repository.StoredResource:
    check_type(resource_type)
    _require_id(resource_type, resource_id)
    ctx.touch(f"{resource_type}/{resource_id}")
    current = await repository.fetch_current(conn, ctx.tenant_id, resource_type, resource_id)
    _require_visible(ctx, current, resource_type, resource_id)
    assert current is not None
    if current.deleted:
        raise Gone(f"{resource_type}/{resource_id} was deleted")
    return current


def _require_id(resource_type: str, resource_id: str) -> None:
    # An id no resource can have (too long, odd characters, NUL) is simply not found.
    if not is_valid_id(resource_id):
        raise NotFound(f"{resource_type}/{resource_id[:80]} is not known")


def _require_visible(
    ctx: FhirContext,
    current: repository.StoredResource | None,
    resource_type: str,
    resource_id: str,
) -> None:
    hidden = (
        current is not None
        and ctx.run_id is not None
        and current.run_id is not None
        and current.run_id != ctx.run_id
    )
    if current is None or hidden:
        raise NotFound(f"{resource_type}/{resource_id} is not known")


async def vread(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    version: str,
) -> repository.StoredResource:
    check_type(resource_type)
    _require_id(resource_type, resource_id)
    ctx.touch(f"{resource_type}/{resource_id}")
    try:
        version_id = int(version)
    except ValueError:
        raise NotFound(
            f"version '{version}' of {resource_type}/{resource_id} is not known"
        ) from None
    found = await repository.fetch_version(
        conn, ctx.tenant_id, resource_type, resource_id, version_id
    )
    _require_visible(ctx, found, resource_type, resource_id)
    assert found is not None
    if found.deleted:
        raise Gone(f"version {version_id} of {resource_type}/{resource_id} is a deletion")
    return found


def parse_if_match(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if text.startswith("W/"):
        text = text[2:]
    text = text.strip('"')
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"If-Match '{value}' is not a version ETag like W/\"3\"") from None


async def update(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    resource: Any,
    *,
    if_match: str | None = None,
    deferred: Deferred | None = None,
) -> WriteResult:
    check_type(resource_type)
    check_id(resource_id)
    resource = writes.update_body(resource_type, resource_id, resource)
    expected = parse_if_match(if_match)
    async with _transaction(conn, deferred):
        current = await _current_for_update(ctx, conn, resource_type, resource_id, deferred)
        if current is not None:
            _require_visible(ctx, current, resource_type, resource_id)
        previous = 0 if current is None else current.version_id
        if expected is not None and expected != previous:
            raise StaleVersion(
                f"If-Match version {expected} is stale: {resource_type}/{resource_id} "
                f"is at version {previous}"
            )
        created = current is None or current.deleted
        write = prepare_write(
            ctx,
            resource_type,
            resource,
            resource_id,
            previous + 1,
            "create" if created else "update",
            utcnow(),
            previous_status(resource_type, current),
        )
        if (same := _unchanged(current, write)) is not None:
            return same
        before = None if created or current is None or current.json is None else current.json
        await _check_scheduling(
            ctx,
            conn,
            resource_type,
            resource,
            None if before is None else jsontext.loads(before),
            deferred,
        )
        await _commit(ctx, conn, write, deferred)
    return _result(write, 201 if created else 200)


async def _write_or_conflict(
    conn: Conn, ctx: FhirContext, writes: list[repository.PreparedWrite]
) -> None:
    try:
        await ctx.write(conn, writes)
    except VersionConflict:
        raise VersionConflict("the resource was changed by another request; retry") from None


async def patch(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    document: Any,
    content_type: str,
    *,
    if_match: str | None = None,
    deferred: Deferred | None = None,
) -> WriteResult:
    check_type(resource_type)
    _require_id(resource_type, resource_id)
    expected = parse_if_match(if_match)
    async with _transaction(conn, deferred):
        current = await _current_for_update(ctx, conn, resource_type, resource_id, deferred)
        _require_visible(ctx, current, resource_type, resource_id)
        assert current is not None
        if current.deleted or current.json is None:
            raise Gone(f"{resource_type}/{resource_id} was deleted")
        if expected is not None and expected != current.version_id:
            raise StaleVersion(
                f"If-Match version {expected} is stale: {resource_type}/{resource_id} "
                f"is at version {current.version_id}"
            )
        original = jsontext.loads(current.json)
        patched = writes.patched(resource_type, resource_id, original, document, content_type)
        write = prepare_write(
            ctx,
            resource_type,
            patched,
            resource_id,
            current.version_id + 1,
            "update",
            utcnow(),
            original.get("status"),
        )
        if (same := _unchanged(current, write)) is not None:
            return same
        await _check_scheduling(
            ctx, conn, resource_type, patched, jsontext.loads(current.json), deferred
        )
        await _commit(ctx, conn, write, deferred)
    return _result(write, 200)


async def delete(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    *,
    deferred: Deferred | None = None,
) -> None:
    check_type(resource_type)
    _require_id(resource_type, resource_id)
    async with _transaction(conn, deferred):
        current = await _current_for_update(ctx, conn, resource_type, resource_id, deferred)
        if current is not None:
            _require_visible(ctx, current, resource_type, resource_id)
        if current is None or current.deleted:
            ctx.touch(f"{resource_type}/{resource_id}")
            return  # deleting what is not there succeeds, as FHIR allows
        await _commit(ctx, conn, deletion(ctx, current, utcnow()), deferred)


# --- search -----------------------------------------------------------------------------


def _parse(resource_type: str, items: list[tuple[str, str]], *, lenient: bool) -> SearchQuery:
    try:
        return parse_search(resource_type, items, lenient=lenient)
    except SearchError as exc:
        raise BadRequest(str(exc), exc.issues) from None


_SELECT = "SELECT r.id, r.version_id, r.last_updated, r.resource"
# The extracted references ride along only when `_include` needs them.
_SELECT_WITH_REFS = _SELECT + ", r.refs"


def _select(query: SearchQuery) -> str:
    return _SELECT_WITH_REFS if any(not i.reverse for i in query.includes) else _SELECT


async def _search_rows(ctx: FhirContext, conn: Conn, query: SearchQuery) -> list[asyncpg.Record]:
    compiled = compile_search(ctx.tenant_id, query, ctx.visibility)
    return list(
        await conn.fetch(
            f"{_select(query)} FROM fhir_resource r WHERE {compiled.where} "
            f"ORDER BY {compiled.order_by} LIMIT {query.count}",
            *compiled.args,
        )
    )


@dataclass
class SearchPage:
    total: int
    rows: list[asyncpg.Record]
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
    query = _parse(resource_type, items, lenient=lenient)
    _touch_query(ctx, items)
    compiled = compile_search(ctx.tenant_id, query, ctx.visibility)
    if query.summary_count or query.count == 0:
        total = await _count(conn, compiled)
        return SearchPage(total, [], [], None, None, query)
    before = query.before
    rows, total, has_more = await _fetch_page(conn, compiled, query, before)
    ctx.touch(*(f"{resource_type}/{r['id']}" for r in rows))
    included = await _includes(ctx, conn, query, rows)
    base = list(query.used)
    next_params: list[tuple[str, str]] | None = None
    previous_params: list[tuple[str, str]] | None = None
    if compiled.keyset:
        if rows and (has_more or before is not None):
            next_params = [*base, ("_after", rows[-1]["id"])]
        if rows and (query.after is not None or (before is not None and has_more)):
            previous_params = [*base, ("_before", rows[0]["id"])]
    else:
        if has_more:
            next_params = [*base, ("_offset", str(query.offset + query.count))]
        if query.offset > 0:
            previous_params = [*base, ("_offset", str(max(0, query.offset - query.count)))]
    return SearchPage(total, rows, included, next_params, previous_params, query)


async def _count(conn: Conn, compiled: CompiledSearch) -> int:
    total: int = await conn.fetchval(
        f"SELECT count(*) FROM fhir_resource r WHERE {compiled.where}", *compiled.args
    )
    return total


async def _fetch_page(
    conn: Conn,
    compiled: CompiledSearch,
    query: SearchQuery,
    before: str | None,
) -> tuple[list[asyncpg.Record], int, bool]:
    """One page plus one row to know whether there is more; the total in the same trip
    on a first page (a window count), by a second query on later pages."""
    limit = query.count + 1
    args = list(compiled.args)
    where = compiled.where
    order = compiled.order_by
    if compiled.keyset and (query.after is not None or before is not None):
        args.append(query.after if query.after is not None else before)
        if query.after is not None:
            where += f" AND r.id > ${len(args)}"
        else:
            where += f" AND r.id < ${len(args)}"
            order = "r.id DESC"
        rows = list(
            await conn.fetch(
                f"{_select(query)} FROM fhir_resource r WHERE {where} "
                f"ORDER BY {order} LIMIT {limit}",
                *args,
            )
        )
        total = await _count(conn, compiled)
        has_more = len(rows) > query.count
        rows = rows[: query.count]
        if before is not None:
            rows.reverse()
        return rows, total, has_more
    offset = query.offset
    rows = list(
        await conn.fetch(
            f"{_select(query)}, count(*) OVER () AS total FROM fhir_resource r WHERE {where} "
            f"ORDER BY {order} LIMIT {limit} OFFSET {offset}",
            *args,
        )
    )
    if rows:
        total = rows[0]["total"]
    elif offset:
        total = await _count(conn, compiled)
    else:
        total = 0
    return rows[: query.count], total, len(rows) > query.count


async def _includes(
    ctx: FhirContext,
    conn: Conn,
    query: SearchQuery,
    rows: list[asyncpg.Record],
) -> list[repository.StoredResource]:
    if not query.includes or not rows:
        return []
    wanted: list[tuple[str, str]] = []
    found: list[repository.StoredResource] = []
    for inc in query.includes:
        if inc.reverse:
            if inc.target_type not in (None, query.resource_type):
                continue
            refs = repository.index_keys(
                ctx.tenant_id,
                inc.source_type,
                [f"{inc.param}={query.resource_type}/{r['id']}" for r in rows],
            )
            found.extend(
                await repository.fetch_referencing(conn, ctx.tenant_id, inc.source_type, refs)
            )
            continue
        if inc.source_type != query.resource_type:
            continue
        prefix = f"{inc.param}="
        for row in rows:
            for key in row["refs"] or ():
                entry = repository.strip_key(key)
                if not entry.startswith(prefix) or "/" not in entry:
                    continue
                rtype, _, rid = entry[len(prefix) :].partition("/")
                if inc.target_type is None or inc.target_type == rtype:
                    wanted.append((rtype, rid))
    if wanted:
        found.extend(await repository.fetch_many(conn, ctx.tenant_id, sorted(set(wanted))))
    own = {(query.resource_type, r["id"]) for r in rows}
    unique: dict[tuple[str, str], repository.StoredResource] = {}
    for res in found:
        key = (res.resource_type, res.id)
        hidden = ctx.run_id is not None and res.run_id not in (None, ctx.run_id)
        if key not in own and not hidden:
            unique.setdefault(key, res)
    ctx.touch(*(f"{t}/{i}" for t, i in unique))
    return list(unique.values())


def _touch_query(ctx: FhirContext, items: list[tuple[str, str]]) -> None:
    for _, value in items:
        for part in value.split(","):
            if "/" in part and not part.startswith("http"):
                ctx.touch(part)


# --- history ----------------------------------------------------------------------------


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
        _require_id(resource_type, resource_id)
        ctx.touch(f"{resource_type}/{resource_id}")
        current = await repository.fetch_current(conn, ctx.tenant_id, resource_type, resource_id)
        _require_visible(ctx, current, resource_type, resource_id)
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


# --- What other features read or delete of the store ------------------------------------
# They call these, never the repository: the SQL over the FHIR tables stays in
# `app.fhir.repository`.


async def current_version(
    conn: Conn, tenant_id: uuid.UUID, resource_type: str, resource_id: str
) -> repository.StoredResource | None:
    """The current version of one resource (deleted or not), whatever run it belongs to."""
    return await repository.fetch_current(conn, tenant_id, resource_type, resource_id)


async def current_or_deleted(
    conn: Conn, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[asyncpg.Record]:
    """resource_type, id, deleted, resource of those of the (type, id) pairs that exist."""
    return await repository.fetch_current_or_deleted(conn, tenant_id, refs)


async def resources_changed_by_run(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    own_types: list[str] | None,
    tenant_types: list[str] | None,
    since: datetime,
    with_before: bool = False,
) -> list[asyncpg.Record]:
    """What clients wrote for a run: see `repository.fetch_changed_by_run`."""
    return await repository.fetch_changed_by_run(
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
    return await repository.delete_run_resources(conn, tenant_id, run_id)


async def written_by_run(
    db: repository.Queryable, tenant_id: uuid.UUID, run_id: str, resource_types: list[str]
) -> list[str]:
    """The current JSON of the live resources of those types clients wrote in the run."""
    return await repository.fetch_written_by_run(db, tenant_id, run_id, resource_types)


async def communications_of(
    db: repository.Queryable, tenant_id: uuid.UUID, run_id: str, ref: str
) -> list[asyncpg.Record]:
    """id, resource, last_updated of the run's live Communications referencing `ref`."""
    return await repository.fetch_communications_of(db, tenant_id, run_id, ref)


async def ids_like(conn: Conn, tenant_id: uuid.UUID, pattern: str) -> set[tuple[str, str]]:
    """(resource_type, id) of the tenant's resources whose id is LIKE `pattern`."""
    return await repository.fetch_ids_like(conn, tenant_id, pattern)


async def patient_chart(
    db: repository.Queryable, tenant_id: uuid.UUID, patient_id: str
) -> list[asyncpg.Record]:
    """The patient's chart: the Patient and every live resource referencing it, newest
    first (empty when the tenant has no such patient)."""
    return await repository.fetch_patient_chart(db, tenant_id, patient_id)


async def versions_of(
    db: repository.Queryable, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[asyncpg.Record]:
    """Every version of those resources, newest first (their history, in one query)."""
    return await repository.fetch_versions_of(db, tenant_id, refs)


async def origins_of(
    db: repository.Queryable, tenant_id: uuid.UUID, refs: list[tuple[str, str]]
) -> list[asyncpg.Record]:
    """The current body of those resources and who wrote each first (setup, stimulus,
    sim, or None for a client)."""
    return await repository.fetch_origins(db, tenant_id, refs)


# SQL fragments for statements of other features that must stay one round trip.
live_count_sql = repository.live_count_sql
version_join_sql = repository.version_join_sql
