"""Parsing a FHIR search request into a typed query (pure; no SQL here).

Repeated parameters are ANDed, comma-separated values within one are ORed, as the
FHIR spec says. Values are turned into the same index entries that
`app.fhir.search.index` writes, so matching is an array overlap in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.errors import Issue
from app.fhir.search.index import (
    STRING_PREFIX_MAX,
    normalize_reference,
    normalize_string,
    parse_date_range,
)
from app.fhir.search.params import ParamKind, SearchParam, params_for

DEFAULT_COUNT = 20
MAX_COUNT = 500
DATE_PREFIXES = ("eq", "ne", "lt", "le", "gt", "ge", "sa", "eb", "ap")

# Result parameters we accept and either honour or that have no effect on JSON output.
_RESULT_PARAMS = frozenset(
    {
        "_count",
        "_sort",
        "_include",
        "_revinclude",
        "_summary",
        "_elements",
        "_total",
        "_totalMethod",
        "_format",
        "_pretty",
        "_offset",
        "_after",
        "_before",
    }
)
# Paging cursors: honoured, but not echoed as search criteria into other links.
_CURSOR_PARAMS = frozenset({"_after", "_before", "_offset"})
# fhirclient writes comparators as symbols (birthdate=>1970).
_SYMBOL_PREFIXES = (("<=", "le"), (">=", "ge"), ("!=", "ne"), ("<", "lt"), (">", "gt"))


@dataclass(frozen=True, slots=True)
class ArrayFilter:
    """Match when the resource's `column` array overlaps `entries` (negated for :not)."""

    column: str  # tokens | refs | strings
    entries: tuple[str, ...]
    negate: bool = False
    param: str = ""


@dataclass(frozen=True, slots=True)
class DateFilter:
    param: str  # a date search parameter, or "_lastUpdated"
    prefix: str
    low: datetime
    high: datetime


@dataclass(frozen=True, slots=True)
class AnyDate:
    """A comma list of date values: any of them may match."""

    filters: tuple[DateFilter, ...]


@dataclass(frozen=True, slots=True)
class IdFilter:
    ids: tuple[str, ...]


Filter = ArrayFilter | DateFilter | AnyDate | IdFilter


@dataclass(frozen=True, slots=True)
class SortKey:
    key: str  # _id | _lastUpdated | a search parameter name
    descending: bool


@dataclass(frozen=True, slots=True)
class Include:
    source_type: str
    param: str
    target_type: str | None
    reverse: bool = False


@dataclass
class SearchQuery:
    resource_type: str
    filters: list[Filter] = field(default_factory=list)
    sort: list[SortKey] = field(default_factory=list)
    count: int = DEFAULT_COUNT
    offset: int = 0
    after: str | None = None
    before: str | None = None
    includes: list[Include] = field(default_factory=list)
    summary_count: bool = False
    elements: tuple[str, ...] = ()
    # Parameters as understood, to echo in the Bundle's self link (FHIR asks for that).
    used: list[tuple[str, str]] = field(default_factory=list)


class SearchError(Exception):
    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("; ".join(i.message for i in issues))
        self.issues = issues


def _split_values(value: str) -> list[str]:
    # A backslash escapes a comma inside a value.
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p != ""]


def _token_entries(name: str, value: str) -> list[str]:
    if "|" in value:
        system, code = value.split("|", 1)
        return [f"{name}={system}|{code}"]
    return [f"{name}={value}"]


def _reference_entries(name: str, param: SearchParam, value: str) -> list[str]:
    if "/" in value:
        ref = normalize_reference(value)
        if ref is None:
            raise ValueError(f"'{value}' is not a reference of the form Type/id")
        return [f"{name}={ref}"]
    if len(param.targets) == 1:
        return [f"{name}={param.targets[0]}/{value}"]
    return [f"{name}={value}"]


def _string_entries(name: str, modifier: str | None, value: str) -> list[str]:
    if modifier == "exact":
        return [f"{name}:exact={value}"]
    norm = normalize_string(value)[:STRING_PREFIX_MAX]
    if not norm:
        raise ValueError("an empty string matches nothing")
    return [f"{name}={norm}"]


def _date_filter(name: str, value: str) -> DateFilter:
    prefix = "eq"
    for symbol, spelled in _SYMBOL_PREFIXES:
        if value.startswith(symbol):
            prefix, value = spelled, value[len(symbol) :]
            break
    if prefix == "eq" and len(value) > 2 and value[:2] in DATE_PREFIXES:
        prefix, value = value[:2], value[2:]
    low, high = parse_date_range(value)
    if prefix == "ap":
        # "approximately": within 10% of the gap to now, at least a day either side.
        from app.kit.clock import utcnow

        slack = max(abs(utcnow() - low) / 10, timedelta(days=1))
        low, high, prefix = low - slack, high + slack, "ap"
    return DateFilter(name, prefix, low, high)


_MODIFIERS: dict[ParamKind, frozenset[str]] = {
    ParamKind.TOKEN: frozenset({"not"}),
    ParamKind.REFERENCE: frozenset(),
    ParamKind.STRING: frozenset({"exact"}),
    ParamKind.DATE: frozenset(),
}


def has_criteria(items: list[tuple[str, str]]) -> bool:
    """Whether a query string holds search criteria, not only result parameters."""
    return any(name.partition(":")[0] not in _RESULT_PARAMS for name, _ in items)


def parse_search(
    resource_type: str, items: list[tuple[str, str]], *, lenient: bool = False
) -> SearchQuery:
    """Parse query items; raise SearchError listing every problem (unless lenient)."""
    query = SearchQuery(resource_type)
    known = params_for(resource_type)
    issues: list[Issue] = []

    def problem(message: str, name: str) -> None:
        if not lenient:
            issues.append(Issue(message, expression=name, code="not-supported"))

    for raw_name, value in items:
        name, _, modifier = raw_name.partition(":")
        try:
            if raw_name in _RESULT_PARAMS:
                _apply_result_param(query, raw_name, value, known)
                if raw_name not in _CURSOR_PARAMS:
                    query.used.append((raw_name, value))
                continue
            if name == "_id":
                query.filters.append(IdFilter(tuple(_split_values(value))))
            elif name == "_lastUpdated":
                dates = tuple(_date_filter("_lastUpdated", v) for v in _split_values(value))
                if not dates:
                    raise ValueError("no value given")
                query.filters.append(dates[0] if len(dates) == 1 else AnyDate(dates))
            elif name in known:
                param = known[name]
                if modifier and modifier not in _MODIFIERS[param.kind]:
                    problem(f"modifier ':{modifier}' is not supported on '{name}'", raw_name)
                    continue
                values = _split_values(value)
                if not values:
                    raise ValueError("no value given")
                if param.kind is ParamKind.DATE:
                    dates = tuple(_date_filter(name, v) for v in values)
                    query.filters.append(dates[0] if len(dates) == 1 else AnyDate(dates))
                else:
                    entries: list[str] = []
                    for v in values:
                        if param.kind is ParamKind.TOKEN:
                            entries += _token_entries(name, v)
                        elif param.kind is ParamKind.REFERENCE:
                            entries += _reference_entries(name, param, v)
                        else:
                            entries += _string_entries(name, modifier or None, v)
                    column = {
                        ParamKind.TOKEN: "tokens",
                        ParamKind.REFERENCE: "refs",
                        ParamKind.STRING: "strings",
                    }[param.kind]
                    query.filters.append(
                        ArrayFilter(column, tuple(entries), modifier == "not", name)
                    )
            else:
                problem(
                    f"unknown search parameter '{name}' for {resource_type} "
                    "(see /metadata for the supported ones, or send Prefer: handling=lenient)",
                    raw_name,
                )
                continue
            query.used.append((raw_name, value))
        except ValueError as exc:
            issues.append(Issue(f"invalid value for '{raw_name}': {exc}", expression=raw_name))
    if issues:
        raise SearchError(issues)
    return query


def _apply_result_param(
    query: SearchQuery, name: str, value: str, known: Mapping[str, SearchParam]
) -> None:
    if name == "_count":
        count = _non_negative_int(value)
        query.count = min(count, MAX_COUNT)
    elif name == "_offset":
        query.offset = _non_negative_int(value)
    elif name == "_after":
        query.after = value
    elif name == "_before":
        query.before = value
    elif name == "_sort":
        for key in _split_values(value):
            descending = key.startswith("-")
            key = key.lstrip("-")
            if key not in ("_id", "_lastUpdated") and key not in known:
                raise ValueError(f"cannot sort by unknown parameter '{key}'")
            query.sort.append(SortKey(key, descending))
    elif name == "_summary":
        if value == "count":
            query.summary_count = True
        elif value != "false":
            raise ValueError("only _summary=count and _summary=false are supported")
    elif name == "_elements":
        query.elements = tuple(_split_values(value))
    elif name in ("_include", "_revinclude"):
        query.includes.append(_parse_include(value, reverse=name == "_revinclude"))
    elif name in ("_total", "_totalMethod", "_format", "_pretty"):
        return  # totals are always exact; JSON is the only format


def _parse_include(value: str, *, reverse: bool) -> Include:
    parts = value.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"'{value}' is not of the form Type:param[:TargetType]")
    source, param = parts[0], parts[1]
    target = parts[2] if len(parts) == 3 else None
    spec = params_for(source).get(param)
    if spec is None or spec.kind is not ParamKind.REFERENCE:
        raise ValueError(f"'{param}' is not a reference search parameter of {source}")
    return Include(source, param, target, reverse)


def _non_negative_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"'{value}' is not a whole number") from None
    if number < 0:
        raise ValueError("must not be negative")
    return number
