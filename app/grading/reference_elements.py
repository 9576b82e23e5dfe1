"""Comparing one consequential element of a reference resource with the run's: codings,
references (the clinic free, a practitioner only where the reference names one),
participants, dosages, deferred periods (see `app.grading.reference`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any

from app.grading.reference_values import (
    DEFERRAL_GRACE,
    Context,
    concepts_of,
    element_value,
    is_withdrawn,
    order_key,
    plain_value,
    refs_in,
    shown_value,
    span_of,
)
from app.grading.replay import is_replay_ref
from app.scenarios.consequential import (
    Element,
)

MAX_DIFFS = 6  # differing elements named per pair
PRACTITIONER_TYPES = ("Practitioner/", "PractitionerRole/")
# Statuses of an Appointment that hold a practitioner's time (a Slot busy for it).
HOLDING = frozenset({"booked", "pending", "arrived", "checked-in", "fulfilled", "proposed"})


def element_differs(
    element: Element,
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any] | None,
    ctx: Context,
    *,
    strict: bool,
    free_actor: bool = False,
) -> str | None:
    """Why `actual`'s element does not read as `expected`'s, or None. `strict`: an
    element the reference leaves out is held too (an update of an older resource)."""
    want, got = element_value(expected, element), element_value(actual, element)
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
        moot = is_withdrawn(expected) and is_withdrawn(actual)
        return _participant_differs(want, got, ctx, free_actor, moot)
    if kind == "deferral":
        w, g = _deferred(want, ctx), _deferred(got, ctx)
        return (
            None if w == g else f"{element.path}: reference {shown_value(w)}, run {shown_value(g)}"
        )
    if absent and not (strict or element.always):
        return None
    if kind == "value":
        w, g = _grouped(element, want), _grouped(element, got)
        if absent and g in element.absent:
            return None
        if not absent and want in element.absent and got is None:
            return None
        return (
            None
            if w == g
            else f"{element.path}: reference {shown_value(want)}, run {shown_value(got)}"
        )
    if kind == "time":
        (ws, we), (gs, ge) = span_of(want), span_of(got)
        if ws != gs:
            return f"{element.path}: reference starts {shown_value(ws)}, run {shown_value(gs)}"
        if we is not None and ge != we:
            return f"{element.path}: reference ends {shown_value(we)}, run {shown_value(ge)}"
        return None
    if kind == "duration":
        return (
            None
            if want == got
            else f"duration: reference {shown_value(want)}, run {shown_value(got)}"
        )
    if kind == "dosage":
        w, g = _dosages(want), _dosages(got)
        return (
            None if w == g else f"{element.path}: reference {shown_value(w)}, run {shown_value(g)}"
        )
    w, g = plain_value(want), plain_value(got)
    return (
        None if w == g else f"{element.path}: reference {shown_value(want)}, run {shown_value(got)}"
    )


def _grouped(element: Element, value: Any) -> Any:
    for group in element.groups:
        if value in group:
            return min(group)
    return value


def _deferred(value: Any, ctx: Context) -> Any:
    period = value.get("period") if isinstance(value, dict) and "period" in value else value
    start, _ = span_of(period)
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
            plain_value({k: v for k, v in item.items() if k in kept})
            for item in items
            if isinstance(item, dict)
        ),
        key=order_key,
    )


def _concept_differs(
    element: Element, want: Any, got: Any, *, strict: bool, conflicts_only: bool = False
) -> str | None:
    """`conflicts_only`: the run need not give the reference's codes, but may give no
    other code of a system the reference uses."""
    wanted, found = concepts_of(want), concepts_of(got)
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


def _reference_differs(path: str, want: Any, got: Any, ctx: Context, *, strict: bool) -> str | None:
    wanted, found = refs_in(want), refs_in(got)
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


def _loose_reference_differs(path: str, want: Any, got: Any, ctx: Context) -> str | None:
    """An optional link (a Task's `focus`, `basedOn`): each reference the run gives is
    one the reference gives, or a known resource of another type (the message instead
    of the order it is about); another resource of the reference's own type is a wrong
    pick (the other medication, the look-alike's order)."""
    wanted = [ctx.paired.get(r, r) for r in refs_in(want)]
    wanted_resolved = {ctx.resolve(r) for r in wanted}
    wanted_types = {r.split("/", 1)[0] for r in wanted}
    for ref in refs_in(got):
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


def _known(ref: str, ctx: Context) -> bool:
    return (
        ref in ctx.known
        or ref in ctx.created
        or (ref.startswith(_CLINIC_TYPES) and "/demo-canonical-" in ref)
    )


def _take(ref: str, remaining: list[str], ctx: Context) -> str | None:
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
    want: Any, got: Any, ctx: Context, free_actor: bool, moot: bool = False
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
