"""The draft builder's pure core (`app.runs.draft.build_draft`): a run's calls turned back
into scenario terms — ids as symbols and saveAs names, instants as time tokens from the
run's start — and the expectations derived from them, as tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.runs.draft import (
    SentEffect,
    SystemCall,
    build_draft,
    dated_texts,
    draft_id,
    lookup_glob,
    message_words,
)
from app.scenarios.expansion import expand_value
from app.scenarios.schema import Scenario
from app.scenarios.validation import validate_scenario

START = datetime(2026, 12, 3, 14, 14, 5, tzinfo=UTC)  # a Thursday afternoon
FIXTURE = {"patient": "Patient/k1-patient", "appt": "Appointment/k1-appt"}
SCENARIO = Scenario.model_validate(
    {
        "id": "custom.draft-core",
        "title": "Move a visit",
        "category": "scheduling",
        "modes": ["agent"],
        "brief": "Move {{patient.name}}'s visit.",
        "fixture": [
            {"resourceType": "Patient", "id": "@patient", "name": [{"family": "Ruiz"}]},
            {
                "resourceType": "Appointment",
                "id": "@appt",
                "status": "booked",
                "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
            },
        ],
        "expectations": [
            {"id": "any", "type": "resource", "label": "x", "resourceType": "Appointment"}
        ],
    }
)


def _call(
    method: str, path: str, request: Any = None, response: Any = None, query: str = ""
) -> SystemCall:
    return SystemCall(method, path, query, request, response)


@pytest.mark.parametrize(
    ("written", "token"),
    [
        ("2026-12-07T10:00:00Z", {"$time": "+2wd@10:00"}),  # Monday: weekdays skip the weekend
        ("2026-12-07T04:00:00-06:00", {"$time": "+2wd@10:00"}),  # the same instant
        ("2026-12-04T09:30:00.000+00:00", {"$time": "+1wd@09:30"}),
        ("2026-12-03T16:00:00Z", {"$time": "+0wd@16:00"}),  # later today
        ("2026-12-03T09:00:00Z", {"$time": "+0d@09:00"}),  # earlier today: +0wd is tomorrow
        ("2026-12-05T10:00:00Z", {"$time": "+2d@10:00"}),  # a Saturday
        (
            "2026-12-03T14:20:37.123Z",
            {"$time": "+7m"},
        ),  # a moment of writing, to the nearest minute
        ("2026-12-08", {"$date": "+3wd"}),  # a Tuesday
        ("2026-12-06", {"$date": "+3d"}),  # a Sunday
        ("1978-03-14", "1978-03-14"),  # a fact, not a moment of the run
        ("k1-patient", "@patient"),  # a fixture id, bare
        ("Dr. Chen at 10:00", "Dr. Chen at 10:00"),  # text stays text
    ],
)
def test_written_values_become_scenario_terms(written: str, token: Any) -> None:
    body = {"resourceType": "Basic", "note": written}
    draft = build_draft(
        SCENARIO,
        run_id="run_k1",
        started_at=START,
        fixture=FIXTURE,
        calls=[_call("POST", "/Basic", body, {"resourceType": "Basic", "id": "b1"})],
    )
    assert draft["oracle"][0]["body"]["note"] == token
    if isinstance(token, dict) and not str(token.get("$time", "")).endswith("m"):
        again = expand_value(token, FIXTURE, START)  # the same moment or day again
        if "$date" in token:
            assert again == written
        else:
            assert datetime.fromisoformat(again) == datetime.fromisoformat(written)


def test_a_runs_writes_become_an_oracle_that_replays() -> None:
    calls = [
        _call("GET", "/Patient/k1-patient", response={"resourceType": "Patient"}),
        _call("GET", "/Slot", query="schedule=Schedule/x&start=ge2026-12-04"),
        _call(
            "POST",
            "/Appointment",
            {
                "resourceType": "Appointment",
                "id": "mine",
                "meta": {"versionId": "9"},
                "status": "booked",
                "start": "2026-12-07T10:00:00Z",
                "participant": [
                    {"actor": {"reference": "Patient/k1-patient"}, "status": "accepted"}
                ],
            },
            {"resourceType": "Appointment", "id": "srv-1"},
        ),
        _call(
            "PUT",
            "/Appointment/k1-appt",
            {
                "resourceType": "Appointment",
                "id": "k1-appt",
                "status": "cancelled",
                "participant": [
                    {"actor": {"reference": "Patient/k1-patient"}, "status": "accepted"}
                ],
            },
            {"resourceType": "Appointment", "id": "k1-appt"},
        ),
        _call(
            "POST",
            "/Communication",
            {
                "resourceType": "Communication",
                "status": "completed",
                "about": [{"reference": "Appointment/srv-1"}],
                "recipient": [{"reference": "Patient/k1-patient"}],
                "payload": [{"contentString": "Your visit is moved to Monday at 10:00."}],
            },
            {"resourceType": "Communication", "id": "srv-2"},
        ),
        _call("PATCH", "/Appointment/srv-1", [{"op": "add", "path": "/comment", "value": "ok"}]),
    ]
    draft = build_draft(
        SCENARIO, run_id="run_K1xyz", started_at=START, fixture=FIXTURE, calls=calls
    )
    assert draft["id"] == "custom.draft-core.from-k1xyz"
    assert [(c["method"], c["path"], c.get("saveAs")) for c in draft["oracle"]] == [
        ("POST", "/Appointment", "appointment1"),
        ("PUT", "/Appointment/@appt", None),
        ("POST", "/Communication", "communication1"),
        ("PATCH", "/Appointment/@appointment1", None),
    ]
    booked = draft["oracle"][0]["body"]
    assert booked == {
        "resourceType": "Appointment",
        "status": "booked",
        "start": {"$time": "+2wd@10:00"},
        "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
    }
    assert draft["oracle"][1]["body"]["id"] == "@appt"
    assert draft["oracle"][2]["body"]["about"] == [{"reference": "@appointment1"}]
    by_id = {e["id"]: e for e in draft["expectations"]}
    assert by_id["nothing-else-changed"]["allowWhere"][:3] == [
        "resourceType = 'Appointment'",
        "resourceType = 'Communication'",
        "resourceType = 'Appointment' and id = %fixture.appt",
    ]
    assert [
        (e["method"], e["path"], e["required"])
        for e in draft["expectations"]
        if e["type"] == "api_call"
    ] == [
        ("GET", "/Patient/*", False),
        ("GET", "/Slot", False),
    ]
    # Times and days are text truth's to check (a paraphrase restates them): the words.
    assert by_id["message-1"]["saysAny"] == ["visit", "moved"]
    scenario, problems, _ = validate_scenario(draft)
    assert [(p.path, p.message) for p in problems] == []
    assert scenario is not None


@pytest.mark.parametrize(
    ("path", "glob"),
    [
        ("/Patient/abc", "/Patient/*"),
        ("/Patient/abc/$everything", "/Patient/*/$everything"),
        ("/Appointment/$find", "/Appointment/$find"),
        ("/Slot", "/Slot"),
        ("/Patient/abc/_history/2", "/Patient/*/_history/*"),
        ("/api/eligibility/$check", "/api/eligibility/$check"),
    ],
)
def test_lookup_globs(path: str, glob: str) -> None:
    assert lookup_glob(path) == glob


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Your visit is moved to Monday at 10:00.", ["visit", "moved"]),
        ("Hi Marcus, which days and times work best for your flu shot?", ["marcus", "times"]),
        ("We rebooked the cardiology referral for Tuesday", ["cardiology", "rebooked", "referral"]),
        ("See you on 12/07 at 10:00, Monday.", []),
        ("¿Qué días le vienen bien para la vacuna?", ["vienen", "vacuna"]),
    ],
)
def test_message_words(text: str, words: list[str]) -> None:
    assert message_words(text) == words


def test_draft_ids_fit_the_schema() -> None:
    long = "x" * 100
    made = draft_id(long, "run_ABCdef123456")
    assert made.endswith(".from-abcdef1234") and len(made) == 100


def test_codes_the_end_state_does_not_compare_are_pinned_and_integrations_checked() -> None:
    reason = {
        "coding": [{"system": "http://terminology.hl7.org/CodeSystem/x", "code": "pat"}],
        "text": "Patient called",
    }
    calls = [
        _call(
            "PATCH",
            "/Appointment/k1-appt",
            [
                {"op": "replace", "path": "/status", "value": "cancelled"},
                {"op": "add", "path": "/cancelationReason", "value": reason},
            ],
            {"resourceType": "Appointment", "id": "k1-appt"},
        ),
    ]
    effects = [
        SentEffect(
            START,
            "POST",
            "/integrations/pharmacy/orders",
            {"medication": "Lisinopril 10 mg", "quantity": 90, "rush": False, "ndc": "0093-7"},
        )
    ]
    draft = build_draft(
        SCENARIO, run_id="run_k1", started_at=START, fixture=FIXTURE, calls=calls, effects=effects
    )
    by_id = {e["id"]: e for e in draft["expectations"]}
    assert by_id["codes-1"]["type"] == "field" and by_id["codes-1"]["target"] == "@appt"
    assert by_id["codes-1"]["where"] == [
        "cancelationReason.coding.where(system = 'http://terminology.hl7.org/CodeSystem/x'"
        " and code = 'pat').exists()"
    ]
    assert by_id["integration-1"]["where"] == [
        "request.medication.exists()",
        "request.quantity = 90",
        "request.rush = false",
        "request.ndc = '0093-7'",
    ]
    assert draft["free"] == []
    _, problems, _ = validate_scenario(draft)
    assert [(p.path, p.message) for p in problems] == []


def test_a_transactions_entries_name_symbols() -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "request": {"method": "PUT", "url": "Appointment/k1-appt"},
                "resource": {"resourceType": "Appointment", "id": "k1-appt", "status": "noshow"},
            },
            {
                "fullUrl": "urn:uuid:1",
                "request": {"method": "POST", "url": "Task"},
                "resource": {
                    "resourceType": "Task",
                    "for": {"reference": "Patient/k1-patient"},
                    "extension": [{"url": "http://example.org/x/y", "valueString": "k"}],
                },
            },
        ],
    }
    draft = build_draft(
        SCENARIO,
        run_id="run_k1",
        started_at=START,
        fixture=FIXTURE,
        calls=[
            _call("POST", "/", bundle, {"resourceType": "Bundle", "type": "transaction-response"})
        ],
    )
    [call] = draft["oracle"]
    assert (call["method"], call["path"], call.get("saveAs")) == ("POST", "/", None)
    put, post = call["body"]["entry"]
    assert put["request"]["url"] == "Appointment/@appt" and put["resource"]["id"] == "@appt"
    assert post["resource"]["for"] == {"reference": "@patient"}
    assert post["resource"]["extension"][0]["url"] == "http://example.org/x/y"
    guard = next(e for e in draft["expectations"] if e["type"] == "changes")
    assert "resourceType = 'Task'" in guard["allowWhere"]


def test_a_put_that_created_under_its_own_id_is_a_create() -> None:
    task = {"resourceType": "Task", "id": "my-task", "status": "requested", "intent": "order"}
    calls = [
        SystemCall("PUT", "/Task/my-task", "", task, task, status=201),
        _call(
            "POST",
            "/Communication",
            {
                "resourceType": "Communication",
                "status": "completed",
                "about": [{"reference": "Task/my-task"}],
            },
            {"resourceType": "Communication", "id": "c9"},
        ),
        SystemCall("PUT", "/Task/my-task", "", {**task, "status": "ready"}, task, status=200),
    ]
    draft = build_draft(SCENARIO, run_id="run_k1", started_at=START, fixture=FIXTURE, calls=calls)
    created, message, updated = draft["oracle"]
    assert (created["method"], created["path"], created["saveAs"]) == ("POST", "/Task", "task1")
    assert "id" not in created["body"]
    assert message["body"]["about"] == [{"reference": "@task1"}]
    assert (updated["method"], updated["path"], updated["body"]["id"]) == (
        "PUT",
        "/Task/@task1",
        "@task1",
    )


@pytest.mark.parametrize(
    ("text", "warned"),
    [
        ("See you Monday, December 7 at 10:00.", True),
        ("Your visit is on 12/07.", True),
        ("Reply here before 17:00 if you need to change it.", False),
        ("Thanks, we have your request.", False),
    ],
)
def test_a_message_that_states_the_runs_date_is_warned_about(text: str, warned: bool) -> None:
    draft = {
        "oracle": [
            {
                "method": "POST",
                "path": "/Communication",
                "body": {"resourceType": "Communication", "payload": [{"contentString": text}]},
            },
            {"method": "POST", "path": "/sms/Messages", "body": {"to": "+15550142", "body": text}},
        ]
    }
    expected = ["/oracle/0/body/payload/0/contentString", "/oracle/1/body/body"] if warned else []
    assert [p.path for p in dated_texts(draft)] == expected
