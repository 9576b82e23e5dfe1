"""Replaying oracle calls against an in-memory copy of a run (pure).

Grading sees a run only through its snapshot (`app.grading.snapshot`): the fixture as
it reads now, the resources the system wrote, and the calls it made. So a near-miss
solution can be graded without a server: start from the snapshot of a real run taken
before its oracle, apply each call the way the FHIR API would (create, update, JSON
Patch or merge patch, delete, a transaction Bundle's entries all or none, each
validated like a real write), and record every call as the trace would. What it cannot
see is the tenant's own data: the scheduling rules (which read the directory's Slots)
are not applied, so the mutants they refuse are graded with real runs.
`app.orchestration.check` proves the two agree for each scenario by
replaying the unmutated oracle both ways and comparing the verdicts; where they differ
it grades the mutants with real runs instead.

In a `patientSim` scenario the simulated patient answers too, as the scripted stand-in
would (the real replays use it): each message written to the patient gets a reply just
after it, revealing the facts the message asks about, up to `maxTurns` replies.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import json_merge_patch
import jsonpatch

from app.fhir.search.index import all_references
from app.fhir.validation import validate_resource
from app.grading.snapshot import Call, ChangedResource, Revealed, RunSnapshot
from app.kit.clock import fhir_instant
from app.orchestration.mutants import is_write
from app.orchestration.rewrites import bundle_urls, transaction_order
from app.patient_sim import engine as patient_engine
from app.scenarios.expansion import ExpansionError, expand_path, expand_value
from app.scenarios.schema import OracleCall, PatientSim, Scenario, Variant, symbol_name

# Calls are spaced this far apart in simulated time, so `before` sees their order.
STEP = timedelta(milliseconds=10)


@dataclass(frozen=True)
class Patient:
    """The simulated patient of a scenario, in one persona."""

    sim: PatientSim
    persona: Variant | None


def patient_of(scenario: Scenario, persona: str | None) -> Patient | None:
    if scenario.patient_sim is None:
        return None
    variant = next((v for v in scenario.variants if v.persona == persona), None)
    return Patient(scenario.patient_sim, variant)


@dataclass
class _Written:
    resource: dict[str, Any] | None
    first_at: datetime
    last_at: datetime
    created: bool
    version: int
    before: dict[str, Any] | None = None  # as it read before the replay's first write


class Simulation:
    """One replay: the state of the run's resources and its calls so far."""

    def __init__(self, before: RunSnapshot, patient: Patient | None = None) -> None:
        self.before = before
        self.patient = patient
        self.patient_ref = (
            before.fixture.get(symbol_name(patient.sim.patient)) if patient is not None else None
        )
        self.answered: set[str] = set()  # messages the patient dealt with
        self.thread: list[patient_engine.Turn] = []
        self.replies = 0
        self.revealed: list[Revealed] = []
        self.refs: dict[str, str] = dict(before.fixture)
        # What each reference reads now: the fixture, then whatever is written. Shared
        # with `before`, not copied: a write stores a new object (a patch applies to a
        # copy), so nothing here is ever changed in place.
        self.state: dict[str, dict[str, Any] | None] = {
            ref: before.current.get(symbol) for symbol, ref in before.fixture.items()
        }
        self.written: dict[str, _Written] = {}
        self.calls: list[Call] = []
        self.at = max(before.now, before.started_at) + STEP
        self.serial = 0
        self.statuses: list[int | None] = []  # per call: status, None if not sent
        self.refs_written: dict[int, str] = {}  # call index -> the resource it wrote
        self.saves: dict[str, str] = {}  # a transaction entry's fullUrl -> symbol to save

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
            Call(
                at=self.at,
                method=call.method,
                path=parts.path,
                query=parts.query,
                status=status,
                transport="rest",
                refs=(),
            )
        )
        if ref is not None and ref.startswith("Communication/"):
            self._answer(ref)
        return status

    def _answer(self, ref: str) -> None:
        """The simulated patient's reply to a message written to them, just after it
        (before the next call), as the real replay waits for it."""
        message = self.state.get(ref)
        if self.patient is None or message is None or ref in self.answered:
            return
        sender = str((message.get("sender") or {}).get("reference", ""))
        recipients = [str(r.get("reference", "")) for r in message.get("recipient") or []]
        if self.patient_ref is None or sender == self.patient_ref:
            return
        if self.patient_ref not in recipients:
            return
        text = "\n".join(
            str(p["contentString"])
            for p in message.get("payload") or []
            if isinstance(p, dict) and p.get("contentString")
        )
        turns_so_far = len(self.answered)
        self.answered.add(ref)
        if patient_engine.turns_left(self.patient.sim, turns_so_far) <= 0:
            return
        sim, persona = self.patient.sim, self.patient.persona
        reply = patient_engine.scripted_reply(sim, persona, text, self.thread)
        asked = {fact.topic for fact in patient_engine.facts_asked(sim, text)}
        self.replies += 1
        at = self.at + STEP / 2
        for topic in reply.revealed:
            self.revealed.append(
                Revealed(at, topic, f"Communication/simreply{self.replies}", ref, topic in asked)
            )
        self.thread += [
            patient_engine.Turn("staff", text),
            patient_engine.Turn("patient", reply.text),
        ]

    def _transaction(self, bundle: Any) -> int:
        """A transaction Bundle: ids for its creates first (so entries refer to each other
        by fullUrl), then its writes in the spec's order; one failure undoes them all."""
        entries = bundle.get("entry") if isinstance(bundle, dict) else None
        if bundle.get("type") != "transaction" or not isinstance(entries, list):
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
                self.serial += 1
                rid = f"sim{self.serial}"
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
        if method == "POST" and len(segments) == 1:
            if new_id is None:
                self.serial += 1
                new_id = f"sim{self.serial}"
            return self._store(segments[0], new_id, body, created=True)
        if len(segments) != 2:
            return 400, None
        ref = f"{segments[0]}/{segments[1]}"
        current = self.state.get(ref)
        if method == "DELETE":
            if current is None:
                return 404, None
            self._record(ref, None, created=False)
            return 204, ref
        if method == "PUT":
            return self._store(segments[0], segments[1], body, created=current is None)
        if current is None:
            return 404, None
        try:
            if isinstance(body, list):
                patched = jsonpatch.apply_patch(current, body)
            else:
                patched = json_merge_patch.merge(copy.deepcopy(current), body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError):
            return 422, None
        return self._store(segments[0], segments[1], patched, created=False)

    def _store(
        self, resource_type: str, rid: str, body: Any, *, created: bool
    ) -> tuple[int, str | None]:
        if not isinstance(body, dict) or body.get("resourceType") != resource_type:
            return 400, None
        resource = {k: v for k, v in body.items() if k not in ("id", "meta")}
        if validate_resource(resource_type, resource):
            return 400, None  # the API refuses invalid FHIR: nothing is written
        ref = f"{resource_type}/{rid}"
        previous = self.written.get(ref)
        stored = {
            "resourceType": resource_type,
            "id": rid,
            "meta": {
                "versionId": str(previous.version + 1 if previous else 1),
                "lastUpdated": fhir_instant(self.at),
            },
            **{k: v for k, v in resource.items() if k != "resourceType"},
        }
        self._record(ref, stored, created=created)
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
            revealed=[*self.before.revealed, *self.revealed],
            patient_replies=self.before.patient_replies + self.replies,
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


def simulate(
    before: RunSnapshot, calls: Sequence[OracleCall], patient: Patient | None = None
) -> RunSnapshot:
    return Simulation(before, patient).run(calls)
