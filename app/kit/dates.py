"""Dates, weekdays, times of day and time zones stated in a text, in English and Spanish:
the one reader that message checks (app/grading/message) and scenario FHIRPath helpers
(app/scenarios/fhirpath_helpers: `statesDate`, `statesInstant`) share, so it sits in the
kit, below both.

`find_datetimes(text) -> list[Stated]` reads every date ("December 8", "Dec. 8th, 2026",
"27 November 2026", "the 27th of November", "the fourth of December", "8 de diciembre",
"4 dic.", "primero de diciembre", "12/8", "08/12/2026", "27.11.2026", "2026-12-08"),
weekday ("Tuesday", "Tue" before a date, "martes"), time of day ("10:30 AM", "10:30am",
"9.30am", "15:30", "10 a. m.", "a las 10 de la mañana", "a las 9.30", "noon", "mediodía",
"half past ten", "las diez y media") and the zone written with a time (below), and groups
the ones written together ("Tuesday, December 8 at 10:30 AM" is one `Stated` with a
weekday, a date and a time). Groups break at a sentence end, at "or"/"and"/"o"/"y" and
after `GROUP_GAP` characters of other text.

Readings are kept ambiguous rather than guessed, so a correct message is never read wrong:
- a time without AM/PM ("10:30", "a las 10") may be 10:30 or 22:30 (`StatedTime.hours`);
- a numeric date "8/12" may be 8 December or August 12 (`StatedDate.candidates`); a
  numeric date without a year counts only next to a time or a weekday, after a cue
  ("on", "el", "for", "para", "until", "hasta", "dates:", "fecha:" …), as the next of a
  list or range whose first counts ("on 11/27 and 11/28", "del 27/11 al 28/11"), or in a
  list or range of two a few days apart ("missed work 11/27 and 11/28", "11/27-11/30":
  the second 1 to 31 days after the first, not before a dose word) — so "1/2 tablet",
  "1/2 to 3/4 tablet" and "1/2 to 1/4 tablet" are no dates;
- "the 8th", "el martes 8" give a day with no month (`month is None`); "the 8th" alone
  needs the same cue as a bare numeric date ("the 2nd floor" is no date);
- a day as an ordinal word reads before "of"/"de" and a month ("the fourth of
  December"), or after a month's full name ("December first"; never "may second");
- an English "at 10" with no AM/PM is a time only before the end of a clause or words like
  "on", "tomorrow", "sharp" ("at 10 Main Street" is an address);
- weekday abbreviations ("Sat", "Wed", "Mar") count only right before a date ("Sat
  sat down" is no weekday).
Relative words ("today", "tomorrow", "mañana") are not dates: they state nothing checkable.

Time zones. A zone counts only written right after a time (a comma between is allowed),
or in parentheses right after or right before it ("10:00 (UTC)", "(hora del Este) el 4
de diciembre a las 10:00"): "10:00 AM Central", "2 PM Eastern Time", "10 a.m. CT",
"9:00 EST/EDT", "2 PM Pacific (PT)", "9 AM Mountain", "Arizona time", "10:00 UTC",
"GMT", "UTC-6", "10:00Z" (a "Z" standing alone is a letter), "hora del centro", "hora
central", "hora del Este", "hora del Pacífico", "tiempo universal". A bare region word
or abbreviation must end the clause or come before words like "on", "and", "to" ("10 AM
Central Park", "2 PM Eastern Avenue", "10:00 CT scan" state no zone), and an abbreviation
counts only in capitals. Each is read as an IANA zone (`StatedTime.zone`, `Stated.zone`,
`Stated.zone_text` the zone as written): a standard or daylight abbreviation (EST, EDT)
names its region's zone, so an instant is read in the offset that zone really has that
day; MST is Denver's (only "Arizona" is Phoenix). An ISO date-time with "Z" or an offset
states its own zone ("UTC", "-06:00") and so its exact instant. A time with no zone of
its own takes the next zone its statement writes ("9:00–9:30 AM Central"), else the one
before, else the statement's parenthesised one.

`stated_instants(stated, default_zones=(), reference=None) -> list[datetime]`: every
instant one statement can mean (aware, UTC), as its dates × its hours × its stated zone,
or UTC and each of `default_zones` for a time with none. A statement without a date or a
time gives []; a date missing its year or month is placed near `reference`.
`zone_of(name)` gives the tzinfo of a `StatedTime.zone`.

`states_datetime(messages, instant, zones=()) -> DatetimeMatch | None` says whether some
message states `instant` (an aware datetime, or a FHIR dateTime / date string) as a date
and a time of day: a time with a stated zone is read in that zone only ("10:00 AM
Central" is 16:00 UTC in December, not 10:00 UTC), a time without one in UTC or in any
of `zones` (IANA names, the clinic's zone). A stated weekday must agree with the date.
The date and the time may sit in separate sentences of the same message. A weekday with
a time but no date does not state an instant (it names a week's day, not the booked
one). For a date-only value the date alone must be stated.

The reader is split by concept: the words (`app.kit.date_words`), the patterns built of
them (`app.kit.date_patterns`), each mention found apart (`app.kit.date_mentions`), the
statements grouped of them (`app.kit.date_statements`) and the instants a statement can
mean (`app.kit.date_instants`). This module is their public face.
"""

from __future__ import annotations

from app.kit.date_instants import (
    DatetimeMatch,
    local_readings,
    parse_instant,
    stated_instants,
    states_datetime,
    zone_info,
    zone_of,
)
from app.kit.date_mentions import YMD, StatedDate, StatedTime
from app.kit.date_statements import GROUP_GAP, Stated, find_datetimes, scan_datetimes
from app.kit.date_words import MONTHS, SPANISH_MONTHS, SPANISH_WEEKDAYS, WEEKDAYS

__all__ = [
    "GROUP_GAP",
    "MONTHS",
    "SPANISH_MONTHS",
    "SPANISH_WEEKDAYS",
    "WEEKDAYS",
    "YMD",
    "DatetimeMatch",
    "Stated",
    "StatedDate",
    "StatedTime",
    "find_datetimes",
    "local_readings",
    "parse_instant",
    "scan_datetimes",
    "stated_instants",
    "states_datetime",
    "zone_info",
    "zone_of",
]
