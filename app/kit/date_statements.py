"""Date-time statements: the mentions of `app.kit.date_mentions` written together
("Tuesday, December 8 at 10:30 AM") grouped into one `Stated`, with which bare numeric
dates count and the zone each time is read in. `find_datetimes` is the reader's entry
point (see `app.kit.dates`)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache

from app.kit.date_mentions import (
    Mention,
    StatedDate,
    StatedTime,
    scan_mentions,
    valid_ymd,
    zone_before,
)
from app.kit.date_patterns import BARE_CUE_RE, DATE_LIST_RE, GAP_BREAK_RE
from app.kit.phrases import Folded, fold, quote

# Words between two parts of one date-time ("Tuesday, December 8 at 10:30 AM" has short
# gaps); longer runs of other text mean another statement.
GROUP_GAP = 24


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


def _group(folded: Folded, original: str, mentions: list[Mention]) -> list[Stated]:
    groups: list[list[Mention]] = []
    for mention in mentions:
        if groups:
            gap = folded.text[groups[-1][-1].end : mention.start]
            if len(gap) <= GROUP_GAP and not GAP_BREAK_RE.search(gap):
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
                    joined = counted_end >= 0 and DATE_LIST_RE.fullmatch(
                        folded.text, counted_end, m.start
                    )
                    if not (BARE_CUE_RE.search(before) or joined or id(m) in paired):
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


def _paired_days(text: str, mentions: list[Mention]) -> set[int]:
    """The bare numeric dates (by id) written as a list or range of a few days: "11/27 and
    11/28", "11/27-11/30" — read month first or day first alike, the second 1 to 31 days
    after the first. Fractions are not: "1/2 to 3/4 tablet", "1/4 and 1/2"."""
    dates = [m for m in mentions if m.date is not None]
    paired: set[int] = set()
    for first, second in itertools.pairwise(dates):
        a = _SLASH_RE.fullmatch(text, first.start, first.end)
        b = _SLASH_RE.fullmatch(text, second.start, second.end)
        if a is None or b is None or not DATE_LIST_RE.fullmatch(text, first.end, second.start):
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
    if not (valid_ymd(leap, *first) and valid_ymd(leap, *second)):
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
    folded: Folded, original: str, group: list[Mention]
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
        before = zone_before(folded.text, group[0].start)
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
    return _group(f, text, scan_mentions(f, text))


# Messages are read by several clauses (grounded, mentions): read each once.
@lru_cache(maxsize=2048)
def _find_cached(text: str) -> tuple[Stated, ...]:
    return tuple(scan_datetimes(text))


def find_datetimes(text: str) -> list[Stated]:
    """Every date-time statement in `text`, in order."""
    return list(_find_cached(text))
