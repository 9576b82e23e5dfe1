"""Dates, weekdays and times of day stated in a text, in English and Spanish: the one reader
that message checks (app/grading/message) and scenario FHIRPath helpers
(app/scenarios/fhirpath_helpers) share, so it sits in the kit, below both.

`find_datetimes(text) -> list[Stated]` reads every date ("December 8", "Dec. 8th, 2026",
"8 de diciembre", "12/8", "08/12/2026", "2026-12-08"), weekday ("Tuesday", "Tue" before a
date, "martes") and time of day ("10:30 AM", "10:30am", "15:30", "10 a. m.", "a las 10 de
la mañana", "noon", "mediodía", "half past ten", "las diez y media") and groups the ones
written together ("Tuesday, December 8 at 10:30 AM" is one `Stated` with a weekday, a date
and a time). Groups break at a sentence end, at "or"/"and"/"o"/"y" and after
`GROUP_GAP` characters of other text.

Readings are kept ambiguous rather than guessed, so a correct message is never read wrong:
- a time without AM/PM ("10:30", "a las 10") may be 10:30 or 22:30 (`StatedTime.hours`);
- a numeric date "8/12" may be 8 December or August 12 (`StatedDate.candidates`); a
  numeric date without a year counts only next to a time or a weekday, or after "on"/"el"
  /"for"/"para" (so "1/2 tablet" is not a date);
- "the 8th", "el martes 8" give a day with no month (`month is None`); "the 8th" alone
  needs the same cue as a bare numeric date ("the 2nd floor" is no date);
- an English "at 10" with no AM/PM is a time only before the end of a clause or words like
  "on", "tomorrow", "sharp" ("at 10 Main Street" is an address);
- weekday abbreviations ("Sat", "Wed", "Mar") count only right before a date ("Sat
  sat down" is no weekday).
Relative words ("today", "tomorrow", "mañana") are not dates: they state nothing checkable.

`states_datetime(messages, instant, zones=()) -> DatetimeMatch | None` says whether some
message states `instant` (an aware datetime, or a FHIR dateTime / date string) as a date
and a time of day, read in UTC or in any of `zones` (IANA names, the clinic's zone). A
stated weekday must agree with the date. The date and the time may sit in separate
sentences of the same message. A weekday with a time but no date does not state an
instant (it names a week's day, not the booked one). For a date-only value the date alone
must be stated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
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


def _alternation(words: Iterable[str]) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


_MONTH = rf"(?P<month>{_alternation(MONTHS)})\.?"
_MONTH2 = rf"(?:{_alternation(MONTHS)})"
_ORD = r"(?:st|nd|rd|th|º|°|o)?"
_YEAR = r"(?P<year>\d{4})"
_HOUR_WORD = _alternation(NUMBER_WORDS)
_B = r"(?<![\w$])"  # no letter, digit or currency sign right before
_E = r"(?![\w])"

_ISO_RE = re.compile(
    rf"{_B}(?P<y>\d{{4}})-(?P<m>\d{{1,2}})-(?P<d>\d{{1,2}})"
    r"(?:[t ](?P<h>\d{1,2}):(?P<mi>\d{2})(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?(?!\d)"
)
_MONTH_DAY_RE = re.compile(
    rf"{_B}{_MONTH}\s+(?:the\s+)?(?P<day>\d{{1,2}}){_ORD}(?![\d:])(?!\s*(?:am|pm|a\.|p\.))"
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

_MERIDIEM = r"(?P<mer>am|pm|a\.\s?m\.?|p\.\s?m\.?|a\s?m\b|p\s?m\b)"
_QUALIFIER = (
    r"(?:\s*(?P<qual>de la manana|de la tarde|de la noche|del mediodia|de la madrugada"
    r"|in the morning|in the afternoon|in the evening|at night|en punto|o'?clock))?"
)
_CLOCK_RE = re.compile(
    rf"(?<![\w$:.,])(?P<h>\d{{1,2}})(?::|h(?=\d))(?P<mi>\d{{2}})(?::\d{{2}})?(?![\d])"
    rf"(?:\s*(?:{_MERIDIEM}|hrs?\b|h\b))?{_QUALIFIER}"
)
_DOT_CLOCK_RE = re.compile(rf"(?<![\w$:.,])(?P<h>\d{{1,2}})\.(?P<mi>\d{{2}})\s*{_MERIDIEM}")
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

# What may follow an English "at N" for N to be an hour ("see you at 10.", "at 3 on Friday").
_AT_HOUR_FOLLOW_RE = re.compile(
    r"\s*(?:$|[.,;!?)]|-|(?:on|tomorrow|today|tonight|this|next|sharp|and|or|to|with|for|if"
    r"|then|in the|works|is|would|please)(?!\w))"
)
_GAP_BREAK_RE = re.compile(r"[.!?;\n]|(?<!\w)(?:or|and|but|instead|not|o|u|y|pero|no|ni)(?!\w)")
_BARE_CUE_RE = re.compile(r"(?:^|\W)(?:on|el|for|para|del|dia|by|until|hasta)\W*$")


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
    """A time of day: the hours (24-hour) it may mean, and the minute."""

    hours: frozenset[int]
    minute: int

    def matches(self, hour: int, minute: int) -> bool:
        return minute == self.minute and hour in self.hours


@dataclass(slots=True)
class _Mention:
    start: int  # folded indices
    end: int
    date: StatedDate | None = None
    weekday: int | None = None
    time: StatedTime | None = None


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


def _scan(folded: str) -> list[_Mention]:
    mentions: list[_Mention] = []
    taken = bytearray(len(folded))

    def free(start: int, end: int) -> bool:
        return not any(taken[start:end])

    def take(mention: _Mention) -> None:
        taken[mention.start : mention.end] = b"\x01" * (mention.end - mention.start)
        mentions.append(mention)

    for m in _ISO_RE.finditer(folded):
        y, mo, d = int(m["y"]), int(m["m"]), int(m["d"])
        if not _valid(y, mo, d):
            continue
        take(_Mention(m.start(), m.end("d"), date=StatedDate(((y, mo, d),))))
        if m["h"] is not None:
            # An ISO time is on the 24-hour clock: no AM/PM ambiguity.
            hour, minute = int(m["h"]), int(m["mi"])
            if hour < 24 and minute < 60:
                take(_Mention(m.start("h"), m.end(), time=StatedTime(frozenset({hour}), minute)))
    for regex in (_MONTH_DAY_RE, _DAY_MONTH_RE):
        for m in regex.finditer(folded):
            if not free(m.start(), m.end()):
                continue
            year = int(m["year"]) if m["year"] else None
            month, day = MONTHS[m["month"]], int(m["day"])
            if m["month"] == "may" and regex is _DAY_MONTH_RE and m["year"] is None:
                continue  # "2 may": too often the verb
            if _valid(year, month, day):
                take(_Mention(m.start(), m.end(), date=StatedDate(((year, month, day),))))
    for m in _NUMERIC_YEAR_RE.finditer(folded):
        if not free(m.start(), m.end()):
            continue
        a, b, y = int(m["a"]), int(m["b"]), _year(m["y"])
        cands = tuple(c for c in ((y, a, b), (y, b, a)) if _valid(*c))
        if cands:
            take(_Mention(m.start(), m.end(), date=StatedDate(tuple(dict.fromkeys(cands)))))
    for m in _CLOCK_RE.finditer(folded):
        if not free(m.start(), m.end()):
            continue
        hours = _hours(int(m["h"]), m["mer"], m["qual"])
        minute = int(m["mi"])
        if hours is not None and minute < 60:
            take(_Mention(m.start(), m.end(), time=StatedTime(hours, minute)))
    for regex in (_DOT_CLOCK_RE, _HOUR_MERIDIEM_RE):
        for m in regex.finditer(folded):
            if not free(m.start(), m.end()):
                continue
            minute = int(m["mi"]) if "mi" in m.groupdict() and m["mi"] else 0
            qual = m["qual"] if "qual" in m.groupdict() else None
            hours = _hours(int(m["h"]), m["mer"], qual)
            if hours is not None and minute < 60:
                take(_Mention(m.start(), m.end(), time=StatedTime(hours, minute)))
    for m in _SPOKEN_RE.finditer(folded):
        if not free(m.start(), m.end()):
            continue
        time = _spoken_time(m, folded)
        if time is not None:
            take(_Mention(m.start(), m.end(), time=time))
    for m in _NOON_RE.finditer(folded):
        if free(m.start(), m.end()):
            hour = 12 if m["word"] in ("noon", "midday", "mediodia") else 0
            take(_Mention(m.start(), m.end(), time=StatedTime(frozenset({hour}), 0)))
    for m in _WEEKDAY_DAY_RE.finditer(folded):
        if free(m.start(), m.end()):
            weekday = {**WEEKDAYS, **WEEKDAY_ABBREVIATIONS}[m["weekday"]]
            take(_Mention(m.start(), m.end("weekday"), weekday=weekday))
            take(_Mention(m.start("day"), m.end(), date=StatedDate(((None, None, int(m["day"])),))))
    for m in _NUMERIC_RE.finditer(folded):
        if not free(m.start(), m.end()):
            continue
        a, b = int(m["a"]), int(m["b"])
        pairs: tuple[YMD, ...] = ((None, a, b), (None, b, a))
        readings = tuple(c for c in pairs if _valid(*c))
        if readings:
            date_ = StatedDate(tuple(dict.fromkeys(readings)), bare=True)
            take(_Mention(m.start(), m.end(), date=date_))
    for m in _ORDINAL_DAY_RE.finditer(folded):
        if free(m.start(), m.end()) and _valid(None, None, int(m["day"])):
            # "the 2nd floor" is no date: like a bare numeric date, it needs a cue.
            date_ = StatedDate(((None, None, int(m["day"])),), bare=True)
            take(_Mention(m.start(), m.end(), date=date_))
    for regex, table in ((_WEEKDAY_RE, WEEKDAYS), (_WEEKDAY_ABBR_RE, WEEKDAY_ABBREVIATIONS)):
        for m in regex.finditer(folded):
            if free(m.start(), m.end()):
                take(_Mention(m.start(), m.end(), weekday=table[m["weekday"]]))
    mentions.sort(key=lambda x: x.start)
    return mentions


def _spoken_time(m: re.Match[str], folded: str) -> StatedTime | None:
    lead, tail = m["lead"], m["tail"]
    if (
        m.group().startswith("at")
        and not (tail or m["mer"] or m["qual"])
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
    for group in groups:
        has_context = any(m.time is not None or m.weekday is not None for m in group)
        dates: list[StatedDate] = []
        parts: list[tuple[str, str]] = []
        for m in group:
            a, b = folded.span(m.start, m.end)
            if m.date is not None:
                if m.date.bare and not has_context:
                    before = folded.text[max(0, m.start - 12) : m.start]
                    if not _BARE_CUE_RE.search(before):
                        continue
                dates.append(m.date)
                parts.append(("date", original[a:b]))
            elif m.weekday is not None:
                parts.append(("weekday", original[a:b]))
            else:
                parts.append(("time", original[a:b]))
        weekdays = tuple(m.weekday for m in group if m.weekday is not None)
        times = tuple(m.time for m in group if m.time is not None)
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
            )
        )
    return stated


def scan_datetimes(text: str, folded: Folded | None = None) -> list[Stated]:
    """`find_datetimes` without the cache, for large texts read once (source bodies);
    `folded` is `fold(text)` when the caller has it already."""
    f = folded if folded is not None else fold(text)
    return _group(f, text, _scan(f.text))


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
        for zone, local in local_readings(parsed, zones):
            day, hour, minute = local.date(), local.hour, local.minute
            dated = [s for s in statements if s.date_agrees(day)]
            for s in dated:
                if any(t.matches(hour, minute) for t in s.times):
                    return DatetimeMatch(index, zone, local.isoformat(), s.quote)
            if dated:
                # Date and time in separate sentences: the time must not sit with another
                # date, or it is that date's time.
                for s in statements:
                    if (
                        any(t.matches(hour, minute) for t in s.times)
                        and (not s.dates or s.date_agrees(day))
                        and all(w == day.weekday() for w in s.weekdays)
                    ):
                        return DatetimeMatch(index, zone, local.isoformat(), s.quote)
    return None
