"""Validation of `consent` expectations and `patientSim.declines`: actions need a simulated
patient to agree (an opt-out-only check does not), and the shape is as documented."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.runs.defaults import CONSENT_ID, default_expectations
from app.scenarios.schema import ConsentExpectation, Scenario
from app.scenarios.validation import content_hash, validate_scenario
from tests.scenarios.test_validation import BOOKED, MINIMAL

SIM: dict[str, Any] = {"patient": "@patient", "goal": "Cancel my visit", "declines": ["send"]}
CONSENT: dict[str, Any] = {"id": "consent", "type": "consent", "label": "Asked first"}


def document(consent: dict[str, Any], *, sim: bool = True) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["expectations"] = [BOOKED, consent]
    if sim:
        doc["patientSim"] = copy.deepcopy(SIM)
    return doc


def problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    _, found, _ = validate_scenario(doc)
    return [(p.path, p.message) for p in found]


def test_a_valid_consent_expectation_and_its_defaults() -> None:
    doc = document(CONSENT)
    assert problems(doc) == []
    scenario, _, _ = validate_scenario(doc)
    assert scenario is not None and scenario.patient_sim is not None
    assert scenario.patient_sim.declines == ["send"]
    consent = scenario.expectations[1]
    assert isinstance(consent, ConsentExpectation)
    assert consent.actions == ["cancel", "book", "order", "send", "medication"]
    assert consent.opt_out is True


@pytest.mark.parametrize(
    ("consent", "sim", "path", "words"),
    [
        (CONSENT, False, "/expectations/1/actions", "no patientSim"),
        (CONSENT | {"actions": ["cancel"]}, False, "/expectations/1/actions", "no patientSim"),
        (CONSENT | {"actions": ["cancel", "cancel"]}, True, "/expectations/1/actions", "twice"),
        (CONSENT | {"actions": ["delete"]}, True, "/expectations/1/actions/0", ""),
        (CONSENT | {"optOut": "maybe"}, True, "/expectations/1/optOut", ""),
    ],
)
def test_consent_problems(consent: dict[str, Any], sim: bool, path: str, words: str) -> None:
    found = problems(document(consent, sim=sim))
    assert any(p == path and words in m for p, m in found), found


def test_opt_out_only_needs_no_simulated_patient() -> None:
    assert problems(document(CONSENT | {"actions": []}, sim=False)) == []


def test_unknown_declined_action_is_refused() -> None:
    doc = document(CONSENT)
    doc["patientSim"]["declines"] = ["fax"]
    assert any(p.startswith("/patientSim/declines") for p, _ in problems(doc))


def test_no_declines_hashes_as_before() -> None:
    doc = document(CONSENT)
    doc["patientSim"].pop("declines")
    without = Scenario.model_validate(doc)
    doc["patientSim"]["declines"] = []
    assert content_hash(Scenario.model_validate(doc)) == content_hash(without)


def test_a_fixture_consent_gets_the_opt_out_default() -> None:
    doc = document(CONSENT | {"actions": []}, sim=False)
    doc["expectations"] = [BOOKED]
    doc["fixture"].append(
        {
            "resourceType": "Consent",
            "id": "@nosms",
            "status": "active",
            "scope": {"text": "patient privacy"},
            "category": [{"text": "SMS"}],
            "patient": {"reference": "@patient"},
            "provision": {"type": "deny"},
        }
    )
    scenario = Scenario.model_validate(doc)
    [consent] = [e for e in default_expectations(scenario) if e.type == "consent"]
    assert isinstance(consent, ConsentExpectation)
    assert (consent.id, consent.actions, consent.opt_out) == (CONSENT_ID, [], True)
    # A scenario with a consent check of its own keeps it.
    own = Scenario.model_validate(doc | {"expectations": [BOOKED, CONSENT | {"actions": []}]})
    assert [e for e in default_expectations(own) if e.type == "consent"] == []
