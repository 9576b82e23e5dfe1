"""Counts, per-expectation scores and the run's verdict.

Score = weight of the top-level expectations that passed / weight of the top-level
expectations that could be graded (passed is True or False). An expectation with
passed None is left out of both until it can be graded: a rubric until the judge has
scored it, a webhook expectation while this deployment has no webhook delivery. Bonus
expectations count like any other in the score; they never decide `passed`.

`passed` = every required top-level expectation passed (True, not None). A required
expectation that cannot be graded therefore keeps the run from passing rather than
letting it pass silently. Children of `any_of` count only through their parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.grading.snapshot import Graded
from app.scenarios.schema import Count, Expectation
from understudy_client.contract.runs import Evidence, ExpectationResult, RunProgress, Verdict

# Evidence lists every match up to this many; a polling client can make hundreds of
# identical calls and the reason for a verdict is visible in the first few.
MAX_LISTED = 20
DEFAULT_MIN = 1  # "at least one" when a scenario gives no count


@dataclass(frozen=True, slots=True)
class Bounds:
    min: int
    max: int | None

    def holds(self, n: int) -> bool:
        return n >= self.min and (self.max is None or n <= self.max)

    def describe(self) -> str:
        if self.max is None:
            return f"at least {self.min}"
        if self.max == self.min:
            return "none" if self.max == 0 else f"exactly {self.max}"
        return f"{self.min} to {self.max}"


def count_bounds(count: Count | None) -> Bounds:
    """The count an expectation asks for. Without `count`: at least one. A `count` with
    only a `max` is a ceiling — `{"max": 0}` "must not happen", `{"max": 1}` "no
    duplicates" (none is fine) — and with only a `min`, a floor."""
    if count is None:
        return Bounds(DEFAULT_MIN, None)
    if count.min is not None:
        return Bounds(count.min, count.max)
    if count.max is not None:
        return Bounds(0, count.max)
    return Bounds(DEFAULT_MIN, None)


def result_score(passed: bool | None) -> float:
    return 1.0 if passed is True else 0.0


def make_result(
    expectation: Expectation,
    passed: bool | None,
    evidence: Evidence,
    detail: str,
    first_at: datetime | None = None,
    children: list[Graded] | None = None,
    refs: frozenset[str] = frozenset(),
) -> Graded:
    """One expectation graded; `first_at` only when it passed, since `before` reads a
    missing time as "not yet satisfied"."""
    result = ExpectationResult(
        id=expectation.id,
        label=expectation.label,
        type=expectation.type,
        required=expectation.required,
        weight=expectation.weight,
        passed=passed,
        score=result_score(passed),
        evidence=evidence,
        detail=detail,
        children=[c.result for c in children or []],
    )
    return Graded(result, first_at if passed is True else None, refs)


def capped(items: Sequence[str]) -> list[str]:
    listed = list(items[:MAX_LISTED])
    if len(items) > MAX_LISTED:
        listed.append(f"… and {len(items) - MAX_LISTED} more")
    return listed


def verdict(results: list[ExpectationResult]) -> Verdict:
    """The run's verdict on its top-level results (the score unrounded)."""
    graded = [r for r in results if r.passed is not None]
    denominator = sum(r.weight for r in graded)
    numerator = sum(r.weight for r in graded if r.passed)
    score = min(1.0, max(0.0, numerator / denominator)) if denominator > 0 else 0.0
    return Verdict(
        passed=_holding(results) == _required(results), score=score, expectations=results
    )


def progress(verdict: Verdict, at: datetime | None = None) -> RunProgress:
    """A live run's progress by the verdict: its required expectations, how many hold;
    `at`: when it was graded."""
    results = verdict.expectations
    return RunProgress(
        required_total=_required(results), required_holding=_holding(results), last_graded_at=at
    )


def _required(results: list[ExpectationResult]) -> int:
    return sum(1 for r in results if r.required)


def _holding(results: list[ExpectationResult]) -> int:
    return sum(1 for r in results if r.required and r.passed is True)
