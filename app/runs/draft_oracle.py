"""The oracle of a draft (docs/scenarios.md "A scenario from a run"): the system's own
calls turned back into scenario terms, so it replays in any later run: the run's fixture
ids become `@symbol`s, each created resource gets a `saveAs` name that later calls use,
and instants become time tokens relative to the run's start (`+2wd@10:00`: the clinic's
Slots are weekdays, so weekday offsets keep a booking on a free Slot whatever day the
draft is replayed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from app.kit.urls import FHIR_PREFIX, RUNS_PREFIX
from app.scenarios.calls import capture_kind
from app.scenarios.expansion import ExpansionError, resolve_time_token

CREATED = 201
# How far a weekday offset is looked for (half a year of weekdays): further than any
# scenario's deadline.
MAX_WEEKDAYS = 130
# Dates further than this from the run's start are facts (a birth date), not moments the
# run chose: kept as written.
DATE_WINDOW_DAYS = 366
SECONDS_PER_MINUTE = 60
# Elements whose dates are facts about the patient, never relative to the run.
FACT_DATES = frozenset({"birthDate", "deceasedDateTime"})

_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True, slots=True)
class SystemCall:
    """A successful call the system under test made, as the draft reads it: the path as
    api_call expectations see it (FHIR calls relative to the base), the query, the request
    body sent and the response body it got (parsed JSON, or None)."""

    method: str
    path: str
    query: str
    request: Any
    response: Any
    at: datetime | None = None
    # The resources the call touched, as the trace keeps them (a write's own first).
    refs: tuple[str, ...] = ()
    status: int = 200


@dataclass(frozen=True, slots=True)
class SentEffect:
    """A captured effect the system sent (docs/capture.md), as an oracle call sends it
    again: `POST /sms/Messages` `{to, body}`, `POST /email` `{to, subject, body}`, or
    `<method> /integrations/<name><path>` with the body it sent."""

    at: datetime
    method: str
    path: str
    body: Any


def relative_path(path: str) -> str:
    """A traced path as api_call expectations and oracle calls name it."""
    if path.startswith(FHIR_PREFIX):
        return path[len(FHIR_PREFIX) :] or "/"
    if path.startswith(RUNS_PREFIX + "/"):
        index = path.find("/fhir/r4")
        if index >= 0:
            return path[index + len("/fhir/r4") :] or "/"
    return path


def is_lookup(method: str, path: str) -> bool:
    """A call that reads: a GET, a search by POST, or an operation (`$find`)."""
    return method == "GET" or path.endswith("/_search") or "/$" in path


class Symbols:
    """The run's ids in scenario terms: fixture ids and the ids of resources the system
    created (their `saveAs` names)."""

    def __init__(self, fixture: dict[str, str]) -> None:
        self.by_ref = {ref: symbol for symbol, ref in fixture.items()}
        self.by_id = {ref.split("/", 1)[1]: symbol for symbol, ref in fixture.items()}
        self.taken = set(fixture)
        self.types = {symbol: ref.split("/", 1)[0] for symbol, ref in fixture.items()}

    def save(self, resource_type: str, resource_id: str) -> str:
        stem = re.sub(r"[^A-Za-z0-9]", "", resource_type) or "created"
        stem = stem[0].lower() + stem[1:]
        n = 1
        while f"{stem}{n}" in self.taken:
            n += 1
        name = f"{stem}{n}"
        self.taken.add(name)
        self.by_ref[f"{resource_type}/{resource_id}"] = name
        self.by_id[resource_id] = name
        self.types[name] = resource_type
        return name

    def path(self, path: str) -> str:
        return "/".join(f"@{self.by_id[s]}" if s in self.by_id else s for s in path.split("/"))

    def query(self, query: str) -> str:
        def swap(match: re.Match[str]) -> str:
            value = match.group(0)
            if value in self.by_ref:
                return "@" + self.by_ref[value]
            return "@" + self.by_id[value] if value in self.by_id else value

        return re.sub(r"[^=&,|]+", swap, query)


class Clock:
    """Instants and dates the system wrote, as tokens relative to the run's start."""

    def __init__(self, started_at: datetime) -> None:
        self.start = started_at.astimezone(UTC)

    def instant(self, text: str) -> Any:
        try:
            moment = datetime.fromisoformat(text).astimezone(UTC)
        except ValueError:
            return text
        if moment.second == 0 and moment.microsecond == 0:
            clock = f"@{moment.hour:02d}:{moment.minute:02d}"
            # `+0wd` only for today: another day is the n-th business day after today,
            # whatever the clock (`+0wd` later on the day before would mean it too).
            first = 0 if moment.date() == self.start.date() else 1
            for n in range(first, MAX_WEEKDAYS):
                for sign in ("+", "-"):
                    token = f"{sign}{n}wd{clock}"
                    if self._resolves(token, moment):
                        return {"$time": token}
            days = (moment.date() - self.start.date()).days
            token = f"{'+' if days >= 0 else '-'}{abs(days)}d{clock}"
            if self._resolves(token, moment):
                return {"$time": token}
        minutes = round((moment - self.start).total_seconds() / SECONDS_PER_MINUTE)
        return {"$time": f"{'+' if minutes >= 0 else '-'}{abs(minutes)}m"}

    def day(self, text: str) -> Any:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            return text
        days = (day - self.start.date()).days
        if abs(days) > DATE_WINDOW_DAYS:
            return text
        if day.weekday() < 5:  # a weekday: as a weekday offset, like bookings
            for n in range(0 if days == 0 else 1, MAX_WEEKDAYS):
                for sign in ("+", "-"):
                    token = f"{sign}{n}wd"
                    if resolve_time_token(token, self.start, as_date=True) == text:
                        return {"$date": token}
        return {"$date": f"{'+' if days >= 0 else '-'}{abs(days)}d"}

    def _resolves(self, token: str, moment: datetime) -> bool:
        try:
            resolved = resolve_time_token(token, self.start)
        except ExpansionError:
            return False
        return datetime.fromisoformat(resolved) == moment


def _abstract(value: Any, symbols: Symbols, clock: Clock, key: str = "") -> Any:
    """A body the system sent, in scenario terms (meta dropped: the server's)."""
    if isinstance(value, dict):
        return {k: _abstract(v, symbols, clock, k) for k, v in value.items() if k != "meta"}
    if isinstance(value, list):
        return [_abstract(v, symbols, clock, key) for v in value]
    if not isinstance(value, str):
        return value
    if key == "reference" and value in symbols.by_ref:
        return "@" + symbols.by_ref[value]
    if key == "url" and re.fullmatch(r"[A-Z][A-Za-z]+/[^/?]+", value):
        # A transaction entry's `Appointment/<id>` (the replay expands `Appointment/@x`).
        kind, _, rid = value.partition("/")
        if rid in symbols.by_id:
            return f"{kind}/@{symbols.by_id[rid]}"
    if value in symbols.by_id:
        return "@" + symbols.by_id[value]
    if key in FACT_DATES:
        return value
    if _INSTANT.match(value):
        return clock.instant(value)
    if _DATE.match(value):
        return clock.day(value)
    return value


def is_capture(path: str) -> bool:
    return capture_kind(path) is not None


def _created(call: SystemCall) -> tuple[str, str] | None:
    """(type, id) of the resource a create answered with."""
    if call.method != "POST" or is_lookup(call.method, call.path) or call.path in ("", "/"):
        return None
    answer = call.response
    kind = call.path.strip("/").split("/")[0]
    if isinstance(answer, dict) and isinstance(answer.get("id"), str):
        return str(answer.get("resourceType") or kind), answer["id"]
    # Answered without a body (`Prefer: return=minimal`): the write's own reference is
    # the first the trace kept of it.
    if call.refs and call.refs[0].startswith(kind + "/"):
        return kind, call.refs[0].split("/", 1)[1]
    return None


def build_oracle(
    calls: list[SystemCall], effects: list[SentEffect], symbols: Symbols, clock: Clock
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sent = sorted(effects, key=lambda e: e.at)
    for call in calls:
        while sent and call.at is not None and sent[0].at <= call.at:
            out.append(_effect_call(sent.pop(0), symbols, clock))
        if call.method == "GET":
            continue
        call = _as_create(call, symbols)
        path = symbols.path(call.path)
        if call.query:
            path += "?" + symbols.query(call.query)
        entry: dict[str, Any] = {"method": call.method, "path": path}
        body = call.request
        if (
            isinstance(body, dict)
            and call.method == "POST"
            and body.get("resourceType") not in (None, "Bundle")
            and not is_lookup(call.method, call.path)
        ):
            body = {k: v for k, v in body.items() if k != "id"}  # the server's choice
        if body is not None:
            entry["body"] = _abstract(body, symbols, clock)
        created = _created(call)
        if created is not None:
            entry["saveAs"] = symbols.save(*created)
        out.append(entry)
    out += [_effect_call(e, symbols, clock) for e in sent]
    return out


def _as_create(call: SystemCall, symbols: Symbols) -> SystemCall:
    """A PUT that created a resource under an id of the system's own choosing, as the
    create it stands for (`POST /Type`, saved): replayed as it was, every later run
    would update that one resource instead of creating its own."""
    segments = call.path.strip("/").split("/")
    if call.method != "PUT" or call.status != CREATED or len(segments) != 2:
        return call
    if segments[1] in symbols.by_id:
        return call
    return replace(call, method="POST", path=f"/{segments[0]}")


def _effect_call(effect: SentEffect, symbols: Symbols, clock: Clock) -> dict[str, Any]:
    entry: dict[str, Any] = {"method": effect.method, "path": effect.path}
    if effect.body is not None:
        entry["body"] = _abstract(effect.body, symbols, clock)
    return entry
