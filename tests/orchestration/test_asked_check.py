"""The scenario check and `asked`: the in-memory replay answers as the simulated patient,
the "guess" mutant (the oracle's writes without its questions) is caught, and the real
oracle run — which waits for the patient's answers — agrees with the in-memory one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from app.grading.engine import grade
from app.grading.snapshot import RunSnapshot
from app.orchestration.mutants import derive_mutants
from app.orchestration.simulation import Simulation, patient_of
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
SCENARIO_ID = "scheduling.book-ask-time"


def before() -> RunSnapshot:
    patient = {"resourceType": "Patient", "id": "r1-patient"}
    msg = {
        "resourceType": "Communication",
        "id": "r1-msg",
        "status": "completed",
        "sender": {"reference": "Patient/r1-patient"},
        "payload": [{"contentString": "I'd like my check-up soon."}],
    }
    return RunSnapshot(
        run_id="run_1",
        started_at=START,
        now=START + timedelta(seconds=1),
        deadline=START + timedelta(minutes=5),
        fixture={"patient": "Patient/r1-patient", "msg": "Communication/r1-msg"},
        current={"patient": patient, "msg": msg},
        patient_refs=frozenset({"Patient/r1-patient"}),
    )


def test_the_in_memory_patient_answers_the_oracle_question() -> None:
    scenario = builtin_scenarios()[SCENARIO_ID].scenario
    sim = Simulation(before(), patient_of(scenario, None))
    snapshot = sim.run(scenario.oracle)
    asked_ref = sim.refs_written[1]  # the oracle's question
    # The question reveals the preferred time; the confirmation, naming Dr. Chen, the
    # doctor (a fact the brief already gives, so nothing requires asking for it).
    assert [r.topic for r in snapshot.revealed] == ["preferred time", "doctor"]
    revealed = snapshot.revealed[0]
    assert (revealed.topic, revealed.asked_ref, revealed.asked) == (
        "preferred time",
        asked_ref,
        True,
    )
    assert snapshot.patient_replies == 2  # the question and the confirmation
    booked = next(c for c in snapshot.changed if c.resource_type == "Appointment")
    assert revealed.at < booked.first_changed_at
    results = {r.id: r for r in grade(list(scenario.expectations), snapshot).expectations}
    assert results["asked-preferred-time"].passed is True


def test_without_a_simulated_patient_nothing_is_revealed() -> None:
    scenario = builtin_scenarios()[SCENARIO_ID].scenario
    snapshot = Simulation(before()).run(scenario.oracle)
    assert snapshot.revealed == []
    results = {r.id: r for r in grade(list(scenario.expectations), snapshot).expectations}
    assert results["asked-preferred-time"].passed is False


def test_the_guess_mutant_leaves_out_the_question_and_is_caught() -> None:
    scenario = builtin_scenarios()[SCENARIO_ID].scenario
    [guess] = [m for m in derive_mutants(scenario) if m.kind == "guess"]
    assert "call 2 (POST /Communication)" in guess.description
    assert len(guess.calls) == len(scenario.oracle) - 1
    snapshot = Simulation(before(), patient_of(scenario, None)).run(guess.calls)
    results = {r.id: r for r in grade(list(scenario.expectations), snapshot).expectations}
    assert results["booked"].passed is True  # the guessed booking is right…
    assert results["asked-preferred-time"].passed is False  # …but nobody asked
    assert "revealed 'preferred time'" in results["asked-preferred-time"].detail


def test_scenarios_without_asked_get_no_guess_mutant() -> None:
    scenario = builtin_scenarios()["scheduling.book-named-practitioner"].scenario
    assert not [m for m in derive_mutants(scenario) if m.kind == "guess"]


async def test_the_check_grades_asked_in_memory_as_the_real_run_does(
    tenant: TenantHandle,
) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{SCENARIO_ID}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["ok"], report
    assert report["mutantKinds"].get("guess") == 1
    for variant in report["variants"]:
        assert variant["mutantGrading"] == "memory", variant["simulationDisagreed"]
        assert "asked-preferred-time" not in variant["neverDecisive"]
