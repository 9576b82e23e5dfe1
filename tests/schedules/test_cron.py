"""The cron rules of schedules: five fields, parses, fires, 15 minutes apart (checked
from one day's times, against a walk over eight days of due times)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from cronsim import CronSim

from app.errors import Unprocessable
from app.schedules import cron

NOW = datetime(2026, 12, 1, 12, 7, 30, tzinfo=UTC)


def refusal(expression: str) -> str:
    with pytest.raises(Unprocessable) as caught:
        cron.check(expression, now=NOW)
    assert [i.expression for i in caught.value.issues] == ["cron"]
    return caught.value.message


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("*/10 * * * *", "fires 10 minute(s) apart"),
        ("* * * * *", "fires 1 minute(s) apart"),
        ("0,14 3 * * *", "fires 14 minute(s) apart"),
        ("0,55 0,23 * * *", "fires 5 minute(s) apart"),  # 23:55 to the next 00:00
        # Mondays only: never consecutive days, refused all the same (the strict side).
        ("0,50 0,23 * * 1", "fires 10 minute(s) apart"),
        ("61 * * * *", "does not parse: Bad minute"),
        ("0 0 30 2 *", "does not parse: Bad day-of-month"),
        ("0 0 * * 8", "does not parse: Bad day-of-week"),
        ("hello", "must have 5 fields"),
        ("0 */15 * * * *", "must have 5 fields"),
        ("@daily", "must have 5 fields"),
    ],
)
def test_refused_with_the_rule_named(expression: str, reason: str) -> None:
    message = refusal(expression)
    assert reason in message
    if "apart" in reason:
        assert "at least 15 minutes apart" in message


@pytest.mark.parametrize(
    "expression",
    [
        "*/15 * * * *",
        "0 3 * * *",
        "0,15,30,45 * * * *",
        "*/30 9-17 * * 1-5",
        "45 23 * * *",
        "0 0 L * *",
        "0,20,40 * * * *",
        "  5   4 * * *  ",
    ],
)
def test_accepted(expression: str) -> None:
    assert cron.check(expression, now=NOW) == " ".join(expression.split())


@pytest.mark.parametrize(
    "expression",
    [
        "*/15 * * * *",
        "*/10 * * * *",
        "0,14 3 * * *",
        "0,46 0,23 * * *",
        "0,45 0,23 * * *",
        "7,29,44 */3 * * *",
        "0 9-17 * * 1-5",
        "50 23 * * *",
        "*/20 1,2 * * *",
        "58 0-23/2 * * 0",
    ],
)
def test_the_day_rule_matches_a_walk_over_eight_days(expression: str) -> None:
    walk = CronSim(expression, NOW)
    times = [next(walk)]
    while times[-1] < NOW + timedelta(days=8):
        times.append(next(walk))
    smallest = min(b - a for a, b in itertools.pairwise(times))
    refused = smallest < timedelta(minutes=15)
    if refused:
        assert "apart" in refusal(expression)
    else:
        assert cron.check(expression, now=NOW) == expression


def test_due_times() -> None:
    start = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    assert cron.next_due("*/15 * * * *", start) == start + timedelta(minutes=15)
    assert cron.next_due("*/15 * * * *", start + timedelta(seconds=1)) == start + timedelta(
        minutes=15
    )
    between = cron.due_between("*/15 * * * *", start, start + timedelta(minutes=50))
    assert between == [start + timedelta(minutes=m) for m in (0, 15, 30, 45)]
    assert cron.explain("0 3 * * 1-5") == "At 03:00 on Monday through Friday"
