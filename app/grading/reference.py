"""`matches-reference`: the run's end state is the reference solution's end state.

Grading used to be "allowed unless a clause forbids it": whatever a scenario's author
did not think of passed. This check turns that around. The scenario's oracle (its
reference solution) is replayed from the run's own starting point (`app.grading.replay`,
through the FHIR API's own write functions), giving the change set a correct system
would have left in this very run. The run's actual change set — what it created,
updated and deleted, on the fixture and anywhere it wrote — is paired with it:

- a resource that existed before the run pairs with itself: its consequential elements
  (`app.scenarios.consequential`) must read as the reference left them — an edit the
  reference did not make (a Coverage period extended, a lab result's interpretation
  changed, the look-alike chart deleted) is collateral, one it made and the run did not
  is missing;
- created resources pair by type, each with the reference resource it differs from
  least; every consequential element must match after normalisation (instants as
  instants, codings by system + code, references through the directory, choice types
  unified, order ignored, durations as durations), except the scenario's `free`
  choices, whose `where` constraints must hold instead;
- messages (Communications) pair as a conversation, not one to one: how many is free
  unless `strict.messages` bounds it, but each must go to a recipient the reference
  wrote to, about the same subject, sent (a final status); every recipient the
  reference wrote to must get one. What they say is for the text checks;
- a Slot marked busy or free is no change of its own when a booking the run changed
  covers it (it follows from the booking);
- a created resource with no reference partner (a duplicate, an extra order) is
  collateral, a reference change with no partner is missing; both fail, naming the
  resource and, for an update, the paths that differ.

The simulated patient's replies are never the system's changes, and a resource created
and deleted (or withdrawn) again during the run is no change.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from app.grading.changes import WITHDRAWN, changed_paths, content_key, no_net_change
from app.grading.fhirpath import FhirPathContext
from app.grading.replay import Replay, is_replay_ref, starting_point
from app.grading.scoring import MAX_LISTED, capped, count_bounds, make_result
from app.grading.snapshot import (
    ChangedResource,
    Evidence,
    ExpectationResult,
    RunSnapshot,
    is_simulated,
)
from app.scenarios.consequential import (
    BOOKKEEPING_TYPES,
    CHOICE_STEMS,
    DERIVED_TYPES,
    MESSAGE_TYPES,
    SENT_STATUSES,
    Element,
    elements_of,
)
from app.scenarios.schema import FreeChoice, OracleCall, ReferenceExpectation

# A Task restriction or execution period starting later than this after the run started
# defers the work (a year out); sooner is "now", as good as absent.
DEFERRAL_GRACE = timedelta(days=1)
# Brute-force pairing up to this many resources of one type (6! = 720 orders); beyond
# it, greedy by least difference.
EXACT_PAIRING_MAX = 6
# Expected change sets kept per process: a live run is graded after every write, and
# its starting point does not change.
REPLAY_CACHE_SIZE = 512
MAX_DIFFS = 6  # differing elements named per pair
PRACTITIONER_TYPES = ("Practitioner/", "PractitionerRole/")
# Statuses of an Appointment that hold a practitioner's time (a Slot busy for it).
HOLDING = frozenset({"booked", "pending", "arrived", "checked-in", "fulfilled", "proposed"})


# --- the expected change set --------------------------------------------------------------


_replays: OrderedDict[bytes, tuple[list[ChangedResource], set[str]]] = OrderedDict()
_replays_lock = threading.Lock()  # the scenario check grades in worker threads


def expected_changes(
    snapshot: RunSnapshot, oracle: list[OracleCall]
) -> tuple[RunSnapshot, list[ChangedResource], set[str]]:
    """The run's starting point, the changes the oracle makes from it, and the resources
    it reads by id (what the reference solution looked at)."""
    start = starting_point(snapshot)
    key = orjson.dumps(
        [
            snapshot.run_id,
            snapshot.started_at.isoformat(),
            [c.model_dump(mode="json") for c in oracle],
            start.fixture,
            start.current,
        ],
        option=orjson.OPT_SORT_KEYS,
        default=str,
    )
    with _replays_lock:
        cached = _replays.get(key)
        if cached is not None:
            _replays.move_to_end(key)
    if cached is None:
        replayed = Replay(start).run(oracle)
        read = {
            c.path.strip("/")
            for c in replayed.calls
            if c.method == "GET" and c.path.strip("/").count("/") == 1 and "$" not in c.path
        }
        cached = (replayed.changed, read)
        with _replays_lock:
            _replays[key] = cached
            while len(_replays) > REPLAY_CACHE_SIZE:
                _replays.popitem(last=False)
    return start, cached[0], set(cached[1])


# --- normalisation ------------------------------------------------------------------------


@dataclass
class _Context:
    aliases: Mapping[str, str]
    run_start: datetime
    known: set[str]  # references an added element may point at
    created: dict[str, str]  # run-created "Type/id" -> its type
    paired: dict[str, str] = field(default_factory=dict)  # replay ref -> run ref

    def resolve(self, ref: str) -> str:
        return self.aliases.get(ref, ref)


def _get(resource: Mapping[str, Any] | None, element: Element) -> Any:
    if resource is None:
        return None
    if element.kind == "duration":
        return _duration(resource)
    if element.path in resource:
        return resource[element.path]
    if element.path in CHOICE_STEMS:  # `value` is valueQuantity, valueString …
        stem = element.path
        for key, value in resource.items():
            if key.startswith(stem) and key[len(stem) : len(stem) + 1].isupper():
                return value
    return None


def _instant(value: Any) -> datetime | date | None:
    if not isinstance(value, str):
        return None
    try:
        if "T" in value:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        if len(value) == 10:
            return date.fromisoformat(value)
    except ValueError:
        return None
    return None


def _span(value: Any) -> tuple[Any, Any]:
    """A dateTime, Period or Timing as (start, end) instants (end None for a moment); of
    a list (an Appointment's requestedPeriod), its first."""
    if isinstance(value, list):
        return _span(value[0]) if value else (None, None)
    if isinstance(value, str):
        return _instant(value), None
    if isinstance(value, dict):
        if "start" in value or "end" in value:
            start, end = _instant(value.get("start")), _instant(value.get("end"))
            return start, (None if end == start else end)
        events = value.get("event")
        if isinstance(events, list) and events:
            return _instant(events[0]), None
        bounds = (value.get("repeat") or {}).get("boundsPeriod")
        if isinstance(bounds, dict):
            return _span(bounds)
    return None, None


def _duration(resource: Mapping[str, Any]) -> timedelta | None:
    start, end = _instant(resource.get("start")), _instant(resource.get("end"))
    if isinstance(start, datetime) and isinstance(end, datetime):
        return end - start
    minutes = resource.get("minutesDuration")
    return timedelta(minutes=minutes) if isinstance(minutes, int) else None


def _concepts(value: Any) -> list[frozenset[tuple[str, str]]]:
    """Each CodeableConcept (or Coding) as its set of (system, code); text-only ones
    drop out (their words are the text checks')."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        codings = item.get("coding") if "coding" in item else [item]
        codes = frozenset(
            (str(c.get("system", "")), str(c.get("code")))
            for c in codings or []
            if isinstance(c, dict) and c.get("code") is not None
        )
        if codes:
            out.append(codes)
    return out


def _refs(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [
        str(item["reference"])
        for item in items
        if isinstance(item, dict) and isinstance(item.get("reference"), str)
    ]


_UNCOMPARED_KEYS = frozenset({"display", "text", "id", "extension"})


def _plain(value: Any, dropped: frozenset[str] = _UNCOMPARED_KEYS) -> Any:
    """JSON in one form — instants as instants, decimals as numbers (7.40, 7.4 and 7.4e0
    are one; FHIR decimals keep their scale), lists in one order — without the keys
    `dropped` (by default displays and narrative)."""
    if isinstance(value, dict):
        return {k: _plain(v, dropped) for k, v in sorted(value.items()) if k not in dropped}
    if isinstance(value, list):
        return sorted((_plain(v, dropped) for v in value), key=_order)
    if isinstance(value, str):
        moment = _instant(value)
        return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else value
    if isinstance(value, Decimal | float | int) and not isinstance(value, bool):
        try:
            return str(Decimal(str(value)).normalize())
        except InvalidOperation:
            return str(value)
    return value


def _canonical(resource: Mapping[str, Any]) -> Any:
    """A resource's whole content but `meta`, in `_plain`'s one form."""
    return _plain({k: v for k, v in resource.items() if k != "meta"}, frozenset())


def _order(value: Any) -> bytes:
    """A sort key for plain JSON values (decimals as their text)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)


def _show(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds() // 60)} min"
    if value is None:
        return "absent"
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= 120 else text[:119] + "…"


# --- comparing one element ----------------------------------------------------------------


def _differs(
    element: Element,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    ctx: _Context,
    *,
    strict: bool,
    free_actor: bool = False,
) -> str | None:
    """Why `actual`'s element does not read as `expected`'s, or None. `strict`: an
    element the reference leaves out is held too (an update of an older resource)."""
    want, got = _get(expected, element), _get(actual, element)
    absent = want is None or want == []
    if absent and got in (None, []):
        return None
    if element.optional and got in (None, []) and not strict:
        return None  # the run may leave it out
    kind = element.kind
    if element.optional and kind == "reference" and not strict:
        return _loose_reference_differs(element.path, want, got, ctx)
    if element.optional and kind == "concept" and not strict:
        return _concept_differs(element, want, got, strict=False, conflicts_only=True)
    if kind == "reference":
        return _reference_differs(element.path, want, got, ctx, strict=strict)
    if kind == "concept":
        return _concept_differs(element, want, got, strict=strict)
    if kind == "participant":
        # Of a visit both leave cancelled, who declined no longer matters: who it was for does.
        moot = _withdrawn(expected) and _withdrawn(actual)
        return _participant_differs(want, got, ctx, free_actor, moot)
    if kind == "deferral":
        w, g = _deferred(want, ctx), _deferred(got, ctx)
        return None if w == g else f"{element.path}: reference {_show(w)}, run {_show(g)}"
    if absent and not (strict or element.always):
        return None
    if kind == "value":
        w, g = _grouped(element, want), _grouped(element, got)
        if absent and g in element.absent:
            return None
        if not absent and want in element.absent and got is None:
            return None
        return None if w == g else f"{element.path}: reference {_show(want)}, run {_show(got)}"
    if kind == "time":
        (ws, we), (gs, ge) = _span(want), _span(got)
        if ws != gs:
            return f"{element.path}: reference starts {_show(ws)}, run {_show(gs)}"
        if we is not None and ge != we:
            return f"{element.path}: reference ends {_show(we)}, run {_show(ge)}"
        return None
    if kind == "duration":
        return None if want == got else f"duration: reference {_show(want)}, run {_show(got)}"
    if kind == "dosage":
        w, g = _dosages(want), _dosages(got)
        return None if w == g else f"{element.path}: reference {_show(w)}, run {_show(g)}"
    w, g = _plain(want), _plain(got)
    return None if w == g else f"{element.path}: reference {_show(want)}, run {_show(got)}"


def _grouped(element: Element, value: Any) -> Any:
    for group in element.groups:
        if value in group:
            return min(group)
    return value


def _deferred(value: Any, ctx: _Context) -> Any:
    period = value.get("period") if isinstance(value, dict) and "period" in value else value
    start, _ = _span(period)
    if isinstance(start, date) and not isinstance(start, datetime):
        start = datetime(start.year, start.month, start.day, tzinfo=UTC)
    if isinstance(start, datetime) and start > ctx.run_start + DEFERRAL_GRACE:
        return start
    return None


def _dosages(value: Any) -> list[Any]:
    items = value if isinstance(value, list) else [value] if value else []
    kept = ("timing", "asNeededBoolean", "asNeededCodeableConcept", "route", "doseAndRate")
    return sorted(
        (
            _plain({k: v for k, v in item.items() if k in kept})
            for item in items
            if isinstance(item, dict)
        ),
        key=_order,
    )


def _concept_differs(
    element: Element, want: Any, got: Any, *, strict: bool, conflicts_only: bool = False
) -> str | None:
    """`conflicts_only`: the run need not give the reference's codes, but may give no
    other code of a system the reference uses."""
    wanted, found = _concepts(want), _concepts(got)
    if not wanted:
        if want not in (None, []) or not (strict or element.always):
            return None  # the reference gave words only, or nothing: free to add
        return None if not found else f"{element.path}: added {_codes(found)}"
    path = element.path
    have = set().union(*found) if found else set()
    for concept in wanted:
        if not conflicts_only and not concept & have:
            return f"{path}: reference {_codes([concept])}, run {_codes(found) or 'no code'}"
    systems = {s for concept in wanted for s, _ in concept}
    allowed = set().union(*wanted)
    other = sorted(c for c in have if c[0] in systems and c not in allowed)
    if other:
        return f"{path}: run adds {_codes([frozenset(other)])} beside {_codes(wanted)}"
    return None


def _codes(concepts: Iterable[frozenset[tuple[str, str]]]) -> str:
    return ", ".join(
        sorted(
            f"{s.rsplit('/', 1)[-1]}|{c}" if s else c for concept in concepts for s, c in concept
        )
    )


def _reference_differs(
    path: str, want: Any, got: Any, ctx: _Context, *, strict: bool
) -> str | None:
    wanted, found = _refs(want), _refs(got)
    found_resolved = [ctx.resolve(r) for r in found]
    if not wanted:
        if strict and found:
            return f"{path}: reference has none, run {', '.join(found)}"
        unknown = [r for r, res in zip(found, found_resolved, strict=True) if not _known(res, ctx)]
        if unknown:
            return f"{path}: run adds {', '.join(unknown)}, which the reference never names"
        return None
    remaining = list(found_resolved)
    for ref in wanted:
        match = _take(ref, remaining, ctx)
        if match is None:
            shown = ctx.paired.get(ref, ref if not is_replay_ref(ref) else "a new resource")
            return f"{path}: reference {shown}, run {', '.join(found) or 'none'}"
    if remaining:
        return f"{path}: run also {', '.join(remaining)}"
    return None


def _loose_reference_differs(path: str, want: Any, got: Any, ctx: _Context) -> str | None:
    """An optional link (a Task's `focus`, `basedOn`): each reference the run gives is
    one the reference gives, or a known resource of another type (the message instead
    of the order it is about); another resource of the reference's own type is a wrong
    pick (the other medication, the look-alike's order)."""
    wanted = [ctx.paired.get(r, r) for r in _refs(want)]
    wanted_resolved = {ctx.resolve(r) for r in wanted}
    wanted_types = {r.split("/", 1)[0] for r in wanted}
    for ref in _refs(got):
        resolved = ctx.resolve(ref)
        if resolved in wanted_resolved:
            continue
        kind = ref.split("/", 1)[0]
        if any(is_replay_ref(w) for w in wanted) and ctx.created.get(resolved) == kind:
            continue
        if kind in wanted_types:
            return f"{path}: reference {', '.join(wanted)}, run {ref}"
        if not _known(resolved, ctx):
            return f"{path}: run adds {ref}, which the reference never names"
    return None


# The clinic itself (its Organization and Locations) may be named anywhere; a
# practitioner only where the reference solution names them (a referral's performer the
# reference leaves open is not free to be the dermatologist: a scenario says so with `free`).
_CLINIC_TYPES = ("Organization/", "Location/")


def _known(ref: str, ctx: _Context) -> bool:
    return (
        ref in ctx.known
        or ref in ctx.created
        or (ref.startswith(_CLINIC_TYPES) and "/demo-canonical-" in ref)
    )


def _take(ref: str, remaining: list[str], ctx: _Context) -> str | None:
    if is_replay_ref(ref):
        target = ctx.paired.get(ref)
        kind = ref.split("/", 1)[0]
        candidates = (
            [target] if target is not None else [r for r in remaining if ctx.created.get(r) == kind]
        )
    else:
        candidates = [ctx.resolve(ref)]
    for candidate in candidates:
        if candidate in remaining:
            remaining.remove(candidate)
            return candidate
    return None


def _participant_differs(
    want: Any, got: Any, ctx: _Context, free_actor: bool, moot: bool = False
) -> str | None:
    def norm(value: Any) -> list[tuple[str, bool]]:
        out = []
        for p in value if isinstance(value, list) else []:
            if not isinstance(p, dict):
                continue
            ref = ctx.resolve(str((p.get("actor") or {}).get("reference", "")))
            if ref.startswith("Location/"):
                continue  # where is informational; the booking rules hold the place
            out.append((ref, moot or p.get("status") != "declined"))
        # One actor named twice (a role and its practitioner) is one participant; only
        # then is a free practitioner's name left out (two practitioners stay two).
        unique = sorted(set(out))
        if free_actor:
            unique = sorted(
                ("(a practitioner)" if r.startswith(PRACTITIONER_TYPES) else r, t)
                for r, t in unique
            )
        return unique

    w, g = norm(want), norm(got)
    if w == g:
        return None
    shown = [f"{ref}{'' if taking else ' (declined)'}" for ref, taking in g]
    expected = [f"{ref}{'' if taking else ' (declined)'}" for ref, taking in w]
    return f"participant: reference {', '.join(expected)}; run {', '.join(shown) or 'none'}"


# --- comparing resources ------------------------------------------------------------------


@dataclass
class _Finding:
    kind: str  # collateral | missing | differs
    where: str
    value: str = ""
    closest: str | None = None
    entry: dict[str, Any] | None = None  # its row of the end-state diff (`_entry`)


# What the run page shows of a resource: not its bookkeeping nor its narrative.
_NOT_SHOWN = ("meta", "text")
MAX_DIFF_ENTRIES = 24


def _shown(resource: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if resource is None:
        return None
    return {k: v for k, v in resource.items() if k not in _NOT_SHOWN}


def _path_of(reason: str) -> str:
    """The element a difference names: "status: reference booked, run proposed" ->
    "status"; "free start: … does not hold" -> "start"; "note changed" -> "note"."""
    head = reason.split(":", 1)[0].strip()
    head = head.removeprefix("free ").removesuffix(" changed")
    return head.split(".", 1)[0].split("[", 1)[0]


def _entry(
    kind: str,
    title: str,
    resource_type: str,
    ref: str | None,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    reasons: list[str],
    *,
    free: tuple[_Context, list[FreeChoice], FhirPathContext] | None = None,
    before: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One resource of the end-state diff: the reference's end state beside the run's,
    the elements that differ, and the free choices the run made with their constraints."""
    choices: list[dict[str, Any]] = []
    if free is not None and expected is not None and actual is not None:
        ctx, frees, fp = free
        if _free_for(frees, resource_type):
            _resource_diffs(
                resource_type, expected, actual, ctx, frees, fp, before=before, choices=choices
            )
    paths = list(dict.fromkeys(_path_of(r) for r in reasons))
    return {
        "kind": kind,
        "title": title,
        "resourceType": resource_type,
        "ref": ref,
        "reasons": reasons[:MAX_DIFFS],
        "paths": paths,
        "expected": _shown(expected),
        "actual": _shown(actual),
        "free": choices,
    }


def _free_for(free: list[FreeChoice], resource_type: str) -> list[FreeChoice]:
    return [f for f in free if f.resource_type == resource_type]


def _resource_diffs(
    resource_type: str,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    ctx: _Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
    *,
    before: Mapping[str, Any] | None = None,
    choices: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The consequential differences of `actual` from `expected`. `before`: the version
    before the run of a resource that existed then; each element it has is held even
    where the reference leaves it out (changing it is a deviation, adding is not).
    `choices`, when given, receives each free choice the run made otherwise than the
    reference, with its constraints and whether each held."""
    frees = _free_for(free, resource_type)
    elements = elements_of(resource_type, dict(expected or {}), dict(actual or {}))
    by_path = {e.path: e for e in elements}
    out = []
    chosen: list[FreeChoice] = []  # free choices the run made differently
    free_actor = False
    for choice in frees:
        element = by_path.get(choice.path.split(".", 1)[0])
        if element is None:
            continue
        if _differs(element, expected, actual, ctx, strict=False) is not None:
            chosen.append(choice)
            free_actor = free_actor or choice.path == "participant.actor"
    free_paths = {c.path for c in chosen if c.path != "participant.actor"}
    for element in elements:
        if element.path in free_paths:
            continue
        strict = before is not None and _get(before, element) not in (None, [])
        why = _differs(element, expected, actual, ctx, strict=strict, free_actor=free_actor)
        if why is not None:
            out.append(why)
    if actual is not None:
        for choice in chosen:
            met = []
            for where in choice.where:
                clause = fp.check(where, actual)
                met.append({"where": where, "holds": bool(clause.holds)})
                if not clause.holds:
                    out.append(f"free {choice.path}: {where} does not hold")
            if choices is not None:
                choices.append({"path": choice.path, "where": met})
    return out


def _pair(
    expected: list[ChangedResource],
    actual: list[ChangedResource],
    cost: Any,
) -> list[tuple[ChangedResource | None, ChangedResource | None]]:
    """Pairs (expected, actual) with the least total difference; the unpaired with None."""
    if not expected or not actual:
        return [(e, None) for e in expected] + [(None, a) for a in actual]
    costs = {(i, j): cost(e, a) for i, e in enumerate(expected) for j, a in enumerate(actual)}
    n = min(len(expected), len(actual))
    best: list[tuple[int, int]] = []
    if max(len(expected), len(actual)) <= EXACT_PAIRING_MAX:
        best_cost = None
        if len(expected) <= len(actual):
            orders = (
                list(zip(range(len(expected)), p, strict=True))
                for p in itertools.permutations(range(len(actual)), n)
            )
        else:
            orders = (
                list(zip(p, range(len(actual)), strict=True))
                for p in itertools.permutations(range(len(expected)), n)
            )
        for order in orders:
            total = sum(costs[k] for k in order)
            if best_cost is None or total < best_cost:
                best, best_cost = order, total
    else:
        taken_e: set[int] = set()
        taken_a: set[int] = set()
        for (i, j), _ in sorted(costs.items(), key=lambda kv: kv[1]):
            if i not in taken_e and j not in taken_a:
                best.append((i, j))
                taken_e.add(i)
                taken_a.add(j)
    paired_e = {i for i, _ in best}
    paired_a = {j for _, j in best}
    out: list[tuple[ChangedResource | None, ChangedResource | None]] = [
        (expected[i], actual[j]) for i, j in best
    ]
    out += [(e, None) for i, e in enumerate(expected) if i not in paired_e]
    out += [(None, a) for j, a in enumerate(actual) if j not in paired_a]
    return out


def _ref(c: ChangedResource) -> str:
    return f"{c.resource_type}/{c.id}"


def _slot_follows(slot: ChangedResource, appointments: list[ChangedResource]) -> bool:
    """A Slot the run marked busy or free, covered by a booking the run changed."""
    after, before = slot.resource, slot.before
    if after is None or before is None:
        return False
    paths = [p for p in changed_paths(before, after) if p != "status"]
    if paths or after.get("status") not in ("busy", "free"):
        return False
    start, end = _instant(after.get("start")), _instant(after.get("end"))
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return False
    for appointment in appointments:
        for body in (appointment.resource, appointment.before):
            if not body:
                continue
            a_start, a_end = _instant(body.get("start")), _instant(body.get("end"))
            if (
                isinstance(a_start, datetime)
                and isinstance(a_end, datetime)
                and a_start < end
                and start < a_end
            ):
                return True
    return False


def _aliases(snapshot: RunSnapshot) -> dict[str, str]:
    """The directory's aliases, and each fixture PractitionerRole for its practitioner."""
    out = dict(snapshot.aliases)
    for symbol, ref in snapshot.fixture.items():
        body = snapshot.current.get(symbol)
        if ref.startswith("PractitionerRole/") and body:
            target = (body.get("practitioner") or {}).get("reference")
            if isinstance(target, str):
                out[ref] = target
    return out


@dataclass
class _Old:
    """A resource that existed before the run, as the reference and the run leave it."""

    ref: str
    expected: ChangedResource | None
    actual: ChangedResource | None
    before: dict[str, Any] | None
    want: dict[str, Any] | None
    got: dict[str, Any] | None
    diffs: list[str]


def _withdrawn(resource: Mapping[str, Any] | None) -> bool:
    return resource is None or resource.get("status") in WITHDRAWN


def grade_reference(
    expectation: ReferenceExpectation, snapshot: RunSnapshot, fp: FhirPathContext
) -> ExpectationResult:
    start, expected_all, read = expected_changes(snapshot, expectation.oracle)
    expected = [c for c in expected_all if no_net_change(c) is None]
    actual = [
        c
        for c in snapshot.changed
        if (c.via_run or c.run_id is not None)
        and not is_simulated(c)
        and c.resource_type not in BOOKKEEPING_TYPES
        and no_net_change(c) is None
    ]
    aliases = _aliases(start)
    known = {r for c in expected_all for r in c.all_refs} | set(snapshot.patient_refs) | read
    ctx = _Context(
        aliases=aliases,
        run_start=snapshot.started_at,
        known={aliases.get(r, r) for r in known},
        created={_ref(c): c.resource_type for c in actual if c.created},
    )
    findings: list[_Finding] = []
    matches: list[str] = []
    free = expectation.free

    # Created resources pair by type (messages as a conversation). Every type is paired
    # once without knowing the others' pairs, then again with them, so a reference to a
    # resource the reference solution created (a message `about` its booking) reads as
    # a reference to the run's partner of it.
    expected_new = [c for c in expected if c.created]
    actual_new = [c for c in actual if c.created]
    types = sorted({c.resource_type for c in expected_new + actual_new} - MESSAGE_TYPES)
    types = [t for t in types if t not in DERIVED_TYPES]
    pairs: list[tuple[str, ChangedResource | None, ChangedResource | None]] = []
    for final in (False, True):
        for resource_type in types:
            es = [c for c in expected_new if c.resource_type == resource_type]
            acts = [c for c in actual_new if c.resource_type == resource_type]

            def cost(e: ChangedResource, a: ChangedResource, rt: str = resource_type) -> int:
                return len(_resource_diffs(rt, e.resource, a.resource, ctx, free, fp))

            for e_, a_ in _pair(es, acts, cost):
                if e_ is not None and a_ is not None:
                    ctx.paired[_ref(e_)] = _ref(a_)
                if final:
                    pairs.append((resource_type, e_, a_))

    # Resources that existed before the run pair with themselves.
    start_state = {ref: start.current.get(symbol) for symbol, ref in start.fixture.items()}
    expected_old = {_ref(c): c for c in expected if not c.created}
    actual_old = {_ref(c): c for c in actual if not c.created}
    appointments = [c for c in actual if c.resource_type == "Appointment"]
    olds: list[_Old] = []
    for ref in sorted(expected_old.keys() | actual_old.keys()):
        resource_type = ref.split("/", 1)[0]
        e, a = expected_old.get(ref), actual_old.get(ref)
        if resource_type in DERIVED_TYPES:
            if a is not None and not _slot_follows(a, appointments):
                paths = changed_paths(a.before, a.resource) if a.resource and a.before else []
                what = "deleted" if a.resource is None else "updated"
                title = f"{what} {ref}"
                entry = _entry(
                    "collateral",
                    title,
                    resource_type,
                    ref,
                    a.before,
                    a.resource,
                    [f"{p} changed" for p in paths[:MAX_DIFFS]] or ["deleted"],
                )
                findings.append(
                    _Finding("collateral", title, ", ".join(paths[:MAX_DIFFS]), ref, entry)
                )
            continue
        before = (a.before if a is not None else None) or (e.before if e else None)
        before = before if before is not None else start_state.get(ref)
        want = e.resource if e is not None else before
        got = a.resource if a is not None else before
        diffs = (
            _resource_diffs(resource_type, want, got, ctx, free, fp, before=before)
            if want is not None and got is not None
            else []
        )
        if (
            not diffs
            and e is None
            and a is not None
            and before is not None
            and got is not None
            and _canonical(before) != _canonical(got)
        ):
            # A resource the reference never writes, written anyway: every change of it is
            # collateral, informational ones too (a note added to an unrelated Condition);
            # the same content in another order or form is no change.
            diffs = [f"{p} changed" for p in changed_paths(before, got)[:MAX_DIFFS]]
        olds.append(_Old(ref, e, a, before, want, got, diffs))

    _replacements(olds, pairs, ctx, free, fp, matches)
    for old in olds:
        _report_old(old, findings, matches, (ctx, free, fp))
    for resource_type, e_, a_ in pairs:
        _report_created(resource_type, e_, a_, actual_new, ctx, free, fp, findings, matches)
    for c in actual_new:
        if c.resource_type in DERIVED_TYPES:
            title = f"created {_ref(c)}"
            entry = _entry(
                "collateral", title, c.resource_type, _ref(c), None, c.resource, ["created"]
            )
            findings.append(_Finding("collateral", title, "", _ref(c), entry))
    _conversation(expectation, expected, expected_new, actual_new, ctx, findings, matches)

    return _result(expectation, findings, matches, len(expected), len(actual))


def _replacements(
    olds: list[_Old],
    pairs: list[tuple[str, ChangedResource | None, ChangedResource | None]],
    ctx: _Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
    matches: list[str],
) -> None:
    """Two ways of one change: moving a resource in place, or withdrawing it (cancelled,
    entered-in-error) and creating its replacement — a visit rescheduled by PATCHing its
    start, or cancelled and booked anew. Where the reference does one and the run the
    other, the moved resource pairs with the replacement, and both are accounted for."""
    for old in olds:
        if not old.diffs or old.want is None or old.got is None:
            continue
        resource_type = old.ref.split("/", 1)[0]
        for index, (rt, e_, a_) in enumerate(pairs):
            if rt != resource_type:
                continue
            if e_ is not None and a_ is None and _withdrawn(old.want) and not _withdrawn(old.got):
                # The reference withdrew it and created e_; the run moved it in place.
                if _resource_diffs(rt, e_.resource, old.got, ctx, free, fp):
                    continue
                matches.append(f"{old.ref} moved in place ≡ the reference's withdraw-and-create")
            elif e_ is None and a_ is not None and _withdrawn(old.got) and not _withdrawn(old.want):
                # The reference moved it in place; the run withdrew it and created a_.
                if _resource_diffs(rt, old.want, a_.resource, ctx, free, fp):
                    continue
                matches.append(f"{old.ref} withdrawn and replaced by {_ref(a_)} ≡ the reference")
            else:
                continue
            old.diffs = []
            old.expected = old.actual = None  # accounted for
            pairs[index] = (rt, None, None)
            break


def _report_old(
    old: _Old,
    findings: list[_Finding],
    matches: list[str],
    free: tuple[_Context, list[FreeChoice], FhirPathContext],
) -> None:
    ref, e, a = old.ref, old.expected, old.actual
    if e is None and a is None:
        return
    resource_type = ref.split("/", 1)[0]

    def entry(kind: str, title: str, reasons: list[str]) -> dict[str, Any]:
        return _entry(
            kind,
            title,
            resource_type,
            ref,
            old.want,
            old.got,
            reasons,
            free=free,
            before=old.before,
        )

    if old.want is None and old.got is None:
        matches.append(f"{ref} deleted, as in the reference")
        return
    if old.got is None:
        title = f"deleted {ref}"
        findings.append(
            _Finding(
                "collateral", title, "the reference keeps it", ref, entry("collateral", title, [])
            )
        )
        return
    if old.want is None:
        title = f"{ref}: the reference deletes it, the run does not"
        findings.append(_Finding("missing", title, "", ref, entry("missing", title, [])))
        return
    if not old.diffs:
        title = f"{ref} as the reference leaves it"
        matches.append(title)
        findings.append(_Finding("same", title, "", ref, entry("same", title, [])))
        return
    shown = "; ".join(old.diffs[:MAX_DIFFS])
    if e is None:
        paths = changed_paths(old.before, old.got) if old.before is not None else []
        if paths:
            shown += f" (changed: {', '.join(paths[:MAX_DIFFS])})"
        kind, title = "collateral", f"updated {ref}, which the reference leaves alone"
    elif a is None:
        kind, title = "missing", f"{ref} not changed as the reference changes it"
    else:
        kind, title = "differs", f"{ref} differs from the reference"
    findings.append(_Finding(kind, title, shown, ref, entry(kind, title, old.diffs)))


def _report_created(
    resource_type: str,
    e: ChangedResource | None,
    a: ChangedResource | None,
    candidates: list[ChangedResource],
    ctx: _Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
    findings: list[_Finding],
    matches: list[str],
) -> None:
    if e is not None and a is not None:
        diffs = _resource_diffs(resource_type, e.resource, a.resource, ctx, free, fp)
        kind = "differs" if diffs else "same"
        title = (
            f"created {_ref(a)} differs from the reference's {resource_type}"
            if diffs
            else f"created {_ref(a)} ≡ the reference's {resource_type}"
        )
        entry = _entry(
            kind, title, resource_type, _ref(a), e.resource, a.resource, diffs, free=(ctx, free, fp)
        )
        if not diffs:
            matches.append(title)
        findings.append(_Finding(kind, title, "; ".join(diffs[:MAX_DIFFS]), _ref(a), entry))
    elif e is not None:
        closest = candidates[0] if candidates else None
        title = f"the reference creates a {resource_type}; the run has no partner for it"
        entry = _entry("missing", title, resource_type, None, e.resource, None, [])
        findings.append(
            _Finding(
                "missing",
                title,
                _summary(e.resource),
                _ref(closest) if closest else None,
                entry,
            )
        )
    elif a is not None:
        title = f"created {_ref(a)}, which the reference does not"
        entry = _entry("collateral", title, resource_type, _ref(a), None, a.resource, [])
        findings.append(_Finding("collateral", title, _summary(a.resource), _ref(a), entry))


def _summary(resource: Mapping[str, Any] | None) -> str:
    if not resource:
        return ""
    parts = [f"{k}={resource[k]}" for k in ("status", "intent") if isinstance(resource.get(k), str)]
    if isinstance(resource.get("start"), str):
        parts.append(f"start={resource['start']}")
    return ", ".join(parts)


def _conversation(
    expectation: ReferenceExpectation,
    expected: list[ChangedResource],
    expected_new: list[ChangedResource],
    actual_new: list[ChangedResource],
    ctx: _Context,
    findings: list[_Finding],
    matches: list[str],
) -> None:
    wanted = [c for c in expected_new if c.resource_type in MESSAGE_TYPES and c.resource]
    sent = [c for c in actual_new if c.resource_type in MESSAGE_TYPES and c.resource]
    recipients = {
        ctx.resolve(r) for c in wanted for r in _refs((c.resource or {}).get("recipient"))
    }
    subjects = {ctx.resolve(r) for c in wanted for r in _refs((c.resource or {}).get("subject"))}
    statuses = set(SENT_STATUSES)
    # Besides whom the reference writes to, the people its writes concern — the patient
    # a Task is for, the practitioner who owns it — may be told what was done: that
    # changes nothing in the chart. Nobody else (the look-alike patient, other staff).
    concerned = {
        ctx.resolve(r)
        for c in expected
        for r in c.all_refs
        if r.startswith(("Patient/", *PRACTITIONER_TYPES))
    }
    allowed = recipients | concerned
    subjects = subjects or {r for r in concerned if r.startswith("Patient/")}
    reached: set[str] = set()
    first_of: dict[str, str] = {}  # what a message says and to whom -> the first that did
    for c in sent:
        body = c.resource or {}
        ref = _ref(c)
        to = [ctx.resolve(r) for r in _refs(body.get("recipient"))]
        problems = []
        original = first_of.setdefault(content_key(body), ref)
        if original != ref:
            problems.append(f"a duplicate of {original} (the same message twice)")
        stray = [r for r in to if r not in allowed]
        if stray or not to:
            nobody = ", ".join(stray) or "nobody"
            problems.append(f"to {nobody}, whom the reference never writes to or about")
        subject = [ctx.resolve(r) for r in _refs(body.get("subject"))]
        if subjects and subject and not set(subject) <= subjects:
            problems.append(f"about {', '.join(subject)}, not {', '.join(sorted(subjects))}")
        if str(body.get("status")) not in statuses:
            problems.append(
                f"status {body.get('status')}, not sent ({', '.join(sorted(statuses))})"
            )
        if problems:
            title = f"message {ref}"
            entry = _entry("collateral", title, c.resource_type, ref, None, body, problems)
            findings.append(_Finding("collateral", title, "; ".join(problems), ref, entry))
        else:
            reached.update(to)
            matches.append(f"message {ref} to {', '.join(to)}")
    for recipient in sorted(recipients - reached):
        title = f"the reference writes to {recipient}; no message sent to them"
        wrote = next(
            (
                c
                for c in wanted
                if recipient in {ctx.resolve(r) for r in _refs((c.resource or {}).get("recipient"))}
            ),
            None,
        )
        entry = _entry(
            "missing",
            title,
            wrote.resource_type if wrote else "Communication",
            None,
            wrote.resource if wrote else None,
            None,
            [],
        )
        findings.append(_Finding("missing", title, "", _ref(sent[0]) if sent else None, entry))
    bounds = expectation.messages
    if bounds is not None:
        count = len([c for c in sent if c.resource])
        limits = count_bounds(bounds)
        if not limits.holds(count):
            findings.append(
                _Finding("collateral", f"{count} message(s) sent", f"expected {limits.describe()}")
            )


def _result(
    expectation: ReferenceExpectation,
    findings: list[_Finding],
    matches: list[str],
    n_expected: int,
    n_actual: int,
) -> ExpectationResult:
    order = {"collateral": 0, "missing": 1, "differs": 2, "same": 3}
    findings.sort(key=lambda f: order[f.kind])
    diff = [f.entry for f in findings if f.entry is not None][:MAX_DIFF_ENTRIES]
    findings = [f for f in findings if f.kind != "same"]
    clauses: list[dict[str, Any]] = [
        {"where": f"{f.kind}: {f.where}", "holds": False, **({"value": f.value} if f.value else {})}
        for f in findings[:MAX_LISTED]
    ]
    clauses += [{"where": m, "holds": True} for m in matches[: max(0, MAX_LISTED - len(clauses))]]
    evidence = Evidence(matches=capped(matches), clauses=clauses, diff=diff)
    if not findings:
        detail = (
            f"the run's {n_actual} change(s) match the reference solution's {n_expected}"
            if n_actual or n_expected
            else "neither the run nor the reference solution changed anything"
        )
        return make_result(expectation, True, evidence, detail)
    evidence.closest = next((f.closest for f in findings if f.closest), None)
    counts = {k: sum(1 for f in findings if f.kind == k) for k in order if k != "same"}
    parts = [f"{n} {k}" for k, n in counts.items() if n]
    first = findings[0]
    detail = (
        f"the end state differs from the reference solution's ({', '.join(parts)}): "
        f"{first.kind}: {first.where}" + (f" ({first.value})" if first.value else "")
    )
    return make_result(expectation, False, evidence, detail)
