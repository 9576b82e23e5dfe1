"""Comparing whole resources for `matches-reference`: the differences between a
reference resource and the run's (the scenario's free choices held instead), pairing
created resources by least difference, and the findings and diff entries the run page
shows (see `app.grading.reference`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.grading.changes import changed_paths
from app.grading.fhirpath import FhirPathContext
from app.grading.reference_elements import MAX_DIFFS, element_differs
from app.grading.reference_values import Context, element_value, instant_value
from app.grading.snapshot import (
    ChangedResource,
    RunSnapshot,
)
from app.scenarios.consequential import (
    elements_of,
)
from app.scenarios.schema import FreeChoice

# Brute-force pairing up to this many resources of one type (6! = 720 orders); beyond
# it, greedy by least difference.
EXACT_PAIRING_MAX = 6


@dataclass
class Finding:
    kind: str  # collateral | missing | differs
    where: str
    value: str = ""
    closest: str | None = None
    entry: dict[str, Any] | None = None  # its row of the end-state diff (`diff_entry`)


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


def diff_entry(
    kind: str,
    title: str,
    resource_type: str,
    ref: str | None,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    reasons: list[str],
    *,
    free: tuple[Context, list[FreeChoice], FhirPathContext] | None = None,
    before: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One resource of the end-state diff: the reference's end state beside the run's,
    the elements that differ, and the free choices the run made with their constraints."""
    choices: list[dict[str, Any]] = []
    if free is not None and expected is not None and actual is not None:
        ctx, frees, fp = free
        if _free_for(frees, resource_type):
            resource_diffs(
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


def resource_diffs(
    resource_type: str,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    ctx: Context,
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
        if element_differs(element, expected, actual, ctx, strict=False) is not None:
            chosen.append(choice)
            free_actor = free_actor or choice.path == "participant.actor"
    free_paths = {c.path for c in chosen if c.path != "participant.actor"}
    for element in elements:
        if element.path in free_paths:
            continue
        strict = before is not None and element_value(before, element) not in (None, [])
        why = element_differs(element, expected, actual, ctx, strict=strict, free_actor=free_actor)
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


def pair_by_cost(
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


def ref_of_change(c: ChangedResource) -> str:
    return f"{c.resource_type}/{c.id}"


def slot_follows(slot: ChangedResource, appointments: list[ChangedResource]) -> bool:
    """A Slot the run marked busy or free, covered by a booking the run changed."""
    after, before = slot.resource, slot.before
    if after is None or before is None:
        return False
    paths = [p for p in changed_paths(before, after) if p != "status"]
    if paths or after.get("status") not in ("busy", "free"):
        return False
    start, end = instant_value(after.get("start")), instant_value(after.get("end"))
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return False
    for appointment in appointments:
        for body in (appointment.resource, appointment.before):
            if not body:
                continue
            a_start, a_end = instant_value(body.get("start")), instant_value(body.get("end"))
            if (
                isinstance(a_start, datetime)
                and isinstance(a_end, datetime)
                and a_start < end
                and start < a_end
            ):
                return True
    return False


def aliases_of(snapshot: RunSnapshot) -> dict[str, str]:
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
class OldPair:
    """A resource that existed before the run, as the reference and the run leave it."""

    ref: str
    expected: ChangedResource | None
    actual: ChangedResource | None
    before: dict[str, Any] | None
    want: dict[str, Any] | None
    got: dict[str, Any] | None
    diffs: list[str]
