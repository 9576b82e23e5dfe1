"""Replaying oracle calls against an in-memory copy of a run (pure).

Grading sees a run only through its snapshot (`app.grading.snapshot`): the fixture as
it reads now, the resources the system wrote, and the calls it made. So a near-miss
solution can be graded without a server: start from the snapshot of a real run taken
before its oracle, apply each call the way the FHIR API would (create, update, JSON
Patch or merge patch, delete, each validated like a real write), and record every call
as the trace would. `app.orchestration.check` proves the two agree for each scenario by
replaying the unmutated oracle both ways and comparing the verdicts; where they differ
it grades the mutants with real runs instead.

In a `patientSim` scenario the simulated patient answers too, as the scripted stand-in
would (the real replays use it): each message written to the patient gets a reply just
after it, revealing the facts the message asks about, up to `maxTurns` replies.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
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
        # What each reference reads now: the fixture, then whatever is written.
        self.state: dict[str, dict[str, Any] | None] = {
            ref: copy.deepcopy(before.current.get(symbol)) for symbol, ref in before.fixture.items()
        }
        self.written: dict[str, _Written] = {}
        self.calls: list[Call] = []
        self.at = max(before.now, before.started_at) + STEP
        self.serial = 0
        self.statuses: list[int | None] = []  # per call: status, None if not sent
        self.refs_written: dict[int, str] = {}  # call index -> the resource it wrote

    def run(self, calls: Sequence[OracleCall]) -> RunSnapshot:
        for call in calls:
            self.statuses.append(self._call(call))
        return self.snapshot()

    def _call(self, call: OracleCall) -> int | None:
        try:
            body = (
                expand_value(call.body, self.refs, self.before.started_at)
                if call.body is not None
                else None
            )
            path = expand_path(call.path, self.refs)
        except ExpansionError:
            return None  # a symbol the left-out call would have saved: never sent
        self.at += STEP
        parts = urlsplit(path)
        status, ref = self._write(call, parts.path, body) if is_write(call) else (200, None)
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

    def _write(self, call: OracleCall, path: str, body: Any) -> tuple[int, str | None]:
        """The status, and the resource written (None when nothing was)."""
        segments = [s for s in path.split("/") if s]
        if call.method == "POST" and len(segments) == 1:
            self.serial += 1
            return self._store(segments[0], f"sim{self.serial}", body, created=True)
        if len(segments) != 2:
            return 400, None
        ref = f"{segments[0]}/{segments[1]}"
        current = self.state.get(ref)
        if call.method == "DELETE":
            if current is None:
                return 404, None
            self._record(ref, None, created=False)
            return 204, ref
        if call.method == "PUT":
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


def simulate(
    before: RunSnapshot, calls: Sequence[OracleCall], patient: Patient | None = None
) -> RunSnapshot:
    return Simulation(before, patient).run(calls)
