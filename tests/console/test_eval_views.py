"""The eval pages' pure parts: the form's request, the grid, the bar, the compare's words,
and the CI rule the default baseline follows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from starlette.datastructures import FormData

from app.console import eval_views as ev
from understudy_client import ci
from understudy_client.contract.evals import (
    CellCounts,
    CompareCell,
    Comparison,
    EvalListItem,
    EvalRun,
    OverallTest,
    Rate,
)

CATEGORIES = [
    ev.Category(
        "results",
        [
            ev.ScenarioChoice("results.a", "A", ["workflow"], []),
            ev.ScenarioChoice("results.b", "B", ["agent", "workflow"], ["terse"]),
            ev.ScenarioChoice("results.c", "C", ["agent"], []),
        ],
    ),
    ev.Category("scheduling", [ev.ScenarioChoice("scheduling.x", "X", ["agent"], ["anxious"])]),
]


def test_a_category_box_stands_for_its_scenarios_of_the_mode() -> None:
    form = ev.StartForm.of(
        FormData(
            [
                ("mode", "workflow"),
                ("category", "results"),
                ("scenario", "scheduling.x"),
                ("scenario", "results.a"),
                ("personas", "chosen"),
                ("persona", "terse"),
                ("persona", "terse"),
                ("repeats", "3"),
                ("label", " main 1 "),
            ]
        )
    )
    request = form.request(CATEGORIES)
    assert request.scenarios == ["scheduling.x", "results.a", "results.b"]
    assert request.personas == ["terse"] and request.repeats == 3 and request.label == "main 1"
    assert request.revision is None
    # Nothing ticked: the API's default (every scenario of the mode).
    assert ev.StartForm(label="x").request(CATEGORIES).scenarios is None
    # A different request, a different fingerprint: Start previews again.
    other = ev.StartForm.of(FormData([("mode", "workflow"), ("label", "main 1"), ("repeats", "3")]))
    assert form.fingerprint(CATEGORIES) != other.fingerprint(CATEGORIES)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"label": ""}, "give the eval a label"),
        ({"label": "x" * 201}, "at most 200"),
        ({"label": "x", "revision": "r" * 101}, "at most 100"),
        ({"label": "x", "personas": "chosen"}, "choose at least one persona"),
        ({"label": "x"}, None),
    ],
)
def test_form_problems(fields: dict[str, str], problem: str | None) -> None:
    found = ev.form_problem(ev.StartForm(**fields))  # type: ignore[arg-type]
    assert (found is None) if problem is None else (found is not None and problem in found)


def _run(scenario: str, persona: str, repeat: int, status: str) -> EvalRun:
    run_id = None if status == "queued" else f"run_{scenario}{persona}{repeat}"
    return EvalRun(
        position=0,
        scenario_id=scenario,
        persona=persona,
        repeat=repeat,
        status=status,
        run_id=run_id,
    )


def test_the_grid_has_a_mark_per_repeat_and_marks_flaky_cells() -> None:
    grid = ev.grid_of(
        [
            _run("s1", "terse", 0, "passed"),
            _run("s1", "baseline", 1, "failed"),
            _run("s1", "baseline", 0, "passed"),
            _run("s2", "baseline", 0, "errored"),
            _run("s2", "baseline", 1, "queued"),
        ]
    )
    assert grid.personas == ["baseline", "terse"]  # the baseline column first
    s1, s2 = grid.rows
    first = s1.cells[0]
    assert first is not None and [m.status for m in first.marks] == ["passed", "failed"]
    assert first.flaky and (first.passes, first.valid) == (1, 2)
    assert s2.cells[1] is None  # s2 has no terse runs
    cell = s2.cells[0]
    assert cell is not None and not cell.flaky and cell.valid == 0
    assert [m.url for m in cell.marks] == ["/runs/run_s2baseline0", None]
    assert ev.mark_state("errored") == ev.mark_state("cancelled") == "excluded"


def test_the_interval_bar_and_percentages() -> None:
    bar = ev.bar_of(Rate(passes=42, runs=50, rate=0.84, ci95=(0.715, 0.917), text=""))
    assert bar is not None and (bar.x, bar.width, bar.at) == ("71.50", "20.20", "84.00")
    full = ev.bar_of(Rate(passes=20, runs=20, rate=1.0, ci95=(0.839, 1.0), text=""))
    assert full is not None and full.at == "99.40"
    assert ev.bar_of(Rate(passes=0, runs=0, rate=None, ci95=None, text="0/0")) is None
    assert ev.percent(None) == "–" and ev.percent(0.8399) == "84.0%"
    sentence = ev.mde_sentence(Rate(passes=42, runs=50, rate=0.84, ci95=(0.7, 0.9), text=""))
    assert sentence is not None and "smaller than 20.5%" in sentence


def _comparison(**changes: object) -> Comparison:
    base: dict[str, object] = {
        "id": "eval_b",
        "baseline": "eval_a",
        "label": "main 2",
        "baseline_label": "main 1",
        "complete": True,
        "cells": [],
        "baseline_rate": Rate(passes=23, runs=30, rate=0.7667, ci95=(0.59, 0.88), text=""),
        "current_rate": Rate(passes=16, runs=30, rate=0.5333, ci95=(0.36, 0.70), text=""),
        "test": OverallTest(
            statistic=16,
            expected=19.5,
            p_two_sided=0.0356,
            p_regress=0.01,
            p_improve=0.99,
            p_regress_plain=0.0178,
            informative_cells=7,
            reason=None,
        ),
        "delta": -0.233,
        "delta_ci95": (-0.44, 0.007),
        "mde": 0.33,
        "underpowered": False,
        "exceeds_noise": True,
        "significant_regression": True,
        "alpha": 0.05,
    }
    base.update(changes)
    return Comparison.model_validate(base)


def test_the_compare_in_words() -> None:
    worse = ev.verdict_of(_comparison())
    assert worse.headline == "Worse, and the drop is bigger than the noise."
    text = " ".join(worse.details)
    assert "from 23/30 (76.7%) to 16/30 (53.3%), a change of -23.3 points" in text
    assert "(95% interval -44.0 points to +0.7 points)" in text
    assert "p = 0.0356 (two-sided" in text and "smaller than 33.0%" in text
    noise = ev.verdict_of(_comparison(exceeds_noise=False, significant_regression=False))
    assert noise.headline.startswith("Not bigger than the noise")
    better = ev.verdict_of(_comparison(delta=0.2, delta_ci95=(0.01, 0.4)))
    assert better.headline.startswith("Better")
    empty = ev.verdict_of(_comparison(delta=None, delta_ci95=None, mde=None))
    assert empty.headline.startswith("No comparison yet")
    cell = CompareCell(
        scenario_id="s",
        persona="baseline",
        label="regressed",
        baseline=CellCounts(passes=3, runs=3),
        current=CellCounts(passes=0, runs=3),
        fisher_p_worse=0.05,
        comparable=False,
    )
    assert ev.cell_label(cell) == "not comparable"
    assert ev.cell_rate(cell.baseline) == "3/3 (100%)" and ev.cell_rate(None) == "–"


def test_the_ci_baseline_rule() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def item(eval_id: str, status: str, minutes: int) -> EvalListItem:
        return EvalListItem(
            id=eval_id,
            label=eval_id,
            mode="workflow",
            status=status,
            created_at=now + timedelta(minutes=minutes),
            total=1,
            counts={},
        )

    listed = [item("e4", "completed", 4), item("e3", "running", 3), item("e2", "completed", 2)]
    assert ci.newest_completed(listed, exclude=None) == listed[0]
    assert ci.newest_completed(listed, exclude="e4") == listed[2]
    assert ci.newest_completed(listed, exclude="e2", before=now + timedelta(minutes=3)) is None
    assert ci.label_prefix("main 1a2b3c") == "main" and ci.label_prefix("nightly") == "nightly"
