"""`api_call`: calls in the run's trace with a method and a path glob.

Only successful calls count (status < 400): a rejected request did not do the work,
so a failed POST /Appointment is no evidence of booking; it shows up as the closest
call instead. With `before: X`, only calls strictly earlier than X's first evidence
count; while X does not hold yet, every call so far counts (the order cannot have been
violated yet).

Globs (wcmatch): `*` is one path segment, `**` any number, `{a,b}` alternatives; `$`
and ids are literal. `/Patient/*` matches `/Patient/abc` but not
`/Patient/abc/_history/1`; `/**` matches every path.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl

from wcmatch import glob

from app.grading.fhirpath import FhirPathContext, fhirpath_datetime, normalise
from app.grading.scoring import capped, count_bounds, make_result
from app.grading.snapshot import Call, Graded, RunSnapshot
from app.scenarios.schema import ApiCallExpectation
from understudy_client.contract.runs import Evidence

# DOTGLOB: `/**` must match `/.well-known/...` too; FORCEUNIX: `/` separates segments
# and matching is case-sensitive whatever the host.
GLOB_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB | glob.FORCEUNIX
GLOB_CACHE_SIZE = 1024  # distinct path patterns across loaded scenarios
FAILED_STATUS = 400  # 4xx and 5xx: the request did not do the work
_GLOB_CHARS = "*?[{"


@lru_cache(maxsize=GLOB_CACHE_SIZE)
def _matcher(pattern: str) -> glob.WcMatcher[str] | str:
    try:
        return glob.compile(pattern, flags=GLOB_FLAGS)
    except Exception as exc:  # e.g. a brace expansion past wcmatch's limit
        return f"path glob {pattern!r} is invalid: {exc}"


def path_matches(pattern: str, path: str) -> bool:
    """Whether a call path matches a scenario path glob (False for an invalid glob)."""
    matcher = _matcher(pattern)
    return not isinstance(matcher, str) and bool(matcher.match(path))


def describe_call(call: Call) -> str:
    described = f"{call.method} {call.path} {call.status} at {fhirpath_datetime(call.at)}"
    return described if call.transport == "rest" else f"{described} via {call.transport}"


def _literal_prefix(pattern: str) -> str:
    cut = min((i for i, ch in enumerate(pattern) if ch in _GLOB_CHARS), default=len(pattern))
    return pattern[:cut]


def _common_prefix_length(a: str, b: str) -> int:
    # Character-wise on purpose: `/Slot` and `/Schedule` share `/S`, a hint worth ranking.
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def nearest_call(expectation: ApiCallExpectation, calls: list[Call]) -> Call | None:
    """The call most like the one expected, to show what the system did instead: a
    matching call that failed, then the same path with another method, then the call
    sharing the longest path prefix (more than the leading `/`)."""
    prefix = _literal_prefix(expectation.path)

    def rank(call: Call) -> tuple[int, int, bool, datetime]:
        same_method = expectation.method in ("*", call.method.upper())
        matches_path = path_matches(expectation.path, call.path)
        tier = (3 if same_method else 2) if matches_path else 1
        return (tier, _common_prefix_length(prefix, call.path), same_method, call.at)

    ranked = [(rank(call), call) for call in calls]
    ranked = [(r, call) for r, call in ranked if r[0] > 1 or r[1] > 1]
    if not ranked:
        return None
    return max(ranked, key=lambda rc: rc[0])[1]


def call_view(call: Call) -> dict[str, Any]:
    """What an api_call's `where` reads of a call: `parameter` — each query parameter
    (`{"name", "valueString"}`), then the body's own parameters (a Parameters body's
    `parameter` as sent; a plain JSON object's top-level values as `valueString`, e.g.
    the eligibility check's `patient` and `date`) — `request` (the body) and `response`
    (the answer), each as kept by the trace (their first 256 KiB)."""
    parameters: list[dict[str, Any]] = [
        {"name": k, "valueString": v} for k, v in parse_qsl(call.query, keep_blank_values=True)
    ]
    body = call.request
    if isinstance(body, Mapping):
        if body.get("resourceType") == "Parameters":
            parameters += [p for p in body.get("parameter") or [] if isinstance(p, dict)]
        else:
            parameters += [
                {"name": k, "valueString": str(v)}
                for k, v in body.items()
                if isinstance(v, str | int | float | bool)
            ]
    view: dict[str, Any] = {"parameter": parameters}
    if body is not None:
        view["request"] = body
    if call.response is not None:
        view["response"] = call.response
    return view


def _before_resource(snapshot: RunSnapshot, before: Graded | None) -> Any:
    """The first resource of `before`'s evidence, as it reads now (`%before`)."""
    if before is None:
        return []
    by_ref = {f"{c.resource_type}/{c.id}": c.resource for c in snapshot.changed}
    for symbol, ref in snapshot.fixture.items():
        by_ref.setdefault(ref, snapshot.current.get(symbol))
    for ref in before.result.evidence.matches:
        resource = by_ref.get(ref.split(" ", 1)[0])
        if resource is not None:
            return normalise(resource)
    return []


def grade_api_call(
    expectation: ApiCallExpectation,
    snapshot: RunSnapshot,
    before: Graded | None,
    fp: FhirPathContext | None = None,
) -> Graded:
    """`before` is the graded result of the expectation named in `expectation.before`
    (None when there is none); `fp` evaluates `where` (the run's variables)."""
    what = f"{expectation.method} {expectation.path}"
    bounds = count_bounds(expectation.count)
    matcher = _matcher(expectation.path)
    if isinstance(matcher, str):
        return make_result(expectation, False, Evidence(matches=[]), matcher)

    calls = sorted(snapshot.calls, key=lambda c: (c.at, c.method, c.path))
    matching = [
        call
        for call in calls
        if expectation.method in ("*", call.method.upper())
        and call.status < FAILED_STATUS
        and matcher.match(call.path)
    ]
    asked_otherwise: list[tuple[Call, str]] = []
    if expectation.where:
        base = fp if fp is not None else FhirPathContext.from_snapshot(snapshot)
        variables = {**base.variables, "before": _before_resource(snapshot, before)}
        where_fp = FhirPathContext(variables, base.memo)
        kept = []
        for call in matching:
            view = call_view(call)
            failing = [c.where for c in where_fp.check_all(expectation.where, view) if not c.holds]
            if failing:
                asked_otherwise.append((call, failing[0]))
            else:
                kept.append(call)
        matching = kept
    cutoff = before.first_at if before is not None else None
    qualifying = [c for c in matching if cutoff is None or c.at < cutoff]
    late = [c for c in matching if cutoff is not None and c.at >= cutoff]

    evidence = Evidence(matches=capped([describe_call(c) for c in qualifying]))
    if before is not None:
        evidence.note = (
            f"counting calls before {before.result.label!r} ({fhirpath_datetime(cutoff)})"
            if cutoff is not None
            else f"{before.result.label!r} does not hold yet: every call so far counts"
        )

    n = len(qualifying)
    if bounds.holds(n):
        first_at = qualifying[0].at if qualifying else None
        detail = f"{n} {what} call(s), expected {bounds.describe()}"
        return make_result(expectation, True, evidence, detail, first_at)

    if bounds.max is not None and n > bounds.max:
        detail = f"{n} {what} call(s), expected {bounds.describe()}"
        return make_result(expectation, False, evidence, detail)

    if before is not None and late:
        evidence.closest = describe_call(late[0])
        detail = (
            f"no {what} before {before.result.label}"
            if n == 0
            else f"{n} {what} call(s) before {before.result.label}, expected {bounds.describe()}"
        )
        return make_result(expectation, False, evidence, detail)

    if asked_otherwise:
        call, clause = asked_otherwise[0]
        evidence.closest = describe_call(call)
        evidence.clauses = [{"where": clause, "holds": False}]
        detail = (
            f"{len(asked_otherwise)} {what} call(s) asked something else: {clause} does not "
            f"hold (expected {bounds.describe()} that do)"
        )
        return make_result(expectation, False, evidence, detail)
    counted = {id(c) for c in qualifying}
    nearest = nearest_call(expectation, [c for c in calls if id(c) not in counted])
    if nearest is not None:
        evidence.closest = describe_call(nearest)
    detail = f"no {what} call" if n == 0 else f"{n} {what} call(s), expected {bounds.describe()}"
    return make_result(expectation, False, evidence, detail)
