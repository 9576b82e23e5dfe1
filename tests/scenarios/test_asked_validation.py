"""Validation of `asked` expectations: a patientSim fact, a known `before`, no cycle, and a
scenario with a simulated patient."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.scenarios.schema import AskedExpectation, ConsentExpectation
from app.scenarios.service import builtin_scenarios
from app.scenarios.validation import validate_scenario
from tests.scenarios.test_validation import BOOKED, MINIMAL

SIM: dict[str, Any] = {
    "patient": "@patient",
    "goal": "Book a visit",
    "facts": [{"topic": "preferred time", "keywords": ["when"], "answer": "Mornings."}],
}
ASKED: dict[str, Any] = {
    "id": "asked-time",
    "type": "asked",
    "label": "Asked when suits the patient",
    "fact": "preferred time",
    "before": "booked",
}


def document(asked: dict[str, Any], *, sim: bool = True) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["expectations"] = [BOOKED, asked]
    if sim:
        doc["patientSim"] = copy.deepcopy(SIM)
    return doc


def problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    _, found, _ = validate_scenario(doc)
    return [(p.path, p.message) for p in found]


def test_a_valid_asked_expectation() -> None:
    assert problems(document(ASKED)) == []


@pytest.mark.parametrize(
    ("asked", "sim", "path", "words"),
    [
        (ASKED | {"fact": "insurance"}, True, "/expectations/1/fact", "not a topic"),
        (ASKED | {"before": "nope"}, True, "/expectations/1/before", "names no expectation"),
        (ASKED | {"before": "asked-time"}, True, "/expectations/1/before", "its own"),
        (ASKED, False, "/expectations/1/type", "no patientSim"),
        ({k: v for k, v in ASKED.items() if k != "before"}, True, "/expectations/1/before", ""),
        ({k: v for k, v in ASKED.items() if k != "fact"}, True, "/expectations/1/fact", ""),
    ],
    ids=["unknown-fact", "unknown-before", "own-before", "no-patient-sim", "no-before", "no-fact"],
)
def test_asked_problems_name_the_field(
    asked: dict[str, Any], sim: bool, path: str, words: str
) -> None:
    found = problems(document(asked, sim=sim))
    assert any(p == path and words in m for p, m in found), found


def test_the_message_lists_the_known_topics() -> None:
    [(_, message)] = problems(document(ASKED | {"fact": "insurance"}))
    assert "'preferred time'" in message


def test_a_cycle_through_asked_is_refused() -> None:
    doc = document(ASKED)
    doc["expectations"][0] = BOOKED  # resource: no before
    doc["expectations"].append(
        {
            "id": "searched",
            "type": "api_call",
            "label": "Searched first",
            "method": "GET",
            "path": "/Slot",
            "before": "asked-time",
        }
    )
    doc["expectations"][1] = ASKED | {"before": "searched"}
    found = problems(doc)
    assert any("cycle" in m for _, m in found), found


@pytest.mark.parametrize(
    "scenario_id",
    sorted(i for i, s in builtin_scenarios().items() if s.scenario.patient_sim is not None),
)
def test_every_builtin_simulated_patient_must_be_asked(scenario_id: str) -> None:
    """Each built-in patientSim scenario requires its hidden facts to be asked for, before
    the write that uses them — or, one whose patient holds no hidden fact, the patient's
    agreement before the action (a required `consent` with actions)."""
    scenario = builtin_scenarios()[scenario_id].scenario
    assert scenario.patient_sim is not None
    by_id = {e.id: e for e in scenario.expectations}
    asked = [e for e in scenario.expectations if isinstance(e, AskedExpectation)]
    if not scenario.patient_sim.facts:
        agreed = [
            e
            for e in scenario.expectations
            if isinstance(e, ConsentExpectation) and e.actions and e.required
        ]
        assert agreed, f"{scenario_id} asks the patient nothing: neither a fact nor consent"
        return
    assert asked, f"{scenario_id} has no asked expectation"
    topics = {f.topic for f in scenario.patient_sim.facts}
    for expectation in asked:
        assert expectation.required
        assert expectation.fact in topics
        assert expectation.before is not None
        assert by_id[expectation.before].type in ("resource", "any_of")
