"""`any_of`: holds when any child holds.

Three-valued, like FHIRPath's `or`: True when a child passed; otherwise None (not
gradable) when a child could not be graded (a webhook without webhook delivery, a rubric
not yet judged), since that child might still hold; otherwise False.
"""

from __future__ import annotations

from collections.abc import Callable

from app.grading.scoring import make_result
from app.grading.snapshot import Graded
from app.scenarios.schema import AnyOfExpectation, Expectation
from understudy_client.contract.runs import Evidence


def grade_any_of(
    expectation: AnyOfExpectation, grade_child: Callable[[Expectation], Graded]
) -> Graded:
    """`grade_child` is the engine's grader, so children of any type (nested any_of
    included) and their `before` dependencies are graded the same way as top-level ones."""
    children = [grade_child(child) for child in expectation.expectations]
    holding = [c for c in children if c.result.passed is True]
    evidence = Evidence(matches=[c.result.id for c in holding])
    if holding:
        first_at = min((c.first_at for c in holding if c.first_at is not None), default=None)
        detail = "holds through " + ", ".join(repr(c.result.label) for c in holding)
        refs = frozenset().union(*(c.refs for c in holding))
        return make_result(expectation, True, evidence, detail, first_at, children, refs)
    if any(c.result.passed is None for c in children):
        pending = ", ".join(repr(c.result.label) for c in children if c.result.passed is None)
        detail = f"no alternative holds; not gradable yet: {pending}"
        return make_result(expectation, None, evidence, detail, None, children)
    detail = f"none of the {len(children)} alternatives holds"
    return make_result(expectation, False, evidence, detail, None, children)
