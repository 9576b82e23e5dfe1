"""`message`: grade what the system said (docs/grading.md "Message checks").

In scope: the Communications the system wrote during the run (never the simulated
patient's replies: those are not the system's writes) whose recipient is a fixture patient;
`to: "practitioner"` adds those to a Practitioner or PractitionerRole, `to: "any"` takes
every one; `after: <id>` keeps those first written after that expectation's evidence time
or with it, in one transaction (none while it does not hold). Messages are read in the
order they were written, their `payload.contentString` parts joined.

Each field set is one clause of the evidence (`{"where": "says: …", "holds": …, "value":
…}`), and the expectation holds when every clause does. With no message in scope the
positive clauses (`says`, `saysAny`, `mentions`) fail and the negative ones (`not`,
`register`, `grounded`, `claims`) hold, each saying so. Times are read in UTC and in the
snapshot's clinic zones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.grading.fhirpath import FhirPathContext, FhirPathError
from app.grading.message.claims import Write, claims, unbacked
from app.grading.message.facts import SourceIndex, grounded
from app.grading.message.mentions import states_value
from app.grading.message.register import register_violations
from app.grading.resource import ref_of
from app.grading.scoring import capped, make_result
from app.grading.snapshot import ChangedResource, Graded, RunSnapshot
from app.grading.truth.texts import addresses_of, patient_addresses
from app.kit.phrases import find_phrases
from app.scenarios.schema import Expectation, MessageExpectation
from understudy_client.contract.runs import Evidence

MAX_NAMED = 5  # phrases, facts or claims named per clause; the first few say what broke
PRACTITIONER_TYPES = ("Practitioner/", "PractitionerRole/")


@dataclass(frozen=True, slots=True)
class Message:
    ref: str
    at: datetime
    text: str


def message_text(resource: dict[str, Any]) -> str:
    return "\n".join(
        str(part["contentString"])
        for part in resource.get("payload") or []
        if isinstance(part, dict) and isinstance(part.get("contentString"), str)
    )


def _recipients(resource: dict[str, Any]) -> list[str]:
    return [
        str(r.get("reference", "")) for r in resource.get("recipient") or [] if isinstance(r, dict)
    ]


def in_scope(
    expectation: MessageExpectation, snapshot: RunSnapshot, after: datetime | None
) -> list[Message]:
    out: list[Message] = []
    for changed in snapshot.changed:
        body = changed.resource
        if changed.resource_type != "Communication" or body is None or not changed.created:
            continue
        # A message written with the evidence (one transaction, one instant) is after it.
        if after is not None and changed.first_changed_at < after:
            continue
        recipients = _recipients(body)
        to_patient = any(r in snapshot.patient_refs for r in recipients)
        if expectation.to == "patient" and not to_patient:
            continue
        if expectation.to == "practitioner" and not (
            to_patient or any(r.startswith(PRACTITIONER_TYPES) for r in recipients)
        ):
            continue
        out.append(Message(ref_of(changed), changed.first_changed_at, message_text(body)))
    # A captured SMS or e-mail is a message like a Communication: to the patient when it
    # went to a fixture patient's number or address, to staff (a referral letter to a
    # clinic's inbox) otherwise.
    addresses = patient_addresses(snapshot) if snapshot.sent else frozenset()
    for sent in snapshot.sent:
        if after is not None and sent.at < after:
            continue
        to_patient = bool(addresses_of(sent) & addresses)
        if expectation.to == "patient" and not to_patient:
            continue
        out.append(Message(sent.ref, sent.at, sent.body))
    return sorted(out, key=lambda m: (m.at, m.ref))


def _clause(where: str, holds: bool, value: str) -> dict[str, Any]:
    return {"where": where, "holds": holds, "value": value}


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:MAX_NAMED])
    return shown + (f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "")


class _Clauses:
    """The clauses of one message expectation, over its messages in scope."""

    def __init__(
        self,
        expectation: MessageExpectation,
        snapshot: RunSnapshot,
        fp: FhirPathContext,
        messages: list[Message],
        grade_named: Callable[[Expectation], Graded],
        by_id: dict[str, Expectation],
    ) -> None:
        self.e = expectation
        self.snapshot = snapshot
        self.fp = fp
        self.messages = messages
        self.texts = [m.text for m in messages]
        self.grade_named = grade_named
        self.by_id = by_id
        self.zones = tuple(snapshot.zones)
        self.out: list[dict[str, Any]] = []
        self.culprits: list[str] = []  # messages that broke a clause, first first

    def blame(self, index: int) -> None:
        ref = self.messages[index].ref
        if ref not in self.culprits:
            self.culprits.append(ref)

    def says(self, phrases: list[str]) -> None:
        found = find_phrases(phrases, self.texts)
        missing = [p for p in phrases if not found[p]]
        said = [
            f"{p!r} in {self.messages[found[p][0].message_index].ref}" for p in phrases if found[p]
        ]
        value = f"not said: {_listed([repr(p) for p in missing])}" if missing else _listed(said)
        self.out.append(_clause(f"says: {phrases}", not missing and bool(self.texts), value))

    def says_any(self, phrases: list[str]) -> None:
        found = find_phrases(phrases, self.texts)
        hits = [
            f"{p!r} in {self.messages[found[p][0].message_index].ref}: “{found[p][0].quote}”"
            for p in phrases
            if found[p]
        ]
        value = _listed(hits) if hits else "none of them is said"
        self.out.append(_clause(f"saysAny: {phrases}", bool(hits), value))

    def not_(self, phrases: list[str]) -> None:
        found = find_phrases(phrases, self.texts)
        hits: list[str] = []
        for phrase in phrases:
            for match in found[phrase]:
                self.blame(match.message_index)
                ref = self.messages[match.message_index].ref
                hits.append(f"{phrase!r} in {ref}: “{match.quote}”")
        value = _listed(hits) if hits else self._none_or("none of them is said")
        self.out.append(_clause(f"not: {phrases}", not hits, value))

    def _none_or(self, text: str) -> str:
        return text if self.texts else "no message in scope"

    def mentions(self) -> None:
        for mention in self.e.mentions or []:
            where = f"mentions: {mention.path} of {mention.of}"
            target = self.by_id.get(mention.of)
            if target is None:
                self.out.append(_clause(where, False, f"no expectation {mention.of!r}"))
                continue
            body, ref = self._first_evidence(self.grade_named(target))
            if body is None:
                self.out.append(_clause(where, False, f"{mention.of} has no resource yet"))
                continue
            try:
                values = self.fp.values(mention.path, body)
            except FhirPathError as exc:
                self.out.append(_clause(where, False, f"{ref}: {exc}"))
                continue
            if not values:
                self.out.append(_clause(where, False, f"{ref} has no {mention.path}"))
                continue
            value = values[0]
            stated = states_value(self.texts, value, self.zones)
            if stated is None:
                shown = f"{value!r} ({ref})" if not isinstance(value, dict) else ref
                self.out.append(_clause(where, False, f"no message states {shown}"))
            else:
                msg = self.messages[stated.message_index].ref
                self.out.append(_clause(where, True, f"{msg}: “{stated.quote}”"))

    def _first_evidence(self, graded: Graded) -> tuple[dict[str, Any] | None, str]:
        matches = graded.result.evidence.matches
        ordered = [m for m in matches if m in graded.refs] or sorted(graded.refs)
        for ref in ordered:
            for changed in self.snapshot.changed:
                if ref_of(changed) == ref and changed.resource is not None:
                    return changed.resource, ref
            for symbol, fixture_ref in self.snapshot.fixture.items():
                if fixture_ref == ref and (body := self.snapshot.current.get(symbol)):
                    return body, ref
        return None, ""

    def register(self, voice: str) -> None:
        hits: list[str] = []
        for index, text in enumerate(self.texts):
            for v in register_violations(text, voice):  # type: ignore[arg-type]
                self.blame(index)
                hits.append(f"{v.word!r} in {self.messages[index].ref}: “{v.quote}”")
        value = _listed(hits) if hits else self._none_or(f"every message keeps to {voice}")
        self.out.append(_clause(f"register: {voice}", not hits, value))

    def grounded(self) -> None:
        index = _source_index(self.snapshot.shown, self.zones)
        hits: list[str] = []
        own: dict[tuple[str, ...], SourceIndex] = {}  # the run's writes before a message
        for i, text in enumerate(self.texts):
            facts = grounded(text, index, self.zones)
            if facts:
                # What the system itself wrote before saying it is a source too: "you're
                # booked Friday at 9:00" right after booking it. Not its messages (each
                # would ground itself); whether the write was right is not this clause's.
                writes = [
                    w
                    for w in self.snapshot.changed
                    if w.resource is not None
                    and w.resource_type not in MESSAGE_SOURCES_EXCLUDED
                    and (w.via_run or w.run_id is not None)
                    and w.first_changed_at <= self.messages[i].at
                ]
                key = tuple(sorted(ref_of(w) for w in writes))
                if key:
                    if key not in own:
                        own[key] = SourceIndex.build([w.resource for w in writes], self.zones)
                    also = {(f.kind, f.start, f.end) for f in grounded(text, own[key], self.zones)}
                    facts = [f for f in facts if (f.kind, f.start, f.end) in also]
            for fact in facts:
                self.blame(i)
                hits.append(
                    f"{fact.kind} {fact.text!r} in {self.messages[i].ref}: “{fact.quote}” "
                    f"({fact.detail})"
                )
        value = _listed(hits) if hits else self._none_or("every fact stated was shown")
        self.out.append(_clause("grounded", not hits, value))

    def claims(self) -> None:
        writes = self.snapshot.changed
        hits: list[str] = []
        for i, message in enumerate(self.messages):
            # A write in the message's own transaction (the same instant) backs it too.
            before = [
                _write(w)
                for w in writes
                if w.first_changed_at <= message.at and ref_of(w) != message.ref
            ]
            for claim in unbacked(claims(message.text, i), before):
                self.blame(i)
                hits.append(f"{claim.action} in {message.ref}: “{claim.quote}”")
        value = (
            f"claimed with no such write before the message: {_listed(hits)}"
            if hits
            else self._none_or("every action claimed was done first")
        )
        self.out.append(_clause("claims", not hits, value))


# What a run was shown is one list per snapshot; the scenario check grades hundreds of
# near misses over one, and building its index is most of the grounded clause's cost.
# Keyed by identity (the list is held, so the id stays its own); a few suffice.
_INDEX_CACHE_SIZE = 8
# The run's own writes ground what its messages say, except messages themselves.
MESSAGE_SOURCES_EXCLUDED = frozenset({"Communication", "CommunicationRequest"})
_indexes: dict[tuple[int, tuple[str, ...]], tuple[list[Any], SourceIndex]] = {}


_indexes_lock = threading.Lock()  # the check grades in worker threads


def _source_index(shown: list[Any], zones: tuple[str, ...]) -> SourceIndex:
    key = (id(shown), zones)
    with _indexes_lock:
        cached = _indexes.get(key)
    if cached is not None and cached[0] is shown:
        return cached[1]
    index = SourceIndex.build(shown, zones)
    with _indexes_lock:
        while len(_indexes) >= _INDEX_CACHE_SIZE:
            _indexes.pop(next(iter(_indexes)))
        _indexes[key] = (shown, index)
    return index


def _write(changed: ChangedResource) -> Write:
    return Write(changed.resource_type, 200, changed.resource)


def grade_message(
    expectation: MessageExpectation,
    snapshot: RunSnapshot,
    fp: FhirPathContext,
    after: Graded | None,
    grade_named: Callable[[Expectation], Graded],
    by_id: dict[str, Expectation],
) -> Graded:
    """`after` is the graded result of `expectation.after` (None without one)."""
    if after is not None and after.first_at is None:
        messages: list[Message] = []
    else:
        messages = in_scope(expectation, snapshot, after.first_at if after else None)
    c = _Clauses(expectation, snapshot, fp, messages, grade_named, by_id)
    if expectation.says:
        c.says(expectation.says)
    if expectation.says_any:
        c.says_any(expectation.says_any)
    if expectation.not_:
        c.not_(expectation.not_)
    if expectation.mentions:
        c.mentions()
    if expectation.voice:
        c.register(expectation.voice)
    if expectation.grounded:
        c.grounded()
    if expectation.claims:
        c.claims()

    refs = [m.ref for m in messages]
    evidence = Evidence(matches=capped(refs), clauses=c.out)
    scope = f"{len(messages)} message(s) in scope"
    if after is not None:
        scope += f" (sent after {expectation.after})"
    if not messages:
        evidence.note = "no message in scope: positive clauses fail, negative ones hold"
    failing = [cl for cl in c.out if not cl["holds"]]
    if not failing:
        first = messages[0].at if messages else None
        return make_result(expectation, True, evidence, scope, first, refs=frozenset(refs))
    evidence.closest = c.culprits[0] if c.culprits else (refs[-1] if refs else None)
    detail = f"{scope}; " + "; ".join(f"{cl['where']} fails: {cl['value']}" for cl in failing)
    return make_result(expectation, False, evidence, detail, refs=frozenset(refs))
