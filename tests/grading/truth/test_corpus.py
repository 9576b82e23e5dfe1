"""The text-truth corpus (`cases`): every correct text passes `text-truth`, every wrong
one fails it, per fact kind. scripts/bench_text_truth.py prints the same as precision and
recall with the cost per text."""

from __future__ import annotations

import pytest

from tests.grading.truth.cases import Case, cases
from tests.grading.truth.world import truth

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}-{i}" for i, c in enumerate(CASES)])
def test_case(case: Case) -> None:
    result = truth(case.writes(), case.advice)
    assert (result.passed is True) == case.correct, f"{case.text!r}: {result.detail}"


def test_every_kind_has_both_sides() -> None:
    kinds = {c.kind for c in CASES}
    for kind in kinds - {"instruction"}:
        assert {c.correct for c in CASES if c.kind == kind} == {True, False}, kind


def test_each_fact_is_shown_with_its_context() -> None:
    text = "Your dose is lisinopril 20 mg once a day (not 10 mg)."
    result = truth([*cases()[0].writes()[:1], _message(text)])
    facts = [f for c in result.evidence.clauses if "facts" in c for f in c["facts"]]
    contexts = {f["text"]: f["context"] for f in facts}
    assert contexts["lisinopril"] == "asserted"
    assert any(f["check"] == "consistent" and f["holds"] for f in facts)


def _message(text: str):  # type: ignore[no-untyped-def]
    from tests.grading.truth.world import message

    return message(text)
