"""Cron expressions of schedules: five fields, evaluated in UTC, at least 15 minutes
between due times.

Parsed and evaluated by `cronsim` (the parser Healthchecks, a cron-job monitoring
service, is built on): one small pure-Python module with no dependencies and type hints,
maintained, packaged by Debian, written to match Debian's cron exactly (day-of-month OR
day-of-week, `L`, `MON#2`), with a named reason for each bad field ("Bad minute").
`croniter`, the older and more widely used choice, was declared unmaintained by its
author in 2024 and is kept alive by a new owner since; its PyPI page still told users
not to rely on it through 2026, and it carries features we do not want (seconds, a
sixth field, hashed `H` expressions).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta

from cronsim import CronSim, CronSimError

from app.errors import Issue, Unprocessable

MIN_GAP_MINUTES = 15
MIN_GAP = timedelta(minutes=MIN_GAP_MINUTES)
FIELDS = "minute hour day-of-month month day-of-week"


def _refuse(message: str) -> Unprocessable:
    return Unprocessable(message, [Issue(message, expression="cron")])


def _iterate(expression: str, after: datetime) -> Iterator[datetime]:
    """The due times strictly after `after`, in UTC."""
    return CronSim(expression, after.astimezone(UTC))


def check(expression: str, *, now: datetime) -> str:
    """The expression, normalised (single spaces), once it parses, fires at all and keeps
    MIN_GAP between every two due times; else a 422 naming `cron` and the rule."""
    fields = expression.split()
    if len(fields) != 5:
        raise _refuse(
            f"cron must have 5 fields ({FIELDS}, in UTC), not {len(fields)}: '{expression}'"
        )
    normalised = " ".join(fields)
    try:
        first = next(_iterate(normalised, now))
    except CronSimError as exc:
        raise _refuse(f"cron '{normalised}' does not parse: {exc}") from exc
    except StopIteration as exc:
        raise _refuse(f"cron '{normalised}' never fires") from exc
    gap = _smallest_gap(normalised, first)
    if gap < MIN_GAP:
        minutes = int(gap.total_seconds() // 60)
        raise _refuse(
            f"cron '{normalised}' fires {minutes} minute(s) apart; schedules must be at "
            f"least {MIN_GAP_MINUTES} minutes apart"
        )
    return normalised


def _smallest_gap(expression: str, first: datetime) -> timedelta:
    """The smallest gap between two due times. Every day the expression matches has the
    same times of day, so one matching day's times tell every gap: those between its
    consecutive times, and the one across midnight (its last time to the next day's
    first; counted even when the matching days are never consecutive, which keeps the
    rule simple and errs on the strict side). Stops at the first gap too small, so at
    most a day's worth of due times (96 at the limit) is walked."""
    day = datetime.combine(first.date(), time(), tzinfo=UTC)
    times: list[datetime] = []
    smallest = timedelta(days=1)
    for moment in _iterate(expression, day - timedelta(minutes=1)):
        if moment.date() != day.date():
            break
        if times:
            smallest = min(smallest, moment - times[-1])
            if smallest < MIN_GAP:
                return smallest
        times.append(moment)
    return min(smallest, times[0] + timedelta(days=1) - times[-1])


def next_due(expression: str, after: datetime) -> datetime:
    """The first due time strictly after `after`."""
    return next(_iterate(expression, after))


def due_between(expression: str, first: datetime, now: datetime) -> list[datetime]:
    """`first` (a due time) and every due time after it up to `now` inclusive."""
    out = [first]
    for moment in _iterate(expression, first):
        if moment > now:
            break
        out.append(moment)
    return out


def explain(expression: str) -> str | None:
    """In words, e.g. 'At 03:00 on Monday through Friday'; None when cronsim cannot say."""
    try:
        return CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC)).explain()
    except Exception:  # explain() is a nicety: a failure must not fail the view
        return None
