"""`changes`: the guard against collateral damage.

Holds when every resource the system under test created, updated or deleted during the
run is accounted for: in the evidence of an expectation named in `allow` (the resources
a `resource` expectation matched, the fixture resource of a `field` expectation that
holds, the union of an `any_of`'s holding children), or matching one of the
`allowWhere` clauses (on the resource as it reads now: a deletion matches none).
Otherwise it fails naming each unexpected change: created /
updated / deleted, type and id, and for an update the paths that changed (a JSON diff
against the version before the run's first write of it, `meta` left out).

Scope "patient" (the default) is what the run owns or wrote: its fixture resources, what
was written on its fixture patients, and anything written through the run's view — a
shared directory resource (a Practitioner, a Slot) edited by the run included. Scope
"tenant" adds writes anywhere in the tenant in the run's window that no other run owns.

Some writes are no change at all: a record of the work (a Provenance, an AuditEvent), an
update that leaves the resource as it was (a PUT of the same body), and a resource
created during the run and deleted again, or withdrawn again (cancelled,
entered-in-error, revoked; not a message, which was read once sent).
And one is never expected, allowed or not: a **duplicate**, a resource created during the
run that reads like an earlier one it created (the same type and content, leaving out
ids, `meta`, narrative, identifiers and the moments of writing) — a retry that did not
check the first had worked, two identical orders or Tasks, the same message twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.grading.fhirpath import FhirPathContext
from app.grading.resource import ref_of
from app.grading.scoring import MAX_LISTED, capped, make_result
from app.grading.snapshot import ChangedResource, Graded, RunSnapshot
from app.scenarios.consequential import BOOKKEEPING_TYPES
from app.scenarios.schema import ChangesExpectation, Expectation
from understudy_client.contract.runs import Evidence

MAX_PATHS = 8  # changed paths named per update; the first few say what happened
IGNORED_KEYS = frozenset({"meta"})  # version bookkeeping, rewritten by every write
# A record created during the run and withdrawn again with one of these statuses is no
# net change (FHIR often forbids deleting; the correction is the status). Not for a
# message: one that was sent has been read, whatever its status says afterwards.
WITHDRAWN = frozenset({"cancelled", "entered-in-error", "revoked"})
SENT_TYPES = frozenset({"Communication"})
# Left out when telling whether two created resources are the same: what differs between
# two writes of one thing (their ids, bookkeeping and the moment each was written).
NOT_CONTENT = frozenset(
    {
        "id",
        "meta",
        "text",
        "identifier",
        "sent",
        "received",
        "authoredOn",
        "issued",
        "recorded",
        "created",
        "date",
        "lastModified",
    }
)


def content_key(resource: dict[str, Any]) -> str:
    """What a created resource says, for spotting a duplicate: its JSON without the
    NOT_CONTENT elements, keys sorted."""
    kept = {k: v for k, v in resource.items() if k not in NOT_CONTENT}
    # Stored decimals are Decimal (their scale kept): written as their text.
    return json.dumps(kept, sort_keys=True, default=str)


def changed_paths(before: Any, after: Any, prefix: str = "") -> list[str]:
    """The paths (FHIRPath-like: `telecom[0].value`) at which two JSON values differ.
    Lists of different lengths differ as a whole; `meta` at the top is left out."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after)):
            if not prefix and key in IGNORED_KEYS:
                continue
            path = f"{prefix}.{key}" if prefix else key
            if key not in before or key not in after:
                out.append(path)
            else:
                out.extend(changed_paths(before[key], after[key], path))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            out.extend(changed_paths(b, a, f"{prefix}[{index}]"))
        return out
    return [] if before == after else [prefix or "(the resource)"]


def describe(changed: ChangedResource) -> tuple[str, list[str]]:
    """What happened to a resource ("created Task/1", "updated Patient/p"), and for an
    update the paths that changed (empty when no earlier version is known)."""
    ref = ref_of(changed)
    if changed.resource is None:
        return f"deleted {ref}", []
    if changed.created:
        return f"created {ref}", []
    if changed.before is None:
        return f"updated {ref}", []
    return f"updated {ref}", changed_paths(changed.before, changed.resource)


def no_net_change(changed: ChangedResource) -> str | None:
    if changed.resource is None and changed.created:
        return f"{ref_of(changed)} was created and deleted again during the run"
    if (
        changed.created
        and changed.resource is not None
        and changed.resource_type not in SENT_TYPES
        and changed.resource.get("status") in WITHDRAWN
    ):
        status = changed.resource["status"]
        return f"{ref_of(changed)} was created and withdrawn again ({status})"
    if (
        not changed.created
        and changed.resource is not None
        and changed.before is not None
        and not changed_paths(changed.before, changed.resource)
    ):
        return f"{ref_of(changed)} was rewritten unchanged"
    return None


def _within(path: str, allowed: str) -> bool:
    return path == allowed or path.startswith((allowed + ".", allowed + "["))


def _outside(changed: ChangedResource, paths: tuple[str, ...] | None) -> list[str]:
    """The paths an update of an allowed resource changed beyond `paths` (none when any
    change is allowed, or the resource was created or deleted whole)."""
    if paths is None or changed.created or changed.resource is None or changed.before is None:
        return []
    return [
        p
        for p in changed_paths(changed.before, changed.resource)
        if not any(_within(p, a) for a in paths)
    ]


def grade_changes(
    expectation: ChangesExpectation,
    snapshot: RunSnapshot,
    fp: FhirPathContext,
    grade_named: Callable[[Expectation], Graded],
    by_id: dict[str, Expectation],
) -> Graded:
    allowed_refs = _allowed_refs(expectation, grade_named, by_id)
    if isinstance(allowed_refs, str):
        return make_result(expectation, False, Evidence(matches=[]), allowed_refs)
    in_scope = _in_scope(expectation, snapshot)

    accounted: list[str] = []
    unexpected: list[dict[str, Any]] = []
    notes: list[str] = []
    first_of: dict[tuple[str, str], str] = {}  # (type, content) -> the first created
    for changed in in_scope:
        ref = ref_of(changed)
        if (why := no_net_change(changed)) is not None:
            notes.append(why)
            continue
        if changed.created and changed.resource is not None:
            key = (changed.resource_type, content_key(changed.resource))
            original = first_of.setdefault(key, ref)
            if original != ref:
                where = f"unexpected: created {ref}, a duplicate of {original}"
                unexpected.append({"where": where, "holds": False})
                continue
        if ref in allowed_refs:
            named, paths = allowed_refs[ref]
            outside = _outside(changed, paths)
            if not outside:
                accounted.append(f"{ref} (by {named})")
                continue
            shown = ", ".join(outside[:MAX_PATHS])
            unexpected.append(
                {
                    "where": f"unexpected: updated {ref} beyond what {named} allows",
                    "holds": False,
                    "value": f"{shown} (allowed: {', '.join(paths or ())})",
                }
            )
            continue
        body = changed.resource  # a deletion matches no allowWhere: nothing is left
        clause = next(
            (
                where
                for where in expectation.allow_where
                if body is not None and fp.check(where, body).holds
            ),
            None,
        )
        if clause is not None:
            accounted.append(f"{ref} (allowWhere {clause})")
            continue
        what, changed_at = describe(changed)
        item: dict[str, Any] = {"where": f"unexpected: {what}", "holds": False}
        if changed_at:
            listed = changed_at[:MAX_PATHS]
            more = len(changed_at) - len(listed)
            item["value"] = ", ".join(listed) + (f" and {more} more" if more else "")
        unexpected.append(item)

    evidence = Evidence(matches=capped(accounted))
    if notes:
        evidence.note = "; ".join(notes[:MAX_LISTED])
    scope = "in the tenant" if expectation.scope == "tenant" else "in the run"
    if not unexpected:
        detail = (
            f"every one of the {len(accounted)} change(s) {scope} is expected"
            if accounted
            else f"no change {scope} besides the expected ones"
        )
        return make_result(expectation, True, evidence, detail)
    evidence.clauses = unexpected[:MAX_LISTED]
    evidence.closest = unexpected[0]["where"].removeprefix("unexpected: ").split(" ")[1].rstrip(",")
    named = "; ".join(
        e["where"].removeprefix("unexpected: ") + (f" ({e['value']})" if "value" in e else "")
        for e in unexpected[:MAX_LISTED]
    )
    more = len(unexpected) - MAX_LISTED
    detail = f"{len(unexpected)} unexpected change(s) {scope}: {named}" + (
        f" and {more} more" if more > 0 else ""
    )
    return make_result(expectation, False, evidence, detail)


def _allowed_refs(
    expectation: ChangesExpectation,
    grade_named: Callable[[Expectation], Graded],
    by_id: dict[str, Expectation],
) -> dict[str, tuple[str, tuple[str, ...] | None]] | str:
    """ref -> (the expectation whose evidence allows it, the paths an update may touch;
    None: any). A resource several entries allow takes the widest. A str: what is wrong
    with `allow` (it names no expectation)."""
    allowed_refs: dict[str, tuple[str, tuple[str, ...] | None]] = {}
    for entry in expectation.allow:
        named, paths = (entry, None) if isinstance(entry, str) else (entry.of, tuple(entry.paths))
        target = by_id.get(named)
        if target is None:
            return f"allow names no expectation: {named!r}"
        for ref in grade_named(target).refs:
            known = allowed_refs.get(ref)
            if known is None or (known[1] is not None and paths is None):
                allowed_refs[ref] = (named, paths)
            elif known[1] is not None and paths is not None:
                allowed_refs[ref] = (known[0], known[1] + paths)
    return allowed_refs


def _in_scope(expectation: ChangesExpectation, snapshot: RunSnapshot) -> list[ChangedResource]:
    """The changes the expectation judges, in the order first made: the run's (or the
    tenant's), records of the work aside."""
    if expectation.scope == "tenant":
        in_scope = list(snapshot.changed)
    else:
        in_scope = [c for c in snapshot.changed if c.via_run or c.run_id is not None]
    # A record of the work (a Provenance, an AuditEvent) changes nothing in the chart.
    in_scope = [c for c in in_scope if c.resource_type not in BOOKKEEPING_TYPES]
    in_scope.sort(key=lambda c: (c.first_changed_at, c.resource_type, c.id))
    return in_scope
