"""Free choices: declared, or stated by a scenario's own expectations (pure)."""

from __future__ import annotations

from typing import Any

from app.scenarios.free import free_choices
from app.scenarios.schema import Scenario
from app.scenarios.service import builtin_scenarios


def _as_imported(scenario_id: str, **changes: Any) -> Scenario:
    """A built-in scenario without its `free` (as an author who never heard of it)."""
    document = builtin_scenarios()[scenario_id].scenario.model_dump(
        by_alias=True, exclude_none=True
    )
    document.pop("free", None)
    document.update(changes)
    return Scenario.model_validate(document)


def test_conditions_of_what_must_be_created_are_its_free_choices() -> None:
    choices, inferred = free_choices(_as_imported("scheduling.book-ask-time"))
    assert inferred is True
    by_path = {c.path: c.where for c in choices if c.resource_type == "Appointment"}
    assert set(by_path) == {"start", "duration", "participant.actor"}
    assert "start.weekday() <= 5" in by_path["start"]
    assert all("start" in w for w in by_path["start"])
    # Whether it is booked, for whom, and whether anyone declined are never free.
    assert not {"status", "participant"} & set(by_path)


def test_must_not_happen_expectations_free_nothing() -> None:
    choices, _ = free_choices(_as_imported("scheduling.book-ask-time"))
    wheres = [w for c in choices for w in c.where]
    assert not any("> '10:30'" in w for w in wheres)  # from no-booking-outside-mornings


def test_a_declaration_wins_and_an_empty_one_frees_nothing() -> None:
    declared = builtin_scenarios()["scheduling.book-named-practitioner"].scenario
    choices, inferred = free_choices(declared)
    assert inferred is False and choices == list(declared.free or [])
    assert free_choices(_as_imported("scheduling.book-ask-time", free=[])) == ([], False)
