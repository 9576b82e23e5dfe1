"""FHIRPath for grading: compiled once, evaluated against the R4 model, never raising.

fhirpathpy compares two date-times as *strings* unless one side is a `@` literal:
resource values and `%runStart + 1 day` (whose result is a string too) are both plain
strings, so `start >= %runStart + 1 day` is a lexicographic comparison. That is only
chronological when both sides are written the same way, so every date-time with a time
zone in the resource, in `%current` and in `%runStart`/`%now` is rewritten to one form
before evaluating: UTC, milliseconds, numeric offset (`2025-03-07T08:00:00.000+00:00`,
also the only form its date arithmetic handles). Evaluation runs on a normalised copy,
so the snapshot's resources are never touched (fhirpathpy annotates what it is given).

Known limits, left alone because scenario authors write `%runStart`-relative times:
comparing with a `@…` literal of second precision that is equal to the second is empty
(fhirpathpy treats seconds and milliseconds as different precisions); a date-only value
compared with a date-time compares as a string (`x.startInstant()` reads it as its first
moment in the comparable form; see app/scenarios/fhirpath_helpers for our functions).

fhirpathpy keeps some global state per evaluation (`constants.reset()`), so grading is
single-threaded, as it is in the worker.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

import orjson

from app.grading.snapshot import RunSnapshot
from app.kit.fhirpath import compile_expression
from app.scenarios.fhirpath_helpers import USER_FUNCTIONS

# Our functions (weekday(), startInstant(), minutesUntil()): see app/scenarios/fhirpath_helpers.
_OPTIONS: dict[str, Any] = {"userInvocationTable": dict(USER_FUNCTIONS)}

# Distinct expressions across all loaded scenarios fit easily; the bound only guards
# against a tenant submitting endless ad-hoc scenarios.
COMPILE_CACHE_SIZE = 4096
# Evidence shows what a clause evaluated to; a whole resource would drown the reason.
MAX_VALUE_CHARS = 300

# A FHIR dateTime/instant with a time part and a zone (FHIR requires the zone whenever
# there is a time). Dates alone and times of day are left as they are.
_DATETIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$", re.ASCII
)

Compiled = Callable[[Any, Mapping[str, Any]], list[Any]]


class FhirPathError(Exception):
    """An expression that does not compile or fails while evaluating."""


def fhirpath_datetime(moment: datetime) -> str:
    """The one date-time form fhirpathpy compares and adds correctly. A naive datetime is
    taken as UTC (every time in the service is UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def _normalise_string(value: str) -> str:
    if not _DATETIME_RE.match(value):
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:  # e.g. a leap second or hour 24: keep what was written
        return value
    return fhirpath_datetime(parsed)


def normalise(value: Any) -> Any:
    """A copy of `value` with every zoned date-time in the one comparable form."""
    if isinstance(value, str):
        return _normalise_string(value)
    if isinstance(value, dict):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item) for item in value]
    return value


@lru_cache(maxsize=COMPILE_CACHE_SIZE)
def _compile(expression: str) -> Compiled | str:
    # A failure is cached as its message so a broken expression is not re-parsed on
    # every grading pass.
    try:
        compiled: Compiled = compile_expression(expression, _OPTIONS)
    except Exception as exc:
        return f"does not compile: {_error_text(exc)}"
    return compiled


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def evaluate_normalised(
    expression: str, resource: Mapping[str, Any] | None, variables: Mapping[str, Any]
) -> list[Any]:
    """Evaluate on a resource already passed through `normalise` (the grading context
    normalises each resource once per pass). Raises FhirPathError."""
    compiled = _compile(expression)
    if isinstance(compiled, str):
        raise FhirPathError(compiled)
    try:
        result = compiled(resource if resource is not None else {}, dict(variables))
    except Exception as exc:
        # fhirpathpy raises bare Exception, ValueError, TypeError, even UnboundLocalError.
        raise FhirPathError(_error_text(exc)) from exc
    return list(result)


def evaluate(
    expression: str, resource: Mapping[str, Any] | None, variables: Mapping[str, Any]
) -> list[Any]:
    """The FHIRPath result of `expression` on `resource` (normalised first). `variables`
    should come from `snapshot_variables`. Raises FhirPathError."""
    return evaluate_normalised(expression, normalise(resource), variables)


def truthy(result: list[Any]) -> bool:
    """FHIRPath singleton evaluation in a boolean context: empty is false, one boolean is
    itself, one other item is true (it exists). More than one item is an error in
    FHIRPath; a where clause needs `exists()` or a comparison there."""
    if not result:
        return False
    if len(result) > 1:
        raise FhirPathError(
            f"returned {len(result)} items where one boolean was expected "
            "(use exists(), all() or a comparison)"
        )
    single = result[0]
    return single if isinstance(single, bool) else True


def holds(
    expression: str, resource: Mapping[str, Any] | None, variables: Mapping[str, Any]
) -> bool:
    """Whether `expression` holds on `resource`. Raises FhirPathError; `check` does not."""
    return truthy(evaluate(expression, resource, variables))


@dataclass(frozen=True, slots=True)
class Clause:
    """One `where` expression's outcome on one resource."""

    where: str
    holds: bool
    value: Any = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"where": self.where, "holds": self.holds}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["value"] = self.value
        return out


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return str(value)  # FP_DateTime, FP_Quantity and friends print as FHIRPath writes them


def _evidence_value(result: list[Any]) -> Any:
    safe = _json_safe(result)
    text = repr(safe)
    if len(text) > MAX_VALUE_CHARS:
        return text[: MAX_VALUE_CHARS - 1] + "…"
    return safe


def snapshot_variables(snapshot: RunSnapshot) -> dict[str, Any]:
    """`%fixture` ({symbol: bare id}), `%current` ({symbol: resource now, or empty}),
    `%runStart`, `%now`, all in the forms `evaluate_normalised` expects."""
    fixture = {symbol: ref.rpartition("/")[2] for symbol, ref in snapshot.fixture.items()}
    current: dict[str, Any] = {}
    for symbol in snapshot.fixture.keys() | snapshot.current.keys():
        body = snapshot.current.get(symbol)
        # An empty list reads as the empty collection: `%current.appt.exists()` is false.
        current[symbol] = normalise(body) if body is not None else []
    return {
        "fixture": fixture,
        "current": current,
        "runStart": fhirpath_datetime(snapshot.started_at),
        "now": fhirpath_datetime(snapshot.now),
    }


# What an expression that may read a resource's `meta` mentions: the element, or a
# function that walks the whole resource.
_READS_META = ("meta", "descendants", "children", "repeat", "trace")


class ClauseMemo:
    """Clause outcomes kept across grading passes, for many passes over near-identical
    snapshots (the scenario check grades dozens of variations of one oracle run): keyed
    by the expression, the resource's content and the variables the expression names,
    so a pass whose resource and variables read the same reuses the outcome. `%now` and
    `%current` change from pass to pass and count only where the expression names them.
    A run's own grading shares one too (`app.runs.verdicts`): a live run is graded after
    every write, and most of what it wrote reads the same as at the pass before. With
    `max_entries` the oldest outcomes go first once it is full; `put` and `get` are safe
    from several threads (an API process grades on its loop, its worker on another)."""

    def __init__(self, max_entries: int | None = None) -> None:
        self._clauses: dict[tuple[str, bytes, bytes], Clause] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def key(
        self, expression: str, prepared: Mapping[str, Any], variables: Mapping[str, Any]
    ) -> tuple[str, bytes, bytes]:
        named = {
            name: value
            for name, value in variables.items()
            if name in ("fixture", "runStart") or f"%{name}" in expression
        }
        if "meta" in prepared and not any(word in expression for word in _READS_META):
            # Each pass stamps its writes at its own times: `meta` differs where
            # nothing else does, and only an expression that reads it can tell.
            prepared = {k: v for k, v in prepared.items() if k != "meta"}
        return (
            expression,
            orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS, default=str),
            orjson.dumps(named, option=orjson.OPT_SORT_KEYS, default=str),
        )

    def get(self, key: tuple[str, bytes, bytes]) -> Clause | None:
        return self._clauses.get(key)

    def put(self, key: tuple[str, bytes, bytes], clause: Clause) -> None:
        with self._lock:
            self._clauses[key] = clause
            if self._max is not None and len(self._clauses) > self._max:
                del self._clauses[next(iter(self._clauses))]


class FhirPathContext:
    """Variables and normalised resources for one grading pass (and, optionally, a memo
    shared by many passes)."""

    def __init__(self, variables: Mapping[str, Any], memo: ClauseMemo | None = None) -> None:
        self.variables = variables
        self.memo = memo
        # Keyed by id(); the original is kept alongside so the id cannot be reused.
        self._normalised: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
        # The same clause on the same resource recurs (matching, then closest-candidate
        # evidence; expectations sharing a clause), and evaluation is the costly part.
        self._clauses: dict[tuple[str, int], Clause] = {}

    @classmethod
    def from_snapshot(
        cls, snapshot: RunSnapshot, memo: ClauseMemo | None = None
    ) -> FhirPathContext:
        return cls(snapshot_variables(snapshot), memo)

    def _prepared(self, resource: Mapping[str, Any]) -> dict[str, Any]:
        hit = self._normalised.get(id(resource))
        if hit is not None and hit[0] is resource:
            return hit[1]
        prepared: dict[str, Any] = normalise(dict(resource))
        self._normalised[id(resource)] = (resource, prepared)
        return prepared

    def check(self, expression: str, resource: Mapping[str, Any]) -> Clause:
        """Evaluate one where clause; an error is a clause that does not hold."""
        prepared = self._prepared(resource)  # pins id(resource) for the cache key below
        key = (expression, id(resource))
        cached = self._clauses.get(key)
        if cached is not None:
            return cached
        shared = self.memo.key(expression, prepared, self.variables) if self.memo else None
        if shared is not None and self.memo is not None:
            cached = self.memo.get(shared)
            if cached is not None:
                self._clauses[key] = cached
                return cached
        try:
            result = evaluate_normalised(expression, prepared, self.variables)
            clause = Clause(expression, truthy(result), value=_evidence_value(result))
        except FhirPathError as exc:
            clause = Clause(expression, False, error=str(exc))
        self._clauses[key] = clause
        if shared is not None and self.memo is not None:
            self.memo.put(shared, clause)
        return clause

    def values(self, expression: str, resource: Mapping[str, Any]) -> list[Any]:
        """What an expression gives on a resource (a message's `mentions`); raises
        FhirPathError."""
        return evaluate_normalised(expression, self._prepared(resource), self.variables)

    def check_all(self, expressions: list[str], resource: Mapping[str, Any]) -> list[Clause]:
        return [self.check(expression, resource) for expression in expressions]
