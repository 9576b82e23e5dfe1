"""`field`: a fixture resource, as it reads now, matches every where clause."""

from __future__ import annotations

from datetime import datetime

from app.grading.fhirpath import FhirPathContext
from app.grading.resource import failing_clauses
from app.grading.scoring import make_result
from app.grading.snapshot import Graded, RunSnapshot
from app.scenarios.schema import FieldExpectation, symbol_name
from understudy_client.contract.runs import Evidence


def changed_at(snapshot: RunSnapshot, ref: str) -> datetime:
    """When the resource came to read as it does now: its last write during the run (the
    body now *is* that write), or the run's start if the run never wrote it."""
    for changed in snapshot.changed:
        if f"{changed.resource_type}/{changed.id}" == ref:
            return changed.last_changed_at
    return snapshot.started_at


def grade_field(
    expectation: FieldExpectation, snapshot: RunSnapshot, fp: FhirPathContext
) -> Graded:
    symbol = symbol_name(expectation.target)
    ref = snapshot.fixture.get(symbol)
    if ref is None:
        return make_result(
            expectation, False, Evidence(matches=[]), f"no fixture resource {expectation.target}"
        )
    body = snapshot.current.get(symbol)
    if body is None:
        return make_result(
            expectation,
            False,
            Evidence(matches=[], closest=ref),
            f"{ref} ({expectation.target}) is deleted or missing",
        )

    clauses = fp.check_all(expectation.where, body)
    evidence = Evidence(matches=[], clauses=[c.as_json() for c in clauses])
    if all(c.holds for c in clauses):
        evidence.matches = [ref]
        first_at = changed_at(snapshot, ref)
        return make_result(
            expectation, True, evidence, f"{ref} matches", first_at, refs=frozenset({ref})
        )
    evidence.closest = ref
    return make_result(expectation, False, evidence, f"{ref} fails: {failing_clauses(clauses)}")
