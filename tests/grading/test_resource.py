"""`resource` expectations: where clauses, count, scope, closest-candidate evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.grading.resource import grade_resource, on_fixture_patients
from app.grading.snapshot import ChangedResource
from app.scenarios.schema import ResourceExpectation
from tests.grading.test_fhirpath import (
    DR_KIM,
    OTHER_PATIENT,
    PATIENT,
    appointment,
    at,
    changed,
    communication,
    context,
    expectation,
    make_snapshot,
    service_request,
    task,
)

BOOKED_WITH_LEE = [
    "status = 'booked'",
    "participant.where(actor.reference = 'Practitioner/' + %fixture.doc).exists()",
    "start >= %runStart + 1 day",
]


@dataclass
class Case:
    id: str
    exp: dict[str, Any]
    changed: list[ChangedResource]
    passed: bool
    matches: list[str] = field(default_factory=list)
    closest: str | None = None
    detail: str = ""  # a substring of the detail
    failing: list[str] = field(default_factory=list)  # clauses reported as not holding
    first_at: float | None = None  # minutes after the run start


CASES = [
    Case(
        "booked with the requested practitioner",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [changed(appointment("a1"), first=3)],
        True,
        matches=["Appointment/a1"],
        first_at=3,
    ),
    Case(
        "wrong practitioner: closest names the failing clause",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [changed(appointment("a1", practitioner=DR_KIM), first=3)],
        False,
        closest="Appointment/a1",
        failing=[BOOKED_WITH_LEE[1]],
        detail="closest Appointment/a1 fails: participant.where",
    ),
    Case(
        "too soon: the date clause fails",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [changed(appointment("a1", start="2025-03-07T15:00:00-05:00"))],
        False,
        closest="Appointment/a1",
        failing=["start >= %runStart + 1 day"],
    ),
    Case(
        "closest is the candidate with the most clauses holding",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [
            changed(appointment("a1", status="proposed", practitioner=DR_KIM), first=1),
            changed(appointment("a2", status="proposed"), first=2),
            changed(appointment("a3", status="cancelled", practitioner=DR_KIM), first=3),
        ],
        False,
        closest="Appointment/a2",
        failing=["status = 'booked'"],
    ),
    Case(
        "closest tie goes to the latest write",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [
            changed(appointment("a1", status="proposed"), first=1, last=6),
            changed(appointment("a2", status="pending"), first=2, last=4),
        ],
        False,
        closest="Appointment/a1",
    ),
    Case(
        "nothing written",
        {"resourceType": "Appointment", "where": BOOKED_WITH_LEE},
        [changed(task("t1"))],
        False,
        detail="no Appointment changed on the fixture patients during the run",
    ),
    Case(
        "a deleted resource is not present",
        {"resourceType": "Appointment"},
        [changed(appointment("a1"), deleted=True)],
        False,
        detail="no Appointment changed",
    ),
    Case(
        "no where: any change of the type counts",
        {"resourceType": "Task"},
        [changed(task("t1"), first=2), changed(task("t2"), first=1)],
        True,
        matches=["Task/t2", "Task/t1"],
        first_at=1,
    ),
    Case(
        "task owner and priority",
        {
            "resourceType": "Task",
            "where": ["owner.reference = 'Practitioner/' + %fixture.doc", "priority = 'urgent'"],
        },
        [
            changed(task("t1", priority="routine"), first=1),
            changed(task("t2", priority="urgent"), first=2),
        ],
        True,
        matches=["Task/t2"],
        first_at=2,
    ),
    Case(
        "task owned by someone else",
        {"resourceType": "Task", "where": ["owner.reference = 'Practitioner/' + %fixture.doc"]},
        [changed(task("t1", owner=DR_KIM))],
        False,
        closest="Task/t1",
        failing=["owner.reference = 'Practitioner/' + %fixture.doc"],
    ),
    Case(
        "communication to the patient in response to theirs",
        {
            "resourceType": "Communication",
            "where": [
                "recipient.reference contains 'Patient/' + %fixture.patient",
                "inResponseTo.reference contains 'Communication/c-in'",
                "payload.content.exists()",  # contentString by its FHIRPath name
            ],
        },
        [
            changed(
                communication("c1", text="Booked Monday 9:00", in_response_to="Communication/c-in")
            )
        ],
        True,
        matches=["Communication/c1"],
        first_at=1,
    ),
    Case(
        "service request occurrence (choice element) with date arithmetic",
        {"resourceType": "ServiceRequest", "where": ["occurrence >= %runStart + 3 days"]},
        [
            changed(service_request("sr-2", occurrence="2025-03-09T10:00:00Z"), first=1),
            changed(service_request("sr-3", occurrence="2025-03-12T10:00:00Z"), first=2),
        ],
        True,
        matches=["ServiceRequest/sr-3"],
        first_at=2,
    ),
    Case(
        "%current: the new appointment starts when the fixture referral is due",
        {"resourceType": "Appointment", "where": ["start >= %current.referral.occurrence"]},
        [
            changed(appointment("a1", start="2025-03-19T09:00:00Z")),
            changed(appointment("a2", start="2025-03-20T11:00:00+01:00")),
        ],
        True,
        matches=["Appointment/a2"],
        first_at=1,
    ),
    # count
    Case(
        "count min 2 with one match",
        {"resourceType": "Task", "count": {"min": 2}},
        [changed(task("t1"))],
        False,
        matches=["Task/t1"],
        detail="1 matching Task on the fixture patients, expected at least 2",
    ),
    Case(
        "count min 2 met",
        {"resourceType": "Task", "count": {"min": 2}},
        [changed(task("t1"), first=4), changed(task("t2"), first=5)],
        True,
        matches=["Task/t1", "Task/t2"],
        first_at=4,
    ),
    Case(
        "count max 1 exceeded lists the offenders",
        {"resourceType": "Appointment", "where": ["status = 'booked'"], "count": {"max": 1}},
        [
            changed(appointment("a1"), first=1),
            changed(appointment("a2"), first=2),
            changed(appointment("a3", status="cancelled"), first=3),
        ],
        False,
        matches=["Appointment/a1", "Appointment/a2"],
        detail="2 matching Appointment on the fixture patients, expected 0 to 1",
    ),
    Case(
        "count with only max is a ceiling: none is fine",
        {"resourceType": "Appointment", "count": {"max": 2}},
        [],
        True,
        detail="0 matching Appointment",
    ),
    Case(
        "max 0 holds when nothing happened, with no first_at",
        {"resourceType": "Appointment", "where": ["status = 'cancelled'"], "count": {"max": 0}},
        [changed(appointment("a1"))],
        True,
        detail="0 matching Appointment",
    ),
    Case(
        "max 0 violated",
        {"resourceType": "Appointment", "where": ["status = 'cancelled'"], "count": {"max": 0}},
        [changed(appointment("a1", status="cancelled"), first=7)],
        False,
        matches=["Appointment/a1"],
        detail="expected none",
    ),
    Case(
        "min 0 max 3 with nothing",
        {"resourceType": "Task", "count": {"min": 0, "max": 3}},
        [],
        True,
    ),
    # scope
    Case(
        "patient scope ignores other patients' resources",
        {"resourceType": "Appointment"},
        [changed(appointment("a1", patient=OTHER_PATIENT))],
        False,
        detail="no Appointment changed on the fixture patients",
    ),
    Case(
        "tenant scope counts them",
        {"resourceType": "Appointment", "scope": "tenant"},
        [changed(appointment("a1", patient=OTHER_PATIENT))],
        True,
        matches=["Appointment/a1"],
        first_at=1,
    ),
    Case(
        "tenant scope counts tenant-wide resources without a run",
        {"resourceType": "Task", "scope": "tenant", "count": {"max": 0}},
        [changed(task("t1", patient=OTHER_PATIENT), run_id=None)],
        False,
        matches=["Task/t1"],
    ),
    Case(
        "patient scope: the fixture patient itself",
        {"resourceType": "Patient", "where": ["telecom.where(system = 'phone').exists()"]},
        [
            changed(
                {
                    "resourceType": "Patient",
                    "id": "pat-1",
                    "telecom": [{"system": "phone", "value": "555-0100"}],
                }
            )
        ],
        True,
        matches=[PATIENT],
        first_at=1,
    ),
    Case(
        "a clause that errors does not hold and carries the error",
        {"resourceType": "Appointment", "where": ["participant.actor.reference = %undefined"]},
        [changed(appointment("a1"))],
        False,
        closest="Appointment/a1",
        failing=["participant.actor.reference = %undefined"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_grade_resource(case: Case) -> None:
    exp = expectation(type="resource", **case.exp)
    assert isinstance(exp, ResourceExpectation)
    snapshot = make_snapshot(changed=case.changed)
    graded = grade_resource(exp, snapshot, context(snapshot))
    result = graded.result

    assert result.passed is case.passed, result.detail
    assert result.evidence.matches == case.matches
    assert result.evidence.closest == case.closest
    assert case.detail in result.detail
    failing = [c["where"] for c in result.evidence.clauses if not c["holds"]]
    if case.failing:
        assert failing == case.failing
        assert all(w in result.detail for w in case.failing)
    if case.closest:  # every clause's result is shown for the closest candidate
        assert len(result.evidence.clauses) == len(exp.where)
    assert graded.first_at == (None if case.first_at is None else at(case.first_at))
    assert result.score == (1.0 if case.passed else 0.0)


def test_erroring_clause_shows_its_error() -> None:
    exp = expectation(type="resource", resourceType="Appointment", where=["start > %nope"])
    assert isinstance(exp, ResourceExpectation)
    snapshot = make_snapshot(changed=[changed(appointment("a1"))])
    result = grade_resource(exp, snapshot, context(snapshot)).result
    assert result.passed is False
    assert "undefined environment variable" in result.evidence.clauses[0]["error"]


def test_a_guard_counts_what_it_cannot_evaluate() -> None:
    """Fail safe: a must-not-happen check whose clause errors on a resource (here:
    startsWith on the references of two participants) counts that resource against its
    ceiling, instead of reading the error as "did not happen"."""
    guard = expectation(
        type="resource",
        resourceType="Appointment",
        where=["participant.actor.reference.startsWith('Practitioner/')"],
        count={"max": 0},
    )
    assert isinstance(guard, ResourceExpectation)
    snapshot = make_snapshot(changed=[changed(appointment("a1"))])
    result = grade_resource(guard, snapshot, context(snapshot)).result
    assert result.passed is False
    assert "could not be evaluated" in result.detail
    assert result.evidence.closest == "Appointment/a1"
    assert "Expected string" in result.evidence.clauses[0]["error"]
    # A clean miss is not a possible match: the guard holds.
    clean = expectation(
        type="resource",
        resourceType="Appointment",
        where=["status = 'cancelled'"],
        count={"max": 0},
    )
    assert isinstance(clean, ResourceExpectation)
    assert grade_resource(clean, snapshot, context(snapshot)).result.passed is True


def test_out_of_scope_changes_are_noted() -> None:
    exp = expectation(type="resource", resourceType="Appointment")
    assert isinstance(exp, ResourceExpectation)
    snapshot = make_snapshot(changed=[changed(appointment("a1", patient=OTHER_PATIENT))])
    result = grade_resource(exp, snapshot, context(snapshot)).result
    assert result.evidence.note is not None
    assert "1 Appointment changed outside the fixture patients" in result.evidence.note


@pytest.mark.parametrize(
    ("body", "run_id", "expected"),
    [
        (appointment("a1"), "run-1", True),
        (appointment("a1", patient=OTHER_PATIENT), "run-1", False),
        (appointment("a1"), None, False),  # tenant-wide: scope tenant only
        ({"resourceType": "Patient", "id": "pat-1"}, "run-1", True),
        ({"resourceType": "Patient", "id": "pat-9"}, "run-1", False),
        (communication("c1", text="hi", recipient=OTHER_PATIENT), "run-1", True),  # subject
    ],
)
def test_on_fixture_patients(body: dict[str, Any], run_id: str | None, expected: bool) -> None:
    assert on_fixture_patients(changed(body, run_id=run_id), frozenset({PATIENT})) is expected
