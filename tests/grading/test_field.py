"""`field` expectations: a fixture resource as it reads now."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.grading.field import grade_field
from app.grading.snapshot import ChangedResource
from app.scenarios.schema import FieldExpectation
from tests.grading.test_fhirpath import (
    DR_KIM,
    T0,
    appointment,
    at,
    changed,
    context,
    expectation,
    fixture_current,
    make_snapshot,
    service_request,
)

CANCELLED = appointment("appt-1", status="cancelled") | {
    "cancelationReason": {"coding": [{"code": "pat"}]}
}


@dataclass
class Case:
    id: str
    target: str
    where: list[str]
    current: dict[str, Any | None]  # overrides of the fixture as it reads now
    passed: bool
    detail: str = ""
    failing: list[str] = field(default_factory=list)
    changed: list[ChangedResource] = field(default_factory=list)


CASES = [
    Case(
        "cancelled as asked",
        "@appt",
        ["status = 'cancelled'", "cancelationReason.coding.code contains 'pat'"],
        {"appt": CANCELLED},
        True,
        detail="Appointment/appt-1 matches",
    ),
    Case(
        "still booked",
        "@appt",
        ["status = 'cancelled'"],
        {},
        False,
        detail="fails: status = 'cancelled'",
        failing=["status = 'cancelled'"],
    ),
    Case(
        "one of two clauses fails",
        "@appt",
        ["status = 'booked'", "participant.actor.reference contains 'Practitioner/dr-kim'"],
        {},
        False,
        failing=["participant.actor.reference contains 'Practitioner/dr-kim'"],
    ),
    Case(
        "rescheduled to the other practitioner, a day or more out",
        "@appt",
        [
            "participant.actor.reference contains 'Practitioner/dr-kim'",
            "start >= %runStart + 1 day",
        ],
        {"appt": appointment("appt-1", practitioner=DR_KIM, start="2025-03-08T09:00:00+01:00")},
        True,
    ),
    Case(
        "bare symbol accepted",
        "referral",
        ["occurrence >= %runStart + 13 days"],
        {},
        True,
    ),
    Case(
        "choice element moved too early",
        "@referral",
        ["occurrence >= %runStart + 13 days"],
        {"referral": service_request("sr-1", occurrence="2025-03-09T10:00:00Z")},
        False,
        failing=["occurrence >= %runStart + 13 days"],
    ),
    Case(
        "deleted target",
        "@appt",
        ["status = 'cancelled'"],
        {"appt": None},
        False,
        detail="Appointment/appt-1 (@appt) is deleted or missing",
    ),
    Case(
        "unknown symbol",
        "@nothing",
        ["status = 'cancelled'"],
        {},
        False,
        detail="no fixture resource @nothing",
    ),
    Case(
        "an erroring clause fails with its error",
        "@appt",
        ["participant.actor.reference"],  # two items where one boolean belongs
        {},
        False,
        detail="returned 2 items",
        failing=["participant.actor.reference"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_grade_field(case: Case) -> None:
    exp = expectation(type="field", target=case.target, where=case.where)
    assert isinstance(exp, FieldExpectation)
    snapshot = make_snapshot(current=fixture_current() | case.current, changed=case.changed)
    result = grade_field(exp, snapshot, context(snapshot)).result

    assert result.passed is case.passed, result.detail
    assert case.detail in result.detail
    failing = [c["where"] for c in result.evidence.clauses if not c["holds"]]
    assert failing == case.failing
    if result.evidence.clauses:  # each clause's result is listed
        assert [c["where"] for c in result.evidence.clauses] == case.where
    if case.passed:
        assert result.evidence.matches == [
            "Appointment/appt-1" if "appt" in case.target else "ServiceRequest/sr-1"
        ]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([], T0),  # untouched during the run: it held from the start
        ([changed(CANCELLED, first=2, last=5)], at(5)),  # the body now is the last write
    ],
)
def test_field_first_at(changes: list[ChangedResource], expected: Any) -> None:
    exp = expectation(type="field", target="@appt", where=["status = 'cancelled'"])
    assert isinstance(exp, FieldExpectation)
    snapshot = make_snapshot(current=fixture_current() | {"appt": CANCELLED}, changed=changes)
    graded = grade_field(exp, snapshot, context(snapshot))
    assert graded.result.passed is True
    assert graded.first_at == expected
