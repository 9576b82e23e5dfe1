"""Our FHIRPath functions (weekday(), startInstant(), minutesUntil()) as grading evaluates
them, checked against Python's own calendar, and as the static check knows them."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fhirpathpy.engine.invocations import invocation_registry

from app.grading.fhirpath import FhirPathContext, FhirPathError, evaluate, fhirpath_datetime
from app.scenarios.fhirpath_helpers import USER_FUNCTIONS, start_moment
from app.scenarios.fhirpath_syntax import syntax_error

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
RUN_START = datetime(2025, 3, 7, 8, 0, tzinfo=UTC)
VARIABLES = {"runStart": fhirpath_datetime(RUN_START)}


def one(expression: str, resource: dict[str, Any] | None = None) -> Any:
    result = evaluate(expression, resource or {}, VARIABLES)
    assert len(result) <= 1, result
    return result[0] if result else None


def edge_days() -> list[date]:
    """Every day of a leap year and the year after, plus month and year ends, leap days
    and the century rules (2000 is a leap year, 1900 and 2100 are not)."""
    days = [date(2024, 1, 1) + timedelta(days=n) for n in range(731)]
    for year in (1900, 1999, 2000, 2001, 2023, 2099, 2100, 2400):
        days += [date(year, 1, 1), date(year, 2, 28), date(year, 3, 1), date(year, 12, 31)]
        if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
            days.append(date(year, 2, 29))
    return days


# The weekday formula two scenarios used to spell out (Sakamoto's, 0 = Sunday), kept
# here to show that weekday() means the same.
def sakamoto(x: str) -> str:
    y = (
        f"({x}.toString().substring(0, 4).toInteger() - "
        f"iif({x}.toString().substring(5, 2).toInteger() < 3, 1, 0))"
    )
    return (
        f"(({y} + {y} div 4 - {y} div 100 + {y} div 400 + "
        f"'032503514624'.substring({x}.toString().substring(5, 2).toInteger() - 1, 1)"
        f".toInteger() + {x}.toString().substring(8, 2).toInteger()) mod 7)"
    )


# --- weekday() ---------------------------------------------------------------------


def test_weekday_matches_python_on_every_edge_day_and_the_old_formula() -> None:
    old = sakamoto("start")
    checked = 0
    for day in edge_days():
        for clock in ((0, 0, 0, 0), (23, 59, 59, 999_000)):
            moment = datetime(day.year, day.month, day.day, *clock, tzinfo=UTC)
            appointment = {"resourceType": "Appointment", "start": moment.isoformat()}
            iso = day.isoweekday()
            assert one("start.weekday()", appointment) == iso, moment
            assert one(old, appointment) == iso % 7, moment
            checked += 1
    assert checked > 1500


@pytest.mark.parametrize(
    ("written", "iso"),
    [
        ("2025-03-07T22:30:00-05:00", 6),  # Friday evening in New York is Saturday UTC
        ("2025-03-08T01:00:00+09:00", 5),  # Saturday morning in Tokyo is Friday UTC
        ("2025-03-07T23:59:59.999Z", 5),
        ("2025-03-08T00:00:00Z", 6),
        ("2024-02-29", 4),  # a date alone is that date's weekday
        ("2024-12-31", 2),
        ("2025-01", 3),  # a partial date: its first day
        ("2025", 3),
    ],
)
def test_weekday_is_taken_in_utc(written: str, iso: int) -> None:
    assert one("value.weekday()", {"value": written}) == iso
    moment = start_moment(written)
    assert moment is not None and moment.isoweekday() == iso


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("@2025-03-09.weekday()", 7),
        ("@2025-03-10T09:00:00Z.weekday()", 1),
        ("@2025-03-10T09:00:00.000+00:00.weekday()", 1),
        ("@2025-03-10T09:00.weekday()", 1),  # a literal without a zone: UTC
        ("%runStart.weekday()", 5),
        ("(%runStart + 2 days).weekday()", 7),
        ("'not a date'.weekday()", None),
        ("'2025-02-30'.weekday()", None),  # no such day: empty, as toDateTime() is
        ("'2025-03-07T25:00:00Z'.weekday()", None),
        ("5.weekday()", None),
        ("missing.weekday()", None),
    ],
)
def test_weekday_literals_and_non_dates(expression: str, expected: int | None) -> None:
    assert one(expression) == expected


def test_weekday_of_two_items_is_an_error_and_the_clause_does_not_hold() -> None:
    resource = {"resourceType": "Appointment", "slot": ["2025-03-07", "2025-03-08"]}
    with pytest.raises(FhirPathError, match="weekday\\(\\) expects one item, got 2"):
        evaluate("slot.weekday()", resource, VARIABLES)
    clause = FhirPathContext(VARIABLES).check("slot.weekday() <= 5", resource)
    assert not clause.holds and clause.error is not None and "one item" in clause.error


@pytest.mark.parametrize(
    ("scenario", "resource_type", "element"),
    [
        ("scheduling.book-ask-time.json", "Appointment", "start"),
        ("orders.repeat-lab-next-morning.json", "ServiceRequest", "occurrenceDateTime"),
    ],
)
def test_the_scenarios_weekday_clauses_read_as_python_does(
    scenario: str, resource_type: str, element: str
) -> None:
    """The clauses as the files hold them: "on a weekday", and (orders) "tomorrow, or a
    Monday" (the next business day when today is Friday to Sunday)."""
    data = json.loads((SCENARIOS / scenario).read_text())
    clauses = [
        clause
        for expectation in data["expectations"]
        for clause in expectation.get("where", [])
        if "weekday()" in clause
    ]
    assert clauses and all("mod 7" not in clause for clause in clauses)
    tomorrow = (RUN_START + timedelta(days=1)).date()
    for day in edge_days()[:400]:
        resource = {"resourceType": resource_type, element: f"{day.isoformat()}T09:00:00Z"}
        for clause in clauses:
            got = evaluate(clause, resource, VARIABLES) == [True]
            if clause.endswith("weekday() <= 5"):
                assert got == (day.isoweekday() <= 5), (clause, day)
            else:
                assert clause.endswith("weekday() = 1")
                assert got == (day == tomorrow or day.isoweekday() == 1), (clause, day)


# --- startInstant() ------------------------------------------------------------------

SR = {"resourceType": "ServiceRequest", "status": "active"}
OBS = {"resourceType": "Observation", "status": "final"}
APPT = {"resourceType": "Appointment", "status": "booked"}


@pytest.mark.parametrize(
    ("resource", "expression", "expected"),
    [
        (
            {**SR, "occurrenceDateTime": "2025-03-08T09:00:00+01:00"},
            "occurrence.startInstant()",
            "2025-03-08T08:00:00.000+00:00",
        ),
        (
            {
                **SR,
                "occurrencePeriod": {
                    "start": "2025-03-08T09:00:00Z",
                    "end": "2025-03-08T10:00:00Z",
                },
            },
            "occurrence.startInstant()",
            "2025-03-08T09:00:00.000+00:00",
        ),
        (
            {**SR, "occurrencePeriod": {"end": "2025-03-08T10:00:00Z"}},
            "occurrence.startInstant()",
            None,
        ),
        (
            {**SR, "occurrenceTiming": {"event": ["2025-03-09T07:00:00Z", "2025-03-08T07:30:00Z"]}},
            "occurrence.startInstant()",
            "2025-03-08T07:30:00.000+00:00",
        ),
        (
            {**SR, "occurrenceTiming": {"repeat": {"boundsPeriod": {"start": "2025-03-10"}}}},
            "occurrence.startInstant()",
            "2025-03-10T00:00:00.000+00:00",
        ),
        (
            {**SR, "occurrenceTiming": {"code": {"text": "daily"}}},
            "occurrence.startInstant()",
            None,
        ),
        (SR, "occurrence.startInstant()", None),
        (
            {**OBS, "effectiveDateTime": "2025-03-06"},
            "effective.startInstant()",
            "2025-03-06T00:00:00.000+00:00",
        ),
        (
            {**OBS, "effectiveInstant": "2025-03-06T12:00:00.123456Z"},
            "effective.startInstant()",
            "2025-03-06T12:00:00.123+00:00",
        ),
        (
            {**OBS, "effectivePeriod": {"start": "2025-03-06T11:00:00-03:00"}},
            "effective.startInstant()",
            "2025-03-06T14:00:00.000+00:00",
        ),
        ({}, "@2025-03-07.startInstant()", "2025-03-07T00:00:00.000+00:00"),
        ({}, "%runStart.startInstant()", "2025-03-07T08:00:00.000+00:00"),
    ],
)
def test_start_instant_reads_a_choice_element_whatever_its_type(
    resource: dict[str, Any], expression: str, expected: str | None
) -> None:
    assert one(expression, resource) == expected


@pytest.mark.parametrize(
    ("occurrence", "after_run_start"),
    [
        ({"occurrenceDateTime": "2025-03-08"}, True),
        ({"occurrenceDateTime": "2025-03-07"}, False),  # that day's first moment, before 08:00
        ({"occurrencePeriod": {"start": "2025-03-07T08:00:00.001Z"}}, True),
        ({"occurrenceDateTime": "2025-03-07T03:30:00-05:00"}, True),  # 08:30 UTC
        ({"occurrenceDateTime": "2025-03-07T07:59:59Z"}, False),
    ],
)
def test_start_instant_compares_chronologically_with_run_start(
    occurrence: dict[str, Any], after_run_start: bool
) -> None:
    resource = {**SR, **occurrence}
    assert one("occurrence.startInstant() > %runStart", resource) is after_run_start


# --- minutesUntil() ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "minutes"),
    [
        ("2025-03-07T09:00:00Z", "2025-03-07T09:30:00Z", 30),
        ("2025-03-07T09:30:00Z", "2025-03-07T09:00:00Z", -30),
        ("2025-03-07T09:00:00Z", "2025-03-07T09:00:00Z", 0),
        ("2024-02-28T23:00:00Z", "2024-03-01T01:00:00Z", 26 * 60),  # over a leap day
        ("2023-02-28T23:00:00Z", "2023-03-01T01:00:00Z", 2 * 60),
        ("2024-12-31T23:45:00Z", "2025-01-01T00:15:00Z", 30),
        ("2025-03-07T09:00:00-05:00", "2025-03-07T14:30:00Z", 30),
        ("2025-03-07T09:00:00Z", "2025-03-07T09:00:30Z", Decimal("0.5")),
        ("2025-03-07T09:00:00.000Z", "2025-03-07T09:00:00.600Z", Decimal("0.01")),
        ("2025-03-07", "2025-03-08", 1440),
        ("2025-03-07T09:00:00Z", "nonsense", None),
    ],
)
def test_minutes_until(start: str, end: str, minutes: int | Decimal | None) -> None:
    got = one("start.minutesUntil(end)", {"start": start, "end": end})
    assert got == minutes
    if minutes is not None:
        assert type(got) is type(minutes)


def test_minutes_until_matches_python_on_random_pairs() -> None:
    rng = random.Random(14)
    base = datetime(1999, 12, 31, tzinfo=UTC)
    for _ in range(300):
        first = base + timedelta(minutes=rng.randrange(0, 60 * 24 * 365 * 30))
        second = first + timedelta(minutes=rng.randrange(-60 * 24 * 400, 60 * 24 * 400))
        zone = timezone(timedelta(minutes=rng.choice([-300, -210, 0, 60, 330, 840])))
        resource = {
            "start": first.astimezone(zone).isoformat(),
            "end": second.isoformat().replace("+00:00", "Z"),
        }
        expected = int((second - first).total_seconds()) // 60
        assert one("start.minutesUntil(end)", resource) == expected, resource


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("%runStart.minutesUntil(%runStart + 1 day)", 1440),
        ("%runStart.minutesUntil(%runStart + 3 hours)", 180),
        ("(%runStart - 10 minutes).minutesUntil(%runStart)", 10),
        ("@2025-03-07T10:00:00Z.minutesUntil(%runStart)", -120),
        ("%runStart.minutesUntil(occurrence)", 24 * 60 + 60),  # a Period argument: its start
        ("occurrence.minutesUntil(occurrence.end)", 30),
        ("%runStart.minutesUntil(missing)", None),
        ("missing.minutesUntil(%runStart)", None),
    ],
)
def test_minutes_until_with_variables_and_periods(expression: str, expected: int | None) -> None:
    resource = {
        **SR,
        "occurrencePeriod": {"start": "2025-03-08T09:00:00Z", "end": "2025-03-08T09:30:00Z"},
    }
    assert one(expression, resource) == expected


def test_minutes_until_two_items_is_an_error() -> None:
    resource = {"a": "2025-03-07T09:00:00Z", "many": ["2025-03-07", "2025-03-08"]}
    with pytest.raises(FhirPathError, match="argument expects one item, got 2"):
        evaluate("a.minutesUntil(many)", resource, VARIABLES)
    with pytest.raises(FhirPathError, match="minutesUntil\\(\\) expects one item"):
        evaluate("many.minutesUntil(a)", resource, VARIABLES)


# --- the static check ----------------------------------------------------------------


def test_our_names_do_not_shadow_fhirpathpy_functions() -> None:
    assert set(USER_FUNCTIONS).isdisjoint(invocation_registry)


@pytest.mark.parametrize(
    "expression",
    [
        "start.weekday() <= 5",
        "occurrence.startInstant() >= %runStart",
        "start.minutesUntil(end) = 30",
        "occurrence.startInstant().weekday() = 1 and %runStart.minutesUntil(occurrence) < 2880",
    ],
)
def test_static_check_accepts_the_helpers(expression: str) -> None:
    assert syntax_error(expression) is None


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("weekday(start) <= 5", "weekday() takes no arguments (write 'x.weekday()'"),
        ("start.weekday(1)", "weekday() takes no arguments"),
        ("occurrence.startInstant(start)", "startInstant() takes no arguments"),
        ("start.minutesUntil()", "minutesUntil() takes 1 argument(s), not 0"),
        ("minutesUntil(start, end) = 30", "minutesUntil() takes 1 argument(s), not 2"),
        ("start.dayOfWeek() <= 5", "unknown function 'dayOfWeek()'"),
        ("start.minutesBetween(end)", "unknown function 'minutesBetween()'"),
        ("start.Weekday()", "unknown function 'Weekday()'"),
    ],
)
def test_static_check_rejects_wrong_arity_and_unknown_names(expression: str, words: str) -> None:
    error = syntax_error(expression)
    assert error is not None and words in error


def test_helpers_inside_where_read_each_item() -> None:
    """An argument is evaluated on the item `where` is at, and many items take select()."""
    bundle = {
        "resourceType": "Bundle",
        "entry": [
            {"resource": {**APPT, "start": "2025-03-07T09:00:00Z", "end": "2025-03-07T09:30:00Z"}},
            {"resource": {**APPT, "start": "2025-03-08T09:00:00Z", "end": "2025-03-08T10:00:00Z"}},
        ],
    }
    half_hour = "entry.resource.where(start.minutesUntil(end) = 30).start"
    assert evaluate(half_hour, bundle, VARIABLES) == ["2025-03-07T09:00:00.000+00:00"]
    weekend = "entry.resource.where(start.weekday() > 5).start"
    assert evaluate(weekend, bundle, VARIABLES) == ["2025-03-08T09:00:00.000+00:00"]
    assert evaluate("entry.resource.start.select(weekday())", bundle, VARIABLES) == [5, 6]
