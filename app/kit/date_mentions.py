"""Each date, weekday and time of day (with its zone) written in a text, found apart:
the first pass of the date reader (`app.kit.dates`), before `app.kit.date_statements`
groups the ones written together. A reading is kept ambiguous rather than guessed (see
`app.kit.dates`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from app.kit.date_patterns import (
    AT_HOUR_FOLLOW_RE,
    CLOCK_RE,
    DAY_MONTH_RE,
    DOT_CLOCK_RE,
    HOUR_MERIDIEM_RE,
    ISO_RE,
    LAS_DOT_CLOCK_RE,
    MONTH_DAY_RE,
    MONTH_WORD_DAY_RE,
    NOON_RE,
    NUMERIC_RE,
    NUMERIC_YEAR_RE,
    ORDINAL_DAY_RE,
    ORDINAL_STEMS,
    SPOKEN_RE,
    WEEKDAY_ABBR_RE,
    WEEKDAY_DAY_RE,
    WEEKDAY_RE,
    WORD_DAY_MONTH_RE,
    ZONE_BEFORE_RE,
    ZONE_FOLLOW_RE,
    ZONE_LEAD_RE,
    ZONE_PAREN_RE,
    ZONE_RE,
)
from app.kit.date_words import (
    MONTHS,
    NUMBER_WORDS,
    ORDINAL_LOOKUP,
    SPANISH_ZONES,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAYS,
    ZONE_ABBREVIATIONS,
    ZONE_NAMES,
)
from app.kit.phrases import Folded

YMD = tuple[int | None, int | None, int]  # year, month, day; None when not stated


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
class Mention:
    start: int  # folded indices
    end: int
    date: StatedDate | None = None
    weekday: int | None = None
    time: StatedTime | None = None
    zone_text: str | None = None  # the time's zone as written


def valid_ymd(y: int | None, m: int | None, d: int) -> bool:
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
    for stem in ORDINAL_STEMS:
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
        m = WORD_DAY_MONTH_RE.match(text, start)
        if m is not None:
            found.append(m)
            continue
        for m in MONTH_WORD_DAY_RE.finditer(text, max(0, start - 24), start + 48):
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
    lead = ZONE_LEAD_RE.match(text, pos)
    at = lead.end() if lead else pos
    paren = ZONE_PAREN_RE.match(text, at)
    if paren is not None:
        zone = _zone_of(paren)
        return (zone, at, paren.end()) if zone else None
    m = ZONE_RE.match(text, at)
    if m is None:
        return None
    if m["abbr"]:
        a, b = folded.span(m.start(), m.end())
        if not original[a:b].isupper():
            return None
    bare = (m["name"] and not m["name_time"]) or m["abbr"]
    if bare and not ZONE_FOLLOW_RE.match(text, m.end()):
        return None
    zone = _zone_of(m)
    if zone is None:
        return None
    end = m.end()
    # "Pacific (PT)", "Eastern Time (ET)": the same zone again in parentheses.
    again = ZONE_PAREN_RE.match(text, end + 1 if text.startswith(" ", end) else end)
    return zone, at, again.end() if again is not None else end


def zone_before(text: str, pos: int) -> tuple[str, int, int] | None:
    """A parenthesised zone right before folded index `pos` ("(UTC) 10:00", "(hora del
    Este) el 4 de diciembre"): (zone, start, end) of the parentheses, or None."""
    m = ZONE_BEFORE_RE.search(text, max(0, pos - 48), pos)
    if m is None:
        return None
    zone = _zone_of(m)
    return (zone, m.start("paren"), m.end("paren")) if zone else None


class _Scan:
    """The mentions found so far in one text, and which of its characters they take."""

    def __init__(self, folded: Folded, original: str) -> None:
        self.folded = folded
        self.original = original
        self.text = folded.text
        self.mentions: list[Mention] = []
        self.taken = bytearray(len(folded.text))

    def free(self, start: int, end: int) -> bool:
        return not any(self.taken[start:end])

    def take(self, mention: Mention) -> None:
        self.taken[mention.start : mention.end] = b"\x01" * (mention.end - mention.start)
        self.mentions.append(mention)

    def written(self, start: int, end: int) -> str:
        a, b = self.folded.span(start, end)
        return self.original[a:b]

    def take_time(self, start: int, end: int, hours: frozenset[int], minute: int) -> None:
        """A time, with the zone written right after it (or in parentheses before)."""
        zone: str | None = None
        zone_text: str | None = None
        after = _zone_after(self.folded, self.original, end)
        if after is not None and self.free(end, after[2]):
            zone, zone_text, end = after[0], self.written(after[1], after[2]), after[2]
        else:
            before = zone_before(self.text, start)
            if before is not None and self.free(before[1], start):
                zone, zone_text = before[0], self.written(before[1], before[2])
                start = before[1]
        time = StatedTime(hours, minute, zone)
        self.take(Mention(start, end, time=time, zone_text=zone_text))


def _iso_dates(scan: _Scan) -> None:
    """ISO dates ("2026-12-08"), with their time and offset when written."""
    for m in ISO_RE.finditer(scan.text):
        y, mo, d = int(m["y"]), int(m["m"]), int(m["d"])
        if not valid_ymd(y, mo, d):
            continue
        scan.take(Mention(m.start(), m.end("d"), date=StatedDate(((y, mo, d),))))
        if m["h"] is not None:
            # An ISO time is on the 24-hour clock: no AM/PM ambiguity; with "Z" or an
            # offset it is an exact instant, read in that offset.
            hour, minute = int(m["h"]), int(m["mi"])
            if hour >= 24 or minute >= 60:
                continue
            if m["tz"] is None:
                scan.take_time(m.start("h"), m.end(), frozenset({hour}), minute)
                continue
            zone = "UTC" if m["tz"] == "z" else _offset(m["tz"])
            time = StatedTime(frozenset({hour}), minute, zone)
            zone_text = scan.written(m.start("tz"), m.end("tz"))
            scan.take(Mention(m.start("h"), m.end(), time=time, zone_text=zone_text))


def _written_dates(scan: _Scan) -> None:
    """Dates with the month as a word ("December 8", "8 de diciembre", "the fourth of
    December"), then numeric dates with a year ("08/12/2026")."""
    text = scan.text
    written_dates = [
        *(
            (m, regex is DAY_MONTH_RE)
            for regex in (MONTH_DAY_RE, DAY_MONTH_RE)
            for m in regex.finditer(text)
        ),
        *((m, False) for m in _ordinal_dates(text)),
    ]
    for m, day_first in written_dates:
        if not scan.free(m.start(), m.end()) or _after_word(text, m.start()):
            continue
        year = int(m["year"]) if m["year"] else None
        month = MONTHS[m["month"]]
        words = m.groupdict().get("dayword")
        day = ORDINAL_LOOKUP[re.sub(r"[- ]", "", words)] if words else int(m["day"])
        if m["month"] == "may" and day_first and m["year"] is None:
            continue  # "2 may": too often the verb
        if valid_ymd(year, month, day):
            scan.take(Mention(m.start(), m.end(), date=StatedDate(((year, month, day),))))
    for m in NUMERIC_YEAR_RE.finditer(text):
        if not scan.free(m.start(), m.end()):
            continue
        a, b, y = int(m["a"]), int(m["b"]), _year(m["y"])
        cands = tuple(c for c in ((y, a, b), (y, b, a)) if valid_ymd(*c))
        if cands:
            date_ = StatedDate(tuple(dict.fromkeys(cands)))
            scan.take(Mention(m.start(), m.end(), date=date_))


def _clock_times(scan: _Scan) -> None:
    """Times on a clock ("10:30 AM", "9.30am", "a las 9.30", "10 a. m.")."""
    for m in CLOCK_RE.finditer(scan.text):
        if not scan.free(m.start(), m.end()):
            continue
        hours = _hours(int(m["h"]), m["mer"], m["qual"])
        minute = int(m["mi"])
        if hours is not None and minute < 60:
            scan.take_time(m.start(), m.end(), hours, minute)
    for regex in (DOT_CLOCK_RE, LAS_DOT_CLOCK_RE, HOUR_MERIDIEM_RE):
        for m in regex.finditer(scan.text):
            if not scan.free(m.start(), m.end()):
                continue
            if regex is LAS_DOT_CLOCK_RE and scan.text[m.start() - 1 : m.start()].isalnum():
                continue  # "islas 2.50"
            groups = m.groupdict()
            minute = int(groups["mi"]) if groups.get("mi") else 0
            hours = _hours(int(m["h"]), groups.get("mer"), groups.get("qual"))
            if hours is not None and minute < 60:
                scan.take_time(m.start(), m.end(), hours, minute)


def _spoken_times(scan: _Scan) -> None:
    """Times in words ("half past ten", "las diez y media", "noon", "medianoche")."""
    for m in SPOKEN_RE.finditer(scan.text):
        if not scan.free(m.start(), m.end()):
            continue
        zoned = _zone_after(scan.folded, scan.original, m.end()) is not None
        spoken = _spoken_time(m, scan.text, zoned)
        if spoken is not None:
            scan.take_time(m.start(), m.end(), spoken.hours, spoken.minute)
    for m in NOON_RE.finditer(scan.text):
        if scan.free(m.start(), m.end()):
            hour = 12 if m["word"] in ("noon", "midday", "mediodia") else 0
            scan.take_time(m.start(), m.end(), frozenset({hour}), 0)


def _bare_days(scan: _Scan) -> None:
    """A weekday with a day ("el martes 8"), numeric dates without a year ("12/8", a cue
    needed) and ordinal days ("the 8th", a cue needed)."""
    text = scan.text
    for m in WEEKDAY_DAY_RE.finditer(text):
        if scan.free(m.start(), m.end()):
            weekday = {**WEEKDAYS, **WEEKDAY_ABBREVIATIONS}[m["weekday"]]
            scan.take(Mention(m.start(), m.end("weekday"), weekday=weekday))
            day = StatedDate(((None, None, int(m["day"])),))
            scan.take(Mention(m.start("day"), m.end(), date=day))
    for m in NUMERIC_RE.finditer(text):
        if not scan.free(m.start(), m.end()):
            continue
        a, b = int(m["a"]), int(m["b"])
        pairs: tuple[YMD, ...] = ((None, a, b), (None, b, a))
        readings = tuple(c for c in pairs if valid_ymd(*c))
        if readings:
            date_ = StatedDate(tuple(dict.fromkeys(readings)), bare=True)
            scan.take(Mention(m.start(), m.end(), date=date_))
    for m in ORDINAL_DAY_RE.finditer(text):
        if scan.free(m.start(), m.end()) and valid_ymd(None, None, int(m["day"])):
            # "the 2nd floor" is no date: like a bare numeric date, it needs a cue.
            date_ = StatedDate(((None, None, int(m["day"])),), bare=True)
            scan.take(Mention(m.start(), m.end(), date=date_))


def _weekdays(scan: _Scan) -> None:
    """Weekdays ("Tuesday", "martes"; "Tue" only right before a date)."""
    for regex, table in ((WEEKDAY_RE, WEEKDAYS), (WEEKDAY_ABBR_RE, WEEKDAY_ABBREVIATIONS)):
        for m in regex.finditer(scan.text):
            if scan.free(m.start(), m.end()):
                scan.take(Mention(m.start(), m.end(), weekday=table[m["weekday"]]))


def scan_mentions(folded: Folded, original: str) -> list[Mention]:
    """Every date, weekday and time in the text, in order. Each kind is looked for in
    turn, the surer first: a span one kind takes, no later kind reads again."""
    scan = _Scan(folded, original)
    for find in (_iso_dates, _written_dates, _clock_times, _spoken_times, _bare_days, _weekdays):
        find(scan)
    scan.mentions.sort(key=lambda x: x.start)
    return scan.mentions


def _spoken_time(m: re.Match[str], folded: str, zoned: bool = False) -> StatedTime | None:
    """The time of a `SPOKEN_RE` match; `zoned`: a zone is written right after it."""
    lead, tail = m["lead"], m["tail"]
    if (
        m.group().startswith("at")
        and not (tail or m["mer"] or m["qual"] or zoned)
        and not AT_HOUR_FOLLOW_RE.match(folded, m.end())
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
