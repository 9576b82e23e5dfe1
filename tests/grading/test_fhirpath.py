"""FHIRPath as grading uses it, plus the builders the other grading tests share:
realistic R4 resources for one run of a scheduling scenario."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import TypeAdapter

from app.grading.fhirpath import (
    ClauseMemo,
    FhirPathContext,
    FhirPathError,
    _compile,
    evaluate,
    fhirpath_datetime,
    holds,
    normalise,
    snapshot_variables,
)
from app.grading.snapshot import Call, ChangedResource, Delivery, RunSnapshot
from app.scenarios.schema import Expectation

RUN_ID = "run-1"
T0 = datetime(2025, 3, 7, 8, 0, tzinfo=UTC)  # the run's start
PATIENT = "Patient/pat-1"
OTHER_PATIENT = "Patient/pat-9"  # a canonical patient, not in the fixture
DR_LEE = "Practitioner/dr-lee"  # the practitioner the scenario asks for
DR_KIM = "Practitioner/dr-kim"
FIXTURE = {
    "patient": PATIENT,
    "doc": DR_LEE,
    "appt": "Appointment/appt-1",
    "referral": "ServiceRequest/sr-1",
}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def appointment(
    id: str,
    *,
    status: str = "booked",
    start: str = "2025-03-10T09:00:00Z",
    practitioner: str = DR_LEE,
    patient: str = PATIENT,
) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "id": id,
        "status": status,
        "start": start,
        "end": "2025-03-10T09:30:00Z",
        "participant": [
            {"actor": {"reference": patient}, "status": "accepted"},
            {"actor": {"reference": practitioner}, "status": "accepted"},
        ],
    }


def task(
    id: str,
    *,
    status: str = "requested",
    priority: str = "routine",
    owner: str = DR_LEE,
    patient: str = PATIENT,
) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "id": id,
        "status": status,
        "intent": "order",
        "priority": priority,
        "for": {"reference": patient},
        "owner": {"reference": owner},
        "description": "Call back about the referral",
    }


def communication(
    id: str, *, text: str, recipient: str = PATIENT, in_response_to: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Communication",
        "id": id,
        "status": "completed",
        "subject": {"reference": PATIENT},
        "recipient": [{"reference": recipient}],
        "payload": [{"contentString": text}],
    }
    if in_response_to:
        body["inResponseTo"] = [{"reference": in_response_to}]
    return body


def service_request(id: str, *, occurrence: str, patient: str = PATIENT) -> dict[str, Any]:
    return {
        "resourceType": "ServiceRequest",
        "id": id,
        "status": "active",
        "intent": "order",
        "subject": {"reference": patient},
        "occurrenceDateTime": occurrence,
        "code": {"coding": [{"system": "http://snomed.info/sct", "code": "73761001"}]},
    }


def refs_in(body: Any) -> tuple[str, ...]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            ref = value.get("reference")
            if isinstance(ref, str):
                found.append(ref)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return tuple(found)


def changed(
    body: dict[str, Any],
    *,
    first: float = 1,
    last: float | None = None,
    deleted: bool = False,
    run_id: str | None = RUN_ID,
) -> ChangedResource:
    return ChangedResource(
        resource_type=body["resourceType"],
        id=body["id"],
        resource=None if deleted else body,
        first_changed_at=at(first),
        last_changed_at=at(first if last is None else last),
        created=True,
        all_refs=refs_in(body),
        run_id=run_id,
    )


def call(method: str, path: str, minute: float, status: int = 200) -> Call:
    return Call(
        at=at(minute),
        method=method,
        path=path,
        query="",
        status=status,
        transport="rest",
        refs=(),
    )


def delivery(event: str, ref: str, minute: float) -> Delivery:
    return Delivery(at=at(minute), event=event, resource_ref=ref)


def fixture_current() -> dict[str, dict[str, Any] | None]:
    return {
        "patient": {"resourceType": "Patient", "id": "pat-1", "gender": "female"},
        "doc": {"resourceType": "Practitioner", "id": "dr-lee"},
        "appt": appointment("appt-1", status="booked"),
        "referral": service_request("sr-1", occurrence="2025-03-20T10:00:00Z"),
    }


def make_snapshot(
    *,
    changed: list[ChangedResource] | None = None,
    calls: list[Call] | None = None,
    current: dict[str, dict[str, Any] | None] | None = None,
    deliveries: list[Delivery] | None = None,
    webhooks_supported: bool = False,
) -> RunSnapshot:
    return RunSnapshot(
        run_id=RUN_ID,
        started_at=T0,
        now=at(10),
        deadline=at(5),
        fixture=dict(FIXTURE),
        current=fixture_current() if current is None else current,
        patient_refs=frozenset({PATIENT}),
        changed=changed or [],
        calls=calls or [],
        deliveries=deliveries or [],
        webhooks_supported=webhooks_supported,
    )


_EXPECTATION = TypeAdapter(Expectation)


def expectation(**fields: Any) -> Expectation:
    """An expectation as a scenario writes it (camelCase JSON), with id/label defaults
    (for any_of children too)."""
    return _EXPECTATION.validate_python(_with_labels(fields))


def _with_labels(fields: dict[str, Any]) -> dict[str, Any]:
    out = {"id": "e"} | fields
    out.setdefault("label", out["id"])
    if "expectations" in out:
        out["expectations"] = [_with_labels(child) for child in out["expectations"]]
    return out


def context(snapshot: RunSnapshot | None = None) -> FhirPathContext:
    return FhirPathContext.from_snapshot(snapshot or make_snapshot())


# ---------------------------------------------------------------------------------------


def test_variables_are_normalised_and_fixture_is_bare_ids() -> None:
    snap = make_snapshot(current={**fixture_current(), "appt": None})
    variables = snapshot_variables(snap)
    assert variables["runStart"] == "2025-03-07T08:00:00.000+00:00"
    assert variables["now"] == "2025-03-07T08:10:00.000+00:00"
    assert variables["fixture"]["patient"] == "pat-1"
    assert variables["current"]["appt"] == []  # deleted reads as empty
    assert variables["current"]["referral"]["occurrenceDateTime"] == (
        "2025-03-20T10:00:00.000+00:00"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-03-08T08:00:00Z", "2025-03-08T08:00:00.000+00:00"),
        ("2025-03-08T09:00:00+01:00", "2025-03-08T08:00:00.000+00:00"),
        ("2025-03-08T03:00:00.1234-05:00", "2025-03-08T08:00:00.123+00:00"),
        ("2025-03-08T08:00Z", "2025-03-08T08:00:00.000+00:00"),
        ("2025-03-08", "2025-03-08"),  # a date has no instant to convert
        ("2025-03-08T08:00:00", "2025-03-08T08:00:00"),  # no zone: not FHIR, left alone
        ("09:30:00", "09:30:00"),  # a time of day
        ("2025-03-08T23:59:60Z", "2025-03-08T23:59:60Z"),  # unparseable: left alone
        ("Call back 2025-03-08T08:00:00Z", "Call back 2025-03-08T08:00:00Z"),
    ],
)
def test_normalise_datetime_strings(value: str, expected: str) -> None:
    assert normalise({"a": [{"b": value}]}) == {"a": [{"b": expected}]}


def test_naive_datetime_is_taken_as_utc() -> None:
    assert fhirpath_datetime(datetime(2025, 3, 7, 8)) == "2025-03-07T08:00:00.000+00:00"


@pytest.mark.parametrize(
    ("start", "expression", "expected"),
    [
        # Exactly one day after the run start, written several ways.
        ("2025-03-08T08:00:00Z", "start >= %runStart + 1 day", True),
        ("2025-03-08T08:00:00+00:00", "start >= %runStart + 1 day", True),
        ("2025-03-08T08:00:00.000+00:00", "start >= %runStart + 1 day", True),
        ("2025-03-08T09:00:00+01:00", "start >= %runStart + 1 day", True),
        # A second or a minute short, including behind a +01:00 offset that reads later.
        ("2025-03-08T07:59:59Z", "start >= %runStart + 1 day", False),
        ("2025-03-08T07:59:59.999Z", "start >= %runStart + 1 day", False),
        ("2025-03-08T08:59:00+01:00", "start >= %runStart + 1 day", False),
        ("2025-03-08T03:30:00-05:00", "start >= %runStart + 1 day", True),
        ("2025-03-08T08:00:00Z", "start < %runStart + 1 day", False),
        ("2025-03-07T10:00:00Z", "start >= %runStart + 2 hours", True),
        ("2025-03-07T09:59:59Z", "start >= %runStart + 2 hours", False),
        ("2025-03-14T08:00:00Z", "start <= %runStart + 7 days", True),
        ("2025-03-14T08:00:01Z", "start <= %runStart + 7 days", False),
        ("2025-03-07T07:00:00Z", "start >= %runStart", False),
        ("2025-03-07T09:00:00+01:00", "start >= %runStart", True),
        ("2025-03-07T08:09:59Z", "start < %now", True),
        ("2025-03-07T08:10:00Z", "start < %now", False),
        ("2025-03-08T08:00:00Z", "(start - 1 day) = %runStart", True),
    ],
)
def test_date_arithmetic_against_run_start(start: str, expression: str, expected: bool) -> None:
    variables = snapshot_variables(make_snapshot())
    assert holds(expression, appointment("a", start=start), variables) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("occurrence", ["2025-03-09T10:00:00.000+00:00"]),  # choice element by its name
        ("occurrence >= %runStart + 2 days", [True]),
        ("occurrence >= %runStart + 3 days", [False]),
        ("subject.reference = 'Patient/' + %fixture.patient", [True]),
        ("%fixture.patient", ["pat-1"]),
        ("%current.appt.status", ["booked"]),
        ("%current.referral.occurrence", ["2025-03-20T10:00:00.000+00:00"]),
        ("occurrence < %current.referral.occurrence", [True]),
        ("code.coding.code contains '73761001'", [True]),  # infix contains: membership
        ("code.coding.code contains '7376'", [False]),
        ("performer.exists()", [False]),
    ],
)
def test_evaluate_service_request(expression: str, expected: list[Any]) -> None:
    sr = service_request("sr-2", occurrence="2025-03-09T11:00:00+01:00")
    assert evaluate(expression, sr, snapshot_variables(make_snapshot())) == expected


@pytest.mark.parametrize(
    ("expression", "holds_", "error"),
    [
        ("status = 'booked'", True, None),
        ("status = 'cancelled'", False, None),
        ("status", True, None),  # one non-boolean item: it exists
        ("reasonCode", False, None),  # empty
        (
            "participant.actor.reference contains %current.doc.resourceType + '/' + %fixture.doc",
            True,
            None,
        ),
        (
            "participant.where(actor.reference = 'Practitioner/' + %fixture.doc).exists()",
            True,
            None,
        ),
        ("participant.actor.reference", False, "returned 2 items"),
        ("%nope = 1", False, "undefined environment variable"),
        ("start.foo(", False, ""),
        ("status.substring('x')", False, ""),
    ],
)
def test_check_clause(expression: str, holds_: bool, error: str | None) -> None:
    clause = context().check(expression, appointment("a"))
    assert clause.holds is holds_
    if error is None:
        assert clause.error is None
    else:
        assert clause.error is not None
        assert error in clause.error
        assert clause.as_json()["error"] == clause.error


def test_evaluate_raises_fhirpath_error_but_check_does_not() -> None:
    with pytest.raises(FhirPathError, match="undefined environment variable"):
        evaluate("%nope", appointment("a"), {})
    assert context().check("%nope", appointment("a")).holds is False


def test_evaluation_never_modifies_the_snapshot() -> None:
    body = appointment("a", start="2025-03-10T10:00:00+01:00")
    before = copy.deepcopy(body)
    ctx = context()
    for expression in ("start >= %runStart", "participant.actor.reference", "start + 1 day"):
        ctx.check(expression, body)
    evaluate("start", body, {})
    assert body == before


def test_clause_value_is_json_safe_and_short() -> None:
    clause = context().check("participant", appointment("a"))  # 2 items: an error
    assert clause.holds is False
    big = context().check("%current.appt", appointment("a"))
    assert isinstance(big.value, str | list)
    assert len(repr(big.value)) <= 310


def test_compiled_expressions_are_cached() -> None:
    assert _compile("status = 'booked'") is _compile("status = 'booked'")


def test_clause_memo_shares_outcomes_across_passes_only_when_they_read_the_same() -> None:
    memo = ClauseMemo()
    variables = {
        "fixture": {"patient": "p1"},
        "current": {},
        "runStart": "2026-03-03T09:00:00.000+00:00",
        "now": "2026-03-03T09:00:01.000+00:00",
    }
    later = {**variables, "now": "2026-03-03T09:00:02.000+00:00"}
    task = {"resourceType": "Task", "status": "requested", "meta": {"versionId": "1"}}
    restamped = {**task, "meta": {"versionId": "2"}}
    first = FhirPathContext(variables, memo)
    assert first.check("status = 'requested'", task).holds
    assert first.check("meta.versionId = '1'", task).holds
    # Another pass: `meta` and `%now` differ, which only the expressions naming them see.
    second = FhirPathContext(later, memo)
    key = memo.key("status = 'requested'", restamped, later)
    assert memo.get(key) is not None  # shared
    assert memo.get(memo.key("meta.versionId = '1'", restamped, later)) is None
    assert not second.check("meta.versionId = '1'", restamped).holds
    assert memo.get(memo.key("%now > %runStart", task, later)) is None
    assert first.check("%now > %runStart", task).holds
    assert memo.get(memo.key("%now > %runStart", task, later)) is None
    assert memo.get(memo.key("%now > %runStart", task, variables)) is not None
    assert memo.get(memo.key("status = 'requested'", {**task, "status": "done"}, later)) is None
