"""Dates, weekdays and times of day in messages; whether a message states an instant."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from app.kit.dates import (
    find_datetimes,
    parse_instant,
    stated_instants,
    states_datetime,
    zone_of,
)

NY = "America/New_York"
CHICAGO = "America/Chicago"
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
        # What a correct agent writes.
        ("27 November 2026", [([(2026, 11, 27)], [], [], [])]),
        ("Nov. 27", [([(None, 11, 27)], [], [], [])]),
        ("Nov 27th", [([(None, 11, 27)], [], [], [])]),
        ("the 27th of November", [([(None, 11, 27)], [], [], [])]),
        ("27/11/2026", [([(2026, 11, 27)], [], [], [])]),  # 27 is no month
        ("04/12/2026", [([(2026, 4, 12), (2026, 12, 4)], [], [], [])]),  # both kept
        ("Friday, 4 December", [([(None, 12, 4)], [4], [], [])]),
        ("4 Dec", [([(None, 12, 4)], [], [], [])]),
        ("December 4th", [([(None, 12, 4)], [], [], [])]),
        ("the fourth of December", [([(None, 12, 4)], [], [], [])]),
        ("the twenty-seventh of November", [([(None, 11, 27)], [], [], [])]),
        ("December first", [([(None, 12, 1)], [], [], [])]),
        ("primero de diciembre", [([(None, 12, 1)], [], [], [])]),
        ("4 dic.", [([(None, 12, 4)], [], [], [])]),
        ("Dec 4: 2 PM", [([(None, 12, 4)], [], [14], [0])]),
        ("9:30 a.m.", [([], [], [9], [30])]),
        ("9.30am", [([], [], [9], [30])]),
        ("09:30", [([], [], [9, 21], [30])]),
        ("21:30", [([], [], [21], [30])]),
        ("noon", [([], [], [12], [0])]),
        ("el viernes 4 de diciembre a las 9:30", [([(None, 12, 4)], [4], [9, 21], [30])]),
        ("el 4 de diciembre de 2026 a las 9.30", [([(2026, 12, 4)], [], [9, 21], [30])]),
        ("a las 9.30 h", [([], [], [9, 21], [30])]),
        ("on 11/27 and 11/28", [([(None, 11, 27)], [], [], []), ([(None, 11, 28)], [], [], [])]),
        ("dates: 11/27-11/28", [([(None, 11, 27), (None, 11, 28)], [], [], [])]),
        ("del 27/11 al 28/11", [([(None, 11, 27), (None, 11, 28)], [], [], [])]),
        (
            "missed work 11/27 and 11/28",
            [([(None, 11, 27)], [], [], []), ([(None, 11, 28)], [], [], [])],
        ),
        ("ill 11/27-11/30", [([(None, 11, 27), (None, 11, 30)], [], [], [])]),
        ("12/30 - 1/2", [([(None, 12, 30), (None, 1, 2), (None, 2, 1)], [], [], [])]),
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
        "Take 1/2 to 3/4 tablet",
        "Take 1/2 to 1/4 tablet",
        "Increase from 1/2 to 1 tablet",
        "Tome 1/2 a 1/4 de tableta",
        "We are open 24/7.",
        "You may second the motion.",
        "11/27",  # a bare numeric date needs a cue
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


# --- time zones ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "zone", "written"),
    [
        ("10:00 AM Central", CHICAGO, "Central"),
        ("10 a.m. CT", CHICAGO, "CT"),
        ("at 3 PM CST.", CHICAGO, "CST"),
        ("9:00 AM Central Time on Friday", CHICAGO, "Central Time"),
        ("2 PM Eastern", NY, "Eastern"),
        ("9:00 ET", NY, "ET"),
        ("9:00 EST/EDT", NY, "EST/EDT"),
        ("9:00 a.m. Eastern Standard Time", NY, "Eastern Standard Time"),
        ("See you at 10 Eastern.", NY, "Eastern"),
        ("2 PM Pacific (PT)", "America/Los_Angeles", "Pacific (PT)"),
        ("9 AM Mountain", "America/Denver", "Mountain"),
        ("9 AM MST", "America/Denver", "MST"),
        ("9 AM Arizona time", "America/Phoenix", "Arizona time"),
        ("10:00 UTC", "UTC", "UTC"),
        ("10:00 GMT", "UTC", "GMT"),
        ("10:00 (UTC)", "UTC", "(UTC)"),
        ("(UTC) 10:00", "UTC", "(UTC)"),
        ("10:00Z", "UTC", "Z"),
        ("10 AM UTC-6", "-06:00", "UTC-6"),
        ("2026-12-14T10:00:00Z", "UTC", "Z"),
        ("on (UTC): 2026-12-14T10:00:00Z", "UTC", "Z"),
        ("2026-12-14T10:00:00-06:00", "-06:00", "-06:00"),
        ("las 10 de la mañana, hora del centro", CHICAGO, "hora del centro"),
        ("a las 10, hora central", CHICAGO, "hora central"),
        ("a las 10 (hora del Este)", NY, "(hora del Este)"),
        ("(hora del Este) el 4 de diciembre a las 10:00", NY, "(hora del Este)"),
        ("a las 10, hora del Pacífico", "America/Los_Angeles", "hora del Pacífico"),
        ("a las 10 tiempo universal", "UTC", "tiempo universal"),
    ],
)
def test_reads_the_zone_stated_with_a_time(text: str, zone: str, written: str) -> None:
    (stated,) = find_datetimes(text)
    assert (stated.zone, stated.zone_text) == (zone, written)
    assert all(t.zone == zone for t in stated.times)


@pytest.mark.parametrize(
    "text",
    [
        "Meet at 10 AM Central Park",
        "See you at 2 PM Eastern Avenue clinic",
        "Our Eastern Avenue office opens at 9:00.",
        "at 10:00 central clinic",
        "Your 10:00 CT scan",
        "Your 10:00 PT session",
        "10:00 ct",  # an abbreviation counts in capitals only
        "10:00 Z",  # "Z" as a word is a letter
        "The central clinic is open 9:00–17:00.",
        "Central: 10:00",  # a zone word before a time counts only in parentheses
    ],
)
def test_no_zone(text: str) -> None:
    assert all(s.zone is None for s in find_datetimes(text))
    assert all(t.zone is None for s in find_datetimes(text) for t in s.times)


def test_a_range_and_two_zones() -> None:
    (stated,) = find_datetimes("9:00–9:30 AM Central")
    assert [t.zone for t in stated.times] == [CHICAGO, CHICAGO]  # written once, for both
    (stated,) = find_datetimes("10:00 AM Central (11:00 AM Eastern)")
    assert [t.zone for t in stated.times] == [CHICAGO, NY]
    assert stated.zone == CHICAGO


# Friday 4 December 2026; Central is UTC-6 then, UTC-5 in July.
FRIDAY_NINE_CENTRAL = "2026-12-04T15:00:00Z"
SPANISH_TEN_CENTRAL = "el 4 de diciembre, a las 10 de la mañana, hora del centro"


@pytest.mark.parametrize(
    ("message", "instant", "zones", "states"),
    [
        ("Friday Dec 4 at 9:00 AM Central", FRIDAY_NINE_CENTRAL, (), True),
        ("Friday Dec 4 at 9:00 AM Central", "2026-12-04T09:00:00Z", (), False),
        # The reader's zones do not undo a zone the text states.
        ("Friday Dec 4 at 9:00 AM Central", "2026-12-04T09:00:00Z", (CHICAGO,), False),
        ("Friday Dec 4 at 9:00 AM Central", "2026-12-04T09:00:00Z", (NY,), False),
        ("Dec 4 at 2 PM Eastern", "2026-12-04T14:00:00Z", (), False),
        ("Dec 4 at 2 PM Eastern", "2026-12-04T19:00:00Z", (), True),
        ("Dec 4 at 10:00 (UTC)", "2026-12-04T10:00:00Z", (), True),
        ("Dec 4 at 10:00 (UTC)", "2026-12-04T10:00:00Z", (NY,), True),
        ("Dec 4 at 05:00 (UTC)", "2026-12-04T10:00:00Z", (NY,), False),  # 05:00 NY, not UTC
        ("Dec 4 at 05:00", "2026-12-04T10:00:00Z", (NY,), True),  # no zone: read in NY too
        (SPANISH_TEN_CENTRAL, "2026-12-04T16:00:00Z", (), True),
        (SPANISH_TEN_CENTRAL, "2026-12-04T10:00:00Z", (), False),
        ("Your visit is December 4. It starts at 9:00 AM Central.", FRIDAY_NINE_CENTRAL, (), True),
        ("on (UTC): 2026-12-04T15:00:00Z", FRIDAY_NINE_CENTRAL, (CHICAGO,), True),
        ("2026-12-04T09:00:00-06:00", FRIDAY_NINE_CENTRAL, (), True),
        ("2026-12-04T09:00:00-06:00", "2026-12-04T09:00:00Z", (), False),
        # Daylight saving time: a July day in Central is UTC-5.
        ("July 9 at 10:00 AM Central", "2026-07-09T15:00:00Z", (), True),
        ("July 9 at 10:00 AM Central", "2026-07-09T16:00:00Z", (), False),
        ("July 9 at 10:00 AM CST", "2026-07-09T15:00:00Z", (), True),  # the region's clock
        # Not zones: read as before, in UTC or the reader's zones.
        ("Dec 4 at 9 AM, Central Park entrance", "2026-12-04T09:00:00Z", (), True),
        ("Dec 4 at 2 PM Eastern Avenue clinic", "2026-12-04T14:00:00Z", (), True),
    ],
)
def test_states_datetime_respects_a_stated_zone(
    message: str, instant: str, zones: tuple[str, ...], states: bool
) -> None:
    assert (states_datetime([message], instant, zones) is not None) is states


def test_match_names_the_stated_zone() -> None:
    match = states_datetime(["Friday Dec 4 at 9:00 AM Central"], FRIDAY_NINE_CENTRAL)
    assert match is not None
    assert (match.zone, match.local) == (CHICAGO, "2026-12-04T09:00:00-06:00")


def _utc(year: int, month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_stated_instants() -> None:
    (zoned,) = find_datetimes("Friday, December 4, 2026 at 9:00 AM Central")
    assert stated_instants(zoned, (NY,)) == [_utc(2026, 12, 4, 15)]
    (plain,) = find_datetimes("December 4, 2026 at 9:00")
    assert stated_instants(plain, (NY,)) == [
        _utc(2026, 12, 4, 9),  # 9:00 UTC
        _utc(2026, 12, 4, 14),  # 9:00 New York
        _utc(2026, 12, 4, 21),  # 21:00 UTC
        _utc(2026, 12, 5, 2),  # 21:00 New York
    ]
    (numeric,) = find_datetimes("on 04/12/2026 at 9:00 AM UTC")
    assert stated_instants(numeric) == [_utc(2026, 4, 12, 9), _utc(2026, 12, 4, 9)]
    (summer,) = find_datetimes("July 9, 2026 at 10:00 AM Central")
    assert stated_instants(summer) == [_utc(2026, 7, 9, 15)]
    (offset,) = find_datetimes("2026-12-14T10:00:00+05:30")
    assert stated_instants(offset) == [_utc(2026, 12, 14, 4, 30)]
    assert all(i.tzinfo is UTC for i in stated_instants(plain, (NY,)))


def test_stated_instants_without_a_date_or_a_time_or_a_year() -> None:
    (time_only,) = find_datetimes("at 9:00 AM Central")
    assert stated_instants(time_only) == []
    (date_only,) = find_datetimes("December 4, 2026")
    assert stated_instants(date_only) == []
    (no_year,) = find_datetimes("Friday, Dec 4 at 9:00 AM Central")
    assert stated_instants(no_year) == []  # no year and no reference to place it
    assert stated_instants(no_year, reference=date(2026, 11, 27)) == [_utc(2026, 12, 4, 15)]
    # 4 December 2027 is a Saturday: the weekday rules it out.
    assert stated_instants(no_year, reference=date(2027, 11, 27)) == []
    (no_month,) = find_datetimes("on the 8th at 10:00 AM UTC")
    assert stated_instants(no_month, reference=date(2026, 12, 1)) == [
        _utc(2026, 11, 8, 10),
        _utc(2026, 12, 8, 10),
    ]


def test_stated_instants_over_a_daylight_saving_change() -> None:
    (repeated,) = find_datetimes("Nov 1, 2026 at 1:30 AM Central")  # clocks go back at 2:00
    assert stated_instants(repeated) == [_utc(2026, 11, 1, 6, 30), _utc(2026, 11, 1, 7, 30)]
    (skipped,) = find_datetimes("Mar 8, 2026 at 2:30 AM Central")  # 2:00 jumps to 3:00
    assert stated_instants(skipped) == []


def test_zone_of() -> None:
    assert zone_of("-06:00") == timezone(-timedelta(hours=6))
    assert zone_of("+05:30") == timezone(timedelta(hours=5, minutes=30))
    assert str(zone_of(CHICAGO)) == CHICAGO
    assert zone_of("Not/AZone") is None
