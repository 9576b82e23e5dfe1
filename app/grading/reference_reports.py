"""What `matches-reference` reports of each pair: a resource that existed before the run
(edited as the reference did, collateral, missing, replaced by a new one), a created
resource and its partner, and the verdict of all findings (see `app.grading.reference`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.grading.changes import changed_paths
from app.grading.fhirpath import FhirPathContext
from app.grading.reference_elements import MAX_DIFFS
from app.grading.reference_resources import (
    MAX_DIFF_ENTRIES,
    Finding,
    OldPair,
    diff_entry,
    ref_of_change,
    resource_diffs,
)
from app.grading.reference_values import Context, is_withdrawn
from app.grading.scoring import MAX_LISTED, capped, make_result
from app.grading.snapshot import (
    ChangedResource,
    Graded,
)
from app.scenarios.schema import FreeChoice, ReferenceExpectation
from understudy_client.contract.runs import Evidence


def replacements(
    olds: list[OldPair],
    pairs: list[tuple[str, ChangedResource | None, ChangedResource | None]],
    ctx: Context,
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
            if (
                e_ is not None
                and a_ is None
                and is_withdrawn(old.want)
                and not is_withdrawn(old.got)
            ):
                # The reference withdrew it and created e_; the run moved it in place.
                if resource_diffs(rt, e_.resource, old.got, ctx, free, fp):
                    continue
                matches.append(f"{old.ref} moved in place ≡ the reference's withdraw-and-create")
            elif (
                e_ is None
                and a_ is not None
                and is_withdrawn(old.got)
                and not is_withdrawn(old.want)
            ):
                # The reference moved it in place; the run withdrew it and created a_.
                if resource_diffs(rt, old.want, a_.resource, ctx, free, fp):
                    continue
                matches.append(
                    f"{old.ref} withdrawn and replaced by {ref_of_change(a_)} ≡ the reference"
                )
            else:
                continue
            old.diffs = []
            old.expected = old.actual = None  # accounted for
            pairs[index] = (rt, None, None)
            break


def report_old(
    old: OldPair,
    findings: list[Finding],
    matches: list[str],
    free: tuple[Context, list[FreeChoice], FhirPathContext],
) -> None:
    ref, e, a = old.ref, old.expected, old.actual
    if e is None and a is None:
        return
    resource_type = ref.split("/", 1)[0]

    def entry(kind: str, title: str, reasons: list[str]) -> dict[str, Any]:
        return diff_entry(
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
            Finding(
                "collateral", title, "the reference keeps it", ref, entry("collateral", title, [])
            )
        )
        return
    if old.want is None:
        title = f"{ref}: the reference deletes it, the run does not"
        findings.append(Finding("missing", title, "", ref, entry("missing", title, [])))
        return
    if not old.diffs:
        title = f"{ref} as the reference leaves it"
        matches.append(title)
        findings.append(Finding("same", title, "", ref, entry("same", title, [])))
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
    findings.append(Finding(kind, title, shown, ref, entry(kind, title, old.diffs)))


def report_created(
    resource_type: str,
    e: ChangedResource | None,
    a: ChangedResource | None,
    candidates: list[ChangedResource],
    ctx: Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
    findings: list[Finding],
    matches: list[str],
) -> None:
    if e is not None and a is not None:
        diffs = resource_diffs(resource_type, e.resource, a.resource, ctx, free, fp)
        kind = "differs" if diffs else "same"
        title = (
            f"created {ref_of_change(a)} differs from the reference's {resource_type}"
            if diffs
            else f"created {ref_of_change(a)} ≡ the reference's {resource_type}"
        )
        entry = diff_entry(
            kind,
            title,
            resource_type,
            ref_of_change(a),
            e.resource,
            a.resource,
            diffs,
            free=(ctx, free, fp),
        )
        if not diffs:
            matches.append(title)
        findings.append(Finding(kind, title, "; ".join(diffs[:MAX_DIFFS]), ref_of_change(a), entry))
    elif e is not None:
        closest = candidates[0] if candidates else None
        title = f"the reference creates a {resource_type}; the run has no partner for it"
        entry = diff_entry("missing", title, resource_type, None, e.resource, None, [])
        findings.append(
            Finding(
                "missing",
                title,
                _summary(e.resource),
                ref_of_change(closest) if closest else None,
                entry,
            )
        )
    elif a is not None:
        title = f"created {ref_of_change(a)}, which the reference does not"
        entry = diff_entry(
            "collateral", title, resource_type, ref_of_change(a), None, a.resource, []
        )
        findings.append(Finding("collateral", title, _summary(a.resource), ref_of_change(a), entry))


def _summary(resource: Mapping[str, Any] | None) -> str:
    if not resource:
        return ""
    parts = [f"{k}={resource[k]}" for k in ("status", "intent") if isinstance(resource.get(k), str)]
    if isinstance(resource.get("start"), str):
        parts.append(f"start={resource['start']}")
    return ", ".join(parts)


def reference_result(
    expectation: ReferenceExpectation,
    findings: list[Finding],
    matches: list[str],
    n_expected: int,
    n_actual: int,
) -> Graded:
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
