"""The scenario lint (warnings at their JSON path) and the errors of the strict fields."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.scenarios.validation import validate_scenario
from tests.scenarios.test_asked_validation import SIM
from tests.scenarios.test_validation import MINIMAL

BOOK = {
    "method": "POST",
    "path": "/Appointment",
    "body": {
        "resourceType": "Appointment",
        "status": "booked",
        "start": {"$time": "+1wd@10:00"},
        "end": {"$time": "+1wd@10:30"},
        "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
    },
}


def document(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["oracle"] = [copy.deepcopy(BOOK)]
    doc.update(copy.deepcopy(changes))
    return doc


def warnings_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    _, problems, warnings = validate_scenario(doc)
    assert problems == [], problems
    return [(w.path, w.message) for w in warnings]


def problems_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    _, problems, _ = validate_scenario(doc)
    return [(p.path, p.message) for p in problems]


def test_a_strict_scenario_has_no_lint() -> None:
    assert [w for w in warnings_of(document()) if w[0] in ("/oracle", "/strict/off")] == []


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"oracle": []}, "/oracle", "no oracle writes"),
        ({"strict": {"off": "many right answers"}}, "/strict/off", "many right answers"),
        ({"patientSim": SIM}, "/patientSim", "no asked expectation"),
    ],
    ids=["no-oracle", "strict-off", "no-asked"],
)
def test_weak_scenarios_are_warned_about(changes: dict[str, Any], path: str, words: str) -> None:
    found = warnings_of(document(**changes))
    assert any(p == path and words in m for p, m in found), found


def _with_expectation(expectation: dict[str, Any]) -> dict[str, Any]:
    doc = document()
    doc["expectations"] = [*doc["expectations"], expectation]
    return doc


def test_a_vacuous_all_is_warned_about_but_an_explicit_empty_is_not() -> None:
    base = {"id": "coded", "type": "resource", "label": "coded", "resourceType": "Appointment"}
    vacuous = {**base, "where": ["serviceType.coding.where(system = 'x').all(code = 'y')"]}
    explicit = {**base, "where": ["serviceType.empty() or serviceType.coding.all(code = 'y')"]}
    found = warnings_of(_with_expectation(vacuous))
    assert any(p.endswith("/where/0") and "all() is true" in m for p, m in found), found
    assert not any("all() is true" in m for _, m in warnings_of(_with_expectation(explicit)))


def test_message_checks_without_any_grounding_are_warned_about() -> None:
    says = {"id": "told", "type": "message", "label": "told", "says": ["booked"]}
    grounded = {"id": "true", "type": "message", "label": "true", "grounded": True}
    assert any("neither grounded" in m for _, m in warnings_of(_with_expectation(says)))
    doc = _with_expectation(says)
    doc["expectations"].append(grounded)
    assert not any("neither grounded" in m for _, m in warnings_of(doc))


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        (
            {"free": [{"resourceType": "Appointment", "path": "comment", "where": []}]},
            "/free/0/path",
            "not a consequential element of Appointment",
        ),
        (
            {"free": [{"resourceType": "Appointmnt", "path": "start", "where": []}]},
            "/free/0/resourceType",
            "unknown FHIR resource type",
        ),
        (
            {"free": [{"resourceType": "Appointment", "path": "start", "where": ["start >"]}]},
            "/free/0/where/0",
            "invalid FHIRPath",
        ),
    ],
    ids=["not-consequential", "unknown-type", "bad-fhirpath"],
)
def test_free_choices_are_validated(changes: dict[str, Any], path: str, words: str) -> None:
    found = problems_of(document(**changes))
    assert any(p == path and words in m for p, m in found), found


def test_a_hand_written_reference_expectation_is_refused() -> None:
    doc = _with_expectation(
        {"id": "mine", "type": "reference", "label": "mine", "oracle": [], "free": []}
    )
    found = problems_of(doc)
    assert any(p.endswith("/type") and "added to every run" in m for p, m in found), found
