"""Grade a run: expectations + RunSnapshot → Verdict. Pure, deterministic, no I/O.

Each expectation is graded once per pass, memoised, on demand: an `api_call` with
`before: X` grades X first (wherever X sits, nested `any_of` children included) so it
knows X's first evidence time. A `before` naming an unknown id or forming a cycle is a
failing expectation, never an exception; so is any error inside a grader, and a
FHIRPath error is a failing clause with its message in the evidence.

`webhook` and `rubric` are graded here (no module of their own yet): a webhook
expectation is ungradable (passed None) while the deployment has no webhook delivery,
which keeps a required one from ever passing silently; a rubric is always pending here
(the judge scores it at the end) and always bonus.

Cost, measured on the dev container (Python 3.11, fhirpathpy 2.2.4): 10 expectations
over 20 changed resources and 30 calls, including date arithmetic and closest-candidate
evidence, grade in about 1.6 ms per pass once the expressions are compiled (about
22 ms the first time, which parses every expression).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.grading.any_of import grade_any_of
from app.grading.api_call import grade_api_call
from app.grading.fhirpath import FhirPathContext, fhirpath_datetime
from app.grading.field import grade_field, symbol_of
from app.grading.resource import grade_resource
from app.grading.scoring import capped, make_result, verdict
from app.grading.snapshot import Evidence, ExpectationResult, RunSnapshot, Verdict
from app.scenarios.schema import (
    AnyOfExpectation,
    ApiCallExpectation,
    Expectation,
    FieldExpectation,
    ResourceExpectation,
    RubricExpectation,
    WebhookExpectation,
)

WEBHOOK_UNSUPPORTED = (
    "webhook expectations are graded once webhook delivery exists; this run cannot pass on it"
)
RUBRIC_PENDING = "graded by a judge when the run ends (not available yet)"


def grade(expectations: list[Expectation], snapshot: RunSnapshot) -> Verdict:
    grader = _Grader(expectations, snapshot)
    return verdict([grader.grade(expectation) for expectation in expectations])


def _walk(expectations: Iterable[Expectation]) -> Iterable[Expectation]:
    for expectation in expectations:
        yield expectation
        if isinstance(expectation, AnyOfExpectation):
            yield from _walk(expectation.expectations)


class _Grader:
    def __init__(self, expectations: list[Expectation], snapshot: RunSnapshot) -> None:
        self.snapshot = snapshot
        self.fp = FhirPathContext.from_snapshot(snapshot)
        self.by_id: dict[str, Expectation] = {}
        for expectation in _walk(expectations):
            self.by_id.setdefault(expectation.id, expectation)
        # Keyed by object identity: ids should be unique, but a duplicate must not make
        # one expectation report another's result.
        self.done: dict[int, ExpectationResult] = {}
        self.in_progress: set[int] = set()

    def grade(self, expectation: Expectation) -> ExpectationResult:
        key = id(expectation)
        if key in self.done:
            return self.done[key]
        self.in_progress.add(key)
        try:
            result = self._dispatch(expectation)
        except Exception as exc:  # a grader bug must not stop the other expectations
            result = make_result(
                expectation, False, Evidence(), f"grading error: {type(exc).__name__}: {exc}"
            )
        finally:
            self.in_progress.discard(key)
        self.done[key] = result
        return result

    def _dispatch(self, expectation: Expectation) -> ExpectationResult:
        snapshot = self.snapshot
        if isinstance(expectation, ResourceExpectation):
            return grade_resource(expectation, snapshot, self.fp)
        if isinstance(expectation, FieldExpectation):
            return grade_field(expectation, snapshot, self.fp)
        if isinstance(expectation, ApiCallExpectation):
            return self._api_call(expectation)
        if isinstance(expectation, AnyOfExpectation):
            return grade_any_of(expectation, self.grade)
        if isinstance(expectation, WebhookExpectation):
            return grade_webhook(expectation, snapshot)
        return grade_rubric(expectation)

    def _api_call(self, expectation: ApiCallExpectation) -> ExpectationResult:
        if expectation.before is None:
            return grade_api_call(expectation, self.snapshot, None)
        target = self.by_id.get(expectation.before)
        if target is None:
            detail = f"before names no expectation: {expectation.before!r}"
            return make_result(expectation, False, Evidence(), detail)
        if id(target) in self.in_progress:
            detail = f"before {expectation.before!r} forms a cycle"
            return make_result(expectation, False, Evidence(), detail)
        return grade_api_call(expectation, self.snapshot, self.grade(target))


def grade_webhook(expectation: WebhookExpectation, snapshot: RunSnapshot) -> ExpectationResult:
    if not snapshot.webhooks_supported:
        return make_result(expectation, None, Evidence(), WEBHOOK_UNSUPPORTED)
    ref = snapshot.fixture.get(symbol_of(expectation.resource))
    if ref is None:
        return make_result(
            expectation, False, Evidence(), f"no fixture resource {expectation.resource}"
        )
    delivered = sorted(
        (d for d in snapshot.deliveries if d.event == expectation.event and d.resource_ref == ref),
        key=lambda d: d.at,
    )
    evidence = Evidence(
        matches=capped(
            [f"{d.event} {d.resource_ref} at {fhirpath_datetime(d.at)}" for d in delivered]
        )
    )
    if delivered:
        detail = f"{len(delivered)} {expectation.event} delivery(ies) for {ref}"
        return make_result(expectation, True, evidence, detail, delivered[0].at)
    others = sorted({d.event for d in snapshot.deliveries if d.resource_ref == ref})
    if others:
        evidence.note = f"other events delivered for {ref}: {', '.join(others)}"
    return make_result(
        expectation, False, evidence, f"no successful {expectation.event} delivery for {ref}"
    )


def grade_rubric(expectation: RubricExpectation) -> ExpectationResult:
    result = make_result(expectation, None, Evidence(), RUBRIC_PENDING)
    result.required = False  # always bonus, whatever the scenario says
    return result
