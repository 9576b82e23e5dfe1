"""FHIRPath functions of our own, registered with fhirpathpy for scenario expressions.

fhirpathpy takes extra functions through `options={"userInvocationTable": ...}` on
`compile`/`evaluate` (each entry is `{"fn": f}` for a function without arguments, or
`{"fn": f, "arity": {1: ["Any"]}}`; `f(inputs, *args)` receives the input collection's
plain values and each argument as a collection). Grading compiles with `USER_FUNCTIONS`,
and the static check in `fhirpath_syntax` knows them with their arity, so a scenario that
calls one wrongly is refused at import rather than read as "false" while grading.

Every time is taken in UTC, the clinic's zone: the canonical directory's slots are
weekdays 09:00–17:00 UTC, scenario time tokens are UTC, and grading rewrites every zoned
date-time to UTC before evaluating (so `start.toString().substring(11, 5) <= '10:30'`,
`start.hourOf()` and `start.weekday()` read the same clock).

- `weekday()`: the ISO day of the week of a date or date-time, 1 = Monday … 7 = Sunday,
  in UTC. `start.weekday() <= 5` is "on a weekday"; `occurrence.weekday() = 1` "on a
  Monday". A date alone is that date's weekday.
- `startInstant()`: when a value starts, as a UTC date-time with milliseconds (the form
  grading compares correctly against `%runStart + 1 day`): a dateTime/instant as itself,
  a date (or year-month, year) as its first moment, a Period as its `start`, a Timing as
  its earliest `event` (else `repeat.boundsPeriod.start`). It reads a choice element
  whatever its type: `occurrence.startInstant()` whether the resource has
  `occurrenceDateTime`, `occurrencePeriod` or `occurrenceTiming`; `effective` likewise.
- `minutesUntil(other)`: minutes from the input's start to `other`'s start (both read as
  `startInstant()` does), negative when `other` is earlier: `start.minutesUntil(end) = 30`,
  `%runStart.minutesUntil(authoredOn) <= 60`.
- `dateOf()`: the UTC calendar date of a date or date-time (or a Period's start, a
  Timing's first event) as a FHIR date string, `2025-03-07`: `occurrence.dateOf() =
  (%runStart + 1 day).dateOf()`, `valueString = %before.start.dateOf()` (in place of
  `toString().substring(0, 10)`). Below day precision ("2025-03") it gives empty.
- `hourOf()`, `minuteOf()`: the UTC hour (0–23) and minute of a date-time, as Integers:
  `start.hourOf() >= 14` (in place of `toString().substring(11, 2).toInteger()`). A date
  alone has no hour: empty.
- `statesDate(value)`, on a string: whether the text states the (UTC) date of `value` (a
  date, dateTime or Period, as `dateOf()` reads it) in any form the message reader reads
  (app/kit/dates: "27 November 2026", "Nov. 27", "11/27" after "on", "the 27th of
  November", "27 de noviembre", "2026-11-27" …), a weekday written beside it agreeing:
  `(description | note.text).where(statesDate(%current.visit.period.start)).exists()`.
- `statesInstant(value)`, on a string: whether the text states the instant `value` as a
  date and a time of day — a time with a zone written beside it ("9:00 AM Central", "10:00
  (UTC)", "hora del centro") is read in that zone, one without in UTC (as message checks'
  `mentions` do). For a date alone, its date must be stated, as `statesDate`.

Each takes one item: an empty input (or argument) gives empty, as FHIRPath functions do,
and a value that is not a date (or, for `statesDate`/`statesInstant`, an input that is
not a string) gives empty, as `toDateTime()` does. More than one item is an error
(FHIRPath's singleton rule), which grading reports with the clause. FHIRPath 3.0's
drafted `dateOf()`/`hourOf()` read a value's own offset; ours read UTC, which grading's
rewrite makes the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from app.kit.dates import find_datetimes, states_datetime
from app.kit.fhirpath import node_data

__all__ = [
    "USER_FUNCTIONS",
    "date_of",
    "hour_of",
    "minute_of",
    "minutes_until",
    "start_instant",
    "start_moment",
    "states_date",
    "states_instant",
    "weekday",
]

# FHIR date, dateTime and instant (and FHIRPath's `@` literals, which may omit the zone):
# year, month, day, hour:minute, seconds, fraction, zone, each after the one before.
_MOMENT_RE: Final = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$",
    re.ASCII,
)


# Arguments arrive as fhirpathpy nodes; node_data unwraps them as it does the input.
_get_data: Final[Callable[[Any], Any]] = node_data


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    # fhirpathpy's FP_DateTime/FP_Date (`@` literals) keep what was written in asStr.
    written = getattr(value, "asStr", None)
    return written if isinstance(written, str) else None


def _parse(text: str) -> datetime | None:
    match = _MOMENT_RE.match(text.strip().lstrip("@"))
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        moment = datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micro,
        )
        if zone is None or zone == "Z":
            return moment.replace(tzinfo=UTC)  # no zone: FHIR requires one; read as UTC
        return datetime.fromisoformat(f"{moment.isoformat()}{zone}").astimezone(UTC)
    except ValueError:  # 2025-02-30, hour 25, offset +25:00
        return None


def start_moment(value: Any) -> datetime | None:
    """When `value` (a date, dateTime, instant, Period or Timing) starts, in UTC; None
    for anything else."""
    if isinstance(value, Mapping):
        if "start" in value or "end" in value:  # Period
            return start_moment(value.get("start"))
        events = value.get("event")
        if isinstance(events, list):  # Timing
            moments = [m for m in (start_moment(e) for e in events) if m is not None]
            if moments:
                return min(moments)
        repeat = value.get("repeat")
        if isinstance(repeat, Mapping) and isinstance(repeat.get("boundsPeriod"), Mapping):
            return start_moment(repeat["boundsPeriod"])
        return None
    text = _text(value)
    return _parse(text) if text is not None else None


def _day_moment(value: Any) -> tuple[datetime, bool] | None:
    """When `value` starts, in UTC, and whether it has a time of day, for a value of day
    precision or finer (a date, dateTime, instant, Period or Timing); None for anything
    else ("2025-03" names no day)."""
    if isinstance(value, Mapping):
        if "start" in value or "end" in value:  # Period
            return _day_moment(value.get("start"))
        moment = start_moment(value)  # Timing
        return (moment, True) if moment is not None else None
    text = _text(value)
    if text is None:
        return None
    match = _MOMENT_RE.match(text.strip().lstrip("@"))
    if match is None or match.group(3) is None:
        return None
    moment = _parse(text)
    return (moment, match.group(4) is not None) if moment is not None else None


def _single(items: list[Any], what: str) -> Any:
    if len(items) > 1:
        raise ValueError(f"{what} expects one item, got {len(items)}")
    return items[0] if items else None


def _as_instant(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def weekday(inputs: list[Any]) -> list[int]:
    """ISO weekday, 1 = Monday … 7 = Sunday, in UTC."""
    value = _single(inputs, "weekday()")
    moment = start_moment(value) if value is not None else None
    return [moment.isoweekday()] if moment is not None else []


def start_instant(inputs: list[Any]) -> list[str]:
    """When the value starts, as `2025-03-07T08:00:00.000+00:00`."""
    value = _single(inputs, "startInstant()")
    moment = start_moment(value) if value is not None else None
    return [_as_instant(moment)] if moment is not None else []


def minutes_until(inputs: list[Any], other: list[Any]) -> list[int | Decimal]:
    """Minutes from the input's start to `other`'s start; whole minutes as an Integer,
    otherwise a Decimal (to the millisecond)."""
    value = _single(inputs, "minutesUntil()")
    target = _single([_get_data(item) for item in other], "minutesUntil() argument")
    if value is None or target is None:
        return []
    start, end = start_moment(value), start_moment(target)
    if start is None or end is None:
        return []
    delta = end - start
    millis = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if millis % 60_000 == 0:
        return [millis // 60_000]
    return [Decimal(millis) / Decimal(60_000)]


def _day_of(inputs: list[Any], what: str) -> tuple[datetime, bool] | None:
    value = _single(inputs, what)
    return _day_moment(value) if value is not None else None


def date_of(inputs: list[Any]) -> list[str]:
    """The UTC calendar date, as `2025-03-07`."""
    found = _day_of(inputs, "dateOf()")
    return [found[0].date().isoformat()] if found is not None else []


def hour_of(inputs: list[Any]) -> list[int]:
    """The UTC hour of a date-time, 0–23; empty for a date alone."""
    found = _day_of(inputs, "hourOf()")
    return [found[0].hour] if found is not None and found[1] else []


def minute_of(inputs: list[Any]) -> list[int]:
    """The UTC minute of a date-time, 0–59; empty for a date alone."""
    found = _day_of(inputs, "minuteOf()")
    return [found[0].minute] if found is not None and found[1] else []


def _text_and_target(
    inputs: list[Any], value: list[Any], what: str
) -> tuple[str, tuple[datetime, bool]] | None:
    text = _single(inputs, f"{what}()")
    target = _single([_get_data(item) for item in value], f"{what}() argument")
    if not isinstance(text, str) or target is None:
        return None
    found = _day_moment(target)
    return (text, found) if found is not None else None


def states_date(inputs: list[Any], value: list[Any]) -> list[bool]:
    """Whether the input text states `value`'s UTC date (a weekday beside it agreeing)."""
    read = _text_and_target(inputs, value, "statesDate")
    if read is None:
        return []
    text, (moment, _) = read
    day = moment.date()
    return [any(s.date_agrees(day) for s in find_datetimes(text))]


def states_instant(inputs: list[Any], value: list[Any]) -> list[bool]:
    """Whether the input text states `value` as a date and a time of day (a stated zone
    respected, UTC otherwise); for a date alone, its date."""
    read = _text_and_target(inputs, value, "statesInstant")
    if read is None:
        return []
    text, (moment, timed) = read
    return [states_datetime([text], moment if timed else moment.date()) is not None]


# fhirpathpy's user invocation table: no "arity" means no arguments.
USER_FUNCTIONS: Final[Mapping[str, Mapping[str, Any]]] = {
    "weekday": {"fn": weekday},
    "startInstant": {"fn": start_instant},
    "minutesUntil": {"fn": minutes_until, "arity": {1: ["Any"]}},
    "dateOf": {"fn": date_of},
    "hourOf": {"fn": hour_of},
    "minuteOf": {"fn": minute_of},
    "statesDate": {"fn": states_date, "arity": {1: ["Any"]}},
    "statesInstant": {"fn": states_instant, "arity": {1: ["Any"]}},
}
