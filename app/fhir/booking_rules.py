"""A practitioner's free time, and the scheduling rules the sandbox books by.

Free time (what `Appointment/$find` proposes and what a booking must fit): the Slots of
a Schedule whose actor is the practitioner, status free, in the future, overlapping no
Appointment of the practitioner that holds time. Both see what the context sees (a run's
view: the tenant's own resources and the run's, never another run's), so three repeats of
one scenario each book Dr. Chen at 10:00 in their own view.

Statuses: `pending` (a hold awaiting confirmation), `booked`, `arrived`, `checked-in` and
`fulfilled` hold the practitioner's time; `proposed`, `waitlist`, `cancelled`, `noshow`
and `entered-in-error` do not.

The rules (docs/scenarios.md "Scheduling rules"), for writes by the system under test (setup,
stimulus and simulated-patient writes are exempt):

- an Appointment whose `end` is not after its `start` is a 422 (in lenient runs too: it
  is nonsense data, not a scheduling choice);
- an Appointment that holds time (the statuses above) with a practitioner who has a
  Schedule must fit that practitioner's free time: start on a free Slot's start and run
  over consecutive free Slots (an end inside the last one holds it whole, as `$find`
  proposes a 45-minute visit in 30-minute Slots), in the future, at most
  `MAX_VISIT_MINUTES` long, overlapping no other Appointment of theirs that holds time;
  the Slots it names (`Appointment.slot`) must be the ones its times cover. A Slot the
  Appointment names counts as free when it is `busy` but no other Appointment holds it
  (an agent that marks the Slot busy before booking). Else a 409 OperationOutcome names
  the practitioner, the conflict and the nearest free times of the same length.
- a write that keeps an Appointment's time and practitioners as they were while it
  already held time (booked → arrived → fulfilled, a changed comment) is not a new
  booking and is not checked again.

A scenario that tests something else may say `"scheduling": "lenient"`: its run view's
writes skip the 409 rules, and so do writes on the tenant base that reference a live
lenient run's fixture (asked only when a write would otherwise be refused).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.db import Conn
from app.errors import Conflict, Issue, Unprocessable
from app.fhir import booking_repository, repository
from app.fhir.search.index import normalize_reference
from app.kit.clock import utcnow

# Statuses of an Appointment that hold its practitioners' time.
HOLDING = frozenset({"pending", "booked", "arrived", "checked-in", "fulfilled"})
NOT_HOLDING = ("cancelled", "noshow", "entered-in-error", "proposed", "waitlist")
# The longest visit a booking (and a `$find` duration) may ask for.
MAX_VISIT_MINUTES = 240
# How far around a refused time the nearest free times are looked for.
NEAREST_WINDOW = timedelta(days=7)
NEAREST_COUNT = 3

# Whether a tenant-base write referencing these ids belongs to a lenient run: the
# runs feature answers (fhir cannot import it).
LenientLookup = Callable[[Conn, list[str]], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class FreeSlot:
    start: datetime
    end: datetime
    id: str


@dataclass(frozen=True, slots=True)
class Busy:
    start: datetime
    end: datetime
    id: str
    status: str


@dataclass
class Held:
    """The Appointments a transaction Bundle wrote before the entry being checked and has
    not flushed yet: what each holds, by practitioner, read once per Bundle. (Parsing and
    scanning every held entry again for each Appointment made a Bundle of 500 quadratic:
    1.2 s, 87% of it here.)"""

    by_practitioner: dict[str, list[tuple[object, Busy]]] = field(default_factory=dict)

    def add(self, appointment: dict[str, Any]) -> None:
        if appointment.get("status") not in HOLDING:
            return
        times = _times(appointment)
        if times is None:
            return
        own_id = appointment.get("id")
        busy = Busy(times[0], times[1], str(own_id), str(appointment.get("status")))
        for practitioner in practitioners_of(appointment):
            self.by_practitioner.setdefault(practitioner, []).append((own_id, busy))

    def busy(self, practitioner: str, own_id: object) -> list[Busy]:
        """What the held Appointments other than `own_id` hold of the practitioner's time."""
        return [b for i, b in self.by_practitioner.get(practitioner, ()) if i != own_id]


@dataclass
class FreeTime:
    scheduled: bool  # the practitioner has a Schedule
    free: list[FreeSlot]  # sorted by start
    busy: list[Busy]


def instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


async def free_time(
    conn: Conn,
    tenant_id: Any,
    run_id: str | None,
    practitioner: str,
    low: datetime,
    high: datetime,
    *,
    now: datetime,
    exclude: str | None = None,
    claimed: Iterable[str] = (),
    extra_busy: Iterable[Busy] = (),
) -> FreeTime:
    """The practitioner's free Slots starting in [low, high) and the Appointments that
    hold their time (except `exclude`, the one being written). `claimed` are Slot ids an
    Appointment names: such a Slot counts when busy, unless another Appointment holds it."""
    claimed_ids = sorted({c.split("/", 1)[1] for c in claimed if c.startswith("Slot/")})
    schedules = await booking_repository.fetch_schedule_ids(conn, tenant_id, run_id, practitioner)
    if not schedules:
        return FreeTime(False, [], [])
    slots = await booking_repository.fetch_slots(
        conn, tenant_id, run_id, schedules, low, high, claimed_ids
    )
    busy = [
        Busy(instant(b.start), instant(b.end), b.id, b.status or "")
        for b in await booking_repository.fetch_holding_appointments(
            conn, tenant_id, run_id, practitioner, NOT_HOLDING, exclude
        )
    ]
    busy.extend(extra_busy)
    free: list[FreeSlot] = []
    for row in slots:
        slot = orjson.loads(row.resource)
        if slot.get("status") not in ("free", "busy"):
            continue
        s, e = instant(slot["start"]), instant(slot["end"])
        if e <= now or any(b.start < e and b.end > s for b in busy):
            continue
        free.append(FreeSlot(s, e, row.id))
    free.sort(key=lambda f: (f.start, f.end, f.id))
    return FreeTime(True, free, busy)


def combine(
    free: list[FreeSlot], duration: timedelta
) -> list[tuple[datetime, datetime, list[str]]]:
    """Each start where consecutive free slots cover `duration`."""
    out: list[tuple[datetime, datetime, list[str]]] = []
    for i, first in enumerate(free):
        ids, reach, j = [first.id], first.end, i
        while reach - first.start < duration and j + 1 < len(free) and free[j + 1].start == reach:
            j += 1
            reach = free[j].end
            ids.append(free[j].id)
        if reach - first.start >= duration:
            out.append((first.start, first.start + duration, ids))
    return out


# --- the rules ----------------------------------------------------------------------------


def practitioners_of(resource: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for participant in resource.get("participant") or []:
        actor = participant.get("actor") if isinstance(participant, dict) else None
        ref = actor.get("reference") if isinstance(actor, dict) else None
        norm = normalize_reference(ref) if isinstance(ref, str) else None
        if norm and norm.startswith("Practitioner/") and norm not in out:
            out.append(norm)
    return out


def _times(resource: dict[str, Any]) -> tuple[datetime, datetime] | None:
    start, end = resource.get("start"), resource.get("end")
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    return instant(start), instant(end)


def _same_booking(resource: dict[str, Any], previous: dict[str, Any] | None) -> bool:
    return (
        previous is not None
        and previous.get("status") in HOLDING
        and _times(previous) == _times(resource)
        and set(practitioners_of(previous)) <= set(practitioners_of(resource))
        and set(practitioners_of(resource)) <= set(practitioners_of(previous))
    )


def _hm(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(start: datetime, end: datetime) -> str:
    return f"{_hm(start)} to {_hm(end)}"


async def check_appointment(
    conn: Conn,
    tenant_id: Any,
    run_id: str | None,
    resource: dict[str, Any],
    previous: dict[str, Any] | None,
    *,
    lenient: bool,
    lenient_lookup: LenientLookup | None = None,
    held: Held | None = None,
) -> None:
    """Apply the rules to a validated Appointment about to be written by the system under
    test. `previous` is its current version (None on create); `held` the Appointments a
    transaction Bundle wrote before it and has not flushed yet."""
    times = _times(resource)
    if times is None:
        return
    start, end = times
    if end <= start:
        message = (
            f"Appointment.end ({resource['end']}) must be after Appointment.start "
            f"({resource['start']})"
        )
        raise Unprocessable(message, [Issue(message, expression="Appointment.end")])
    if lenient or resource.get("status") not in HOLDING or _same_booking(resource, previous):
        return
    practitioners = practitioners_of(resource)
    if not practitioners:
        return
    own_id = resource.get("id")
    claimed = [
        norm
        for s in resource.get("slot") or []
        if isinstance(s, dict)
        and isinstance(s.get("reference"), str)
        and (norm := normalize_reference(s["reference"])) is not None
    ]
    now = utcnow()
    low = max(now, start - NEAREST_WINDOW)
    high = max(start, now) + NEAREST_WINDOW + (end - start)
    for practitioner in practitioners:
        extra = held.busy(practitioner, own_id) if held is not None else []
        time = await free_time(
            conn,
            tenant_id,
            run_id,
            practitioner,
            low,
            high,
            now=now,
            exclude=own_id if isinstance(own_id, str) else None,
            claimed=claimed,
            extra_busy=extra,
        )
        if not time.scheduled:
            continue
        conflict = _conflict(start, end, now, time, claimed)
        if conflict is None:
            continue
        refs = sorted({practitioner, *_fixture_refs(resource)})
        if lenient_lookup is not None and run_id is None and await lenient_lookup(conn, refs):
            return
        name = await _practitioner_name(conn, tenant_id, practitioner)
        nearest = _nearest(time.free, start, end)
        who = f"{name} ({practitioner})" if name else practitioner
        offer = (
            "nearest free times: " + "; ".join(_span(s, e) for s, e in nearest)
            if nearest
            else f"no free times of that length within {NEAREST_WINDOW.days} days"
        )
        message = (
            f"{who} cannot be booked from {_span(start, end)}: {conflict}. {offer[0].upper()}"
            f"{offer[1:]} (see Appointment/$find?practitioner={practitioner})"
        )
        raise Conflict(
            message,
            [
                Issue(message, expression="Appointment.start", code="conflict"),
                Issue(offer, code="informational", severity="information"),
            ],
        )


def _fixture_refs(resource: dict[str, Any]) -> list[str]:
    out = []
    for participant in resource.get("participant") or []:
        actor = participant.get("actor") if isinstance(participant, dict) else None
        ref = actor.get("reference") if isinstance(actor, dict) else None
        norm = normalize_reference(ref) if isinstance(ref, str) else None
        if norm:
            out.append(norm)
    if isinstance(resource.get("id"), str):
        out.append(f"Appointment/{resource['id']}")
    return out


def _conflict(
    start: datetime, end: datetime, now: datetime, time: FreeTime, claimed: list[str]
) -> str | None:
    """What keeps [start, end) from fitting the free time, or None if it fits."""
    minutes = (end - start).total_seconds() / 60
    if minutes > MAX_VISIT_MINUTES:
        return f"it is {minutes:g} minutes long; a visit may be at most {MAX_VISIT_MINUTES}"
    if start < now:
        return f"it starts in the past (now is {_hm(now)})"
    overlapping = [b for b in time.busy if b.start < end and b.end > start]
    if overlapping:
        return "it overlaps " + ", ".join(
            f"Appointment/{b.id} ({b.status}, {_span(b.start, b.end)})" for b in overlapping
        )
    by_start = {f.start: f for f in time.free}
    touching = [f for f in time.free if f.start < end and f.end > start]
    if not touching:
        return (
            f"no free Slot of their Schedule lies between {_hm(start)} and {_hm(end)} "
            f"({start:%A}); that time is outside their schedule"
        )
    if start not in by_start:
        return (
            f"{_hm(start)} is not the start of a free Slot (free Slots there: "
            + ", ".join(_span(f.start, f.end) for f in touching)
            + ")"
        )
    covered: list[str] = []
    reach = start
    while reach < end and reach in by_start:  # consecutive free Slots from the start
        covered.append(f"Slot/{by_start[reach].id}")
        reach = by_start[reach].end
    if reach < end:
        return f"the consecutive free Slots from {_hm(start)} end at {_hm(reach)}, before its end"
    # An end inside the last Slot holds that Slot whole (what `$find` proposes for a
    # 45-minute visit in 30-minute Slots).
    if claimed and sorted(claimed) != sorted(covered):
        return (
            "Appointment.slot names "
            + ", ".join(claimed)
            + " but its times are the Slots "
            + ", ".join(covered)
        )
    return None


def _nearest(
    free: list[FreeSlot], start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    duration = min(max(end - start, timedelta(minutes=5)), timedelta(minutes=MAX_VISIT_MINUTES))
    proposals = [(s, e) for s, e, _ in combine(free, duration)]
    proposals.sort(key=lambda p: (abs((p[0] - start).total_seconds()), p[0]))
    return sorted(proposals[:NEAREST_COUNT])


async def _practitioner_name(conn: Conn, tenant_id: Any, practitioner: str) -> str | None:
    raw = await repository.fetch_live_body(
        conn, tenant_id, "Practitioner", practitioner.split("/", 1)[1]
    )
    if raw is None:
        return None
    for name in orjson.loads(raw).get("name") or []:
        if isinstance(name, dict):
            if name.get("text"):
                return str(name["text"])
            parts = [*(name.get("prefix") or []), *(name.get("given") or []), name.get("family")]
            text = " ".join(str(p) for p in parts if p)
            if text:
                return text
    return None
