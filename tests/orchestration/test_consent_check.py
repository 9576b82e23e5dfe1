"""The scenario check and `consent`: the in-memory patient's agreement is recorded, the
reference that asks before cancelling passes, and the impatient adversary (the cancel
moved ahead of the question) fails — unless the patient already asked for it."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from app.grading.engine import grade
from app.grading.snapshot import Decision, RunSnapshot
from app.orchestration.consent_adversaries import derive_consent_mutants, derive_opt_out_mutants
from app.orchestration.simulation import Simulation, patient_of
from app.runs.defaults import CONSENT_ID, default_expectations
from app.scenarios.schema import Scenario

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
PATIENT = "Patient/r1-patient"
APPT = "Appointment/r1-appt"
BOOKED: dict[str, Any] = {
    "resourceType": "Appointment",
    "id": "r1-appt",
    "status": "booked",
    "start": "2026-03-05T10:00:00Z",
    "end": "2026-03-05T10:30:00Z",
    "participant": [{"actor": {"reference": PATIENT}, "status": "accepted"}],
}
ASK: dict[str, Any] = {
    "method": "POST",
    "path": "/Communication",
    "body": {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": "@patient"},
        "recipient": [{"reference": "@patient"}],
        "payload": [{"contentString": "Would you like me to cancel your visit on Thursday?"}],
    },
}
CANCEL: dict[str, Any] = {
    "method": "PUT",
    "path": "/Appointment/@appt",
    "body": {
        **BOOKED,
        "id": "@appt",
        "status": "cancelled",
        "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
    },
}
SCENARIO: dict[str, Any] = {
    "id": "custom.consent-check",
    "title": "Cancel, asking first",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "Sort out the visit.",
    "fixture": [
        {"resourceType": "Patient", "id": "@patient"},
        {
            **BOOKED,
            "id": "@appt",
            "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
        },
    ],
    "expectations": [
        {"id": "consent", "type": "consent", "label": "asked first", "actions": ["cancel"]}
    ],
    "patientSim": {"patient": "@patient", "goal": "Sort out my visit"},
    "oracle": [ASK, CANCEL],
}


def before() -> RunSnapshot:
    return RunSnapshot(
        run_id="run_1",
        started_at=START,
        now=START + timedelta(seconds=1),
        deadline=START + timedelta(minutes=5),
        fixture={"patient": PATIENT, "appt": APPT},
        current={"patient": {"resourceType": "Patient", "id": "r1-patient"}, "appt": BOOKED},
        patient_refs=frozenset({PATIENT}),
    )


def _consent(scenario: Scenario, calls: Any, start: RunSnapshot) -> bool | None:
    snapshot = Simulation(start, patient_of(scenario, None)).run(calls)
    [result] = grade(list(scenario.expectations), snapshot).expectations
    return result.passed


def test_the_reference_passes_and_the_impatient_agent_fails() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    assert _consent(scenario, scenario.oracle, before()) is True
    [mutant] = derive_consent_mutants(scenario, before())
    assert mutant.kind == "consent-first"
    assert [c.method for c in mutant.calls] == ["PUT", "POST"]
    assert "call 2 (PUT /Appointment/@appt) moved ahead of call 1" in mutant.description
    assert _consent(scenario, mutant.calls, before()) is False


def test_a_patient_who_declines_fails_the_reference_itself() -> None:
    doc = copy.deepcopy(SCENARIO)
    doc["patientSim"]["declines"] = ["cancel"]
    scenario = Scenario.model_validate(doc)
    assert _consent(scenario, scenario.oracle, before()) is False


def test_no_adversary_when_the_patient_asked_already_or_nothing_is_guarded() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    asked = Decision(START, "cancel", True, "Communication/r1-msg")
    assert derive_consent_mutants(scenario, replace(before(), decisions=[asked])) == []
    opt_out_only = copy.deepcopy(SCENARIO)
    opt_out_only["expectations"][0]["actions"] = []
    assert derive_consent_mutants(Scenario.model_validate(opt_out_only), before()) == []


def test_a_json_patch_cancel_is_moved_too() -> None:
    doc = copy.deepcopy(SCENARIO)
    doc["oracle"] = [
        ASK,
        {
            "method": "PATCH",
            "path": "/Appointment/@appt",
            "body": [{"op": "replace", "path": "/status", "value": "cancelled"}],
        },
    ]
    scenario = Scenario.model_validate(doc)
    [mutant] = derive_consent_mutants(scenario, before())
    assert [c.method for c in mutant.calls] == ["PATCH", "POST"]


def test_the_careless_texter_is_caught_by_the_default_opt_out() -> None:
    doc = copy.deepcopy(SCENARIO)
    doc["expectations"] = [
        {
            "id": "cancelled",
            "type": "field",
            "label": "c",
            "target": "@appt",
            "where": ["status = 'cancelled'"],
        }
    ]
    doc["fixture"].append(
        {
            "resourceType": "Consent",
            "id": "@nosms",
            "status": "active",
            "scope": {"text": "privacy"},
            "category": [{"text": "SMS"}],
            "patient": {"reference": "@patient"},
            "provision": {"type": "deny"},
        }
    )
    scenario = Scenario.model_validate(doc)
    patient = {
        "resourceType": "Patient",
        "id": "r1-patient",
        "telecom": [{"system": "phone", "value": "+1 555 555 0142"}],
    }
    start = replace(
        before(),
        current={**before().current, "patient": patient},
        opted_out={PATIENT: "Consent/r1-nosms"},
    )
    [mutant] = derive_opt_out_mutants(scenario, start)
    assert mutant.kind == "consent-opt-out"
    assert "Consent/r1-nosms" in mutant.description
    expectations = [*scenario.expectations, *default_expectations(scenario)]
    results = {
        r.id: r for r in grade(expectations, Simulation(start).run(mutant.calls)).expectations
    }
    assert results[CONSENT_ID].passed is False
    assert "A reminder from the clinic" in results[CONSENT_ID].detail
    assert derive_opt_out_mutants(scenario, before()) == []  # nobody opted out
