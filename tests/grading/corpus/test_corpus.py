"""The message-check corpus: every correct message passes, at least 95% of wrong ones fail.

False failures are the worst bug, so the correct side is all or nothing; the figures per
field are printed by scripts/bench_message_checks.py.
"""

from __future__ import annotations

import pytest

from tests.grading.corpus.cases import Case, all_correct, all_wrong
from tests.grading.corpus.evaluate import holds, why

CORRECT = all_correct()
WRONG = all_wrong()
MIN_RECALL = 0.95


def test_corpus_size() -> None:
    assert len(CORRECT) >= 200
    assert len(WRONG) >= 100
    assert sum(1 for c in CORRECT if c.message.isascii()) < len(CORRECT)  # Spanish is in
    assert len({c.id for c in CORRECT + WRONG}) == len(CORRECT) + len(WRONG)


@pytest.mark.parametrize("case", CORRECT, ids=lambda c: c.id)
def test_correct_message_passes(case: Case) -> None:
    result = holds(case)
    assert all(result.values()), f"{result}\n{why(case)}"


def test_wrong_messages_fail() -> None:
    caught = [c for c in WRONG if not holds(c)[c.fails[0]]]
    missed = [why(c) for c in WRONG if c not in caught]
    assert len(caught) / len(WRONG) >= MIN_RECALL, "\n".join(missed)


@pytest.mark.parametrize("field", ["grounded", "claims", "mentions"])
def test_each_field_catches_its_mistakes(field: str) -> None:
    meant = [c for c in WRONG if field in c.fails]
    assert meant
    caught = [c for c in meant if not holds(c)[field]]
    assert len(caught) / len(meant) >= MIN_RECALL
