"""The FHIRPath helpers over the one date reader (app/kit/dates): statesDate(),
statesInstant(), dateOf(), hourOf(), minuteOf(), as grading evaluates them and as the
static check knows them; and the scenario expectation that used to spell out its own date
matching (messaging.clarify-request) now reading every form a correct agent writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.grading.fhirpath import (
    FhirPathContext,
    FhirPathError,
    evaluate,
    fhirpath_datetime,
    normalise,
)
from app.scenarios.fhirpath_helpers import USER_FUNCTIONS
from app.scenarios.fhirpath_syntax import syntax_error

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
# Friday 27 November 2026, 15:00 UTC (09:00 in Chicago).
VISIT_START = "2026-11-27T15:00:00Z"
VARIABLES: dict[str, Any] = {
    "runStart": "2026-12-01T08:00:00.000+00:00",
    "fixture": {"patient": "pat-1", "visit": "enc-1"},
    "current": {
        "visit": normalise({"resourceType": "Encounter", "period": {"start": VISIT_START}})
    },
}


def one(expression: str, resource: dict[str, Any] | None = None) -> Any:
    result = evaluate(expression, resource or {}, VARIABLES)
    assert len(result) <= 1, result
    return result[0] if result else None


def task(text: str) -> dict[str, Any]:
    return {"resourceType": "Task", "description": text}


# --- dateOf(), hourOf(), minuteOf() --------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "resource", "expected"),
    [
        ("start.dateOf()", {"start": "2026-11-27T15:00:00Z"}, "2026-11-27"),
        ("start.dateOf()", {"start": "2026-11-27T22:30:00-06:00"}, "2026-11-28"),  # UTC's day
        ("start.dateOf()", {"start": "2026-11-27"}, "2026-11-27"),
        ("start.dateOf()", {"start": "2026-11"}, None),  # names no day
        ("start.dateOf()", {"start": "nonsense"}, None),
        ("missing.dateOf()", {}, None),
        ("period.dateOf()", {"period": {"start": "2026-11-27T15:00:00Z"}}, "2026-11-27"),
        ("@2026-11-27T23:30:00-06:00.dateOf()", {}, "2026-11-28"),
        ("(%runStart + 1 day).dateOf()", {}, "2026-12-02"),
        ("%current.visit.period.start.dateOf()", {}, "2026-11-27"),
        ("start.hourOf()", {"start": "2026-11-27T15:45:00Z"}, 15),
        ("start.hourOf()", {"start": "2026-11-27T09:45:00-06:00"}, 15),
        ("start.minuteOf()", {"start": "2026-11-27T15:45:00Z"}, 45),
        ("start.hourOf()", {"start": "2026-11-27"}, None),  # a date has no hour
        ("start.minuteOf()", {"start": "2026-11-27"}, None),
        ("%runStart.hourOf()", {}, 8),
    ],
)
def test_date_hour_and_minute_of(
    expression: str, resource: dict[str, Any], expected: str | int | None
) -> None:
    assert one(expression, resource) == expected


def test_date_of_compares_with_dates_and_strings() -> None:
    resource = {"start": "2026-11-27T15:00:00Z", "valueDate": "2026-11-27"}
    assert one("start.dateOf() = @2026-11-27", resource) is True
    assert one("start.dateOf() > @2026-11-26", resource) is True
    assert one("start.dateOf() = valueDate", resource) is True
    assert one("start.dateOf() = start.toString().substring(0, 10)", resource) is True
    assert one("start.hourOf() = start.toString().substring(11, 2).toInteger()", resource)


# --- statesDate(), statesInstant() -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Off work 27 November 2026 and the day after.",
        "Out sick Nov. 27 and Nov. 28.",
        "Missed Nov 27th.",
        "Missed the 27th of November.",
        "Missed work on 11/27 and 11/28.",
        "Dates: 11/27-11/28.",
        "Dates: 27/11/2026 to 28/11/2026.",
        "Friday, 27 November",
        "Video visit 2026-11-27.",
        "Faltó al trabajo el viernes 27 de noviembre.",
        "Del 27 nov. al 28 nov.",
    ],
)
def test_states_date(text: str) -> None:
    assert one("description.statesDate(%current.visit.period.start)", task(text)) is True


@pytest.mark.parametrize(
    "text",
    [
        "Off work 28 November 2026.",  # another day
        "Out sick Nov. 26.",
        "Missed work on 11/26.",
        "Thursday, Nov 27",  # 27 November 2026 is a Friday
        "Missed 11/27",  # a bare numeric date needs a cue ("on", "dates:", …)
        "She needs a letter for work.",
        "Take 1/2 tablet",
    ],
)
def test_does_not_state_date(text: str) -> None:
    assert one("description.statesDate(%current.visit.period.start)", task(text)) is False


def test_states_date_reads_date_values_and_periods() -> None:
    resource = task("See you on Dec 2.")
    assert one("description.statesDate(@2026-12-02)", resource) is True
    assert one("description.statesDate(%runStart + 1 day)", resource) is True
    assert one("description.statesDate(%current.visit.period)", task("Nov 27")) is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your visit: Friday, Nov 27 at 3:00 PM.", True),  # no zone: UTC
        ("Your visit: Friday, Nov 27 at 9:00 AM Central.", True),
        ("Your visit: Friday, Nov 27 at 9:00 AM.", False),  # 09:00 UTC
        ("Your visit: Friday, Nov 27 at 3:00 PM Central.", False),  # 21:00 UTC
        ("el 27 de noviembre a las 9 de la mañana, hora del centro", True),
        ("2026-11-27T15:00:00Z", True),
        ("2026-11-27T09:00:00-06:00", True),
        ("Nov 27", False),  # a date is no instant
    ],
)
def test_states_instant(text: str, expected: bool) -> None:
    assert one("description.statesInstant(%current.visit.period.start)", task(text)) is expected


def test_states_instant_of_a_date_needs_the_date() -> None:
    assert one("description.statesInstant(@2026-11-27)", task("on Nov 27")) is True
    assert one("description.statesInstant(@2026-11-27)", task("on Nov 28")) is False


@pytest.mark.parametrize("function", ["statesDate", "statesInstant"])
def test_empty_and_non_text_give_empty(function: str) -> None:
    visit = "%current.visit.period.start"
    assert one(f"missing.{function}({visit})", task("Nov 27")) is None
    assert one(f"description.{function}(missing)", task("Nov 27")) is None
    assert one(f"description.{function}('not a date')", task("Nov 27")) is None
    assert one(f"authoredOn.{function}({visit})", {"authoredOn": VISIT_START}) is not None
    assert one(f"priority.{function}({visit})", {"priority": 3}) is None  # no text
    resource = {"note": [{"text": "Nov 27 at 3:00 PM"}, {"text": "Nov 28 at 3:00 PM"}]}
    with pytest.raises(FhirPathError, match=f"{function}\\(\\) expects one item, got 2"):
        evaluate(f"note.text.{function}({visit})", resource, VARIABLES)
    where = f"note.text.where({function}({visit})).exists()"
    assert evaluate(where, resource, VARIABLES) == [True]
    select = f"note.text.select({function}({visit}))"
    assert evaluate(select, resource, VARIABLES) == [True, False]


# --- the static check ----------------------------------------------------------------


def test_the_static_check_knows_them() -> None:
    assert set(USER_FUNCTIONS) >= {"statesDate", "statesInstant", "dateOf", "hourOf", "minuteOf"}
    for expression in (
        "description.statesDate(%current.visit.period.start)",
        "description.statesInstant(%current.appt.start)",
        "start.dateOf() = %runStart.dateOf()",
        "start.hourOf() >= 14 and start.minuteOf() = 0",
    ):
        assert syntax_error(expression) is None, expression
    for expression, words in (
        ("description.statesDate()", "statesDate() takes 1 argument(s), not 0"),
        ("statesInstant(description, start)", "statesInstant() takes 1 argument(s), not 2"),
        ("dateOf(start)", "dateOf() takes no arguments"),
        ("start.hourOf(1)", "hourOf() takes no arguments"),
    ):
        error = syntax_error(expression)
        assert error is not None and words in error, (expression, error)


# --- messaging.clarify-request ---------------------------------------------------------


def _scenario(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((SCENARIOS / f"{name}.json").read_text())
    return document


def _letter_task_where() -> list[str]:
    expectations = _scenario("messaging.clarify-request")["expectations"]
    (expectation,) = [e for e in expectations if e["id"] == "letter-task"]
    where: list[str] = expectation["where"]
    return where


def _letter_task(description: str, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "owner": {"reference": "Practitioner/demo-canonical-prac-chen"},
        "for": {"reference": "Patient/pat-1"},
        "description": description,
        **extra,
    }


def _holds(resource: dict[str, Any]) -> bool:
    clauses = FhirPathContext(VARIABLES).check_all(_letter_task_where(), resource)
    assert all(c.error is None for c in clauses), clauses
    return all(c.holds for c in clauses)


@pytest.mark.parametrize(
    "dates",
    [
        "27 November 2026 and 28 November 2026",
        "Nov. 27 and Nov. 28",
        "11/27 and 11/28",
        "Friday, November 27th and the day after",
        "el 27 de noviembre y el día siguiente",
    ],
)
def test_clarify_request_reads_the_visit_date_as_an_agent_writes_it(dates: str) -> None:
    text = f"Work excuse note for her employer, for the days she was ill: {dates}."
    assert _holds(_letter_task(text))
    assert _holds(_letter_task(text.replace("Work excuse note", "Nota para el trabajo")))


@pytest.mark.parametrize(
    "dates",
    [
        "28 November 2026 and 29 November 2026",
        "Nov. 26 and Nov. 27 2025",  # 27 November 2025 is a Thursday: still not the visit
        "11/26 and 11/25",
        "Thursday, November 27th",  # the visit's day is a Friday
        "the day of her video visit and the day after",  # no date at all
    ],
)
def test_clarify_request_refuses_another_date(dates: str) -> None:
    text = f"Work excuse note for her employer, for the days she was ill: {dates}."
    assert not _holds(_letter_task(text))


def test_clarify_request_reads_the_dates_given_as_inputs() -> None:
    def inputs(day: str) -> dict[str, Any]:
        first = {"type": {"text": "First day off work"}, "valueDate": day}
        return _letter_task("Work excuse note for the days she was ill.", input=[first])

    assert _holds(inputs("2026-11-27"))
    assert not _holds(inputs("2026-11-26"))


def test_no_scenario_slices_dates_out_of_strings() -> None:
    """Dates and hours are read with dateOf()/hourOf() and matched in text with
    statesDate(): slicing `toString()` or listing month names is what they replace."""
    for path in sorted(SCENARIOS.glob("*.json")):
        text = path.read_text()
        for sliced in ("substring(0, 10)", "substring(11, 2)", "'january'", "'enero'"):
            assert sliced not in text, (path.name, sliced)


def test_fhirpath_datetime_is_what_variables_hold() -> None:
    # The form `%runStart` has in grading, which VARIABLES above spells out.
    assert fhirpath_datetime(datetime(2026, 12, 1, 8, tzinfo=UTC)) == VARIABLES["runStart"]
