"""The instants a date-time statement can mean, and whether a message states a given
instant (`states_datetime`): a statement's dates × hours × zone, read with each zone's
real offset on the day (see `app.kit.dates`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

from app.kit.date_mentions import YMD, valid_ymd
from app.kit.date_statements import Stated, find_datetimes


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
        return [date(year, month, day)] if valid_ymd(year, month, day) else []
    if reference is None:
        return []
    found: list[date] = []
    if month is not None:
        years = (reference.year - 1, reference.year, reference.year + 1)
        near = [date(y, month, day) for y in years if valid_ymd(y, month, day)]
        if near:
            best = min(abs((d - reference).days) for d in near)
            found = [d for d in near if abs((d - reference).days) == best]
        return found
    first = reference.replace(day=1)
    for step in (-1, 0, 1):
        y, m = divmod(first.year * 12 + first.month - 1 + step, 12)
        if valid_ymd(y, m + 1, day):
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
