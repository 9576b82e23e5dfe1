"""`api_call` expectations: method, path glob, status, count, `before`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from app.grading.api_call import grade_api_call, path_matches
from app.grading.snapshot import Call, Graded
from app.scenarios.schema import ApiCallExpectation
from tests.grading.test_fhirpath import at, call, expectation, make_snapshot
from understudy_client.contract.runs import Evidence, ExpectationResult


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("/Patient/*", "/Patient/abc", True),
        ("/Patient/*", "/Patient/abc/_history/1", False),
        ("/Patient/*", "/Patient", False),
        ("/Patient/**", "/Patient/abc/_history/1", True),
        ("/**", "/Patient/abc/_history/1", True),
        ("/**", "/Slot", True),
        ("/**", "/.well-known/smart-configuration", True),
        ("/**", "/api/eligibility/$check", True),
        ("/Appointment/$find", "/Appointment/$find", True),  # `$` is literal
        ("/Appointment/$find", "/Appointment/find", False),
        ("/Appointment/*/$cancel", "/Appointment/appt-1/$cancel", True),
        ("/{Slot,Schedule}", "/Slot", True),
        ("/{Slot,Schedule}", "/Schedule", True),
        ("/{Slot,Schedule}", "/Slots", False),
        ("/{Appointment,Task}/*", "/Task/t-1", True),
        ("/api/**/$check", "/api/eligibility/$check", True),
        ("/Slot", "/slot", False),  # case-sensitive, as FHIR types are
        ("/Slot", "/Slot", True),
    ],
)
def test_path_glob(pattern: str, path: str, expected: bool) -> None:
    assert path_matches(pattern, path) is expected


def decided_at(minute: float | None, label: str = "appointment booked") -> Graded:
    """The `before` target: held from `minute` on, or not (yet) when None."""
    result = ExpectationResult(
        id="booked",
        label=label,
        type="resource",
        required=True,
        weight=1.0,
        passed=minute is not None,
        score=1.0 if minute is not None else 0.0,
        evidence=Evidence(matches=[]),
        detail="",
    )
    return Graded(result, first_at=None if minute is None else at(minute))


@dataclass
class Case:
    id: str
    exp: dict[str, Any]
    calls: list[Call]
    passed: bool
    matches: list[str] = field(default_factory=list)
    closest: str | None = None
    detail: str = ""
    before: Graded | None = None
    first_at: datetime | None = None


def shown(method: str, path: str, minute: float, status: int = 200) -> str:
    return f"{method} {path} {status} at {at(minute).isoformat(timespec='milliseconds')}"


CASES = [
    Case(
        "searched slots",
        {"method": "GET", "path": "/Slot"},
        [call("GET", "/Patient/pat-1", 1), call("GET", "/Slot", 2)],
        True,
        matches=[shown("GET", "/Slot", 2)],
        first_at=at(2),
    ),
    Case(
        "wildcard method",
        {"method": "*", "path": "/Appointment/**"},
        [call("PATCH", "/Appointment/appt-1", 3)],
        True,
        matches=[shown("PATCH", "/Appointment/appt-1", 3)],
        first_at=at(3),
    ),
    Case(
        "a failed call does not count and is the closest",
        {"method": "POST", "path": "/Appointment"},
        [call("GET", "/Slot", 1), call("POST", "/Appointment", 2, status=422)],
        False,
        closest=shown("POST", "/Appointment", 2, 422),
        detail="no POST /Appointment call",
    ),
    Case(
        "closest: same path, another method",
        {"method": "POST", "path": "/Appointment/$find"},
        [call("GET", "/Appointment/$find", 1), call("POST", "/Appointment", 2)],
        False,
        closest=shown("GET", "/Appointment/$find", 1),
    ),
    Case(
        "closest: longest common prefix",
        {"method": "GET", "path": "/Slot"},
        [call("GET", "/Patient/pat-1", 1), call("GET", "/Schedule", 2)],
        False,
        closest=shown("GET", "/Schedule", 2),
    ),
    Case(
        "no closest when nothing is alike",
        {"method": "GET", "path": "/Slot"},
        [call("GET", "/Patient/pat-1", 1)],
        False,
        closest=None,
    ),
    Case(
        "brace alternatives",
        {"method": "GET", "path": "/{Slot,Schedule}"},
        [call("GET", "/Schedule", 1), call("GET", "/Slot", 2), call("GET", "/Slots", 3)],
        True,
        matches=[shown("GET", "/Schedule", 1), shown("GET", "/Slot", 2)],
        first_at=at(1),
    ),
    Case(
        "absolute non-FHIR path with $",
        {"method": "POST", "path": "/api/eligibility/$check"},
        [call("POST", "/api/eligibility/$check", 1)],
        True,
        matches=[shown("POST", "/api/eligibility/$check", 1)],
        first_at=at(1),
    ),
    Case(
        "count min 2",
        {"method": "GET", "path": "/Slot", "count": {"min": 2}},
        [call("GET", "/Slot", 1)],
        False,
        matches=[shown("GET", "/Slot", 1)],
        detail="1 GET /Slot call(s), expected at least 2",
    ),
    Case(
        "max 0: no deletes",
        {"method": "DELETE", "path": "/**", "count": {"max": 0}},
        [call("DELETE", "/Appointment/appt-1", 4, status=409)],  # refused: not done
        True,
    ),
    Case(
        "max 0 violated",
        {"method": "DELETE", "path": "/**", "count": {"max": 0}},
        [call("DELETE", "/Appointment/appt-1", 4, status=204)],
        False,
        matches=[shown("DELETE", "/Appointment/appt-1", 4, 204)],
        detail="expected none",
    ),
    # before
    Case(
        "searched before booking",
        {"method": "GET", "path": "/Slot", "before": "booked"},
        [call("GET", "/Slot", 1), call("POST", "/Appointment", 2), call("GET", "/Slot", 3)],
        True,
        matches=[shown("GET", "/Slot", 1)],
        before=decided_at(2),
        first_at=at(1),
    ),
    Case(
        "searched only after booking",
        {"method": "GET", "path": "/Slot", "before": "booked"},
        [call("POST", "/Appointment", 2), call("GET", "/Slot", 3)],
        False,
        closest=shown("GET", "/Slot", 3),
        before=decided_at(2),
        detail="no GET /Slot before appointment booked",
    ),
    Case(
        "a call at the same instant as the decisive write is not before it",
        {"method": "GET", "path": "/Slot", "before": "booked"},
        [call("GET", "/Slot", 2)],
        False,
        before=decided_at(2),
        closest=shown("GET", "/Slot", 2),
    ),
    Case(
        "booking not done yet: every call so far counts",
        {"method": "GET", "path": "/Slot", "before": "booked"},
        [call("GET", "/Slot", 3)],
        True,
        matches=[shown("GET", "/Slot", 3)],
        before=decided_at(None),
        first_at=at(3),
    ),
    Case(
        "booking not done yet and no search either",
        {"method": "GET", "path": "/Slot", "before": "booked"},
        [],
        False,
        before=decided_at(None),
        detail="no GET /Slot call",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_grade_api_call(case: Case) -> None:
    exp = expectation(type="api_call", **case.exp)
    assert isinstance(exp, ApiCallExpectation)
    graded = grade_api_call(exp, make_snapshot(calls=case.calls), case.before)
    result = graded.result

    assert result.passed is case.passed, result.detail
    assert result.evidence.matches == case.matches
    assert result.evidence.closest == case.closest
    assert case.detail in result.detail
    assert graded.first_at == case.first_at


def test_before_note_explains_the_cutoff() -> None:
    exp = expectation(type="api_call", method="GET", path="/Slot", before="booked")
    assert isinstance(exp, ApiCallExpectation)
    snapshot = make_snapshot(calls=[call("GET", "/Slot", 1)])
    held = grade_api_call(exp, snapshot, decided_at(2)).result
    pending = grade_api_call(exp, snapshot, decided_at(None)).result
    assert held.evidence.note == (
        "counting calls before 'appointment booked' (2025-03-07T08:02:00.000+00:00)"
    )
    assert (
        pending.evidence.note == "'appointment booked' does not hold yet: every call so far counts"
    )


def test_matches_are_capped() -> None:
    exp = expectation(type="api_call", method="GET", path="/Slot")
    assert isinstance(exp, ApiCallExpectation)
    polling = [call("GET", "/Slot", i / 10) for i in range(50)]
    result = grade_api_call(exp, make_snapshot(calls=polling), None).result
    assert result.passed is True
    assert len(result.evidence.matches) == 21
    assert result.evidence.matches[-1] == "… and 30 more"
    assert "50 GET /Slot call(s)" in result.detail


# --- where: what a call asked, not only its path ---------------------------------------------


def _eligibility(date: str, minute: float = 1) -> Call:
    return Call(
        at=at(minute),
        method="POST",
        path="/api/eligibility/$check",
        query="",
        status=200,
        transport="rest",
        refs=(),
        request={"patient": "Patient/p1", "date": date},
        response={"eligible": True},
    )


VISIT_DATE_WHERE = [
    "parameter.where(name = 'patient').valueString = 'Patient/p1'",
    "parameter.where(name = 'date').valueString = %before.start.toString().substring(0, 10)",
    "response.eligible = true",
]


def _booked_visit() -> tuple[Any, Graded]:
    from app.grading.snapshot import ChangedResource

    visit = {
        "resourceType": "Appointment",
        "id": "a1",
        "status": "booked",
        "start": "2026-03-05T10:00:00Z",
        "end": "2026-03-05T10:30:00Z",
    }
    changed = ChangedResource(
        resource_type="Appointment",
        id="a1",
        resource=visit,
        first_changed_at=at(5),
        last_changed_at=at(5),
        created=True,
        all_refs=(),
        run_id="run_1",
    )
    booked = decided_at(5)
    booked.result.evidence.matches = ["Appointment/a1"]
    return changed, booked


@pytest.mark.parametrize(
    ("date", "holds"), [("2026-03-05", True), ("2026-01-05", False)], ids=["visit-day", "other"]
)
def test_where_reads_the_request_and_the_before_resource(date: str, holds: bool) -> None:
    changed, booked = _booked_visit()
    snapshot = make_snapshot(changed=[changed], calls=[_eligibility(date)])
    checked = ApiCallExpectation(
        id="checked",
        type="api_call",
        label="eligibility for the visit's date",
        method="POST",
        path="/api/eligibility/$check",
        before="booked",
        where=VISIT_DATE_WHERE,
    )
    result = grade_api_call(checked, snapshot, booked).result
    assert result.passed is holds, result.detail
    if not holds:
        assert "asked something else" in result.detail
        assert result.evidence.clauses[0]["where"] == VISIT_DATE_WHERE[1]
        assert result.evidence.closest is not None


def test_where_reads_query_parameters_and_parameters_bodies() -> None:
    find = Call(
        at=at(1),
        method="POST",
        path="/Appointment/$find",
        query="practitioner=Practitioner/demo-canonical-prac-chen",
        status=200,
        transport="rest",
        refs=(),
        request={
            "resourceType": "Parameters",
            "parameter": [{"name": "duration", "valueInteger": 30}],
        },
    )
    snapshot = make_snapshot(calls=[find])
    looked = ApiCallExpectation(
        id="looked",
        type="api_call",
        label="looked for Dr. Chen's 30-minute slots",
        method="POST",
        path="/Appointment/$find",
        where=[
            "parameter.where(name = 'practitioner').valueString.endsWith('prac-chen')",
            "parameter.where(name = 'duration').valueInteger = 30",
        ],
    )
    assert grade_api_call(looked, snapshot, None).result.passed is True
