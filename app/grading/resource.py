"""`resource`: resources of a type written during the run, matching every where clause,
their number within `count`."""

from __future__ import annotations

from typing import Any

from app.grading.fhirpath import Clause, FhirPathContext
from app.grading.scoring import capped, count_bounds, make_result
from app.grading.snapshot import ChangedResource, Graded, RunSnapshot
from app.scenarios.schema import ResourceExpectation
from understudy_client.contract.runs import Evidence


def ref_of(changed: ChangedResource) -> str:
    return f"{changed.resource_type}/{changed.id}"


def on_fixture_patients(changed: ChangedResource, patient_refs: frozenset[str]) -> bool:
    """A fixture Patient itself, or a resource that references one anywhere in its body.
    A resource without a run (tenant-wide) never counts for patient scope."""
    if changed.run_id is None:
        return False
    return ref_of(changed) in patient_refs or not patient_refs.isdisjoint(changed.all_refs)


def failing_clauses(clauses: list[Clause]) -> str:
    return "; ".join(c.where + (f" ({c.error})" if c.error else "") for c in clauses if not c.holds)


def grade_resource(
    expectation: ResourceExpectation, snapshot: RunSnapshot, fp: FhirPathContext
) -> Graded:
    kind = expectation.resource_type
    bounds = count_bounds(expectation.count)
    # A deleted resource is not present, so it can neither match nor be "closest".
    of_type = sorted(
        (
            (changed, body)
            for changed in snapshot.changed
            if changed.resource_type == kind and (body := changed.resource) is not None
        ),
        key=lambda cb: (cb[0].first_changed_at, cb[0].id),
    )
    if expectation.scope == "tenant":
        candidates = of_type
        where_text = "in the tenant"
    else:
        candidates = [cb for cb in of_type if on_fixture_patients(cb[0], snapshot.patient_refs)]
        where_text = "on the fixture patients"
    out_of_scope = len(of_type) - len(candidates)

    matches: list[ChangedResource] = []
    misses: list[tuple[ChangedResource, dict[str, Any]]] = []
    unknown: list[tuple[ChangedResource, Clause]] = []  # a clause could not be evaluated
    for changed, body in candidates:
        # Clauses stop at the first that fails; every clause's result is only needed for
        # the closest candidate of a failure, worked out below.
        failed = next(
            (c for c in (fp.check(where, body) for where in expectation.where) if not c.holds),
            None,
        )
        if failed is None:
            matches.append(changed)
        else:
            misses.append((changed, body))
            if failed.error is not None:
                unknown.append((changed, failed))

    n = len(matches)
    matched = frozenset(ref_of(m) for m in matches)
    passed = bounds.holds(n)
    evidence = Evidence(matches=capped([ref_of(m) for m in matches]))
    if out_of_scope:
        evidence.note = (
            f"{out_of_scope} {kind} changed outside the fixture patients' records "
            "(not counted: scope is patient)"
        )
    counted = f"{n} matching {kind} {where_text}, expected {bounds.describe()}"
    if passed and unknown and bounds.max is not None and n + len(unknown) > bounds.max:
        # Fail safe: a resource a must-not-happen check cannot evaluate may be the very
        # thing it guards against, so it counts against the ceiling.
        changed, clause = unknown[0]
        evidence.closest = ref_of(changed)
        evidence.clauses = [clause.as_json()]
        return make_result(
            expectation,
            False,
            evidence,
            f"{counted}, but {ref_of(changed)} could not be evaluated ({clause.where}: "
            f"{clause.error}); counted as a possible match",
            refs=matched,
        )

    if passed:
        first_at = min((m.first_changed_at for m in matches), default=None)
        return make_result(expectation, True, evidence, counted, first_at, refs=matched)
    if bounds.max is not None and n > bounds.max:
        return make_result(expectation, False, evidence, counted, refs=matched)
    if not candidates:
        return make_result(
            expectation,
            False,
            evidence,
            f"no {kind} changed {where_text} during the run",
            refs=matched,
        )
    if not misses:  # every candidate matches, there are just too few
        return make_result(expectation, False, evidence, counted, refs=matched)

    scored = [(changed, fp.check_all(expectation.where, body)) for changed, body in misses]
    # Most clauses holding wins; a tie goes to the latest write, the system under test's
    # most likely answer.
    closest, clauses = max(
        scored,
        key=lambda sc: (sum(c.holds for c in sc[1]), sc[0].last_changed_at, sc[0].id),
    )
    evidence.closest = ref_of(closest)
    evidence.clauses = [c.as_json() for c in clauses]
    detail = f"{counted}; closest {ref_of(closest)} fails: {failing_clauses(clauses)}"
    return make_result(expectation, False, evidence, detail, refs=matched)
