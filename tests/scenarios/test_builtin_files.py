"""The built-in scenario library (`scenarios/*.json`): every file loads, validates as an
import would, and is a fair test — a reference solution to show what passing looks
like, something the system must do, and something it must not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.scenarios.expansion import apply_variant, expand_scenario
from app.scenarios.schema import (
    AnyOfExpectation,
    ApiCallExpectation,
    Count,
    Expectation,
    ResourceExpectation,
    Scenario,
    WebhookExpectation,
)
from app.scenarios.validation import Problem, validate_scenario

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(SCENARIO_DIR.glob("*.json"))
# Run starts for expanding each scenario: a weekday morning and a Saturday night, so
# weekday tokens ("+0wd@10:00") are resolved on both sides of a weekend.
RUN_STARTS = (datetime(2025, 3, 4, 9, 30, tzinfo=UTC), datetime(2025, 3, 8, 23, 45, tzinfo=UTC))

each_file = pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])


def _document(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: a scenario is a JSON object"
    return data


def _scenario(path: Path) -> Scenario:
    return Scenario.model_validate(_document(path))


def _walk(expectations: list[Expectation]) -> Iterator[Expectation]:
    for expectation in expectations:
        yield expectation
        if isinstance(expectation, AnyOfExpectation):
            yield from _walk(expectation.expectations)


def _is_must_not(expectation: Expectation) -> bool:
    return (
        isinstance(expectation, ResourceExpectation)
        and expectation.count is not None
        and expectation.count.max == 0
    )


def _needs_evidence(expectation: Expectation) -> bool:
    """Whether the expectation can only hold once something was done (so a run that
    does nothing fails it)."""
    if isinstance(expectation, ResourceExpectation | ApiCallExpectation):
        count = expectation.count or Count(min=1)
        return (count.min or 0) >= 1
    if isinstance(expectation, WebhookExpectation):
        return True
    if isinstance(expectation, AnyOfExpectation):
        return all(_needs_evidence(child) for child in expectation.expectations)
    return False


def _explain(problems: list[Problem]) -> str:
    return "\n".join(f"  {p.path or '/'}: {p.message}" for p in problems)


# What the library must cover (issue 8): category -> at least this many scenarios.
REQUIRED_CATEGORIES = {
    "scheduling": 5,  # book, reschedule, cancel, waitlist backfill, no-show follow-up
    "messaging": 3,  # triage, a question answered from the chart, a clarifying question
    "results": 3,  # critical lab, normal result notification, two similar charts
    "medications": 2,  # refill request, refill blocked by an allergy or interaction
    "coverage": 2,  # eligibility before booking, lapsed coverage
    "intake": 1,  # a questionnaire routed to exactly one queue
    "inbox": 1,  # an urgent portal message triaged to the responsible clinician
}


def test_library_covers_the_everyday_work() -> None:
    scenarios = [_scenario(p) for p in FILES]
    assert len(scenarios) >= 26
    categories: dict[str, int] = {}
    for s in scenarios:
        categories[s.category] = categories.get(s.category, 0) + 1
    for category, least in REQUIRED_CATEGORIES.items():
        assert categories.get(category, 0) >= least, (category, categories)
    assert categories.get("referrals", 0) + categories.get("orders", 0) >= 2, categories
    assert sum("workflow" in [str(m) for m in s.modes] for s in scenarios) >= 8
    assert any({"agent", "workflow"} <= {str(m) for m in s.modes} for s in scenarios)
    assert sum(s.patient_sim is not None for s in scenarios) >= 4
    assert sum(len(s.variants) >= 2 for s in scenarios) >= 6


def test_readme_lists_every_scenario() -> None:
    readme = (SCENARIO_DIR.parent / "README.md").read_text(encoding="utf-8")
    for path in FILES:
        assert f"`{path.stem}`" in readme, f"{path.stem} is not listed in the README"


@each_file
def test_file_is_a_scenario_named_by_its_id(path: Path) -> None:
    scenario = _scenario(path)
    assert path.name == f"{scenario.id}.json"


@each_file
def test_has_a_reference_solution_and_guards(path: Path) -> None:
    scenario = _scenario(path)
    assert scenario.oracle, "a built-in scenario needs an oracle (its reference solution)"
    required = [e for e in scenario.expectations if e.required]
    assert any(_needs_evidence(e) for e in required), (
        "needs a required expectation that only holds once something was done"
        " (so doing nothing fails)"
    )
    assert any(_is_must_not(e) for e in required), (
        'needs a required "must not happen" expectation (a resource one with count max 0)'
    )
    assert any(e.type == "changes" and e.scope == "patient" for e in required), (
        'needs a required "changes" expectation: the guard against collateral changes'
    )


@each_file
def test_expectation_ids_are_unique(path: Path) -> None:
    ids = [e.id for e in _walk(_scenario(path).expectations)]
    assert len(ids) == len(set(ids)), f"duplicate expectation ids: {sorted(ids)}"


@each_file
def test_validates_without_problems(path: Path) -> None:
    scenario, problems, _ = validate_scenario(_document(path))
    assert not problems, f"{path.name}:\n{_explain(problems)}"
    assert scenario is not None


@each_file
def test_each_variant_applies_and_validates(path: Path) -> None:
    scenario = _scenario(path)
    for variant in scenario.variants:
        applied = apply_variant(scenario, variant.persona)
        _, problems, _ = validate_scenario(applied.model_dump(by_alias=True, exclude_none=True))
        assert not problems, f"{path.name} variant {variant.persona}:\n{_explain(problems)}"


@each_file
@pytest.mark.parametrize("run_start", RUN_STARTS, ids=lambda d: f"{d:%a-%H%M}")
def test_expands_for_every_persona(path: Path, run_start: datetime) -> None:
    scenario = _scenario(path)
    for persona in [None, *(v.persona for v in scenario.variants)]:
        expanded = expand_scenario(scenario, "builtin", run_start, persona)
        if scenario.brief is not None:
            assert expanded.brief, f"persona {persona}: the brief renders empty"
            assert "{{" not in expanded.brief, f"persona {persona}: {expanded.brief}"
