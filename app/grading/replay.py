"""Replaying oracle calls against an in-memory copy of a run (pure).

Grading sees a run only through its snapshot (`app.grading.snapshot`): the fixture as it
reads now, the resources the system wrote, and the calls it made. A replay starts from
a snapshot taken before any of the system's writes, applies each call the way the FHIR
API does — through the same functions (`app.fhir.writes`: the shape and id checks, JSON
Patch or merge patch, validation, stamping), a transaction Bundle's entries all or none —
and records every call as the trace would. It serves two purposes:

- the expected end state of a run (`app.grading.reference`): the scenario's reference
  solution replayed from the run's own starting point, so every run is compared with
  what the reference solution would have left in *that* run;
- the scenario check (`app.orchestration.simulation`): near misses of the reference
  solution graded without a server, with the simulated patient answering.

What a replay cannot see is the tenant's own data: the scheduling rules (which read the
directory's Slots) are not applied.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from app.errors import AppError
from app.fhir import writes
from app.fhir.search.index import all_references
from app.grading.snapshot import Call as TracedCall
from app.grading.snapshot import ChangedResource, RunSnapshot, SentText
from app.scenarios.calls import (
    bundle_urls,
    capture_kind,
    capture_text,
    is_write,
    transaction_order,
)
from app.scenarios.expansion import ExpansionError, expand_path, expand_value
from app.scenarios.schema import OracleCall

# Calls are spaced this far apart in simulated time, so `before` sees their order.
STEP = timedelta(milliseconds=10)
# Ids a replay gives the resources it creates: never a real id (those have no prefix
# like this), so a reference to one is known to point at something the replay made.
REPLAY_ID_PREFIX = "replay-"


@dataclass
class _Written:
    resource: dict[str, Any] | None
    first_at: datetime
    last_at: datetime
    created: bool
    version: int
    before: dict[str, Any] | None = None  # as it read before the replay's first write


def is_replay_ref(reference: str) -> bool:
    return reference.split("/", 1)[-1].startswith(REPLAY_ID_PREFIX)


def starting_point(snapshot: RunSnapshot) -> RunSnapshot:
    """The run as it read when it started: each fixture resource as it was before the
    system's first write of it (the snapshot's `before`), nothing changed, no calls."""
    befores = {
        f"{c.resource_type}/{c.id}": c.before
        for c in snapshot.changed
        if not c.created and c.before is not None
    }
    current = {
        symbol: befores.get(ref, snapshot.current.get(symbol))
        for symbol, ref in snapshot.fixture.items()
    }
    return replace(
        snapshot,
        now=snapshot.started_at,
        current=current,
        changed=[],
        sent=[],
        calls=[],
        deliveries=[],
        revealed=[],
        patient_replies=0,
        final=False,
    )


class Replay:
    """One replay: the state of the run's resources and its calls so far. Subclasses
    react to each call after it (`after_call`: the simulated patient answering)."""

    def __init__(self, before: RunSnapshot) -> None:
        self.before = before
        self.refs: dict[str, str] = dict(before.fixture)
        # What each reference reads now: the fixture, then whatever is written. Shared
        # with `before`, not copied: a write stores a new object (a patch applies to a
        # copy), so nothing here is ever changed in place.
        self.state: dict[str, dict[str, Any] | None] = {
            ref: before.current.get(symbol) for symbol, ref in before.fixture.items()
        }
        self.written: dict[str, _Written] = {}
        self.calls: list[TracedCall] = []
        self.at = max(before.now, before.started_at) + STEP
        self.serial = 0
        self.statuses: list[int | None] = []  # per call: status, None if not sent
        self.refs_written: dict[int, str] = {}  # call index -> the resource it wrote
        self.saves: dict[str, str] = {}  # a transaction entry's fullUrl -> symbol to save
        self.sent: list[SentText] = []  # the SMS and e-mail it sent (captured effects)

    def run(
        self,
        calls: Sequence[OracleCall],
        expanded: Callable[[OracleCall, Any], Any] | None = None,
        saves: Mapping[str, str] | None = None,
    ) -> RunSnapshot:
        """Replay `calls`; `expanded` rewrites each body after expansion, `saves` names
        the symbols a transaction's creates save by fullUrl (a rewrite's)."""
        self.saves = dict(saves or {})
        for call in calls:
            self.statuses.append(self._call(call, expanded))
        return self.snapshot()

    def after_call(self, ref: str | None) -> None:
        """Called after each sent call with the resource it wrote (None if none)."""

    def _new_id(self) -> str:
        self.serial += 1
        return f"{REPLAY_ID_PREFIX}{self.serial}"

    def _call(
        self, call: OracleCall, expanded: Callable[[OracleCall, Any], Any] | None = None
    ) -> int | None:
        try:
            body = (
                bundle_urls(expand_value(call.body, self.refs, self.before.started_at), self.refs)
                if call.body is not None
                else None
            )
            path = expand_path(call.path, self.refs)
        except ExpansionError:
            return None  # a symbol the left-out call would have saved: never sent
        if expanded is not None and body is not None:
            body = expanded(call, body)
        self.at += STEP
        parts = urlsplit(path)
        kind = capture_kind(parts.path)
        if kind is not None:
            status = self._capture(kind, body)
            self.calls.append(
                TracedCall(self.at, call.method, parts.path, parts.query, status, kind, (), body)
            )
            self.after_call(None)
            return status
        if call.method == "POST" and parts.path.strip("/") == "":
            status, ref = self._transaction(body), None
        elif is_write(call):
            status, ref = self._write(call.method, parts.path, body)
        else:
            status, ref = 200, None
        if ref is not None:
            self.refs_written[len(self.statuses)] = ref
            if call.save_as is not None:
                self.refs[call.save_as] = ref
        self.calls.append(
            TracedCall(
                at=self.at,
                method=call.method,
                path=parts.path,
                query=parts.query,
                status=status,
                transport="rest",
                refs=(),
                request=body,
            )
        )
        self.after_call(ref)
        return status

    def _capture(self, kind: str, body: Any) -> int:
        """A captured effect the reference sends (an SMS, an e-mail, an integration
        call): no FHIR change; an SMS or e-mail is a text sent, as the capture keeps it."""
        if kind == "integration":
            return 200
        fields = body if isinstance(body, dict) else {}
        to = fields.get("to")
        recipients = ", ".join(str(t) for t in to) if isinstance(to, list) else str(to or "")
        text = capture_text(fields.get("body"))
        if not recipients or not text.strip():
            return 400
        self.serial += 1
        ref = f"{kind}:{REPLAY_ID_PREFIX}{self.serial}"
        self.sent.append(SentText(ref, kind, self.at, recipients, text))
        return 201

    def _transaction(self, bundle: Any) -> int:
        """A transaction Bundle: ids for its creates first (so entries refer to each other
        by fullUrl), then its writes in the spec's order; one failure undoes them all."""
        entries = bundle.get("entry") if isinstance(bundle, dict) else None
        if not isinstance(bundle, dict) or bundle.get("type") != "transaction":
            return 400
        if not isinstance(entries, list):
            return 400
        mapping: dict[str, str] = {}
        plan: list[tuple[str, str, Any, str | None]] = []
        for entry in entries:
            request = entry.get("request") if isinstance(entry, dict) else None
            if not isinstance(request, dict):
                return 400
            method = str(request.get("method", ""))
            path = "/" + str(request.get("url", "")).lstrip("/")
            rid = None
            if method == "POST":
                rid = self._new_id()
                full_url = entry.get("fullUrl")
                if isinstance(full_url, str):
                    mapping[full_url] = f"{path.strip('/')}/{rid}"
            plan.append((method, path, entry.get("resource"), rid))
        saved = (copy.deepcopy(self.state), copy.deepcopy(self.written))
        for method, path, resource, rid in sorted(plan, key=lambda p: transaction_order(p[0])):
            status, _ = self._write(method, path, _resolve_urns(resource, mapping), rid)
            if status >= 400:
                self.state, self.written = saved
                return 400
        for full_url, symbol in self.saves.items():
            if full_url in mapping:
                self.refs[symbol] = mapping[full_url]
        return 200

    def _write(
        self, method: str, path: str, body: Any, new_id: str | None = None
    ) -> tuple[int, str | None]:
        """The status, and the resource written (None when nothing was)."""
        segments = [s for s in path.split("/") if s]
        try:
            if method == "POST" and len(segments) == 1:
                resource = copy.deepcopy(writes.require_shape(segments[0], body))
                return self._store(segments[0], new_id or self._new_id(), resource, True)
            if len(segments) != 2:
                return 400, None
            resource_type, rid = segments
            ref = f"{resource_type}/{rid}"
            current = self.state.get(ref)
            if method == "DELETE":
                if current is None:
                    return 204, None  # deleting what is not there succeeds, as FHIR allows
                self._record(ref, None, created=False)
                return 204, ref
            if method == "PUT":
                resource = copy.deepcopy(writes.update_body(resource_type, rid, body))
                return self._store(resource_type, rid, resource, current is None)
            if current is None:
                return 404, None
            content_type = "application/json-patch+json" if isinstance(body, list) else ""
            resource = writes.patched(
                resource_type, rid, copy.deepcopy(current), body, content_type
            )
            return self._store(resource_type, rid, resource, False)
        except AppError as exc:
            return exc.status, None

    def _store(
        self, resource_type: str, rid: str, resource: dict[str, Any], created: bool
    ) -> tuple[int, str | None]:
        writes.validated(resource_type, resource)
        ref = f"{resource_type}/{rid}"
        previous = self.written.get(ref)
        before = self.state.get(ref)
        version = (
            previous.version + 1
            if previous
            else int(str((before or {}).get("meta", {}).get("versionId", "0")) or 0) + 1
        )
        writes.stamp(resource, rid, version, self.at, writes.RUN_TAG)
        self._record(ref, resource, created=created)
        return (201 if created else 200), ref

    def _record(self, ref: str, resource: dict[str, Any] | None, *, created: bool) -> None:
        earlier = self.state.get(ref)
        self.state[ref] = resource
        previous = self.written.get(ref)
        if previous is None:
            self.written[ref] = _Written(
                resource, self.at, self.at, created, 1, copy.deepcopy(earlier)
            )
        else:
            previous.resource = resource
            previous.last_at = self.at
            previous.version += 1

    def snapshot(self) -> RunSnapshot:
        by_ref = {ref: symbol for symbol, ref in self.before.fixture.items()}
        current = dict(self.before.current)
        changed = []
        for ref, w in self.written.items():
            if ref in by_ref:
                current[by_ref[ref]] = copy.deepcopy(w.resource)
            resource_type, rid = ref.split("/", 1)
            changed.append(
                ChangedResource(
                    resource_type=resource_type,
                    id=rid,
                    resource=copy.deepcopy(w.resource),
                    first_changed_at=w.first_at,
                    last_changed_at=w.last_at,
                    created=w.created,
                    all_refs=tuple(all_references(w.resource)) if w.resource else (),
                    # As the store attributes it: what the run created or owns (its
                    # fixture) is the run's; the shared directory (Slots) is nobody's.
                    run_id=self.before.run_id if w.created or ref in by_ref else None,
                    before=None if w.created else w.before,
                    via_run=True,  # the replay writes through the run's view
                )
            )
        return replace(
            self.before,
            now=self.at + STEP,
            current=current,
            changed=[*self.before.changed, *changed],
            # Only the replayed calls: a call another run shared before the oracle started
            # is not part of the solution being graded.
            calls=list(self.calls),
            sent=[*self.before.sent, *self.sent],
            final=True,
        )


def _resolve_urns(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {
            k: mapping.get(v, v)
            if k == "reference" and isinstance(v, str)
            else _resolve_urns(v, mapping)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_resolve_urns(v, mapping) for v in value]
    return value
