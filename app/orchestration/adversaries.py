"""Adversaries the scenario check makes itself, from the consequential table
(`app.scenarios.consequential`) rather than from cases someone thought of:

- `element` mutants (must fail): for every consequential element of every oracle write,
  the same write with that element changed to another valid value — another status,
  intent or priority; another practitioner of the directory, or the look-alike resource,
  where it names one; another code of the same system; a start five weeks later; a
  visit 90 minutes longer; a participant who declined; the work deferred a year; an
  expedited priority or a do-not-perform added where the reference leaves it out;
- `delete` mutants (must fail): the reference solution, then a delete of each fixture
  resource;
- `free` alternatives (must pass): for every free choice, the reference solution with
  that element changed to another value satisfying every constraint the scenario gives
  it (another start, practitioner, code or priority, tried in a fixed order; the first
  that satisfies them all is used, and a choice none satisfies is reported).

Mutants change a body after its symbols and time tokens are expanded (`expanded`), so
they apply to any scenario's writes without knowing how they were written.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from app.errors import AppError
from app.fhir import writes
from app.fhir.validation import required_codes
from app.grading.changes import WITHDRAWN
from app.grading.fhirpath import FhirPathContext
from app.grading.snapshot import RunSnapshot
from app.orchestration.mutants import OTHER_PATIENT, Mutant, describe
from app.orchestration.rewrites import Rewrite
from app.scenarios.calls import is_write
from app.scenarios.consequential import MESSAGE_TYPES, TABLE, Element
from app.scenarios.expansion import ExpansionError, expand_value
from app.scenarios.free import free_choices
from app.scenarios.schema import FreeChoice, OracleCall, Scenario
from app.tenants.directory import CLINICIANS

Transform = Callable[[OracleCall, Any], Any]
# What a message is graded on by the end-state comparison (the rest is text truth's).
MESSAGE_ELEMENTS = frozenset({"status", "recipient", "subject"})

# The directory's practitioners a changed reference points at instead (the first that
# is not the one named): a dermatologist first, the look-alike of a referral mistake.
DIRECTORY_PRACTITIONERS = tuple(
    f"Practitioner/{c.id}" for c in sorted(CLINICIANS, key=lambda c: c.specialty != "Dermatology")
)
FIVE_WEEKS = timedelta(weeks=5)
LONGER = timedelta(minutes=90)
DEFERRED = timedelta(days=365)
# Moves tried for a free start, in order: nearby first.
_SHIFTS = tuple(
    timedelta(minutes=m)
    for m in (-30, 30, -60, 60, -90, 90, 120, -120, 1440, 2880, 4320, 1410, 1470, 10080, -1440)
)
_PRIORITIES = ("routine", "urgent", "asap", "stat")
_LITERAL_RE = re.compile(r"'([^']*)'")
_TIME_PATHS = ("start", "occurrence", "effective")


def refs_with_saves(scenario: Scenario, before: RunSnapshot) -> dict[str, str]:
    """The fixture's references, and a stand-in for each resource an oracle call saves
    (`saveAs`), so a body naming one can be expanded to try values on."""
    refs = dict(before.fixture)
    for call in scenario.oracle:
        kind = urlsplit(call.path).path.strip("/").split("/", 1)[0]
        if call.save_as is not None:
            refs.setdefault(call.save_as, f"{kind}/replay-saved-{call.save_as}")
    return refs


def _target(call: OracleCall) -> str | None:
    segments = [s for s in urlsplit(call.path).path.split("/") if s]
    if not is_write(call) or call.method not in ("POST", "PUT") or not segments:
        return None
    return segments[0]


def _only(call: OracleCall, change: Callable[[dict[str, Any]], None]) -> Transform:
    def apply(seen: OracleCall, body: Any) -> Any:
        if seen != call or not isinstance(body, dict):
            return body
        out = copy.deepcopy(body)
        change(out)
        return out

    return apply


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str) or "T" not in value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _choice_key(body: dict[str, Any], stem: str) -> str | None:
    if stem in body:
        return stem
    return next(
        (k for k in body if k.startswith(stem) and k[len(stem) : len(stem) + 1].isupper()), None
    )


def _shift(body: dict[str, Any], stem: str, by: timedelta, *, keep_length: bool) -> bool:
    """Move a time element (a dateTime, or a Period's start and end) by `by`."""
    key = _choice_key(body, stem)
    if key is None:
        return False
    value = body[key]
    if isinstance(value, str) and (moment := _instant(value)) is not None:
        body[key] = _text(moment + by)
        if keep_length and stem == "start" and (end := _instant(body.get("end"))) is not None:
            body["end"] = _text(end + by)
        return True
    if isinstance(value, dict):
        moved = False
        for part in ("start", "end"):
            if (moment := _instant(value.get(part))) is not None:
                value[part] = _text(moment + by)
                moved = True
        return moved
    return False


Change = Callable[[dict[str, Any]], None]


def _setter(path: str, value: Any) -> Change:
    def change(body: dict[str, Any]) -> None:
        body[path] = value

    return change


def _mover(path: str, by: timedelta) -> Change:
    def change(body: dict[str, Any]) -> None:
        _shift(body, path, by, keep_length=True)

    return change


def _lengthen(by: timedelta) -> Change:
    def change(body: dict[str, Any]) -> None:
        end = _instant(body.get("end"))
        if end is not None:
            body["end"] = _text(end + by)
        if isinstance(body.get("minutesDuration"), int):
            body["minutesDuration"] += int(by.total_seconds() // 60)

    return change


def _other_code(resource_type: str, element: Element, current: Any) -> Any:
    if element.path == "priority":
        expedited = current in ("urgent", "asap", "stat")
        return "routine" if expedited else "stat"
    if isinstance(current, bool):
        return not current
    grouped = next((g for g in element.groups if current in g), frozenset({current}))
    return next((c for c in required_codes(resource_type, element.path) if c not in grouped), None)


def _other_reference(ref: str, fixture_refs: list[str]) -> str:
    kind = ref.split("/", 1)[0]
    if kind in ("Practitioner", "PractitionerRole"):
        return next(p for p in DIRECTORY_PRACTITIONERS if not ref.endswith(p.rsplit("-", 1)[1]))
    if kind == "Patient":
        return next(
            (r for r in fixture_refs if r.startswith("Patient/") and r != ref), OTHER_PATIENT
        )
    same = [r for r in fixture_refs if r.startswith(kind + "/") and r != ref]
    return same[0] if same else f"{kind}/understudy-other-{kind.lower()}"


def _references(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("reference"), str)]


def _codings(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            out += [c for c in item.get("coding") or [] if isinstance(c, dict) and c.get("code")]
    return out


def _element_changes(
    resource_type: str, body: dict[str, Any], fixture_refs: list[str]
) -> Iterator[tuple[str, Callable[[dict[str, Any]], None]]]:
    """(what changes, how) for each consequential element of one expanded body. A
    message is read as a conversation (to whom, about whom, sent): only those change."""
    for element in TABLE.get(resource_type, ()):
        path, kind = element.path, element.kind
        if resource_type in MESSAGE_TYPES and path not in MESSAGE_ELEMENTS:
            continue
        value = body.get(path)
        if kind == "value":
            if value is None:
                if element.always and path in ("priority", "doNotPerform"):
                    added: Any = True if path == "doNotPerform" else "stat"
                    yield f"{path} {added!r} added", _setter(path, added)
                continue
            other = _other_code(resource_type, element, value)
            if other is not None and other != value:
                yield f"{path} {other!r} instead of {value!r}", _setter(path, other)
        elif kind == "concept":
            codings = _codings(value)
            if codings:
                code = str(codings[0]["code"])

                def recode(b: dict[str, Any], p: str = path, c: str = code) -> None:
                    for coding in _codings(b.get(p)):
                        if coding.get("code") == c:
                            coding["code"] = f"{c}-other"
                            coding.pop("display", None)

                yield f"{path} code {code}-other instead of {code}", recode
        elif kind == "time" and _choice_key(body, path) is not None:
            yield f"{path} five weeks later", _mover(path, FIVE_WEEKS)
        elif kind == "duration" and _instant(body.get("end")) is not None:
            yield "90 minutes longer", _lengthen(LONGER)
        elif (
            kind == "participant"
            and isinstance(value, list)
            # Of a cancelled visit, who declined no longer matters: no near miss there.
            and body.get("status") not in WITHDRAWN
        ):
            for index, participant in enumerate(value):
                actor = str((participant.get("actor") or {}).get("reference", ""))
                if not actor or actor.startswith("Location/"):
                    continue

                def decline(b: dict[str, Any], i: int = index) -> None:
                    b["participant"][i]["status"] = "declined"

                yield f"participant {actor} declined", decline
        elif kind == "deferral" and value is None and path == "restriction":
            start = _instant(body.get("authoredOn")) or datetime.now(UTC)

            def defer(b: dict[str, Any], s: datetime = start) -> None:
                b["restriction"] = {"period": {"start": _text(s + DEFERRED)}}

            yield "deferred a year", defer


def _symbolic(text: str, before: RunSnapshot) -> str:
    """A description with the run's ids written as the scenario's symbols (the same
    mutant reads the same in every run)."""
    for symbol, ref in sorted(before.fixture.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(ref, f"{ref.split('/', 1)[0]}/@{symbol}")
    return text


def _reference_mutants(
    scenario: Scenario,
    index: int,
    call: OracleCall,
    resource_type: str,
    before: RunSnapshot,
    frees: dict[str, FreeChoice],
    refs: dict[str, str],
    fp: FhirPathContext,
) -> list[Mutant]:
    """A reference element of an oracle write pointed elsewhere, written as the scenario
    writes it (`@symbol`), so the mutant is the same in every run: a patient's to the
    other fixture patient (or nobody's chart), a practitioner's to another of the
    directory, anything else's to another fixture resource of its type."""
    body = call.body
    assert isinstance(body, dict)
    kinds = {sym: ref.split("/", 1)[0] for sym, ref in before.fixture.items()}
    out: list[Mutant] = []
    for element in TABLE.get(resource_type, ()):
        if element.kind != "reference":
            continue
        if resource_type in MESSAGE_TYPES and element.path not in MESSAGE_ELEMENTS:
            continue
        named = _references(body.get(element.path))
        if not named:
            continue
        old = str(named[0]["reference"])
        if old.startswith("@"):
            kind = kinds.get(old[1:], "")
            others = sorted(f"@{s}" for s, k in kinds.items() if k == kind and f"@{s}" != old)
            new = (
                others[0]
                if others
                else (
                    OTHER_PATIENT
                    if kind == "Patient"
                    else f"{kind}/understudy-other-{kind.lower()}"
                )
            )
        else:
            new = _other_reference(old, [])
        changed = copy.deepcopy(body)
        for r in _references(changed.get(element.path)):
            if r["reference"] == old:
                r["reference"] = new
                r.pop("display", None)
                break
        choice = frees.get(element.path)
        if choice is not None:
            try:
                tried = expand_value(changed, refs, before.started_at)
            except ExpansionError:
                continue
            if all(fp.check(where, tried).holds for where in choice.where):
                continue  # another value its free choice allows: not a near miss
        calls = tuple(
            call.model_copy(update={"body": changed}) if i == index else c
            for i, c in enumerate(scenario.oracle)
        )
        out.append(
            Mutant(
                "element",
                f"{describe(index, call)} with {element.path} {new} instead of {old}",
                calls,
                index,
            )
        )
    return out


def derive_element_mutants(scenario: Scenario, before: RunSnapshot) -> list[Mutant]:
    """The `element` and `delete` mutants of a scenario, from the run's starting point."""
    oracle = tuple(scenario.oracle)
    fixture_refs = sorted(before.fixture.values())
    refs = refs_with_saves(scenario, before)
    fp = FhirPathContext.from_snapshot(before)
    out: list[Mutant] = []
    for index, call in enumerate(oracle):
        resource_type = _target(call)
        if resource_type is None or not isinstance(call.body, dict):
            continue
        try:
            body = expand_value(call.body, refs, before.started_at)
        except ExpansionError:
            continue
        frees = {c.path: c for c in free_choices(scenario)[0] if c.resource_type == resource_type}
        for what, change in _element_changes(resource_type, body, fixture_refs):
            choice = frees.get(what.split(" ", 1)[0])
            if choice is not None:
                # A free element changed: a near miss only where its constraints say no
                # (another priority than the two allowed); one they allow is a rewrite.
                tried = copy.deepcopy(body)
                change(tried)
                if all(fp.check(where, tried).holds for where in choice.where):
                    continue
            # A booking moved or lengthened meets the scheduling rules, which read the
            # tenant's Slots (not in a snapshot): graded with a real run, and a booking
            # the API refuses could not be made at all (caught).
            booking = resource_type == "Appointment" and what.startswith(("start ", "90 "))
            out.append(
                Mutant(
                    "element",
                    f"{describe(index, call)} with {_symbolic(what, before)}",
                    oracle,
                    index,
                    real_run=booking,
                    probe=index if booking else None,
                    expanded=_only(call, change),
                )
            )
        out += _reference_mutants(scenario, index, call, resource_type, before, frees, refs, fp)
    for symbol, ref in sorted(before.fixture.items()):
        if before.current.get(symbol) is None:
            continue
        kind = ref.split("/", 1)[0]
        delete = OracleCall(method="DELETE", path=f"/{kind}/@{symbol}")
        out.append(Mutant("delete", f"then {kind} @{symbol} deleted", (*oracle, delete), None))
    return out


# --- free alternatives --------------------------------------------------------------------


def _literals(choice: FreeChoice) -> list[str]:
    return [m for where in choice.where for m in _LITERAL_RE.findall(where)]


def _candidates(
    choice: FreeChoice, body: dict[str, Any], fixture_refs: list[str]
) -> Iterator[tuple[str, Callable[[dict[str, Any]], None]]]:
    path = choice.path
    if path in _TIME_PATHS:
        for by in _SHIFTS:
            minutes = int(by.total_seconds() // 60)
            yield f"{path} moved {minutes:+d} min", _mover(path, by)
    elif path == "duration":
        for minutes in (30, 15, -15, 60):
            yield f"{minutes:+d} min longer", _lengthen(timedelta(minutes=minutes))
    elif path == "participant.actor":
        refs = [lit for lit in _literals(choice) if lit.startswith("Practitioner")]
        for ref in [*refs, *DIRECTORY_PRACTITIONERS]:

            def practitioner(b: dict[str, Any], r: str = ref) -> None:
                for p in b.get("participant") or []:
                    actor = p.get("actor") or {}
                    if str(actor.get("reference", "")).startswith("Practitioner"):
                        p["actor"] = {"reference": r}

            yield f"practitioner {ref}", practitioner
    elif path == "priority":
        for value in _PRIORITIES:
            yield f"priority {value!r}", _setter("priority", value)
    else:
        literals = _literals(choice)
        refs = [lit for lit in literals if "/" in lit and not lit.startswith("http")]
        # A type the constraints name (`'MedicationRequest/' + %fixture.x`): its fixture
        # resources are candidates too.
        prefixes = tuple(r for r in refs if r.endswith("/"))
        named = [r for r in fixture_refs if prefixes and r.startswith(prefixes)]
        for ref in [*refs, *named, *DIRECTORY_PRACTITIONERS, "Organization/demo-canonical-org"]:
            if ref.endswith("/"):
                continue
            yield f"{path} {ref}", _setter(path, [{"reference": ref}])
            yield f"{path} {ref}", _setter(path, {"reference": ref})
        systems = [lit for lit in literals if lit.startswith("http")]
        codes = [lit for lit in literals if lit not in systems and "/" not in lit]
        for system in systems:
            for code in codes:
                concept = {"coding": [{"system": system, "code": code}]}
                what = f"{path} {system.rsplit('/', 1)[-1]}|{code}"
                yield what, _setter(path, concept)
                yield what, _setter(path, [concept])


def _valid(resource_type: str, body: dict[str, Any]) -> bool:
    try:
        writes.validated(resource_type, copy.deepcopy(body))
    except AppError:
        return False
    return True


def _changed_strings(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
    """Top-level strings (and a Period's) a change replaced: old -> new."""
    out: dict[str, str] = {}
    for key, old in before.items():
        new = after.get(key)
        if isinstance(old, str) and isinstance(new, str) and old != new:
            out[old] = new
        elif isinstance(old, dict) and isinstance(new, dict):
            out.update(_changed_strings(old, new))
    return out


def _substitute(value: Any, strings: dict[str, str]) -> Any:
    if isinstance(value, str):
        return strings.get(value, value)
    if isinstance(value, dict):
        return {k: _substitute(v, strings) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, strings) for v in value]
    return value


def _everywhere(call: OracleCall, change: Change, strings: dict[str, str]) -> Transform:
    """`change` on `call`'s body, and the values it replaced replaced alike in every
    other call (a confirmation that states the booked time states the new one)."""
    own = _only(call, change)

    def apply(seen: OracleCall, body: Any) -> Any:
        if seen == call:
            return own(seen, body)
        return _substitute(body, strings)

    return apply


def derive_free_alternatives(
    scenario: Scenario, before: RunSnapshot
) -> tuple[list[Rewrite], list[str]]:
    """One alternative per free choice that satisfies its constraints, as a rewrite that
    must pass; and the free choices for which none of the tried values did."""
    fp = FhirPathContext.from_snapshot(before)
    rewrites: list[Rewrite] = []
    unmet: list[str] = []
    oracle = tuple(scenario.oracle)
    refs = refs_with_saves(scenario, before)
    choices, inferred = free_choices(scenario)
    for choice in choices:
        made = False
        for index, call in enumerate(oracle):
            if _target(call) != choice.resource_type or not isinstance(call.body, dict):
                continue
            try:
                body = expand_value(call.body, refs, before.started_at)
            except ExpansionError:
                continue
            original = copy.deepcopy(body)
            for what, change in _candidates(choice, body, sorted(before.fixture.values())):
                tried = copy.deepcopy(body)
                change(tried)
                if tried == original:
                    continue
                if not _valid(choice.resource_type, tried):
                    continue  # e.g. a list where FHIR has one value: not a write at all
                if all(fp.check(where, tried).holds for where in choice.where):
                    rewrites.append(
                        Rewrite(
                            "free",
                            f"{describe(index, call)} with {what} (free: {choice.path})",
                            oracle,
                            _everywhere(call, change, _changed_strings(original, tried)),
                        )
                    )
                    made = True
                    break
            if made:
                break
        if not made and not inferred:
            # A declared choice nothing meets is a mistake in the scenario; an inferred
            # one whose conditions pin one value (`start = %current.appt.start`) is no
            # choice at all.
            unmet.append(f"{choice.resource_type}.{choice.path}")
    return rewrites, unmet
