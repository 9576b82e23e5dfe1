"""Near-miss solutions derived from a scenario's oracle (pure).

A scenario is a weak test when a solution that is *almost* right still passes. The
mutants here are the near misses an agent really makes: a write left out, a write for
the wrong patient, a wrong code or status, a lookup done after acting instead of
before, the right writes made without asking the simulated patient first (a guess), a
change to a chart resource nobody asked to touch (`collateral`), a resource created twice
(`duplicate`), a booking moved off the free slots (`slot`), and in what the oracle tells
the patient: a phrase a message check needs left out (`message-says`), a phrase it
forbids added (`message-not`), a mentioned time an hour off (`message-time`), an action
claimed that nothing wrote (`message-claim`), and for a persona whose own expectations
keep to a Spanish register, a sentence in the other one (`message-register`,
`derive_variant_mutants`). Every mutant must fail at
least one required expectation (`app.orchestration.check`); the opposite direction,
rewrites that must still pass, is `app.orchestration.rewrites`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.fhir.booking_rules import HOLDING
from app.fhir.validation import required_codes
from app.grading.api_call import path_matches
from app.grading.message.claims import Write, claims, unbacked
from app.kit.phrases import find_phrase
from app.patient_sim.engine import facts_asked
from app.scenarios.calls import is_write
from app.scenarios.schema import (
    AnyOfExpectation,
    ApiCallExpectation,
    AskedExpectation,
    Expectation,
    MessageExpectation,
    OracleCall,
    Scenario,
    symbol_name,
)

# The patient a write is redirected to when the fixture has only one: nobody's chart.
OTHER_PATIENT = "Patient/understudy-other-patient"
# Top-level coded elements whose value is swapped, and the wrong value tried first.
_CODED_ELEMENTS = {"status": "entered-in-error", "intent": "proposal", "priority": "routine"}
_SECOND_CHOICE = {"status": "cancelled", "intent": "plan", "priority": "stat"}
# A time token `<sign><N><unit>@HH:MM` (the clock part is what a slot mutant moves).
_CLOCK_TOKEN_RE = re.compile(r"([+-]\d+(?:wd|d))@(\d{2}):(\d{2})")
# How far a `slot` mutant moves a booking, and the hour it moves one to at night.
SLOT_SHIFT_MINUTES = 10
NIGHT_HOUR = 3
# Collateral changes: per fixture resource type, a JSON Patch a careless agent might
# make on a resource the scenario never asked it to touch.
_NOTE = [{"text": "Reviewed while handling another request."}]
_COLLATERAL: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "Patient": (
        "telecom rewritten",
        [{"op": "add", "path": "/telecom", "value": [{"system": "phone", "value": "555-0199"}]}],
    ),
    "Condition": ("a note added", [{"op": "add", "path": "/note", "value": _NOTE}]),
    "Observation": ("a note added", [{"op": "add", "path": "/note", "value": _NOTE}]),
    "AllergyIntolerance": ("a note added", [{"op": "add", "path": "/note", "value": _NOTE}]),
    "Immunization": ("a note added", [{"op": "add", "path": "/note", "value": _NOTE}]),
    "ServiceRequest": ("a note added", [{"op": "add", "path": "/note", "value": _NOTE}]),
}
# Types whose collateral change is a status change (to the first of these it does not
# have already).
_COLLATERAL_STATUS: dict[str, tuple[str, ...]] = {
    "MedicationStatement": ("stopped", "on-hold"),
    "MedicationRequest": ("stopped", "on-hold"),
    "Appointment": ("cancelled", "noshow"),
    "Coverage": ("cancelled", "draft"),
}


@dataclass(frozen=True)
class Mutant:
    # drop | redirect | code | reorder | guess | collateral | duplicate | slot |
    # message-says | message-not | message-time | message-claim | message-register
    kind: str
    description: str
    calls: tuple[OracleCall, ...]
    call_index: int | None  # the oracle call mutated (None for reorder and collateral)
    # Graded with a real run even where the in-memory replay is trusted: the scheduling
    # rules that refuse it read the tenant's Slots, which a run snapshot does not hold.
    real_run: bool = False
    # The index in `calls` of the mutated call: when the API refuses it (the scheduling
    # rules' 409), the near miss cannot be made at all, which counts as caught.
    probe: int | None = None
    # Applied to a call's body after expansion (`app.orchestration.adversaries`).
    expanded: Callable[[OracleCall, Any], Any] | None = None


def describe(index: int, call: OracleCall) -> str:
    return f"call {index + 1} ({call.method} {call.path})"


def patient_symbols(scenario: Scenario) -> list[str]:
    """Symbols of the fixture's (and stimulus's) Patients, in order."""
    out = []
    for resource in [*scenario.fixture, *scenario.stimulus]:
        rid = resource.get("id") if isinstance(resource, dict) else None
        if resource.get("resourceType") == "Patient" and isinstance(rid, str):
            out.append(rid)
    return out


def derive_mutants(scenario: Scenario) -> list[Mutant]:
    oracle = list(scenario.oracle)
    mutants: list[Mutant] = []
    patients = patient_symbols(scenario)
    for index, call in enumerate(oracle):
        if not is_write(call):
            continue
        rest = tuple(c for i, c in enumerate(oracle) if i != index)
        mutants.append(Mutant("drop", f"{describe(index, call)} left out", rest, index))
        mutants.extend(_redirects(oracle, index, call, patients))
        mutants.extend(_code_changes(oracle, index, call))
        mutants.extend(_duplicates(scenario, oracle, index, call))
        mutants.extend(_slot_moves(scenario, oracle, index, call))
    mutants.extend(_reorders(scenario, oracle))
    mutants.extend(_guesses(scenario, oracle))
    mutants.extend(_collaterals(scenario, oracle))
    mutants.extend(_message_mutants(scenario, oracle))
    return mutants


def _replaced(oracle: list[OracleCall], index: int, call: OracleCall) -> tuple[OracleCall, ...]:
    return tuple(call if i == index else c for i, c in enumerate(oracle))


def _redirects(
    oracle: list[OracleCall], index: int, call: OracleCall, patients: list[str]
) -> Iterator[Mutant]:
    if call.body is None:
        return
    for symbol in patients:
        if not _mentions(call.body, symbol):
            continue
        other = next((p for p in patients if p != symbol), OTHER_PATIENT)
        body = _substitute(call.body, symbol, other)
        yield Mutant(
            "redirect",
            f"{describe(index, call)} written for {other} instead of {symbol}",
            _replaced(oracle, index, call.model_copy(update={"body": body})),
            index,
        )


def _mentions(value: Any, symbol: str) -> bool:
    if isinstance(value, dict):
        return any(_mentions(v, symbol) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, symbol) for v in value)
    return bool(value == symbol)


def _substitute(value: Any, symbol: str, other: str) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, symbol, other) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, symbol, other) for v in value]
    return other if value == symbol else value


def _resource_type(call: OracleCall) -> str | None:
    if isinstance(call.body, dict) and isinstance(call.body.get("resourceType"), str):
        return str(call.body["resourceType"])
    segments = [s for s in urlsplit(call.path).path.split("/") if s]
    return segments[0] if segments else None


def _wrong_value(resource_type: str | None, element: str, value: str) -> str | None:
    allowed = required_codes(resource_type, element) if resource_type else ()
    for candidate in (_CODED_ELEMENTS[element], _SECOND_CHOICE[element], *allowed):
        if candidate != value and (not allowed or candidate in allowed):
            return candidate
    return None


def _code_changes(oracle: list[OracleCall], index: int, call: OracleCall) -> Iterator[Mutant]:
    body = call.body
    if body is None:
        return
    resource_type = _resource_type(call)
    # Top-level status / intent / priority: in a resource body, a merge patch, or the
    # value of a JSON Patch operation on /status, /intent or /priority.
    for where, element, value in _top_level_codes(body):
        wrong = _wrong_value(resource_type, element, value)
        if wrong is None:
            continue
        mutated = copy.deepcopy(body)
        _set(mutated, where, wrong)
        yield Mutant(
            "code",
            f"{describe(index, call)} with {element} '{wrong}' instead of '{value}'",
            _replaced(oracle, index, call.model_copy(update={"body": mutated})),
            index,
        )
    for where, code in _codings(body, ()):
        mutated = copy.deepcopy(body)
        wrong = f"{code}-changed"
        _set(mutated, (*where, "code"), wrong)
        yield Mutant(
            "code",
            f"{describe(index, call)} with code '{wrong}' instead of '{code}' "
            f"at {_show_path(where)}",
            _replaced(oracle, index, call.model_copy(update={"body": mutated})),
            index,
        )


def _top_level_codes(body: Any) -> Iterator[tuple[tuple[Any, ...], str, str]]:
    if isinstance(body, dict):
        for element in _CODED_ELEMENTS:
            value = body.get(element)
            if isinstance(value, str):
                yield (element,), element, value
    elif isinstance(body, list):  # JSON Patch
        for i, op in enumerate(body):
            if not isinstance(op, dict) or op.get("op") not in ("add", "replace"):
                continue
            element = str(op.get("path", "")).lstrip("/")
            if element in _CODED_ELEMENTS and isinstance(op.get("value"), str):
                yield (i, "value"), element, op["value"]


def _codings(value: Any, where: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, dict):
        if isinstance(value.get("system"), str) and isinstance(value.get("code"), str):
            yield where, value["code"]
        for key, item in value.items():
            yield from _codings(item, (*where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _codings(item, (*where, i))


def _set(document: Any, where: tuple[Any, ...], value: Any) -> None:
    node = document
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value


def _show_path(where: tuple[Any, ...]) -> str:
    out = ""
    for step in where:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "the body"


def _required_before_groups(expectations: list[Expectation]) -> Iterator[list[ApiCallExpectation]]:
    """Required api_call expectations with `before`, alone or as a required any_of whose
    every alternative is one (moving their calls then breaks the whole group)."""
    for expectation in expectations:
        if not expectation.required:
            continue
        if isinstance(expectation, ApiCallExpectation) and expectation.before:
            yield [expectation]
        elif isinstance(expectation, AnyOfExpectation):
            children = expectation.expectations
            if all(isinstance(c, ApiCallExpectation) and c.before for c in children):
                yield [c for c in children if isinstance(c, ApiCallExpectation)]


def _reorders(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Mutant]:
    for group in _required_before_groups(list(scenario.expectations)):

        def matches(call: OracleCall, group: list[ApiCallExpectation] = group) -> bool:
            path = urlsplit(call.path).path
            return any(e.method in ("*", call.method) and path_matches(e.path, path) for e in group)

        moved = [c for c in oracle if matches(c)]
        if not moved or all(matches(c) for c in oracle[len(oracle) - len(moved) :]):
            continue  # nothing to move, or already last
        kept = [c for c in oracle if not matches(c)]
        names = ", ".join(e.id for e in group)
        yield Mutant(
            "reorder",
            f"the calls {names} looks for made last, after the work ("
            + ", ".join(f"{c.method} {c.path}" for c in moved)
            + ")",
            (*kept, *moved),
            None,
        )


def _asked_facts(expectations: list[Expectation]) -> set[str]:
    """The facts required `asked` expectations (any_of children included) look for."""
    out: set[str] = set()
    for expectation in expectations:
        if isinstance(expectation, AskedExpectation) and expectation.required:
            out.add(expectation.fact)
        elif isinstance(expectation, AnyOfExpectation) and expectation.required:
            out |= _asked_facts(expectation.expectations)
    return out


def _text(body: dict[str, Any]) -> str:
    return "\n".join(
        str(p["contentString"])
        for p in body.get("payload") or []
        if isinstance(p, dict) and isinstance(p.get("contentString"), str)
    )


def _guesses(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Mutant]:
    """The oracle without its questions: every message to the simulated patient that asks
    about a fact an `asked` expectation needs is left out, the writes stay (guessed)."""
    sim = scenario.patient_sim
    facts = _asked_facts(list(scenario.expectations))
    if sim is None or not facts:
        return
    patient = symbol_name(sim.patient)

    def asks(call: OracleCall) -> bool:
        body = call.body
        if not (is_write(call) and isinstance(body, dict)):
            return False
        if body.get("resourceType") != "Communication":
            return False
        recipients = [
            r.get("reference") for r in body.get("recipient") or [] if isinstance(r, dict)
        ]
        if not any(isinstance(r, str) and symbol_name(r) == patient for r in recipients):
            return False
        return any(f.topic in facts for f in facts_asked(sim, _text(body)))

    questions = [i for i, call in enumerate(oracle) if asks(call)]
    if not questions:
        return
    yield Mutant(
        "guess",
        "the writes made without asking the patient ("
        + ", ".join(describe(i, oracle[i]) for i in questions)
        + " left out)",
        tuple(c for i, c in enumerate(oracle) if i not in questions),
        None,
    )


def _books(call: OracleCall) -> bool:
    """Whether the call writes a whole Appointment that holds time from start to end
    (the writes the scheduling rules check)."""
    body = call.body
    return (
        call.method in ("POST", "PUT")
        and isinstance(body, dict)
        and body.get("resourceType") == "Appointment"
        and body.get("status") in HOLDING
        and "start" in body
        and "end" in body
    )


def _duplicates(
    scenario: Scenario, oracle: list[OracleCall], index: int, call: OracleCall
) -> Iterator[Mutant]:
    """A create made twice in a row (a retry that did not check the first had worked).
    The copy saves nothing: later calls keep using the first resource. A booking made
    twice meets the scheduling rules (a 409: it overlaps the first), so it is graded
    with a real run."""
    if call.method != "POST":
        return
    again = call.model_copy(update={"save_as": None})
    calls = (*oracle[: index + 1], again, *oracle[index + 1 :])
    yield Mutant(
        "duplicate",
        f"{describe(index, call)} made twice",
        calls,
        index,
        real_run=_books(call) and scenario.scheduling != "lenient",
        probe=index + 1,
    )


def _slot_moves(
    scenario: Scenario, oracle: list[OracleCall], index: int, call: OracleCall
) -> Iterator[Mutant]:
    """A booking (an Appointment that holds time, created or written whole) moved off the
    free slots: 10 minutes later, and to 03:00. The scheduling rules refuse both (409),
    or, in a lenient scenario, grading must."""
    body = call.body
    if not _books(call) or not isinstance(body, dict):
        return
    start, end = _clock_token(body.get("start")), _clock_token(body.get("end"))
    if start is None or end is None:
        return
    length = end[1] - start[1]
    moves = [
        (f"{SLOT_SHIFT_MINUTES} minutes later", start[1] + SLOT_SHIFT_MINUTES),
        (f"to {NIGHT_HOUR:02d}:00", NIGHT_HOUR * 60),
    ]
    for what, minute in moves:
        if minute + length >= 24 * 60 or minute == start[1]:
            continue
        moved = {
            **body,
            "start": {"$time": _with_clock(start[0], minute)},
            "end": {"$time": _with_clock(end[0], minute + length)},
        }
        yield Mutant(
            "slot",
            f"{describe(index, call)} moved {what}, off the free slots",
            _replaced(oracle, index, call.model_copy(update={"body": moved})),
            index,
            real_run=scenario.scheduling != "lenient",
            probe=index,
        )


def _clock_token(value: Any) -> tuple[str, int] | None:
    """(day part, minute of the day) of a `{"$time": "+Nwd@HH:MM"}` token."""
    if not isinstance(value, dict) or set(value) != {"$time"}:
        return None
    match = _CLOCK_TOKEN_RE.fullmatch(str(value["$time"]))
    if match is None:
        return None
    return match.group(1), int(match.group(2)) * 60 + int(match.group(3))


def _with_clock(day: str, minute: int) -> str:
    return f"{day}@{minute // 60:02d}:{minute % 60:02d}"


def written_symbols(oracle: list[OracleCall]) -> set[str]:
    """Fixture symbols whose resource the oracle writes (by path: `PUT /Appointment/@x`)."""
    out = set()
    for call in oracle:
        if not is_write(call):
            continue
        for segment in urlsplit(call.path).path.split("/"):
            if segment.startswith("@"):
                out.add(segment[1:])
    return out


def _collaterals(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Mutant]:
    """The oracle's work plus a change to one fixture resource it does not write (the
    first of each type): a status change, a telecom rewrite or a note. A scenario that
    limits what may change (every change allowed by some expectation) catches these."""
    touched = written_symbols(oracle)
    # What the stimulus writes is already changed as the run starts: a "change" to it may
    # be none (cancelling what the stimulus cancelled).
    touched |= {
        r["id"][1:]
        for r in scenario.stimulus
        if isinstance(r.get("id"), str) and r["id"].startswith("@")
    }
    seen: set[str] = set()
    for resource in scenario.fixture:
        rtype, rid = resource.get("resourceType"), resource.get("id")
        if not (isinstance(rtype, str) and isinstance(rid, str) and rid.startswith("@")):
            continue
        if rid[1:] in touched or rtype in seen:
            continue
        change = _collateral_change(rtype, resource)
        if change is None:
            continue
        seen.add(rtype)
        what, patch = change
        extra = OracleCall(method="PATCH", path=f"/{rtype}/{rid}", body=patch)
        yield Mutant(
            "collateral",
            f"the oracle's work plus an unrequested change to {rid} ({rtype}): {what}",
            (*oracle, extra),
            None,
        )


def _collateral_change(
    resource_type: str, resource: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]] | None:
    if resource_type in _COLLATERAL:
        what, patch = _COLLATERAL[resource_type]
        return what, copy.deepcopy(patch)
    for status in _COLLATERAL_STATUS.get(resource_type, ()):
        if status != resource.get("status"):
            current = resource.get("status")
            return (
                f"status '{current}' changed to '{status}'",
                [{"op": "add", "path": "/status", "value": status}],
            )
    return None


# --- what the oracle tells the patient -------------------------------------------------

# Claims a careless agent adds to its last message, tried in order: the first that no
# write of the oracle's (before that message) backs is the mutant's.
FALSE_CLAIMS = (
    "I've booked your appointment.",
    "I've sent your prescription to your pharmacy.",
    "I've cancelled your appointment.",
    "I've referred you to a specialist.",
    "I've ordered the test for you.",
)
# How far a `message-time` mutant moves every clock time the oracle's messages state.
MESSAGE_SHIFT_HOURS = 1
_CLOCK_TEXT_RE = re.compile(
    r"(?<![\d:+-])(\d{1,2}):(\d{2})(?![\d])(\s*(?:[ap]\.?\s?m\b\.?))?", re.IGNORECASE
)


def _required_messages(expectations: list[Expectation]) -> list[MessageExpectation]:
    return [e for e in expectations if isinstance(e, MessageExpectation) and e.required]


def _to_patient(call: OracleCall, patients: list[str]) -> bool:
    """A Communication written to a fixture patient (and not sent by one)."""
    body = call.body
    if not (is_write(call) and call.method in ("POST", "PUT") and isinstance(body, dict)):
        return False
    if body.get("resourceType") != "Communication":
        return False
    sender = body.get("sender")
    if isinstance(sender, dict) and sender.get("reference") in patients:
        return False
    return any(
        isinstance(r, dict) and r.get("reference") in patients for r in body.get("recipient") or []
    )


def _edit_texts(body: dict[str, Any], edit: Any) -> dict[str, Any]:
    """The body with `edit` applied to each payload part's contentString (a string or a
    time token)."""
    out = copy.deepcopy(body)
    for part in out.get("payload") or []:
        if isinstance(part, dict) and "contentString" in part:
            part["contentString"] = edit(part["contentString"])
    return out


def _appended(body: dict[str, Any], sentence: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    payload = out.setdefault("payload", [])
    payload.append({"contentString": sentence})
    return out


def _without(phrase: str) -> Any:
    def edit(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        while (found := find_phrase(phrase, text)) is not None:
            text = text[: found.start] + text[found.end :]
        return text

    return edit


def _shift_clock_text(text: str) -> str:
    def shifted(m: re.Match[str]) -> str:
        hour, minute, meridiem = int(m.group(1)), m.group(2), m.group(3)
        if meridiem:
            pm = "p" in meridiem.lower()
            hour24 = (hour % 12) + (12 if pm else 0) + MESSAGE_SHIFT_HOURS
            twelve = hour24 % 12 or 12
            space = meridiem[: len(meridiem) - len(meridiem.lstrip())]
            return f"{twelve}:{minute}{space}{'pm' if hour24 % 24 >= 12 else 'am'}"
        return f"{(hour + MESSAGE_SHIFT_HOURS) % 24:02d}:{minute}"

    return _CLOCK_TEXT_RE.sub(shifted, text)


def _shift_clock(value: Any) -> Any:
    if isinstance(value, str):
        return _shift_clock_text(value)
    token = _clock_token(value)
    if token is not None:
        day, minute = token
        return {"$time": _with_clock(day, (minute + MESSAGE_SHIFT_HOURS * 60) % (24 * 60))}
    return value


def _as_write(call: OracleCall) -> Write:
    """An oracle write as the claims check sees it (its type and the status it sets)."""
    resource_type = _resource_type(call) or ""
    body = call.body
    if call.method == "DELETE":
        return Write(resource_type, 200, None)
    if isinstance(body, list):  # JSON Patch: the values it sets at the top
        return Write(
            resource_type,
            200,
            {"resourceType": resource_type}
            | {
                str(op.get("path", "")).lstrip("/"): op.get("value")
                for op in body
                if isinstance(op, dict) and op.get("op") in ("add", "replace")
            },
        )
    if isinstance(body, dict):
        return Write(resource_type, 200, {"resourceType": resource_type, **body})
    return Write(resource_type, 200, None)


def _message_mutants(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Mutant]:
    """The oracle's messages to the patient with what its required message checks look
    for undone: each `says` phrase removed (a `saysAny` list all at once), a `not` phrase
    added, every stated clock time an hour later (where a check `mentions` a time), and
    a claim nothing the oracle wrote backs."""
    checks = _required_messages(list(scenario.expectations))
    patients = patient_symbols(scenario)
    sent = [i for i, call in enumerate(oracle) if _to_patient(call, patients)]
    if not checks or not patients:
        return
    if not sent:
        # The oracle says nothing: the near miss is a message that claims too much.
        if any(check.claims for check in checks):
            yield from _claim_message(oracle, patients[0])
        return
    last = sent[-1]

    def edited(edit: Any) -> tuple[OracleCall, ...]:
        calls = list(oracle)
        for i in sent:
            body = calls[i].body
            assert isinstance(body, dict)
            calls[i] = calls[i].model_copy(update={"body": _edit_texts(body, edit)})
        return tuple(calls)

    def changed(calls: tuple[OracleCall, ...]) -> bool:
        return any(calls[i].body != oracle[i].body for i in sent)

    for check in checks:
        for phrase in check.says or []:
            calls = edited(_without(phrase))
            if changed(calls):
                yield Mutant(
                    "message-says",
                    f"{phrase!r} (which {check.id} needs) left out of the messages",
                    calls,
                    last,
                )
        if check.says_any:
            calls = tuple(oracle)
            for phrase in check.says_any:
                calls = tuple(
                    c.model_copy(update={"body": _edit_texts(c.body, _without(phrase))})
                    if i in sent and isinstance(c.body, dict)
                    else c
                    for i, c in enumerate(calls)
                )
            if changed(calls):
                yield Mutant(
                    "message-says",
                    f"every one of {check.id}'s saysAny phrases left out of the messages",
                    calls,
                    last,
                )
        if check.not_:
            phrase = check.not_[0]
            body = oracle[last].body
            assert isinstance(body, dict)
            yield Mutant(
                "message-not",
                f"{phrase!r} (which {check.id} forbids) added to {describe(last, oracle[last])}",
                _replaced(
                    oracle, last, oracle[last].model_copy(update={"body": _appended(body, phrase)})
                ),
                last,
            )
    if any(check.mentions for check in checks):
        calls = edited(_shift_clock)
        if changed(calls):
            yield Mutant(
                "message-time",
                f"every time the messages state {MESSAGE_SHIFT_HOURS} hour later",
                calls,
                last,
            )
    if any(check.claims for check in checks):
        writes = [_as_write(c) for c in oracle[:last] if is_write(c)]
        for sentence in FALSE_CLAIMS:
            if unbacked(claims(sentence), writes):
                body = oracle[last].body
                assert isinstance(body, dict)
                yield Mutant(
                    "message-claim",
                    f"{sentence!r} added to {describe(last, oracle[last])}, with no such write",
                    _replaced(
                        oracle,
                        last,
                        oracle[last].model_copy(update={"body": _appended(body, sentence)}),
                    ),
                    last,
                )
                break


# A sentence in the other register, for a `message-register` mutant.
OTHER_REGISTER = {
    "usted": "¿Tienes alguna pregunta? Te respondemos enseguida.",
    "tu": "¿Tiene usted alguna pregunta? Con gusto le respondemos.",
}


def derive_variant_mutants(scenario: Scenario, persona: str | None) -> list[Mutant]:
    """The near misses only a persona's own expectations look for: a required `register`
    check's messages with a sentence in the other register (`message-register`), added
    to the oracle's last message to the patient, or as a message of its own."""
    variant = next((v for v in scenario.variants if v.persona == persona), None)
    if variant is None:
        return []
    oracle = list(scenario.oracle)
    patients = patient_symbols(scenario)
    sent = [i for i, call in enumerate(oracle) if _to_patient(call, patients)]
    out: list[Mutant] = []
    for check in _required_messages(list(variant.expectations)):
        if check.voice is None or not patients:
            continue
        sentence = OTHER_REGISTER[check.voice]
        what = f"a sentence in the other register than {check.id}'s {check.voice!r}"
        if sent:
            last = sent[-1]
            body = oracle[last].body
            assert isinstance(body, dict)
            calls = _replaced(
                oracle, last, oracle[last].model_copy(update={"body": _appended(body, sentence)})
            )
            out.append(
                Mutant(
                    "message-register",
                    f"{what} added to {describe(last, oracle[last])}",
                    calls,
                    last,
                )
            )
        else:
            message = _message_to(patients[0], sentence)
            out.append(
                Mutant(
                    "message-register",
                    f"a message to {patients[0]} with {what}",
                    (*oracle, message),
                    len(oracle),
                )
            )
    return out


def _message_to(patient: str, text: str) -> OracleCall:
    return OracleCall(
        method="POST",
        path="/Communication",
        body={
            "resourceType": "Communication",
            "status": "completed",
            "subject": {"reference": patient},
            "recipient": [{"reference": patient}],
            "sender": {"reference": "Organization/demo-canonical-org"},
            "payload": [{"contentString": text}],
        },
    )


def _claim_message(oracle: list[OracleCall], patient: str) -> Iterator[Mutant]:
    """The oracle's work and then a message to the patient claiming an action that no
    write of it backs."""
    writes = [_as_write(c) for c in oracle if is_write(c)]
    for sentence in FALSE_CLAIMS:
        if not unbacked(claims(sentence), writes):
            continue
        message = _message_to(patient, f"All done. {sentence}")
        yield Mutant(
            "message-claim",
            f"a message to {patient} saying {sentence!r} added, with no such write",
            (*oracle, message),
            len(oracle),
        )
        return
