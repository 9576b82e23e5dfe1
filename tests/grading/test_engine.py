"""`grade`: dependency order for `before`, any_of, webhook, rubric, score and verdict."""

from __future__ import annotations

from typing import Any

import pytest

from app.grading.engine import RUBRIC_PENDING, WEBHOOK_UNSUPPORTED, grade, grade_each
from app.grading.scoring import Bounds, count_bounds, progress
from app.grading.snapshot import Graded, RunSnapshot
from app.scenarios.schema import Count, Expectation
from tests.grading.test_fhirpath import (
    DR_KIM,
    appointment,
    at,
    call,
    changed,
    delivery,
    expectation,
    make_snapshot,
    task,
)
from understudy_client.contract.runs import ExpectationResult, Verdict

BOOKED: dict[str, Any] = {
    "id": "booked",
    "label": "appointment booked with the requested practitioner",
    "type": "resource",
    "resourceType": "Appointment",
    "where": [
        "status = 'booked'",
        "participant.actor.reference contains 'Practitioner/' + %fixture.doc",
    ],
}
SEARCHED_FIRST: dict[str, Any] = {
    "id": "searched",
    "label": "searched slots before booking",
    "type": "api_call",
    "method": "GET",
    "path": "/Slot",
    "before": "booked",
}


def exps(*items: dict[str, Any]) -> list[Expectation]:
    return [expectation(**item) for item in items]


def by_id(results: list[ExpectationResult]) -> dict[str, ExpectationResult]:
    return {r.id: r for r in results}


def graded_by_id(graded: list[Graded]) -> dict[str, Graded]:
    return {g.result.id: g for g in graded}


def required_counts(verdict: Verdict) -> tuple[int | None, int | None]:
    """A live run's progress by the verdict: required expectations, how many hold."""
    p = progress(verdict)
    return p.required_total, p.required_holding


def holding(id: str, **extra: Any) -> dict[str, Any]:
    return {"id": id, "type": "field", "target": "@appt", "where": ["status = 'booked'"]} | extra


def failing(id: str, **extra: Any) -> dict[str, Any]:
    return {"id": id, "type": "field", "target": "@appt", "where": ["status = 'noshow'"]} | extra


@pytest.mark.parametrize(
    ("call_minute", "write_minute", "call_status", "expected"),
    [
        (1, 3, 200, True),  # search, then the decisive write
        (4, 3, 200, False),  # booked first, searched afterwards
        (3, 3, 200, False),  # the same instant is not before
        (1, 3, 500, False),  # the search failed
        (1, None, 200, True),  # not booked yet: the order is not violated yet
    ],
)
def test_before_respects_the_decisive_write(
    call_minute: float, write_minute: float | None, call_status: int, expected: bool
) -> None:
    writes = [] if write_minute is None else [changed(appointment("a1"), first=write_minute)]
    snapshot = make_snapshot(
        changed=writes, calls=[call("GET", "/Slot", call_minute, status=call_status)]
    )
    # The api_call comes first in the list: the engine still grades its target first.
    results = by_id(grade(exps(SEARCHED_FIRST, BOOKED), snapshot).expectations)
    assert results["searched"].passed is expected, results["searched"].detail
    if not expected and write_minute is not None and call_status < 400:
        assert results["searched"].detail == (
            "no GET /Slot before appointment booked with the requested practitioner"
        )


def test_before_uses_the_first_match_not_a_later_one() -> None:
    snapshot = make_snapshot(
        changed=[
            changed(appointment("a1", practitioner=DR_KIM), first=1),  # not a match
            changed(appointment("a2"), first=5),
            changed(appointment("a3"), first=8),
        ],
        calls=[call("GET", "/Slot", 6)],
    )
    graded = graded_by_id(grade_each(exps(SEARCHED_FIRST, BOOKED), snapshot))
    assert graded["booked"].first_at == at(5)
    assert graded["searched"].result.passed is False


def test_before_target_inside_any_of() -> None:
    either = {
        "id": "either",
        "label": "booked or asked for a callback",
        "type": "any_of",
        "expectations": [BOOKED, {"id": "task", "type": "resource", "resourceType": "Task"}],
    }
    snapshot = make_snapshot(
        changed=[changed(task("t1"), first=2), changed(appointment("a1"), first=4)],
        calls=[call("GET", "/Slot", 3)],
    )
    verdict = grade(exps(SEARCHED_FIRST, either), snapshot)
    results = by_id(verdict.expectations)
    assert results["searched"].passed is True  # 3 < booked at 4
    graded = graded_by_id(grade_each(exps(SEARCHED_FIRST, either), snapshot))
    assert graded["either"].first_at == at(2)  # earliest holding child
    assert [c.id for c in results["either"].children] == ["booked", "task"]
    assert verdict.passed is True


@pytest.mark.parametrize(
    ("items", "detail"),
    [
        ([SEARCHED_FIRST], "before names no expectation: 'booked'"),
        (
            [
                SEARCHED_FIRST | {"before": "other"},
                SEARCHED_FIRST | {"id": "other", "before": "searched"},
            ],
            "forms a cycle",
        ),
        ([SEARCHED_FIRST | {"before": "searched"}], "forms a cycle"),
    ],
)
def test_broken_before_fails_without_raising(items: list[dict[str, Any]], detail: str) -> None:
    verdict = grade(exps(*items), make_snapshot(calls=[call("GET", "/Slot", 1)]))
    assert verdict.passed is False
    assert all(r.passed is False and detail in r.detail for r in verdict.expectations)


@pytest.mark.parametrize(
    ("children", "passed", "detail"),
    [
        ([holding("a"), failing("b")], True, "holds through 'a'"),
        ([failing("a"), failing("b")], False, "none of the 2 alternatives holds"),
        (
            [failing("a"), {"id": "w", "type": "webhook", "event": "x", "resource": "@appt"}],
            None,
            "not gradable yet: 'w'",
        ),
        (
            [holding("a"), {"id": "w", "type": "webhook", "event": "x", "resource": "@appt"}],
            True,
            "holds through 'a'",
        ),
        (
            [failing("a"), {"id": "n", "type": "any_of", "expectations": [holding("deep")]}],
            True,
            "holds through 'n'",
        ),
    ],
)
def test_any_of(children: list[dict[str, Any]], passed: bool | None, detail: str) -> None:
    verdict = grade(
        exps({"id": "any", "type": "any_of", "expectations": children}), make_snapshot()
    )
    (result,) = verdict.expectations
    assert result.passed is passed
    assert detail in result.detail
    assert [c.id for c in result.children] == [c["id"] for c in children]
    assert result.wire()["children"][0]["id"] == children[0]["id"]
    assert verdict.passed is (passed is True)


def test_unsupported_webhook_blocks_a_pass() -> None:
    webhook = {"id": "w", "type": "webhook", "event": "appointment.booked", "resource": "@appt"}
    verdict = grade(exps(holding("a"), webhook), make_snapshot(webhooks_supported=False))
    results = by_id(verdict.expectations)
    assert results["w"].passed is None
    assert results["w"].detail == WEBHOOK_UNSUPPORTED
    assert verdict.passed is False
    assert required_counts(verdict) == (2, 1)
    assert verdict.score == 1.0  # the ungradable one is outside the denominator


@pytest.mark.parametrize(
    ("deliveries", "passed"),
    [
        ([delivery("appointment.booked", "Appointment/appt-1", 3)], True),
        ([delivery("appointment.cancelled", "Appointment/appt-1", 3)], False),
        ([delivery("appointment.booked", "Appointment/other", 3)], False),
        ([], False),
    ],
)
def test_supported_webhook(deliveries: list[Any], passed: bool) -> None:
    webhook = {"id": "w", "type": "webhook", "event": "appointment.booked", "resource": "@appt"}
    snapshot = make_snapshot(webhooks_supported=True, deliveries=deliveries)
    (graded,) = grade_each(exps(webhook), snapshot)
    assert graded.result.passed is passed
    assert graded.first_at == (at(3) if passed else None)


def test_rubric_is_pending_bonus() -> None:
    rubric = {"id": "tone", "type": "rubric", "rubric": "Kind and clear.", "required": True}
    verdict = grade(exps(holding("a"), rubric), make_snapshot())
    results = by_id(verdict.expectations)
    assert results["tone"].passed is None
    assert results["tone"].required is False  # always bonus
    assert results["tone"].detail == RUBRIC_PENDING
    assert verdict.passed is True
    assert verdict.score == 1.0  # not in the denominator until judged
    assert required_counts(verdict) == (1, 1)


@pytest.mark.parametrize(
    ("items", "passed", "score", "required"),
    [
        ([holding("a"), holding("b")], True, 1.0, (2, 2)),
        ([holding("a"), failing("b")], False, 0.5, (2, 1)),
        ([holding("a", weight=3), failing("b")], False, 0.75, (2, 1)),
        # A failed bonus lowers the score but not the verdict.
        ([holding("a", weight=3), failing("b", required=False)], True, 0.75, (1, 1)),
        # A passed bonus adds to the score even when a required one fails.
        ([failing("a"), holding("b", required=False, weight=2)], False, 2 / 3, (1, 0)),
        ([failing("a", required=False)], True, 0.0, (0, 0)),
        ([{"id": "r", "type": "rubric", "rubric": "x"}], True, 0.0, (0, 0)),  # nothing graded
    ],
)
def test_score_and_verdict(
    items: list[dict[str, Any]], passed: bool, score: float, required: tuple[int, int]
) -> None:
    verdict = grade(exps(*items), make_snapshot())
    assert verdict.passed is passed
    assert verdict.score == pytest.approx(score)
    assert required_counts(verdict) == required


@pytest.mark.parametrize(
    ("count", "bounds"),
    [
        (None, Bounds(1, None)),
        (Count(min=2), Bounds(2, None)),
        (Count(max=0), Bounds(0, 0)),
        (Count(max=2), Bounds(0, 2)),
        (Count(max=1), Bounds(0, 1)),
        (Count(min=0), Bounds(0, None)),
        (Count(min=1, max=1), Bounds(1, 1)),
    ],
)
def test_count_bounds(count: Count | None, bounds: Bounds) -> None:
    assert count_bounds(count) == bounds


def full_snapshot() -> RunSnapshot:
    return make_snapshot(
        changed=[changed(appointment("a1"), first=4), changed(task("t1"), first=5)],
        calls=[call("GET", "/Slot", 1), call("POST", "/Appointment", 4, status=201)],
    )


def test_bad_fhirpath_fails_the_expectation_not_the_grading() -> None:
    items = [
        BOOKED | {"where": ["participant.actor.reference"]},  # two items, not one boolean
        failing("f") | {"where": ["status = %nope"]},  # undefined variable
        {
            "id": "t",
            "type": "resource",
            "resourceType": "Task",
            "where": ["for.reference.substring('x')"],
        },
    ]
    verdict = grade(exps(*items), full_snapshot())
    assert [r.passed for r in verdict.expectations] == [False, False, False]
    assert all(c.get("error") for r in verdict.expectations for c in r.evidence.clauses)


def test_grading_is_deterministic() -> None:
    items = exps(SEARCHED_FIRST, BOOKED, failing("f"), {"id": "r", "type": "rubric", "rubric": "x"})
    first = [r.wire() for r in grade(items, full_snapshot()).expectations]
    second = [r.wire() for r in grade(items, full_snapshot()).expectations]
    assert first == second
    assert [r["id"] for r in first] == ["searched", "booked", "f", "r"]  # scenario order
