"""The instance interactions: read, vread, create, update, patch, delete.

Each is the one implementation of itself, for a single request and for every entry of a
batch or transaction Bundle. A single request runs in a transaction of its own and writes
at once. A transaction Bundle passes a `Deferred`: the interaction then runs in the
caller's transaction (on the caller's connection) and holds its write back, so the whole
Bundle is written by one statement at `flush`.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from app.db import Conn
from app.errors import Gone, NotFound
from app.fhir import booking_rules, repository, writes
from app.fhir.checks import check_id, check_type, parse_if_match, require_id, require_visible
from app.fhir.context import FhirContext, WriteResult
from app.fhir.errors import StaleVersion, VersionConflict
from app.fhir.events import previous_status
from app.fhir.prepare import deletion, prepare_write, result_of, unchanged
from app.fhir.searching import conditional_match
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.ids import new_resource_id


async def read(
    ctx: FhirContext, conn: Conn, resource_type: str, resource_id: str
) -> repository.StoredResource:
    check_type(resource_type)
    require_id(resource_type, resource_id)
    ctx.touch(f"{resource_type}/{resource_id}")
    current = await repository.fetch_current(conn, ctx.tenant_id, resource_type, resource_id)
    require_visible(ctx, current, resource_type, resource_id)
    assert current is not None
    if current.deleted:
        raise Gone(f"{resource_type}/{resource_id} was deleted")
    return current


async def vread(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    version: str,
) -> repository.StoredResource:
    check_type(resource_type)
    require_id(resource_type, resource_id)
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
    require_visible(ctx, found, resource_type, resource_id)
    assert found is not None
    if found.deleted:
        raise Gone(f"version {version_id} of {resource_type}/{resource_id} is a deletion")
    return found


async def _check_booking(
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
    await booking_rules.check_appointment(
        conn,
        ctx.tenant_id,
        ctx.run_id,
        resource,
        previous,
        lenient=ctx.scheduling == "lenient",
        lenient_lookup=ctx.lenient_lookup,
        held=held,
    )


@dataclass
class Deferred:
    """Writes held back until `flush`, all inside the caller's open transaction."""

    writes: list[repository.PreparedWrite] = field(default_factory=list)
    keys: set[tuple[str, str]] = field(default_factory=set)
    # The held Appointments for the scheduling rules, read from `writes[:_read]` so far.
    _held: booking_rules.Held = field(default_factory=booking_rules.Held)
    _read: int = 0

    def holds(self, resource_type: str, resource_id: str) -> bool:
        return (resource_type, resource_id) in self.keys

    def held_appointments(self) -> booking_rules.Held:
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
        self._held, self._read = booking_rules.Held(), 0
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


async def _write_or_conflict(
    conn: Conn, ctx: FhirContext, writes: list[repository.PreparedWrite]
) -> None:
    try:
        await ctx.write(conn, writes)
    except VersionConflict:
        raise VersionConflict("the resource was changed by another request; retry") from None


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
    await _check_booking(ctx, conn, resource_type, resource, None, deferred)
    await _commit(ctx, conn, write, deferred)
    return result_of(write, 201)


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
            require_visible(ctx, current, resource_type, resource_id)
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
        if (same := unchanged(current, write)) is not None:
            return same
        before = None if created or current is None or current.json is None else current.json
        await _check_booking(
            ctx,
            conn,
            resource_type,
            resource,
            None if before is None else jsontext.loads(before),
            deferred,
        )
        await _commit(ctx, conn, write, deferred)
    return result_of(write, 201 if created else 200)


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
    require_id(resource_type, resource_id)
    expected = parse_if_match(if_match)
    async with _transaction(conn, deferred):
        current = await _current_for_update(ctx, conn, resource_type, resource_id, deferred)
        require_visible(ctx, current, resource_type, resource_id)
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
        if (same := unchanged(current, write)) is not None:
            return same
        await _check_booking(
            ctx, conn, resource_type, patched, jsontext.loads(current.json), deferred
        )
        await _commit(ctx, conn, write, deferred)
    return result_of(write, 200)


async def delete(
    ctx: FhirContext,
    conn: Conn,
    resource_type: str,
    resource_id: str,
    *,
    deferred: Deferred | None = None,
) -> None:
    check_type(resource_type)
    require_id(resource_type, resource_id)
    async with _transaction(conn, deferred):
        current = await _current_for_update(ctx, conn, resource_type, resource_id, deferred)
        if current is not None:
            require_visible(ctx, current, resource_type, resource_id)
        if current is None or current.deleted:
            ctx.touch(f"{resource_type}/{resource_id}")
            return  # deleting what is not there succeeds, as FHIR allows
        await _commit(ctx, conn, deletion(ctx, current, utcnow()), deferred)
