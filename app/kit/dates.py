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
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

from app.kit.phrases import Folded, fold, quote

# Words between two parts of one date-time ("Tuesday, December 8 at 10:30 AM" has short
# gaps); longer runs of other text mean another statement.
GROUP_GAP = 24

YMD = tuple[int | None, int | None, int]  # year, month, day; None when not stated

MONTHS: dict[str, int] = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sept": 9,
    "sep": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
    "enero": 1,
    "ene": 1,
    "febrero": 2,
    "marzo": 3,
    "abril": 4,
    "abr": 4,
    "mayo": 5,
    "junio": 6,
    "julio": 7,
    "agosto": 8,
    "ago": 8,
    "septiembre": 9,
    "setiembre": 9,
    "set": 9,
    "octubre": 10,
    "noviembre": 11,
    "diciembre": 12,
    "dic": 12,
}
# The Spanish names as written (with their accents), Monday and January first: for texts
# this project writes (the scenario check's paraphrases), not for reading.
SPANISH_WEEKDAYS = ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo")
SPANISH_MONTHS = (
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
)
WEEKDAYS: dict[str, int] = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
    "lunes": 0,
    "martes": 1,
    "miercoles": 2,
    "jueves": 3,
    "viernes": 4,
    "sabado": 5,
    "domingo": 6,
}
# Abbreviations that are also words ("sat", "wed", "sun", "mar") count only before a date.
WEEKDAY_ABBREVIATIONS: dict[str, int] = {
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
    "lun": 0,
    "mar": 1,
    "mie": 2,
    "mier": 2,
    "jue": 3,
    "vie": 4,
    "sab": 5,
    "dom": 6,
}
NUMBER_WORDS: dict[str, int] = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "una": 1,
    "uno": 1,
    "dos": 2,
    "tres": 3,
    "cuatro": 4,
    "cinco": 5,
    "seis": 6,
    "siete": 7,
    "ocho": 8,
    "nueve": 9,
    "diez": 10,
    "once": 11,
    "doce": 12,
}
# Days written as ordinal words: "the fourth of December", "December first", "primero de".
_UNITS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
ORDINAL_DAYS: dict[str, int] = {
    **{word: n for n, word in enumerate(_UNITS, start=1)},
    **{
        word: n
        for n, word in enumerate(
            (
                "tenth",
                "eleventh",
                "twelfth",
                "thirteenth",
                "fourteenth",
                "fifteenth",
                "sixteenth",
                "seventeenth",
                "eighteenth",
                "nineteenth",
                "twentieth",
            ),
            start=10,
        )
    },
    **{f"twenty-{word}": 20 + n for n, word in enumerate(_UNITS, start=1)},
    "thirtieth": 30,
    "thirty-first": 31,
    "primero": 1,
}
_ORDINAL_LOOKUP = {word.replace("-", ""): n for word, n in ORDINAL_DAYS.items()}

# Time zones a text may state beside a time (`Stated.zone`), as IANA names. A standard or a
# daylight abbreviation (EST, EDT) names its region's zone: an instant is read in that
# zone's real offset on the day, as the writer meant the clock on the wall.
NEW_YORK = "America/New_York"
CHICAGO = "America/Chicago"
DENVER = "America/Denver"
PHOENIX = "America/Phoenix"  # Arizona keeps standard time all year
LOS_ANGELES = "America/Los_Angeles"
ANCHORAGE = "America/Anchorage"
HONOLULU = "Pacific/Honolulu"
ZONE_NAMES: dict[str, str] = {
    "eastern": NEW_YORK,
    "central": CHICAGO,
    "mountain": DENVER,
    "pacific": LOS_ANGELES,
    "arizona": PHOENIX,
    "alaska": ANCHORAGE,
    "hawaii": HONOLULU,
}
# Upper case in the text only ("10:00 CT", not "10:00 ct"): the letters are words too.
ZONE_ABBREVIATIONS: dict[str, str] = {
    "et": NEW_YORK,
    "est": NEW_YORK,
    "edt": NEW_YORK,
    "ct": CHICAGO,
    "cst": CHICAGO,
    "cdt": CHICAGO,
    "mt": DENVER,
    "mst": DENVER,
    "mdt": DENVER,
    "pt": LOS_ANGELES,
    "pst": LOS_ANGELES,
    "pdt": LOS_ANGELES,
    "akst": ANCHORAGE,
    "akdt": ANCHORAGE,
    "hst": HONOLULU,
}
# After "hora"/"horario": "hora del Este", "hora central", "horario del Pacífico".
SPANISH_ZONES: dict[str, str] = {
    "del este": NEW_YORK,
    "del centro": CHICAGO,
    "central": CHICAGO,
    "de la montana": DENVER,
    "de las montanas": DENVER,
    "del pacifico": LOS_ANGELES,
    "de arizona": PHOENIX,
    "de alaska": ANCHORAGE,
    "de hawai": HONOLULU,
    "de hawaii": HONOLULU,
    "utc": "UTC",
    "gmt": "UTC",
}


def _alternation(words: Iterable[str]) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


_MONTH = rf"(?P<month>{_alternation(MONTHS)})\.?"
_MONTH2 = rf"(?:{_alternation(MONTHS)})"
_ORD = r"(?:st|nd|rd|th|º|°|o|ro)?"
_YEAR = r"(?P<year>\d{4})"
_HOUR_WORD = _alternation(NUMBER_WORDS)
_B = r"(?<![\w$])"  # no letter, digit or currency sign right before
_E = r"(?![\w])"

_ISO_RE = re.compile(
    rf"{_B}(?P<y>\d{{4}})-(?P<m>\d{{1,2}})-(?P<d>\d{{1,2}})"
    r"(?:[t ](?P<h>\d{1,2}):(?P<mi>\d{2})(?::\d{2}(?:\.\d+)?)?(?P<tz>z|[+-]\d{2}:?\d{2})?)?(?!\d)"
)
_MONTH_DAY_RE = re.compile(
    rf"{_B}{_MONTH}\s+(?:the\s+)?(?P<day>\d{{1,2}}){_ORD}(?!\d|:\d)(?!\s*(?:am|pm|a\.|p\.))"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
_DAY_MONTH_RE = re.compile(
    rf"{_B}(?P<day>\d{{1,2}}){_ORD}\s*(?:of\s+|de\s+)?{_MONTH}{_E}"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
_NUMERIC_YEAR_RE = re.compile(
    rf"{_B}(?P<a>\d{{1,2}})(?P<sep>[/.-])(?P<b>\d{{1,2}})(?P=sep)(?P<y>\d{{4}}|\d{{2}})(?![\d/.-]\d)"
)
_NUMERIC_RE = re.compile(r"(?<![\w$/.,])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?![\d/]|[.,]\d)")
_WEEKDAY_RE = re.compile(rf"{_B}(?P<weekday>{_alternation(WEEKDAYS)}){_E}")
_WEEKDAY_ABBR_RE = re.compile(
    rf"{_B}(?P<weekday>{_alternation(WEEKDAY_ABBREVIATIONS)})\.?(?=,?\s*(?:\d|{_MONTH2}{_E}))"
)
# "Tuesday the 8th", "martes 8", "Tue 8": a day with no month, right after a weekday.
_WEEKDAY_DAY_RE = re.compile(
    rf"{_B}(?P<weekday>{_alternation({**WEEKDAYS, **WEEKDAY_ABBREVIATIONS})})\.?,?\s+"
    rf"(?:the\s+|el\s+|dia\s+)?(?P<day>\d{{1,2}}){_ORD}(?![\d:./-]|\s*(?:am|pm|a\.|p\.|h\b|hrs?\b))"
)
_ORDINAL_DAY_RE = re.compile(r"(?<![\w$])the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)(?!\w)")
_DAY_WORD = "|".join(w.replace("-", "[- ]?") for w in sorted(ORDINAL_DAYS, key=len, reverse=True))
# "the fourth of December", "primero de diciembre"; "December fourth" with a month's full
# name only, and never "may" ("you may second it"). Python's engine scans slowly for an
# alternation of words, so these are tried only where `str.find` sees one of
# `_ORDINAL_STEMS` (`_ordinal_dates`).
_ORDINAL_STEMS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "teenth",
    "tieth",
    "primero",
)
_WORD_DAY_MONTH_RE = re.compile(
    rf"(?P<dayword>{_DAY_WORD})\s+(?:of|de)\s+{_MONTH}{_E}"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
_FULL_MONTHS = [m for m, n in MONTHS.items() if len(m) > 3 and m not in ("may", "mayo")]
_MONTH_WORD_DAY_RE = re.compile(
    rf"(?P<month>{_alternation(_FULL_MONTHS)})\s+(?:the\s+)?(?P<dayword>{_DAY_WORD}){_E}"
    rf"(?:,?\s+{_YEAR}(?!\d))?"
)

_MERIDIEM = r"(?P<mer>am|pm|a\.\s?m\.?|p\.\s?m\.?|a\s?m\b|p\s?m\b)"
_QUALIFIER = (
    r"(?:\s*(?P<qual>de la manana|de la tarde|de la noche|del mediodia|de la madrugada"
    r"|in the morning|in the afternoon|in the evening|at night|en punto|o'?clock))?"
)
_CLOCK_RE = re.compile(
    rf"(?<![\w$:.,])(?P<h>\d{{1,2}})(?::|h(?=\d))(?P<mi>\d{{2}})(?::\d{{2}})?(?![\d])"
    rf"(?:\s*(?:{_MERIDIEM}|hrs?\b|h\b))?{_QUALIFIER}"
)
# "9.30am", "9.30 h"; after "a las", "a las 9.30" alone (the regex starts with its literal,
# which Python's engine finds fast; the word boundary before it is checked by hand).
_DOT_CLOCK_RE = re.compile(
    rf"(?<![\w$:.,])(?P<h>\d{{1,2}})\.(?P<mi>\d{{2}})\s*(?:{_MERIDIEM}|hrs?\b|h\b)"
)
_LAS_DOT_CLOCK_RE = re.compile(
    rf"las?\s+(?P<h>\d{{1,2}})\.(?P<mi>\d{{2}})(?![\d.,]\d|\s*(?:%|mg|ml|\$|us|eur|dol|peso))"
    rf"(?:\s*(?:{_MERIDIEM}|hrs?\b|h\b))?{_QUALIFIER}"
)
_HOUR_MERIDIEM_RE = re.compile(rf"(?<![\w$:.,])(?P<h>\d{{1,2}})\s*{_MERIDIEM}(?![a-z]){_QUALIFIER}")
_SPOKEN_RE = re.compile(
    rf"(?<!\w)(?:(?P<lead>half past|quarter past|quarter to)\s+(?P<h1>\d{{1,2}}|{_HOUR_WORD})"
    rf"|(?:a\s+las?|las|at)\s+(?P<h2>\d{{1,2}}|{_HOUR_WORD})"
    r"(?:\s+(?P<tail>y media|y cuarto|menos cuarto|y (?P<mins>\d{1,2})"
    r"|thirty|fifteen|forty-five))?)"
    rf"(?!\w|:|\.\d|\s*(?:%|mg|ml|dollars?|dolares|pesos|euros|minutes|minutos|people|personas|units))"
    rf"(?:\s*{_MERIDIEM})?{_QUALIFIER}"
)
_NOON_RE = re.compile(r"(?<!\w)(?:12\s+)?(?P<word>noon|midday|mediodia|midnight|medianoche)(?!\w)")

# A time zone, as folded text. `name` and `abbr` alone are "bare": after a time they count
# only before the end of a clause or words like "on", "and" ("10 AM Central Park" and
# "2 PM Eastern Avenue" state no zone), and `abbr` only in upper case.
_ZONE = (
    rf"(?P<name>{_alternation(ZONE_NAMES)})"
    r"(?P<name_time>\s+(?:standard\s+|daylight\s+|prevailing\s+)?time(?:\s+zone)?)?(?!\w)"
    rf"|(?P<abbr>{_alternation(ZONE_ABBREVIATIONS)})(?:/(?:{_alternation(ZONE_ABBREVIATIONS)}))?(?!\w)"
    r"|(?P<utc>utc|gmt)(?:\s?(?P<off>[+-]\d{1,2}(?::?\d{2})?))?(?![\w:])"
    rf"|(?:hora|horario)\s+(?:estandar\s+|de verano\s+)?(?P<es>{_alternation(SPANISH_ZONES)})(?!\w)"
    r"|(?P<universal>tiempo universal(?:\s+coordinado)?)(?!\w)"
)
_ZONE_RE = re.compile(_ZONE)
_ZONE_LEAD_RE = re.compile(r"\s*(?:,\s*)?")
_ZONE_PAREN_RE = re.compile(rf"\(\s*(?:{_ZONE})\s*\)")
# A parenthesised zone right before a time: "(UTC) 10:00", "(hora del Este): 10:00".
_ZONE_BEFORE_RE = re.compile(
    rf"(?P<paren>\(\s*(?:{_ZONE})\s*\))\s*:?\s*(?:(?:on|el|the|at|a las)\s+)?$"
)
_ZONE_FOLLOW_RE = re.compile(
    r"\s*(?:$|[.,;:!?)\]/\"'*(-]|(?:on|tomorrow|today|tonight|this|next|and|or|then|if|is"
    r"|works|please|to|until|through|thru|sharp|y|o|el)(?!\w))"
)

# What may follow an English "at N" for N to be an hour ("see you at 10.", "at 3 on Friday").
_AT_HOUR_FOLLOW_RE = re.compile(
    r"\s*(?:$|[.,;!?)]|-|(?:on|tomorrow|today|tonight|this|next|sharp|and|or|to|with|for|if"
    r"|then|in the|works|is|would|please)(?!\w))"
)
_GAP_BREAK_RE = re.compile(r"[.!?;\n]|(?<!\w)(?:or|and|but|instead|not|o|u|y|pero|no|ni)(?!\w)")
_BARE_CUE_RE = re.compile(
    r"(?:^|\W)(?:on|el|for|para|del|dia|by|until|hasta|since|through|thru|dated?|dates"
    r"|fechas?)\W*$"
)
# Between two dates of one list or range: "on 11/27 and 11/28", "del 27/11 al 28/11".
_DATE_LIST_RE = re.compile(
    r"\s*(?:(?:,|-|&|and|or|to|through|thru|till|until|y|o|al|a|hasta)\s*){1,2}"
)


@dataclass(frozen=True, slots=True)
class StatedDate:
    """Every reading of one written date, as (year, month, day); None where unstated."""

    candidates: tuple[YMD, ...]
    bare: bool = False  # a numeric date without a year: counts only with a cue

    def matches(self, day: date) -> bool:
        return any(
            (y is None or y == day.year) and (m is None or m == day.month) and d == day.day
            for y, m, d in self.candidates
        )


@dataclass(frozen=True, slots=True)
class StatedTime:
    """A time of day: the hours (24-hour) it may mean, the minute, and the zone it is read
    in when the text states one (an IANA name, "UTC" or an offset "-06:00"; None: unstated,
    so UTC or the reader's own zones)."""

    hours: frozenset[int]
    minute: int
    zone: str | None = None

    def matches(self, hour: int, minute: int) -> bool:
        return minute == self.minute and hour in self.hours


@dataclass(slots=True)
class _Mention:
    start: int  # folded indices
    end: int
    date: StatedDate | None = None
    weekday: int | None = None
    time: StatedTime | None = None
    zone_text: str | None = None  # the time's zone as written


@dataclass(frozen=True, slots=True)
class Stated:
    """One date-time statement: its parts, the original span and a quote."""

    dates: tuple[StatedDate, ...]
    weekdays: tuple[int, ...]
    times: tuple[StatedTime, ...]
    start: int
    end: int
    text: str
    quote: str = field(compare=False)
    # Each part as written: ("date" | "weekday" | "time", text), in order.
    parts: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # The zone its times are read in (the first one stated; see `StatedTime.zone` for
    # each time's), None when it states none; and that zone as written ("CST", "hora del
    # Este", "Z").
    zone: str | None = None
    zone_text: str | None = field(default=None, compare=False)

    def date_agrees(self, day: date) -> bool:
        """Some date of this statement is `day` and every weekday stated is its weekday."""
        return any(d.matches(day) for d in self.dates) and all(
            w == day.weekday() for w in self.weekdays
        )


def _valid(y: int | None, m: int | None, d: int) -> bool:
    if m is not None and not 1 <= m <= 12:
        return False
    if not 1 <= d <= 31:
        return False
    if y is not None and m is not None:
        try:
            date(y, m, d)
        except ValueError:
            return False
    return True


def _year(text: str) -> int:
    value = int(text)
    return value + 2000 if value < 100 else value


def _hours(hour: int, meridiem: str | None, qualifier: str | None) -> frozenset[int] | None:
    if hour > 24:
        return None
    mer = (meridiem or "").replace(".", "").replace(" ", "")
    qual = qualifier or ""
    if mer == "pm" or qual in (
        "de la tarde",
        "de la noche",
        "in the afternoon",
        "in the evening",
        "at night",
    ):
        if hour > 12:
            return frozenset({hour})
        return frozenset({hour % 12 + 12})
    if mer == "am" or qual in ("de la manana", "in the morning", "de la madrugada"):
        if hour > 12:
            return None
        return frozenset({hour % 12})
    if qual == "del mediodia":
        return frozenset({hour if hour >= 12 else hour + 12, hour})
    if hour == 24:
        return frozenset({0})
    if 1 <= hour < 12:
        return frozenset({hour, hour + 12})
    return frozenset({hour})


def _hour_value(text: str) -> int:
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def _ordinal_dates(text: str) -> list[re.Match[str]]:
    """The dates with a day as an ordinal word ("the fourth of December", "December
    first"), tried only where an ordinal's stem is written."""
    starts: set[int] = set()
    for stem in _ORDINAL_STEMS:
        at = text.find(stem)
        while at != -1:
            start = at
            while start > 0 and text[start - 1].isalpha():
                start -= 1
            for tens in ("twenty-", "twenty ", "thirty-", "thirty "):
                if text.startswith(tens, start - len(tens)):
                    start -= len(tens)
            starts.add(start)
            at = text.find(stem, at + 1)
    found: list[re.Match[str]] = []
    for start in sorted(starts):
        m = _WORD_DAY_MONTH_RE.match(text, start)
        if m is not None:
            found.append(m)
            continue
        for m in _MONTH_WORD_DAY_RE.finditer(text, max(0, start - 24), start + 48):
            if m.start("dayword") == start:
                found.append(m)
    return found


def _after_word(text: str, start: int) -> bool:
    """A letter, digit or currency sign right before `start` (what `_B` refuses)."""
    before = text[start - 1 : start]
    return before.isalnum() or before in ("_", "$")


def _offset(text: str) -> str | None:
    """A written UTC offset ("-6", "-0600", "+05:30") as "-06:00"; "UTC" for zero; None
    for what no zone has."""
    digits = text[1:].replace(":", "")
    hours, minutes = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
    if hours > 14 or minutes >= 60:
        return None
    if hours == minutes == 0:
        return "UTC"
    return f"{text[0]}{hours:02d}:{minutes:02d}"


def _zone_of(m: re.Match[str]) -> str | None:
    if m["name"]:
        return ZONE_NAMES[m["name"]]
    if m["abbr"]:
        return ZONE_ABBREVIATIONS[m["abbr"]]
    if m["utc"]:
        return _offset(m["off"]) if m["off"] else "UTC"
    if m["es"]:
        return SPANISH_ZONES[m["es"]]
    return "UTC"  # tiempo universal


def _zone_after(folded: Folded, original: str, pos: int) -> tuple[str, int, int] | None:
    """The zone written right after a time ending at folded index `pos`: (zone, start,
    end) of its folded span, or None."""
    text = folded.text
    if text.startswith("z", pos) and not text[pos + 1 : pos + 2].isalnum():
        return "UTC", pos, pos + 1  # "10:00Z"; a "Z" standing alone is a letter
    lead = _ZONE_LEAD_RE.match(text, pos)
    at = lead.end() if lead else pos
    paren = _ZONE_PAREN_RE.match(text, at)
    if paren is not None:
        zone = _zone_of(paren)
        return (zone, at, paren.end()) if zone else None
    m = _ZONE_RE.match(text, at)
    if m is None:
        return None
    if m["abbr"]:
        a, b = folded.span(m.start(), m.end())
        if not original[a:b].isupper():
            return None
    bare = (m["name"] and not m["name_time"]) or m["abbr"]
    if bare and not _ZONE_FOLLOW_RE.match(text, m.end()):
        return None
    zone = _zone_of(m)
    if zone is None:
        return None
    end = m.end()
    # "Pacific (PT)", "Eastern Time (ET)": the same zone again in parentheses.
    again = _ZONE_PAREN_RE.match(text, end + 1 if text.startswith(" ", end) else end)
    return zone, at, again.end() if again is not None else end


def _zone_before(text: str, pos: int) -> tuple[str, int, int] | None:
    """A parenthesised zone right before folded index `pos` ("(UTC) 10:00", "(hora del
    Este) el 4 de diciembre"): (zone, start, end) of the parentheses, or None."""
    m = _ZONE_BEFORE_RE.search(text, max(0, pos - 48), pos)
    if m is None:
        return None
    zone = _zone_of(m)
    return (zone, m.start("paren"), m.end("paren")) if zone else None


def _scan(folded: Folded, original: str) -> list[_Mention]:
    text = folded.text
    mentions: list[_Mention] = []
    taken = bytearray(len(text))

    def free(start: int, end: int) -> bool:
        return not any(taken[start:end])

    def take(mention: _Mention) -> None:
        taken[mention.start : mention.end] = b"\x01" * (mention.end - mention.start)
        mentions.append(mention)

    def written(start: int, end: int) -> str:
        a, b = folded.span(start, end)
        return original[a:b]

    def take_time(start: int, end: int, hours: frozenset[int], minute: int) -> None:
        """A time, with the zone written right after it (or in parentheses before)."""
        zone: str | None = None
        zone_text: str | None = None
        after = _zone_after(folded, original, end)
        if after is not None and free(end, after[2]):
            zone, zone_text, end = after[0], written(after[1], after[2]), after[2]
        else:
            before = _zone_before(text, start)
            if before is not None and free(before[1], start):
                zone, zone_text, start = before[0], written(before[1], before[2]), before[1]
        take(_Mention(start, end, time=StatedTime(hours, minute, zone), zone_text=zone_text))

    for m in _ISO_RE.finditer(text):
        y, mo, d = int(m["y"]), int(m["m"]), int(m["d"])
        if not _valid(y, mo, d):
            continue
        take(_Mention(m.start(), m.end("d"), date=StatedDate(((y, mo, d),))))
        if m["h"] is not None:
            # An ISO time is on the 24-hour clock: no AM/PM ambiguity; with "Z" or an
            # offset it is an exact instant, read in that offset.
            hour, minute = int(m["h"]), int(m["mi"])
            if hour >= 24 or minute >= 60:
                continue
            if m["tz"] is None:
                take_time(m.start("h"), m.end(), frozenset({hour}), minute)
                continue
            zone = "UTC" if m["tz"] == "z" else _offset(m["tz"])
            time = StatedTime(frozenset({hour}), minute, zone)
            zone_text = written(m.start("tz"), m.end("tz"))
            take(_Mention(m.start("h"), m.end(), time=time, zone_text=zone_text))
    written_dates = [
        *(
            (m, regex is _DAY_MONTH_RE)
            for regex in (_MONTH_DAY_RE, _DAY_MONTH_RE)
            for m in regex.finditer(text)
        ),
        *((m, False) for m in _ordinal_dates(text)),
    ]
    for m, day_first in written_dates:
        if not free(m.start(), m.end()) or _after_word(text, m.start()):
            continue
        year = int(m["year"]) if m["year"] else None
        month = MONTHS[m["month"]]
        words = m.groupdict().get("dayword")
        day = _ORDINAL_LOOKUP[re.sub(r"[- ]", "", words)] if words else int(m["day"])
        if m["month"] == "may" and day_first and m["year"] is None:
            continue  # "2 may": too often the verb
        if _valid(year, month, day):
            take(_Mention(m.start(), m.end(), date=StatedDate(((year, month, day),))))
    for m in _NUMERIC_YEAR_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        a, b, y = int(m["a"]), int(m["b"]), _year(m["y"])
        cands = tuple(c for c in ((y, a, b), (y, b, a)) if _valid(*c))
        if cands:
            take(_Mention(m.start(), m.end(), date=StatedDate(tuple(dict.fromkeys(cands)))))
    for m in _CLOCK_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        hours = _hours(int(m["h"]), m["mer"], m["qual"])
        minute = int(m["mi"])
        if hours is not None and minute < 60:
            take_time(m.start(), m.end(), hours, minute)
    for regex in (_DOT_CLOCK_RE, _LAS_DOT_CLOCK_RE, _HOUR_MERIDIEM_RE):
        for m in regex.finditer(text):
            if not free(m.start(), m.end()):
                continue
            if regex is _LAS_DOT_CLOCK_RE and text[m.start() - 1 : m.start()].isalnum():
                continue  # "islas 2.50"
            groups = m.groupdict()
            minute = int(groups["mi"]) if groups.get("mi") else 0
            hours = _hours(int(m["h"]), groups.get("mer"), groups.get("qual"))
            if hours is not None and minute < 60:
                take_time(m.start(), m.end(), hours, minute)
    for m in _SPOKEN_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        zoned = _zone_after(folded, original, m.end()) is not None
        spoken = _spoken_time(m, text, zoned)
        if spoken is not None:
            take_time(m.start(), m.end(), spoken.hours, spoken.minute)
    for m in _NOON_RE.finditer(text):
        if free(m.start(), m.end()):
            hour = 12 if m["word"] in ("noon", "midday", "mediodia") else 0
            take_time(m.start(), m.end(), frozenset({hour}), 0)
    for m in _WEEKDAY_DAY_RE.finditer(text):
        if free(m.start(), m.end()):
            weekday = {**WEEKDAYS, **WEEKDAY_ABBREVIATIONS}[m["weekday"]]
            take(_Mention(m.start(), m.end("weekday"), weekday=weekday))
            take(_Mention(m.start("day"), m.end(), date=StatedDate(((None, None, int(m["day"])),))))
    for m in _NUMERIC_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        a, b = int(m["a"]), int(m["b"])
        pairs: tuple[YMD, ...] = ((None, a, b), (None, b, a))
        readings = tuple(c for c in pairs if _valid(*c))
        if readings:
            date_ = StatedDate(tuple(dict.fromkeys(readings)), bare=True)
            take(_Mention(m.start(), m.end(), date=date_))
    for m in _ORDINAL_DAY_RE.finditer(text):
        if free(m.start(), m.end()) and _valid(None, None, int(m["day"])):
            # "the 2nd floor" is no date: like a bare numeric date, it needs a cue.
            date_ = StatedDate(((None, None, int(m["day"])),), bare=True)
            take(_Mention(m.start(), m.end(), date=date_))
    for regex, table in ((_WEEKDAY_RE, WEEKDAYS), (_WEEKDAY_ABBR_RE, WEEKDAY_ABBREVIATIONS)):
        for m in regex.finditer(text):
            if free(m.start(), m.end()):
                take(_Mention(m.start(), m.end(), weekday=table[m["weekday"]]))
    mentions.sort(key=lambda x: x.start)
    return mentions


def _spoken_time(m: re.Match[str], folded: str, zoned: bool = False) -> StatedTime | None:
    """The time of a `_SPOKEN_RE` match; `zoned`: a zone is written right after it."""
    lead, tail = m["lead"], m["tail"]
    if (
        m.group().startswith("at")
        and not (tail or m["mer"] or m["qual"] or zoned)
        and not _AT_HOUR_FOLLOW_RE.match(folded, m.end())
    ):
        return None  # "at 10 Main Street", "at 3 locations": an English "at N" needs more
    raw = m["h1"] or m["h2"]
    hour = _hour_value(raw)
    minute = 0
    if lead == "half past":
        minute = 30
    elif lead == "quarter past":
        minute = 15
    elif lead == "quarter to":
        hour, minute = (hour - 1) % 12 or 12, 45
    if tail in ("y media", "thirty"):
        minute = 30
    elif tail in ("y cuarto", "fifteen"):
        minute = 15
    elif tail in ("menos cuarto",):
        hour, minute = (hour - 1) % 12 or 12, 45
    elif tail == "forty-five":
        minute = 45
    elif m["mins"]:
        minute = int(m["mins"])
    if minute >= 60:
        return None
    hours = _hours(hour, m["mer"], m["qual"])
    if hours is None:
        return None
    return StatedTime(hours, minute)


def _group(folded: Folded, original: str, mentions: list[_Mention]) -> list[Stated]:
    groups: list[list[_Mention]] = []
    for mention in mentions:
        if groups:
            gap = folded.text[groups[-1][-1].end : mention.start]
            if len(gap) <= GROUP_GAP and not _GAP_BREAK_RE.search(gap):
                groups[-1].append(mention)
                continue
        groups.append([mention])
    stated: list[Stated] = []
    counted_end = -1  # where the last date that counts ends: a list or range goes on
    paired = _paired_days(folded.text, mentions)
    for group in groups:
        has_context = any(m.time is not None or m.weekday is not None for m in group)
        dates: list[StatedDate] = []
        parts: list[tuple[str, str]] = []
        for m in group:
            a, b = folded.span(m.start, m.end)
            if m.date is not None:
                if m.date.bare and not has_context:
                    before = folded.text[max(0, m.start - 12) : m.start]
                    joined = counted_end >= 0 and _DATE_LIST_RE.fullmatch(
                        folded.text, counted_end, m.start
                    )
                    if not (_BARE_CUE_RE.search(before) or joined or id(m) in paired):
                        continue
                dates.append(m.date)
                parts.append(("date", original[a:b]))
                counted_end = m.end
            elif m.weekday is not None:
                parts.append(("weekday", original[a:b]))
            else:
                parts.append(("time", original[a:b]))
        times, zone, zone_text = _zoned_times(folded, original, group)
        weekdays = tuple(m.weekday for m in group if m.weekday is not None)
        if not (dates or weekdays or times):
            continue
        start, end = folded.span(group[0].start, group[-1].end)
        stated.append(
            Stated(
                tuple(dates),
                weekdays,
                times,
                start,
                end,
                original[start:end],
                quote(original, start, end),
                tuple(parts),
                zone,
                zone_text,
            )
        )
    return stated


_SLASH_RE = re.compile(r"(\d{1,2})/(\d{1,2})")
_DOSE_RE = re.compile(
    r"\s*(?:of\s+(?:an?|the)\s+|de\s+(?:una?\s+|la\s+)?)?(?:tablets?|tabs?|pills?|capsules?"
    r"|caps?|cups?|tsp|tbsp|teaspoons?|tablespoons?|inch(?:es)?|mg|ml|doses?|tabletas?"
    r"|pastillas?|comprimidos?|capsulas?|cucharadas?|cucharaditas?|tazas?|dosis)(?!\w)"
)


def _paired_days(text: str, mentions: list[_Mention]) -> set[int]:
    """The bare numeric dates (by id) written as a list or range of a few days: "11/27 and
    11/28", "11/27-11/30" — read month first or day first alike, the second 1 to 31 days
    after the first. Fractions are not: "1/2 to 3/4 tablet", "1/4 and 1/2"."""
    dates = [m for m in mentions if m.date is not None]
    paired: set[int] = set()
    for first, second in itertools.pairwise(dates):
        a = _SLASH_RE.fullmatch(text, first.start, first.end)
        b = _SLASH_RE.fullmatch(text, second.start, second.end)
        if a is None or b is None or not _DATE_LIST_RE.fullmatch(text, first.end, second.start):
            continue
        if _DOSE_RE.match(text, second.end):
            continue  # "from 1/2 to 1/4 tablet"
        x, y = (int(v) for v in a.groups())
        u, v = (int(w) for w in b.groups())
        if _few_days_apart((x, y), (u, v)) or _few_days_apart((y, x), (v, u)):
            paired.update((id(first), id(second)))
    return paired


def _few_days_apart(first: tuple[int, int], second: tuple[int, int]) -> bool:
    """(month, day) `second` is 1 to 31 days after `first` (over a year's end too)."""
    leap = 2024  # so 2/29 is a day
    if not (_valid(leap, *first) and _valid(leap, *second)):
        return False
    start = date(leap, *first)
    end = date(leap, *second)
    if end < start:
        end = end.replace(year=leap + 1) if second != (2, 29) else end
    return 1 <= (end - start).days <= 31


_LOCAL_TIME_RE = re.compile(
    r"\s*\(?\s*(?:your (?:local )?time|local time|hora local|su hora|tu hora|(?:en )?su zona)"
)


def _zoned_times(
    folded: Folded, original: str, group: list[_Mention]
) -> tuple[tuple[StatedTime, ...], str | None, str | None]:
    """The group's times, each with its zone: its own, else the next zoned time's ("9:00–
    9:30 AM Central" writes it once), else the one before; else a zone in parentheses
    before the group ("(hora del Este) el 4 de diciembre a las 10:00"). With the group's
    zone (the first stated) and that zone as written."""
    timed = [(m.time, m.zone_text) for m in group if m.time is not None]
    if not timed:
        return (), None, None
    # "15:30 UTC (10:30 AM your time)": a time said in the reader's own clock takes no
    # other time's zone.
    local = [
        m.time.zone is None and _LOCAL_TIME_RE.match(folded.text, m.end) is not None
        for m in group
        if m.time is not None
    ]
    zones = [time.zone for time, _ in timed]
    own = [(time.zone, text) for time, text in timed if time.zone is not None]
    zone, zone_text = own[0] if own else (None, None)
    if zone is None:
        before = _zone_before(folded.text, group[0].start)
        if before is not None:
            a, b = folded.span(before[1], before[2])
            zone, zone_text = before[0], original[a:b]
    times: list[StatedTime] = []
    for i, (time, _) in enumerate(timed):
        if time.zone is None and zone is not None and not local[i]:
            later = [z for z in zones[i + 1 :] if z is not None]
            earlier = [z for z in zones[:i] if z is not None]
            inherited = later[0] if later else earlier[-1] if earlier else zone
            time = StatedTime(time.hours, time.minute, inherited)
        times.append(time)
    return tuple(times), zone, zone_text


def scan_datetimes(text: str, folded: Folded | None = None) -> list[Stated]:
    """`find_datetimes` without the cache, for large texts read once (source bodies);
    `folded` is `fold(text)` when the caller has it already."""
    f = folded if folded is not None else fold(text)
    return _group(f, text, _scan(f, text))


# Messages are read by several clauses (grounded, mentions): read each once.
@lru_cache(maxsize=2048)
def _find_cached(text: str) -> tuple[Stated, ...]:
    return tuple(scan_datetimes(text))


def find_datetimes(text: str) -> list[Stated]:
    """Every date-time statement in `text`, in order."""
    return list(_find_cached(text))


@dataclass(frozen=True, slots=True)
class DatetimeMatch:
    """Message `message_index` states the instant, read in zone `zone`, at `quote`."""

    message_index: int
    zone: str
    local: str  # the instant as read in that zone, ISO
    quote: str


def parse_instant(value: datetime | date | str) -> datetime | date | None:
    """An aware datetime (a naive one or a zoneless string is taken as UTC), a date for a
    date-only value, or None for what is neither."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return value
    text = value.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@lru_cache(maxsize=64)
def zone_info(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError):
        return None


_OFFSET_RE = re.compile(r"[+-]\d{2}:\d{2}", re.ASCII)


def zone_of(name: str) -> tzinfo | None:
    """The zone a `StatedTime.zone` names: an IANA zone ("America/Chicago", "UTC") or a
    fixed offset ("-06:00"); None for neither."""
    if _OFFSET_RE.fullmatch(name):
        hours, minutes = int(name[1:3]), int(name[4:6])
        sign = -1 if name[0] == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    return zone_info(name)


def local_readings(instant: datetime, zones: Sequence[str]) -> list[tuple[str, datetime]]:
    """The instant read in UTC and in each valid zone, without repeats."""
    readings: list[tuple[str, datetime]] = [("UTC", instant.astimezone(UTC))]
    for name in zones:
        tz = zone_info(name)
        if tz is None:
            continue
        local = instant.astimezone(tz)
        if all(local.replace(tzinfo=None) != r.replace(tzinfo=None) for _, r in readings):
            readings.append((name, local))
    return readings


def _days(ymd: YMD, reference: date | None) -> list[date]:
    """The calendar days a (year, month, day) reading may be: itself when whole; else, near
    `reference`, the nearest such day for a missing year and every such day within 31 days
    for a missing month; none without a reference."""
    year, month, day = ymd
    if year is not None and month is not None:
        return [date(year, month, day)] if _valid(year, month, day) else []
    if reference is None:
        return []
    found: list[date] = []
    if month is not None:
        years = (reference.year - 1, reference.year, reference.year + 1)
        near = [date(y, month, day) for y in years if _valid(y, month, day)]
        if near:
            best = min(abs((d - reference).days) for d in near)
            found = [d for d in near if abs((d - reference).days) == best]
        return found
    first = reference.replace(day=1)
    for step in (-1, 0, 1):
        y, m = divmod(first.year * 12 + first.month - 1 + step, 12)
        if _valid(y, m + 1, day):
            candidate = date(y, m + 1, day)
            if abs((candidate - reference).days) <= 31:
                found.append(candidate)
    return found


def stated_instants(
    stated: Stated, default_zones: Sequence[str] = (), reference: date | None = None
) -> list[datetime]:
    """Every instant `stated` can mean, as aware UTC datetimes in order: each day its dates
    may be (whose weekday agrees with every weekday stated) × each hour its times may mean
    × the time's stated zone, or, for a time with none, UTC and each of `default_zones`. A
    date without a year (or month) is placed near `reference` (see `_days`); without one
    it gives nothing. A statement without a date, or without a time, gives []. A wall
    clock a daylight-saving change skips is no instant; one it repeats is both."""
    days = dict.fromkeys(
        day
        for d in stated.dates
        for ymd in d.candidates
        for day in _days(ymd, reference)
        if all(w == day.weekday() for w in stated.weekdays)
    )
    instants: dict[datetime, None] = {}
    for time in stated.times:
        names = [time.zone] if time.zone is not None else ["UTC", *default_zones]
        zones = [tz for tz in (zone_of(n) for n in names) if tz is not None]
        for day in days:
            for hour in sorted(time.hours):
                wall = datetime(day.year, day.month, day.day, hour, time.minute)
                for tz in zones:
                    for fold_ in (0, 1):
                        moment = wall.replace(tzinfo=tz, fold=fold_).astimezone(UTC)
                        if moment.astimezone(tz).replace(tzinfo=None) == wall:
                            instants[moment] = None
    return sorted(instants)


def _has_time(stated: Stated, zone: str, local: datetime, default: bool) -> bool:
    """Some time of `stated` is `local`'s clock, read in `zone`: its own stated zone, or
    for a time with none a `default` reading (UTC or the reader's zones)."""
    return any(
        t.matches(local.hour, local.minute) and (t.zone == zone or (t.zone is None and default))
        for t in stated.times
    )


def states_datetime(
    messages: Sequence[str], instant: datetime | date | str, zones: Sequence[str] = ()
) -> DatetimeMatch | None:
    parsed = parse_instant(instant)
    if parsed is None:
        return None
    for index, message in enumerate(messages):
        statements = find_datetimes(message)
        if not isinstance(parsed, datetime):
            for s in statements:
                if s.date_agrees(parsed):
                    return DatetimeMatch(index, "", parsed.isoformat(), s.quote)
            continue
        # A time with a stated zone is read in that zone only; one without, in UTC and in
        # each of `zones` (the reader's own).
        readings = [(name, local, True) for name, local in local_readings(parsed, zones)]
        known = {name for name, _, _ in readings}
        for s in statements:
            for t in s.times:
                if t.zone is not None and t.zone not in known:
                    tz = zone_of(t.zone)
                    if tz is not None:
                        readings.append((t.zone, parsed.astimezone(tz), False))
                    known.add(t.zone)
        for zone, local, default in readings:
            day = local.date()
            dated = [s for s in statements if s.date_agrees(day)]
            for s in dated:
                if _has_time(s, zone, local, default):
                    return DatetimeMatch(index, zone, local.isoformat(), s.quote)
            if dated:
                # Date and time in separate sentences: the time must not sit with another
                # date, or it is that date's time.
                for s in statements:
                    if (
                        _has_time(s, zone, local, default)
                        and (not s.dates or s.date_agrees(day))
                        and all(w == day.weekday() for w in s.weekdays)
                    ):
                        return DatetimeMatch(index, zone, local.isoformat(), s.quote)
    return None
