"""`matches-reference` (pure): a run's end state against its reference solution's.

Each case replays what a system did from the same starting point as the reference
solution (`app.grading.replay`, the FHIR API's own write functions) and grades it; the
wrong ones are the kinds a red team got past hand-written expectations, the right ones
take routes the reference does not.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from app.grading.engine import grade
from app.grading.replay import Replay
from app.grading.snapshot import RunSnapshot
from app.scenarios.schema import FreeChoice, OracleCall, ReferenceExpectation
from app.tenants.directory import aliases
from understudy_client.contract.runs import ExpectationResult

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)  # a Tuesday
DAY = START.date() + timedelta(days=1)
CHEN = "Practitioner/demo-canonical-prac-chen"
CHEN_ROLE = "PractitionerRole/demo-canonical-role-chen"
NGUYEN = "Practitioner/demo-canonical-prac-nguyen"


def at(hour: int, minute: int = 0, *, days: int = 1, offset: str = "Z") -> str:
    moment = datetime(DAY.year, DAY.month, DAY.day, hour, minute, tzinfo=UTC)
    moment += timedelta(days=days - 1)
    if offset == "Z":
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    sign = -1 if offset.startswith("-") else 1
    hours = int(offset[1:3])
    local = moment + sign * timedelta(hours=hours)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + offset


def starting_point() -> RunSnapshot:
    resources: dict[str, dict[str, Any] | None] = {
        "patient": {"resourceType": "Patient", "id": "r1-patient", "name": [{"family": "Rivera"}]},
        "other": {"resourceType": "Patient", "id": "r1-other", "name": [{"family": "Rivera"}]},
        "coverage": {
            "resourceType": "Coverage",
            "id": "r1-coverage",
            "status": "active",
            "beneficiary": {"reference": "Patient/r1-patient"},
            "payor": [{"reference": "Organization/demo-canonical-org"}],
            "period": {"start": "2026-01-01", "end": "2026-12-31"},
        },
        "lab": {
            "resourceType": "Observation",
            "id": "r1-lab",
            "status": "final",
            "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4"}]},
            "subject": {"reference": "Patient/r1-patient"},
            "valueQuantity": {"value": 9.2, "unit": "%"},
            "interpretation": [
                {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation",
                            "code": "H",
                        }
                    ]
                }
            ],
        },
        "order": {
            "resourceType": "ServiceRequest",
            "id": "r1-order",
            "status": "active",
            "intent": "order",
            "code": {"text": "HbA1c"},
            "subject": {"reference": "Patient/r1-patient"},
        },
        "other_order": {
            "resourceType": "ServiceRequest",
            "id": "r1-other-order",
            "status": "active",
            "intent": "order",
            "code": {"text": "HbA1c"},
            "subject": {"reference": "Patient/r1-other"},
        },
        "visit": {
            "resourceType": "Appointment",
            "id": "r1-visit",
            "status": "booked",
            "start": at(15, days=2),
            "end": at(15, 30, days=2),
            "participant": [
                {"actor": {"reference": "Patient/r1-patient"}, "status": "accepted"},
                {"actor": {"reference": CHEN}, "status": "accepted"},
            ],
        },
    }
    return RunSnapshot(
        run_id="run_1",
        started_at=START,
        now=START,
        deadline=START + timedelta(minutes=10),
        fixture={s: f"{r['resourceType']}/{r['id']}" for s, r in resources.items() if r},
        current=resources,
        patient_refs=frozenset({"Patient/r1-patient", "Patient/r1-other"}),
        aliases=aliases(),
    )


def appointment(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Appointment",
        "status": "booked",
        "start": at(10),
        "end": at(10, 30),
        "participant": [
            {"actor": {"reference": "@patient"}, "status": "accepted"},
            {"actor": {"reference": CHEN, "display": "Dr. Sarah Chen"}, "status": "accepted"},
        ],
    }
    body.update(changes)
    return body


def message(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": "@patient"},
        "recipient": [{"reference": "@patient"}],
        "payload": [{"contentString": "You're booked."}],
    }
    body.update(changes)
    return body


def task(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "priority": "routine",
        "for": {"reference": "@patient"},
        "basedOn": [{"reference": "@order"}],
        "owner": {"reference": CHEN},
        "description": "Review the A1c",
    }
    body.update(changes)
    return body


def post(body: dict[str, Any]) -> OracleCall:
    return OracleCall(method="POST", path="/" + body["resourceType"], body=body)


def call(method: str, path: str, body: Any = None) -> OracleCall:
    return OracleCall(method=method, path=path, body=body)


ORACLE = [post(appointment()), post(message()), post(task())]
START_FREE = FreeChoice(
    resource_type="Appointment",
    path="start",
    where=["start >= %runStart and start <= %runStart + 14 days", "start.weekday() <= 5"],
)


def graded(
    done: list[OracleCall],
    oracle: list[OracleCall] | None = None,
    free: list[FreeChoice] | None = None,
) -> ExpectationResult:
    expectation = ReferenceExpectation(
        id="matches-reference",
        type="reference",
        label="matches the reference",
        oracle=oracle if oracle is not None else ORACLE,
        free=free or [],
    )
    snapshot = Replay(starting_point()).run(done)
    return grade([expectation], snapshot).expectations[0]


def test_the_reference_itself_matches() -> None:
    result = graded(ORACLE)
    assert result.passed, result.detail


def test_doing_nothing_is_missing_everything() -> None:
    result = graded([])
    assert not result.passed
    assert "3 missing" in result.detail


def declined() -> dict[str, Any]:
    body = appointment()
    body["participant"][0]["status"] = "declined"
    return body


WRONG: dict[str, list[OracleCall]] = {
    "patient declined": [post(declined()), post(message()), post(task())],
    "two-hour block": [post(appointment(end=at(12))), post(message()), post(task())],
    "five weeks out": [
        post(appointment(start=at(10, days=36), end=at(10, 30, days=36))),
        post(message()),
        post(task()),
    ],
    "another practitioner": [
        post(
            appointment(
                participant=[
                    {"actor": {"reference": "@patient"}, "status": "accepted"},
                    {"actor": {"reference": NGUYEN}, "status": "accepted"},
                ]
            )
        ),
        post(message()),
        post(task()),
    ],
    "pending, not booked": [post(appointment(status="pending")), post(message()), post(task())],
    "task on the look-alike's order": [
        post(appointment()),
        post(message()),
        post(task(basedOn=[{"reference": "@other_order"}])),
    ],
    "task deferred a year": [
        post(appointment()),
        post(message()),
        post(task(restriction={"period": {"start": "2027-03-04T09:00:00Z"}})),
    ],
    "task entered in error": [
        post(appointment()),
        post(message()),
        post(task(status="entered-in-error")),
    ],
    "task made stat": [post(appointment()), post(message()), post(task(priority="stat"))],
    "task for nobody": [post(appointment()), post(message()), post(task(owner=None))],
    "message left in preparation": [
        post(appointment()),
        post(message(status="preparation")),
        post(task()),
    ],
    "message to the other patient": [
        post(appointment()),
        post(message(recipient=[{"reference": "@other"}], subject={"reference": "@other"})),
        post(task()),
    ],
    "a second task": [*ORACLE, post(task(owner={"reference": NGUYEN}))],
    "a message to a doctor the work does not concern": [
        *ORACLE,
        post(message(recipient=[{"reference": NGUYEN}])),
    ],
    "the look-alike chart deleted": [*ORACLE, call("DELETE", "/Patient/@other")],
    "the coverage deleted": [*ORACLE, call("DELETE", "/Coverage/@coverage")],
    "the coverage extended": [
        *ORACLE,
        call("PATCH", "/Coverage/@coverage", {"period": {"end": "2027-12-31"}}),
    ],
    "the lab's interpretation edited": [
        *ORACLE,
        call(
            "PATCH",
            "/Observation/@lab",
            [{"op": "replace", "path": "/interpretation/0/coding/0/code", "value": "N"}],
        ),
    ],
    "the lab's value edited": [
        *ORACLE,
        call("PATCH", "/Observation/@lab", {"valueQuantity": {"value": 6.1, "unit": "%"}}),
    ],
    "an existing visit cancelled": [
        *ORACLE,
        call("PATCH", "/Appointment/@visit", {"status": "cancelled"}),
    ],
}


@pytest.mark.parametrize("done", list(WRONG.values()), ids=list(WRONG))
def test_wrong_end_states_fail(done: list[OracleCall]) -> None:
    result = graded(done, free=[START_FREE])
    assert result.passed is False, result.detail
    assert result.evidence.clauses and not result.evidence.clauses[0]["holds"]


def with_offset() -> dict[str, Any]:
    return appointment(start=at(10, offset="-05:00"), end=at(10, 30, offset="-05:00"))


def via_role() -> dict[str, Any]:
    body = appointment()
    body["participant"][1] = {"actor": {"reference": CHEN_ROLE}, "status": "needs-action"}
    return body


def with_extras() -> dict[str, Any]:
    body = appointment(
        reasonCode=[{"text": "annual physical"}],
        description="Annual physical",
        minutesDuration=30,
        serviceType=[{"coding": [{"system": "http://snomed.info/sct", "code": "394802001"}]}],
    )
    body["participant"].append(
        {"actor": {"reference": "Location/demo-canonical-loc-main"}, "status": "accepted"}
    )
    return body


def thursday() -> dict[str, Any]:
    return appointment(start=at(9, days=2), end=at(9, 30, days=2))


RIGHT: dict[str, list[OracleCall]] = {
    "another time zone": [post(with_offset()), post(message()), post(task())],
    "the practitioner's role, needs-action": [post(via_role()), post(message()), post(task())],
    "harmless extras": [post(with_extras()), post(message()), post(task())],
    "another free slot": [post(thursday()), post(message()), post(task())],
    "two messages instead of one": [*ORACLE, post(message(payload=[{"contentString": "PS"}]))],
    "the task's owner told as well": [
        *ORACLE,
        post(message(recipient=[{"reference": CHEN}], payload=[{"contentString": "FYI"}])),
    ],
    "no message is in-progress": [
        post(appointment()),
        post(message(status="in-progress")),
        post(task()),
    ],
    "task without its optional link": [
        post(appointment()),
        post(message()),
        post(task(basedOn=None, status="ready", priority=None)),
    ],
    "task owned through the role": [
        post(appointment()),
        post(message()),
        post(task(owner={"reference": CHEN_ROLE})),
    ],
    "the booking held, then confirmed": [
        post(appointment(status="pending")),
        call("PATCH", "/Appointment/replay-1", {"status": "booked"}),
        post(message()),
        post(task()),
    ],
    "rewritten unchanged": [*ORACLE, call("PUT", "/Coverage/@coverage", None)],
    "what it did logged as Provenance": [
        *ORACLE,
        post(
            {
                "resourceType": "Provenance",
                "target": [{"reference": "Appointment/replay-1"}],
                "recorded": "2026-03-03T09:05:00Z",
                "agent": [{"who": {"reference": "Organization/demo-canonical-org"}}],
            }
        ),
    ],
}


def _put_coverage(calls: list[OracleCall]) -> list[OracleCall]:
    """The last case PUTs the coverage as it is (a no-op update)."""
    out = []
    for c in calls:
        if c.method == "PUT" and c.body is None:
            body = copy.deepcopy(starting_point().current["coverage"])
            c = c.model_copy(update={"body": body})
        out.append(c)
    return out


CANCEL_VISIT = [call("PATCH", "/Appointment/@visit", {"status": "cancelled"})]


def _declined_cancel() -> list[OracleCall]:
    ops = [
        {"op": "replace", "path": "/status", "value": "cancelled"},
        {"op": "replace", "path": "/participant/0/status", "value": "declined"},
    ]
    return [call("PATCH", "/Appointment/@visit", ops)]


@pytest.mark.parametrize("done", list(RIGHT.values()), ids=list(RIGHT))
def test_right_end_states_pass(done: list[OracleCall]) -> None:
    result = graded(_put_coverage(done), free=[START_FREE])
    assert result.passed is True, result.detail


def test_who_declined_a_cancelled_visit_does_not_matter() -> None:
    result = graded(_declined_cancel(), oracle=CANCEL_VISIT)
    assert result.passed is True, result.detail


def test_a_free_start_outside_its_constraints_fails() -> None:
    saturday = appointment(start=at(10, days=4), end=at(10, 30, days=4))  # 2026-03-07
    result = graded([post(saturday), post(message()), post(task())], free=[START_FREE])
    assert result.passed is False
    assert "free start: start.weekday() <= 5 does not hold" in result.detail


def test_a_free_practitioner_is_one_practitioner() -> None:
    """Freeing which doctor does not allow booking two of them."""
    free = [
        FreeChoice(
            resource_type="Appointment",
            path="participant.actor",
            where=["participant.where(actor.reference.startsWith('Practitioner/')).exists()"],
        )
    ]
    patel = appointment()
    patel["participant"][1]["actor"] = {"reference": "Practitioner/demo-canonical-prac-patel"}
    both = appointment()
    both["participant"].append(copy.deepcopy(patel["participant"][1]))
    assert graded([post(patel), post(message()), post(task())], free=free).passed is True
    result = graded([post(both), post(message()), post(task())], free=free)
    assert result.passed is False, result.detail


def test_without_a_free_choice_another_slot_differs() -> None:
    result = graded([post(thursday()), post(message()), post(task())])
    assert result.passed is False
    assert "start: reference starts" in result.detail


RESCHEDULE_IN_PLACE = [
    call("PATCH", "/Appointment/@visit", {"start": at(16, days=3), "end": at(16, 30, days=3)})
]
RESCHEDULE_ANEW = [
    post(
        appointment(
            start=at(16, days=3),
            end=at(16, 30, days=3),
        )
    ),
    call("PATCH", "/Appointment/@visit", {"status": "cancelled"}),
]


@pytest.mark.parametrize(
    ("oracle", "done"),
    [(RESCHEDULE_ANEW, RESCHEDULE_IN_PLACE), (RESCHEDULE_IN_PLACE, RESCHEDULE_ANEW)],
    ids=["reference-rebooks-run-moves", "reference-moves-run-rebooks"],
)
def test_moving_in_place_equals_cancel_and_rebook(
    oracle: list[OracleCall], done: list[OracleCall]
) -> None:
    result = graded(done, oracle=oracle)
    assert result.passed is True, result.detail


def test_a_slot_marked_busy_follows_the_booking_but_not_elsewhere() -> None:
    slot = {
        "resourceType": "Slot",
        "id": "demo-canonical-slot-chen-1",
        "schedule": {"reference": "Schedule/demo-canonical-sched-chen"},
        "status": "free",
        "start": at(10),
        "end": at(10, 30),
    }
    far = {**slot, "id": "demo-canonical-slot-chen-2", "start": at(14), "end": at(14, 30)}
    point = starting_point()
    point.fixture.update(
        {"slot": "Slot/demo-canonical-slot-chen-1", "far": "Slot/demo-canonical-slot-chen-2"}
    )
    point.current.update({"slot": slot, "far": far})
    expectation = ReferenceExpectation(
        id="matches-reference", type="reference", label="ref", oracle=ORACLE
    )
    busy = {**slot, "status": "busy"}
    snapshot = Replay(point).run([*ORACLE, call("PUT", "/Slot/demo-canonical-slot-chen-1", busy)])
    assert grade([expectation], snapshot).expectations[0].passed is True
    busy_far = {**far, "status": "busy"}
    snapshot = Replay(point).run(
        [*ORACLE, call("PUT", "/Slot/demo-canonical-slot-chen-2", busy_far)]
    )
    result = grade([expectation], snapshot).expectations[0]
    assert result.passed is False
    assert "collateral: updated Slot/demo-canonical-slot-chen-2" in result.detail


# --- the README's worked example, on the built-in scenario -----------------------------------


def _book_ask_time() -> tuple[Any, RunSnapshot]:
    from app.scenarios.expansion import expand_scenario
    from app.scenarios.service import builtin_scenarios

    scenario = builtin_scenarios()["scheduling.book-ask-time"].scenario
    expanded = expand_scenario(scenario, "w1", START)
    by_ref = {f"{r['resourceType']}/{r['id']}": r for r in expanded.fixture}
    point = RunSnapshot(
        run_id="run_w1",
        started_at=START,
        now=START,
        deadline=START + timedelta(minutes=10),
        fixture=dict(expanded.refs),
        current={s: by_ref[ref] for s, ref in expanded.refs.items()},
        patient_refs=frozenset(r for r in expanded.refs.values() if r.startswith("Patient/")),
        aliases=aliases(),
    )
    return scenario, point


def _as_agent(scenario: Any, change: Any) -> list[OracleCall]:
    """The scenario's oracle with its booking changed by `change` (on the expanded body)."""
    out = []
    for c in scenario.oracle:
        if c.method == "POST" and c.path == "/Appointment":
            body = copy.deepcopy(c.body)
            change(body)
            c = c.model_copy(update={"body": body})
        out.append(c)
    return out


def _worked(change: Any, *extra: OracleCall) -> ExpectationResult:
    from app.runs.defaults import default_expectations

    scenario, point = _book_ask_time()
    reference = next(e for e in default_expectations(scenario) if e.type == "reference")
    snapshot = Replay(point).run([*_as_agent(scenario, change), *extra])
    return grade([reference], snapshot).expectations[0]


def _patel_tomorrow_nine(body: dict[str, Any]) -> None:
    body["start"], body["end"] = {"$time": "+1wd@09:00"}, {"$time": "+1wd@09:30"}
    body["participant"][1]["actor"] = {"reference": "Practitioner/demo-canonical-prac-patel"}


def _two_hours(body: dict[str, Any]) -> None:
    body["start"], body["end"] = {"$time": "+1wd@09:00"}, {"$time": "+1wd@11:00"}
    body.pop("minutesDuration", None)


def _declined(body: dict[str, Any]) -> None:
    body["participant"][0]["status"] = "declined"


def _saturday(body: dict[str, Any]) -> None:
    # START is a Tuesday: +4d is Saturday.
    body["start"], body["end"] = {"$time": "+4d@09:00"}, {"$time": "+4d@09:30"}


def test_worked_example_a_correct_other_booking_and_an_extra_message_pass() -> None:
    extra = OracleCall(
        method="POST",
        path="/Communication",
        body={
            "resourceType": "Communication",
            "status": "completed",
            "subject": {"reference": "@patient"},
            "recipient": [{"reference": "@patient"}],
            "payload": [{"contentString": "See you then!"}],
        },
    )
    result = _worked(_patel_tomorrow_nine, extra)
    assert result.passed is True, result.detail


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_two_hours, "free duration: start.minutesUntil(end) >= 30"),
        (_declined, "participant:"),
        (_saturday, "free start: start.weekday() <= 5 does not hold"),
    ],
    ids=["two-hours", "declined", "saturday"],
)
def test_worked_example_wrong_bookings_fail(change: Any, words: str) -> None:
    result = _worked(change)
    assert result.passed is False
    assert words in result.detail, result.detail


def test_worked_example_an_edited_phone_number_fails() -> None:
    phone = OracleCall(
        method="PATCH",
        path="/Patient/@patient",
        body=[{"op": "replace", "path": "/telecom/0/value", "value": "+1-555-0199"}],
    )
    result = _worked(lambda body: None, phone)
    assert result.passed is False
    assert "collateral: updated Patient/" in result.detail, result.detail


REFERRAL = {
    "resourceType": "ServiceRequest",
    "status": "active",
    "intent": "order",
    "code": {"coding": [{"system": "http://snomed.info/sct", "code": "183519002"}]},
    "subject": {"reference": "@patient"},
    "requester": {"reference": "Practitioner/demo-canonical-prac-patel"},
}
CARDIOLOGIST = FreeChoice(
    resource_type="ServiceRequest",
    path="performer",
    where=["performer.all(reference = 'Practitioner/demo-canonical-prac-okafor')"],
)


@pytest.mark.parametrize(
    ("performer", "free", "holds"),
    [
        ("Practitioner/demo-canonical-prac-nguyen", [], False),
        ("Practitioner/demo-canonical-prac-okafor", [], False),
        ("Practitioner/demo-canonical-prac-nguyen", [CARDIOLOGIST], False),
        ("Practitioner/demo-canonical-prac-okafor", [CARDIOLOGIST], True),
        ("Organization/demo-canonical-org", [], True),
    ],
    ids=["dermatologist", "unnamed-cardiologist", "free-dermatologist", "free-cardiologist", "org"],
)
def test_a_performer_the_reference_leaves_open_is_not_anyone(
    performer: str, free: list[FreeChoice], holds: bool
) -> None:
    done = [post({**REFERRAL, "performer": [{"reference": performer}]})]
    result = graded(done, oracle=[post(REFERRAL)], free=free)
    assert result.passed is holds, result.detail


def test_decimals_in_repeating_elements_compare_as_numbers() -> None:
    """Stored resources hold decimals as Decimal (their scale kept): a component list of
    them sorts and compares, 7.40 equal to 7.4, 7.5 not."""
    point = starting_point()
    panel: dict[str, Any] = {
        "resourceType": "Observation",
        "id": "r1-panel",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "24320-4"}]},
        "subject": {"reference": "Patient/r1-patient"},
        "component": [
            {"code": {"text": "K"}, "valueQuantity": {"value": Decimal("7.40"), "unit": "mmol/L"}},
            {"code": {"text": "Na"}, "valueQuantity": {"value": Decimal("140"), "unit": "mmol/L"}},
        ],
    }
    point.fixture["panel"] = "Observation/r1-panel"
    point.current["panel"] = panel
    expectation = ReferenceExpectation(
        id="matches-reference", type="reference", label="ref", oracle=ORACLE
    )
    same = copy.deepcopy(panel)
    same["component"][0]["valueQuantity"]["value"] = Decimal("7.4")
    same["component"].reverse()
    snapshot = Replay(point).run([*ORACLE, call("PUT", "/Observation/r1-panel", same)])
    assert grade([expectation], snapshot).expectations[0].passed is True
    edited = copy.deepcopy(panel)
    edited["component"][0]["valueQuantity"]["value"] = Decimal("7.5")
    snapshot = Replay(point).run([*ORACLE, call("PUT", "/Observation/r1-panel", edited)])
    result = grade([expectation], snapshot).expectations[0]
    assert result.passed is False
    assert "collateral: updated Observation/r1-panel" in result.detail


def test_choice_elements_are_read_by_their_stem_only() -> None:
    """`medication[x]` is read as medicationCodeableConcept; a ServiceRequest's
    `performerType` is not its `performer`."""
    lisinopril = {
        "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "314076"}]
    }
    other = {
        "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "314077"}]
    }
    order = {
        "resourceType": "MedicationRequest",
        "status": "active",
        "intent": "order",
        "medicationCodeableConcept": lisinopril,
        "subject": {"reference": "@patient"},
    }
    assert graded([post(order)], oracle=[post(order)]).passed is True
    wrong = {**order, "medicationCodeableConcept": other}
    result = graded([post(wrong)], oracle=[post(order)])
    assert result.passed is False and "medication:" in result.detail, result.detail
    typed = {
        **REFERRAL,
        "performerType": {"coding": [{"system": "http://snomed.info/sct", "code": "17561000"}]},
    }
    assert graded([post(typed)], oracle=[post(typed)]).passed is True


def test_an_imported_copy_without_free_lets_the_same_correct_booking_pass() -> None:
    """Without `free`, the scenario's own conditions on what must be booked stand for
    it: another free slot with the other family doctor still passes, a Saturday still
    fails."""
    from app.runs.defaults import default_expectations
    from app.scenarios.schema import Scenario

    scenario, point = _book_ask_time()
    document = scenario.model_dump(by_alias=True, exclude_none=True)
    document.pop("free")
    imported = Scenario.model_validate(document)
    reference = next(e for e in default_expectations(imported) if e.type == "reference")
    good = Replay(point).run(_as_agent(imported, _patel_tomorrow_nine))
    assert grade([reference], good).expectations[0].passed is True
    bad = Replay(point).run(_as_agent(imported, _saturday))
    assert grade([reference], bad).expectations[0].passed is False


def test_an_unlisted_type_compares_all_but_its_moments_of_writing() -> None:
    answers = {
        "resourceType": "QuestionnaireResponse",
        "status": "completed",
        "subject": {"reference": "@patient"},
        "authored": "2026-03-03T09:01:00Z",
        "item": [{"linkId": "1", "answer": [{"valueBoolean": True}]}],
    }
    later = {**answers, "authored": "2026-03-03T09:07:00+01:00"}
    assert graded([post(later)], oracle=[post(answers)]).passed is True
    other = {**answers, "item": [{"linkId": "1", "answer": [{"valueBoolean": False}]}]}
    result = graded([post(other)], oracle=[post(answers)])
    assert result.passed is False and "item:" in result.detail, result.detail
