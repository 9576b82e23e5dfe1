"""`asked`: the simulated patient revealed the fact in answer to a question, before the
work that needs it — and why not, when not."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from app.grading.engine import grade, grade_each
from app.grading.snapshot import Revealed, RunSnapshot
from tests.grading.test_fhirpath import appointment, at, changed, expectation, make_snapshot
from understudy_client.contract.runs import ExpectationResult

BOOKED: dict[str, Any] = {
    "id": "booked",
    "label": "appointment booked",
    "type": "resource",
    "resourceType": "Appointment",
    "where": ["status = 'booked'"],
}
ASKED: dict[str, Any] = {
    "id": "asked-time",
    "label": "asked when suits the patient",
    "type": "asked",
    "fact": "preferred time",
    "before": "booked",
}


def reveal(
    minute: float, topic: str = "preferred time", *, asked: bool = True, n: int = 1
) -> Revealed:
    return Revealed(
        at=at(minute),
        topic=topic,
        reply_ref=f"Communication/reply-{n}",
        asked_ref=f"Communication/question-{n}",
        asked=asked,
    )


def snapshot(
    revealed: list[Revealed], *, booked_at: float | None = 5, replies: int | None = None
) -> RunSnapshot:
    changes = [] if booked_at is None else [changed(appointment("new-appt"), first=booked_at)]
    base = make_snapshot(changed=changes)
    count = len({r.reply_ref for r in revealed}) if replies is None else replies
    return replace(base, revealed=revealed, patient_replies=count)


def graded(snap: RunSnapshot, *items: dict[str, Any]) -> dict[str, ExpectationResult]:
    expectations = [expectation(**item) for item in (items or (BOOKED, ASKED))]
    return {r.id: r for r in grade(expectations, snap).expectations}


def first_at(snap: RunSnapshot) -> datetime | None:
    """When the default expectations' `asked` held first (grading's working data)."""
    expectations = [expectation(**item) for item in (BOOKED, ASKED)]
    return next(g.first_at for g in grade_each(expectations, snap) if g.result.id == "asked-time")


def test_asked_then_booked_passes_with_the_reply_and_the_question() -> None:
    result = graded(snapshot([reveal(2)]))["asked-time"]
    assert result.passed is True
    assert result.evidence.matches == ["Communication/question-1", "Communication/reply-1"]
    assert "Communication/reply-1 answering Communication/question-1" in result.detail
    assert first_at(snapshot([reveal(2)])) == at(2)
    assert "counting replies before 'appointment booked'" in (result.evidence.note or "")


def test_booked_without_asking_fails_saying_so() -> None:
    result = graded(snapshot([], replies=0))["asked-time"]
    assert result.passed is False
    assert "no simulated patient replied" in result.detail


def test_replies_that_never_reveal_the_fact_fail() -> None:
    other = reveal(2, "doctor")
    result = graded(snapshot([other], replies=2))["asked-time"]
    assert result.passed is False
    assert "none of the simulated patient's 2 reply(ies) revealed 'preferred time'" in (
        result.detail
    )


def test_revealed_only_after_the_booking_fails_with_the_late_reply_as_closest() -> None:
    result = graded(snapshot([reveal(7)]))["asked-time"]
    assert result.passed is False
    assert "only after 'appointment booked'" in result.detail
    assert result.evidence.closest is not None
    assert result.evidence.closest.startswith("Communication/reply-1 answering")


def test_the_same_instant_as_the_booking_is_not_before() -> None:
    assert graded(snapshot([reveal(5)]))["asked-time"].passed is False


def test_a_fact_let_slip_without_a_question_does_not_count() -> None:
    result = graded(snapshot([reveal(2, asked=False)]))["asked-time"]
    assert result.passed is False
    assert "without being asked" in result.detail
    assert "Communication/question-1 did not ask about it" in result.detail


def test_an_earlier_slip_and_a_later_answer_to_a_question_pass_on_the_answer() -> None:
    snap = snapshot([reveal(1, asked=False, n=1), reveal(3, n=2)])
    result = graded(snap)["asked-time"]
    assert result.passed is True
    assert first_at(snap) == at(3)
    assert result.evidence.matches == ["Communication/question-2", "Communication/reply-2"]


def test_while_the_work_is_not_done_every_reveal_so_far_counts() -> None:
    result = graded(snapshot([reveal(2)], booked_at=None))["asked-time"]
    assert result.passed is True
    assert "does not hold yet" in (result.evidence.note or "")


@pytest.mark.parametrize(
    ("items", "detail"),
    [
        ((ASKED,), "before names no expectation: 'booked'"),
        ((ASKED | {"before": "asked-time"},), "forms a cycle"),
        (
            (
                ASKED | {"before": "searched"},
                {
                    "id": "searched",
                    "type": "api_call",
                    "method": "GET",
                    "path": "/Slot",
                    "before": "asked-time",
                },
            ),
            "forms a cycle",
        ),
    ],
)
def test_a_broken_before_fails_without_raising(
    items: tuple[dict[str, Any], ...], detail: str
) -> None:
    results = graded(snapshot([reveal(2)]), *items)
    assert results["asked-time"].passed is False
    assert detail in results["asked-time"].detail


def test_asked_inside_any_of_and_as_another_before_target() -> None:
    """An asked expectation graded through any_of, and named by an api_call's before."""
    either = {
        "id": "either",
        "type": "any_of",
        "expectations": [ASKED, ASKED | {"id": "asked-doctor", "fact": "doctor"}],
    }
    searched = {
        "id": "searched",
        "type": "api_call",
        "method": "GET",
        "path": "/Slot",
        "before": "asked-time",
    }
    snap = replace(snapshot([reveal(2)]), calls=[])
    results = graded(snap, BOOKED, either, searched)
    assert results["either"].passed is True
    assert results["searched"].passed is False  # no GET /Slot at all
    assert "before 'asked when suits the patient'" in (results["searched"].evidence.note or "")
