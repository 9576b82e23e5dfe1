"""Dates, weekdays and times of day in messages; whether a message states an instant."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.kit.dates import find_datetimes, parse_instant, states_datetime

NY = "America/New_York"
MADRID = "Europe/Madrid"
# Tuesday 8 December 2026, 10:30 in UTC (05:30 in New York, 11:30 in Madrid).
INSTANT = "2026-12-08T10:30:00Z"


def _parts(
    text: str,
) -> list[tuple[list[tuple[int | None, int | None, int]], list[int], list[int], list[int]]]:
    out = []
    for s in find_datetimes(text):
        dates = [c for d in s.dates for c in d.candidates]
        hours = sorted(h for t in s.times for h in t.hours)
        minutes = [t.minute for t in s.times]
        out.append((dates, list(s.weekdays), hours, minutes))
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tuesday, December 8 at 10:30 AM", [([(None, 12, 8)], [1], [10], [30])]),
        ("Tue Dec 8, 10:30am", [([(None, 12, 8)], [1], [10], [30])]),
        ("Tue. Dec. 8th, 2026 at 10:30 a.m.", [([(2026, 12, 8)], [1], [10], [30])]),
        ("12/8 at 10:30", [([(None, 12, 8), (None, 8, 12)], [], [10, 22], [30])]),
        ("2026-12-08 10:30", [([(2026, 12, 8)], [], [10], [30])]),
        ("2026-12-08T15:30:00Z", [([(2026, 12, 8)], [], [15], [30])]),
        ("Fri, Dec 11 at 15:30", [([(None, 12, 11)], [4], [15], [30])]),
        ("8 de diciembre a las 10:30", [([(None, 12, 8)], [], [10, 22], [30])]),
        ("el martes 8 a las 10:30 de la mañana", [([(None, None, 8)], [1], [10], [30])]),
        ("el martes 8 de diciembre a las 4 de la tarde", [([(None, 12, 8)], [1], [16], [0])]),
        ("December 8th at noon", [([(None, 12, 8)], [], [12], [0])]),
        ("a mediodía", [([], [], [12], [0])]),
        ("half past ten on the 8th", [([(None, None, 8)], [], [10, 22], [30])]),
        ("a las diez y media", [([], [], [10, 22], [30])]),
        ("a las 11 menos cuarto", [([], [], [10, 22], [45])]),
        ("at 3 pm", [([], [], [15], [0])]),
        ("at 3:15 PM", [([], [], [15], [15])]),
        ("10 a. m.", [([], [], [10], [0])]),
        ("08/12/2026", [([(2026, 8, 12), (2026, 12, 8)], [], [], [])]),
        ("the 8th of December", [([(None, 12, 8)], [], [], [])]),
        ("miércoles 9 de diciembre de 2026", [([(2026, 12, 9)], [2], [], [])]),
        ("Sat Dec 12 9am", [([(None, 12, 12)], [5], [9], [0])]),
        ("on 12/8", [([(None, 12, 8), (None, 8, 12)], [], [], [])]),
        ("on the 8th", [([(None, None, 8)], [], [], [])]),
        ("See you at 10.", [([], [], [10, 22], [0])]),
        ("Come at 3 tomorrow", [([], [], [3, 15], [0])]),
        ("**Tuesday, December 8th at 10:30 AM EST**", [([(None, 12, 8)], [1], [10], [30])]),
    ],
)
def test_find_datetimes(text: str, expected: object) -> None:
    assert _parts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Take 1/2 tablet",
        "Call 555-0100",
        "Your copay is $25.00",
        "Take 20 mg twice a day",
        "We sat down to review your chart",
        "You may call us back",
        "Mar is the sea in Spanish",
        "Please take 1.5 mL",
        "tomorrow morning",
        "mañana por la mañana",
        "see you in 2 weeks",
        "We are at 10 Main Street.",
        "Go to the 2nd floor.",
        "We have clinics at 3 locations.",
        "Your blood pressure was 120/80.",
    ],
)
def test_no_datetime(text: str) -> None:
    assert find_datetimes(text) == []


def test_groups_break_between_statements() -> None:
    stated = find_datetimes("Monday or Tuesday at 10. We also have December 9 at 2:00 PM.")
    assert [s.weekdays for s in stated] == [(0,), (1,), ()]
    assert stated[2].quote.endswith("2:00 PM.")


@pytest.mark.parametrize(
    ("message", "zones"),
    [
        ("See you Tuesday, December 8 at 10:30 AM.", ()),
        ("Tue Dec 8, 10:30am works.", ()),
        ("Booked: 12/8 at 10:30.", ()),
        ("Your visit: 2026-12-08 10:30", ()),
        ("Le esperamos el 8 de diciembre a las 10:30.", ()),
        ("Le esperamos el martes 8 a las 10:30 de la mañana.", ()),
        ("Your appointment is December 8. It starts at 10:30.", ()),
        ("See you Tuesday, December 8 at 5:30 AM.", (NY,)),
        ("Nos vemos el 8 de diciembre a las 11:30.", (MADRID,)),
        ("Your visit is on 8/12/2026 at 10:30.", ()),
        ("Half past ten on Tuesday the 8th.", ()),
    ],
)
def test_states_datetime(message: str, zones: tuple[str, ...]) -> None:
    assert states_datetime(["Hello.", message], INSTANT, zones) is not None


@pytest.mark.parametrize(
    ("message", "zones"),
    [
        ("See you Tuesday, December 8 at 11:30 AM.", ()),  # an hour off
        ("See you Monday, December 8 at 10:30 AM.", ()),  # wrong weekday
        ("See you December 9 at 10:30 AM.", ()),  # wrong day
        ("See you Tuesday at 10:30.", ()),  # no date
        ("See you December 8 at 10:30 PM.", ()),  # PM
        ("See you Tuesday, December 8 at 5:30 AM.", ()),  # the New York time, zone not given
        ("Nos vemos el 8 de diciembre a las 12:30.", (MADRID,)),
        ("December 8 is full. We have December 9 at 10:30.", ()),  # the time is the 9th's
    ],
)
def test_does_not_state_datetime(message: str, zones: tuple[str, ...]) -> None:
    assert states_datetime([message], INSTANT, zones) is None


def test_states_a_date_only_value() -> None:
    assert states_datetime(["Your test is on December 8."], "2026-12-08") is not None
    assert states_datetime(["Your test is on December 9."], "2026-12-08") is None


def test_match_names_message_zone_and_quote() -> None:
    match = states_datetime(["Hi", "Tuesday, December 8 at 5:30 AM"], INSTANT, (NY,))
    assert match is not None
    assert (match.message_index, match.zone) == (1, NY)
    assert match.quote == "Tuesday, December 8 at 5:30 AM"


def test_parse_instant() -> None:
    assert parse_instant("2026-12-08T10:30:00Z") == datetime(2026, 12, 8, 10, 30, tzinfo=UTC)
    assert parse_instant("2026-12-08") == date(2026, 12, 8)
    assert parse_instant("not a date") is None
