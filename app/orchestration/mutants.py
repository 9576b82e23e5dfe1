"""Near-miss solutions derived from a scenario's oracle (pure).

A scenario is a weak test when a solution that is *almost* right still passes. The
mutants here are the near misses an agent really makes: a write left out, a write for
the wrong patient, a wrong code or status, a lookup done after acting instead of
before, the right writes made without asking the simulated patient first (a guess).
Every mutant must fail at least one required expectation (`app.orchestration.check`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.fhir.validation import required_codes
from app.grading.api_call import path_matches
from app.patient_sim.engine import facts_asked
from app.scenarios.schema import (
    AnyOfExpectation,
    ApiCallExpectation,
    AskedExpectation,
    Expectation,
    OracleCall,
    Scenario,
    symbol_name,
)

# The patient a write is redirected to when the fixture has only one: nobody's chart.
OTHER_PATIENT = "Patient/understudy-other-patient"
# Top-level coded elements whose value is swapped, and the wrong value tried first.
_CODED_ELEMENTS = {"status": "entered-in-error", "intent": "proposal", "priority": "routine"}
_SECOND_CHOICE = {"status": "cancelled", "intent": "plan", "priority": "stat"}
_WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Mutant:
    kind: str  # drop | redirect | code | reorder | guess
    description: str
    calls: tuple[OracleCall, ...]
    call_index: int | None  # the oracle call mutated (None for reorder)


def is_write(call: OracleCall) -> bool:
    path = urlsplit(call.path).path
    return (
        call.method in _WRITE_METHODS
        and not path.startswith("/api/")
        and "$" not in path
        and not path.endswith("/_search")
        and path not in ("", "/")
    )


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
    mutants.extend(_reorders(scenario, oracle))
    mutants.extend(_guesses(scenario, oracle))
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
