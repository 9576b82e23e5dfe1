"""An eval's statistics count a check as failed only when it failed (passed false): a
rubric no model judged (passed null, "not judged") is no failure, in the most-failed
checks or anywhere else, and the runs' pass rate is decided by their required checks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from app.evals.service import Item, summarise
from app.runs.service import RunRow


def _check(id_: str, type_: str, required: bool, passed: bool | None) -> dict[str, Any]:
    return {
        "id": id_,
        "label": id_,
        "type": type_,
        "required": required,
        "weight": 1.0,
        "passed": passed,
        "score": 1.0 if passed else 0.0,
        "evidence": {"matches": []},
        "detail": "not judged: no model configured" if passed is None else "",
    }


def _item(position: int, status: str, checks: list[dict[str, Any]]) -> Item:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    graded = [c for c in checks if c["passed"] is not None]
    run = RunRow(
        tenant_id=uuid.uuid4(),
        id=f"run_{position}",
        scenario_id="s",
        scenario_version=1,
        scenario_hash="h",
        builtin=False,
        mode="agent",
        variant=None,
        label=None,
        status=status,
        brief=None,
        fixture={},
        expectations=[],
        started_at=now,
        deadline=now,
        finished_at=now,
        changed_at=now,
        graded_change_at=None,
        graded_at=None,
        progress=None,
        verdict={
            "passed": status == "passed",
            "score": sum(bool(c["passed"]) for c in graded) / len(graded),
            "expectations": checks,
        },
    )
    return Item(position, "s", None, 0, "done", None, run)


def test_a_not_judged_rubric_is_no_failed_check_and_moves_no_rate() -> None:
    not_judged = _check("tone", "rubric", False, None)
    items = [
        _item(0, "passed", [_check("task", "resource", True, True), not_judged]),
        _item(1, "failed", [_check("task", "resource", True, False), not_judged]),
        _item(2, "failed", [_check("task", "resource", True, False), not_judged]),
    ]
    summary = summarise(items, k=1)
    assert summary.pass_rate.passes == 1 and summary.pass_rate.runs == 3
    assert [(c.expectation_id, c.count) for c in summary.most_failed_checks] == [("task", 2)]

    # A rubric a model judged and failed is a failed check (bonus: the pass rate stands).
    judged_low = _check("tone", "rubric", False, False)
    items[2] = _item(2, "failed", [_check("task", "resource", True, False), judged_low])
    summary = summarise(items, k=1)
    assert summary.pass_rate.passes == 1 and summary.pass_rate.runs == 3
    assert {(c.expectation_id, c.count) for c in summary.most_failed_checks} == {
        ("task", 2),
        ("tone", 1),
    }
