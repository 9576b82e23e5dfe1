"""The expectations every run gets without its scenario asking (pure)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.grading.engine import grade
from app.grading.snapshot import ChangedResource, Revealed, RunSnapshot
from app.runs.defaults import REFERENCE_ID, default_expectations
from app.scenarios.schema import AskedExpectation, Scenario
from app.scenarios.service import builtin_scenarios

T0 = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def _without_asked(scenario_id: str) -> Scenario:
    scenario = builtin_scenarios()[scenario_id].scenario
    document: dict[str, Any] = scenario.model_dump(by_alias=True, exclude_none=True)
    document["expectations"] = [e for e in document["expectations"] if e["type"] != "asked"]
    return Scenario.model_validate(copy.deepcopy(document))


def test_every_scenario_with_an_oracle_gets_matches_reference() -> None:
    for scenario_id, loaded in builtin_scenarios().items():
        ids = [e.id for e in default_expectations(loaded.scenario)]
        assert REFERENCE_ID in ids, scenario_id


def test_strict_off_drops_it_and_says_why() -> None:
    scenario = builtin_scenarios()["scheduling.cancel-visit"].scenario
    off = scenario.model_copy(update={"strict": scenario.strict.model_copy(update={"off": "x"})})
    assert REFERENCE_ID not in [e.id for e in default_expectations(off)]


def test_a_fact_the_oracle_asks_before_writing_gets_a_default_asked() -> None:
    scenario = _without_asked("orders.imaging-ask-laterality")
    asked = [e for e in default_expectations(scenario) if isinstance(e, AskedExpectation)]
    assert [(e.fact, e.before_write) for e in asked] == [("which knee", "ServiceRequest")]
    assert asked[0].id == "asked-which-knee-before-servicerequest"
    # A scenario that writes its own keeps its own.
    own = builtin_scenarios()["orders.imaging-ask-laterality"].scenario
    assert not [e for e in default_expectations(own) if isinstance(e, AskedExpectation)]


def _snapshot(revealed_at: float | None, written_at: float) -> RunSnapshot:
    order = {"resourceType": "ServiceRequest", "id": "sr1", "status": "active"}
    revealed = (
        []
        if revealed_at is None
        else [
            Revealed(
                T0 + timedelta(minutes=revealed_at),
                "which knee",
                "Communication/reply1",
                "Communication/q1",
                True,
            )
        ]
    )
    return RunSnapshot(
        run_id="run_1",
        started_at=T0,
        now=T0 + timedelta(minutes=10),
        deadline=T0 + timedelta(minutes=20),
        fixture={},
        current={},
        patient_refs=frozenset(),
        changed=[
            ChangedResource(
                resource_type="ServiceRequest",
                id="sr1",
                resource=order,
                first_changed_at=T0 + timedelta(minutes=written_at),
                last_changed_at=T0 + timedelta(minutes=written_at),
                created=True,
                all_refs=(),
                run_id="run_1",
            )
        ],
        revealed=revealed,
        patient_replies=0 if revealed_at is None else 1,
    )


@pytest.mark.parametrize(
    ("revealed_at", "written_at", "holds"),
    [(1, 2, True), (3, 2, False), (None, 2, False)],
    ids=["answered-then-ordered", "ordered-before-the-answer", "never-asked"],
)
def test_before_write_waits_for_the_answer(
    revealed_at: float | None, written_at: float, holds: bool
) -> None:
    asked = AskedExpectation(
        id="asked-knee",
        type="asked",
        label="asked which knee",
        fact="which knee",
        before_write="ServiceRequest",
    )
    result = grade([asked], _snapshot(revealed_at, written_at)).expectations[0]
    assert result.passed is holds, result.detail
