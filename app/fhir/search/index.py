"""Search index extraction: the values a resource is found by, computed once per write.

`extract_index` turns a resource into the search columns of its row (see docs/architecture.md,
"The FHIR store"): ``tokens``, ``refs`` and ``strings`` (text arrays behind GIN indexes),
``dates`` (half-open UTC ranges for the side table), ``sort`` keys and ``all_refs`` (every
reference in the body, used to attribute the resource to a run / patient).

Entry formats (the query side builds the same strings):

* token: ``param=code``, ``param=system|code`` (``param=|code`` without a system) and
  ``param=system|`` when there is a system. ContactPoints index only their value (they have
  no code system); booleans index ``true`` / ``false``.
* reference: ``param=Type/id`` and ``param=id``.
* string: ``param=<prefix>`` for every prefix (1..64 chars) of the normalised value and of
  each of its words, plus ``param:exact=<value as written>`` (values up to 512 chars).

The extraction is shape-driven on the JSON (a dict with ``coding`` is a CodeableConcept,
one with ``start``/``end`` a Period...) so it needs no model class at runtime; the registry
test checks every path and its element type against the R4 model instead.

Must stay fast: it runs inside every write transaction. Paths are compiled once per
resource type into a plan keyed by top-level JSON key, so absent elements cost nothing and
a path shared by several parameters is walked once. Normalised strings with their prefix
lists and normalised references are memoised (bounded), since the same names, cities and
patient references recur across writes.

Measured with ``python -m tests.fhir.test_search_params`` (timeit, best of repeated runs;
CPython 3.11 on the shared 2-vCPU dev container, where ``sum(range(1000))`` takes 10.3 µs:
scale by that on another machine). "cold" clears the memos before every call:

* Patient (1 name, 1 identifier, 2 telecoms, address, org, tag): 40 µs warm, 49 µs cold
* Patient, richer (2 names, 3 given, 2 identifiers, 3 telecoms, GP): 48 µs / 59 µs
* Appointment with 3 participants + an identifier-only one, slot: 21 µs / 25 µs
* Observation (LOINC code, category, effectiveDateTime, valueQuantity): 16 µs / 17 µs

String prefixes dominate (~100 ns per entry; a Patient has ~100 of them).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from itertools import accumulate
from typing import Any

from app.fhir.search.params import ParamKind, SearchParam, params_for

__all__ = [
    "EXACT_VALUE_MAX",
    "PERIOD_MAX",
    "PERIOD_MIN",
    "SORT_KEY_MAX",
    "STRING_PREFIX_MAX",
    "IndexValues",
    "extract_index",
    "format_sort_instant",
    "normalize_reference",
    "normalize_string",
    "parse_date_range",
]

# Open ends of a Period (the storage contract: a missing start/end means "unbounded").
PERIOD_MIN = datetime(1, 1, 1, tzinfo=UTC)
PERIOD_MAX = datetime(9999, 12, 31, tzinfo=UTC)
# Longest indexed string prefix; the query side truncates search values to the same length.
STRING_PREFIX_MAX = 64
# Longest value indexed whole (`:exact` strings, token codes). A GIN key must fit in a third
# of a page (~2.7 kB): one bigger entry would make PostgreSQL reject the write. 512 chars is
# at most ~2 kB of UTF-8. Longer values are simply not indexed for exact/token match.
EXACT_VALUE_MAX = 512
# Sort keys are cut to this: ordering never depends on the 257th character.
SORT_KEY_MAX = 256

# Clamp for ranges that fall off datetime's calendar (year 9999 has no "next year").
_DT_MAX = datetime.max.replace(tzinfo=UTC)


@dataclass(slots=True)
class IndexValues:
    tokens: list[str]
    refs: list[str]
    strings: list[str]
    dates: list[tuple[str, datetime, datetime]]  # (param, low, high), tz-aware UTC, [low, high)
    sort: dict[str, str]
    all_refs: list[str]


# --- strings ------------------------------------------------------------------------


def normalize_string(value: str) -> str:
    """Case- and accent-insensitive form used for string search: ``"  Zoë  Ñúñez"`` ->
    ``"zoe nunez"``."""
    if value.isascii():
        # Fast path (most values): casefold == lower for ASCII, nothing to decompose.
        return " ".join(value.lower().split())
    decomposed = unicodedata.normalize("NFKD", value.casefold())
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(stripped.split())


# String parts of HumanName and Address, in the order that makes a good sort key (family
# name first for `_sort=name`, the first address line for `_sort=address`).
_STRING_PARTS = (
    "family",
    "given",
    "prefix",
    "suffix",
    "text",
    "line",
    "city",
    "district",
    "state",
    "postalCode",
    "country",
)


def _string_values(value: Any) -> list[str]:
    if type(value) is str:
        return [value]
    if type(value) is not dict:
        return []
    out: list[str] = []
    for part in _STRING_PARTS:
        item = value.get(part)
        if item is None:
            continue
        if type(item) is str:
            out.append(item)
        elif type(item) is list:
            out.extend(x for x in item if type(x) is str)
    # Agents search by a full name ("Alex Rivera"): index the given names followed by the
    # family name as one more value, so that matches without HumanName.text.
    family = value.get("family")
    given = value.get("given")
    if type(family) is str and type(given) is list and given:
        out.append(" ".join([*(g for g in given if type(g) is str), family]))
    return out


def _string_prefixes(norm: str) -> list[str]:
    """Every prefix (up to 64 chars) of a normalised value and of each of its words.

    Prefixes ending in a space are kept: no normalised search value ends in one, except a
    long value the query side cut at 64 characters right after a word. Not deduplicated
    (extract_index dedupes its output once); the first word is skipped because its
    prefixes are the phrase's own. `accumulate` is ~3x faster than slicing in a loop.
    """
    out = list(accumulate(norm[:STRING_PREFIX_MAX]))
    if " " in norm:
        for word in norm.split(" ")[1:]:
            out += accumulate(word[:STRING_PREFIX_MAX])
    return out


# Prefix lists are the costliest part of a write's index (~100 ns per entry) and the same
# texts recur: a patient's names in name/family/given, a city in address/address-city, the
# same patient re-indexed on every update. Memoised, bounded: cleared when full.
_TEXT_CACHE: dict[str, tuple[str, list[str]]] = {}
_TEXT_CACHE_MAX = 16384


def _text_entries(text: str) -> tuple[str, list[str]]:
    """(normalised text, its prefixes); callers must not mutate the list."""
    entry = _TEXT_CACHE.get(text)  # not try/except: on a miss, raising costs more
    if entry is not None:
        return entry
    if len(_TEXT_CACHE) >= _TEXT_CACHE_MAX:
        _TEXT_CACHE.clear()
    norm = normalize_string(text)
    entry = _TEXT_CACHE[text] = (norm, _string_prefixes(norm) if norm else [])
    return entry


# --- references ---------------------------------------------------------------------

# `[base/]Type/id[/_history/vid]`: relative and absolute literal references.
_REFERENCE_RE = re.compile(r"(?:.*/)?([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})(?:/_history/[^/]+)?")


def normalize_reference(ref: str) -> str | None:
    """``"Patient/1"``, ``"http://x/fhir/Patient/1/_history/3"`` -> ``"Patient/1"``.

    Contained (``#x``), ``urn:uuid:``/``urn:oid:`` (transaction placeholders), conditional
    (``Patient?identifier=..``) and empty references have no stable target: ``None``.
    A canonical's ``|version`` is dropped (``Questionnaire/phq9|2`` -> ``Questionnaire/phq9``).
    """
    if not ref or ref[0] == "#" or ref.startswith("urn:"):
        return None
    bar = ref.find("|")
    if bar >= 0:
        ref = ref[:bar]
    match = _REFERENCE_RE.fullmatch(ref)
    if match is None:
        return None
    return f"{match[1]}/{match[2]}"


# normalize_reference is a regex match; the same few targets (the patient, the clinician)
# recur in nearly every write, so results are memoised. Bounded: cleared when full.
_REFERENCE_CACHE: dict[str, str | None] = {}
_REFERENCE_CACHE_MAX = 8192
_MISSING = ""  # a cached target is never "" (None marks "no target")


def _target(ref: str) -> str | None:
    target = _REFERENCE_CACHE.get(ref, _MISSING)
    if target is not _MISSING:
        return target
    if len(_REFERENCE_CACHE) >= _REFERENCE_CACHE_MAX:
        _REFERENCE_CACHE.clear()
    target = _REFERENCE_CACHE[ref] = normalize_reference(ref)
    return target


def _refs_below(node: dict[str, Any], seen: dict[str, None]) -> None:
    # Recursive: FHIR JSON is shallow (the model validation that runs before this recurses
    # the same way), and it is ~3x faster than an explicit stack here.
    for value in node.values():
        kind = type(value)
        if kind is dict:
            ref = value.get("reference")
            if type(ref) is str:
                target = _target(ref)
                if target is not None:
                    seen[target] = None
            _refs_below(value, seen)
        elif kind is list:
            for item in value:
                if type(item) is dict:
                    ref = item.get("reference")
                    if type(ref) is str:
                        target = _target(ref)
                        if target is not None:
                            seen[target] = None
                    _refs_below(item, seen)


def all_references(resource: dict[str, Any]) -> list[str]:
    """Every "Type/id" a resource refers to, in document order (as stored in all_refs)."""
    return _collect_all_refs(resource)


def _collect_all_refs(resource: dict[str, Any]) -> list[str]:
    seen: dict[str, None] = {}  # an ordered set: document order, first occurrence wins
    _refs_below(resource, seen)
    return list(seen)


# --- dates --------------------------------------------------------------------------

_DATE_RE = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?"
)
_DATE_FORMATS = "YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]][Z|+hh:mm|-hh:mm]"
_TIMEZONES: dict[str, timezone] = {}
_ONE_DAY = timedelta(days=1)
_ONE_MINUTE = timedelta(minutes=1)
_ONE_SECOND = timedelta(seconds=1)


def _offset(text: str) -> timezone:
    tz = _TIMEZONES.get(text)
    if tz is None:
        hours, minutes = int(text[1:3]), int(text[4:6])
        if hours > 14 or minutes > 59:
            raise ValueError(f"time zone offset {text} out of range")
        delta = timedelta(hours=hours, minutes=minutes)
        tz = timezone(-delta if text[0] == "-" else delta)
        _TIMEZONES[text] = tz
    return tz


def _plus(moment: datetime, delta: timedelta) -> datetime:
    try:
        return moment + delta
    except OverflowError:
        return _DT_MAX


def parse_date_range(value: str) -> tuple[datetime, datetime]:
    """The half-open UTC range ``[low, high)`` a FHIR date/dateTime/instant stands for.

    The precision given is the width: ``2025`` is the year, ``2025-03`` the month,
    ``2025-03-07`` the day, ``…T10:00`` the minute, ``…T10:00:00`` the second and
    ``…T10:00:00.25`` a hundredth of a second (finest: 1 µs, more digits are truncated).
    A value without an offset is taken as UTC. Raises `ValueError` on anything else.
    """
    match = _DATE_RE.fullmatch(value)
    if match is None:
        raise ValueError(f"invalid FHIR date {value!r}: expected {_DATE_FORMATS}")
    year_s, month_s, day_s, hour_s, minute_s, second_s, fraction, zone = match.groups()
    try:
        year = int(year_s)
        if month_s is None:
            low = datetime(year, 1, 1, tzinfo=UTC)
            high = datetime(year + 1, 1, 1, tzinfo=UTC) if year < 9999 else _DT_MAX
            return low, high
        month = int(month_s)
        if day_s is None:
            low = datetime(year, month, 1, tzinfo=UTC)
            if month < 12:
                return low, datetime(year, month + 1, 1, tzinfo=UTC)
            return low, datetime(year + 1, 1, 1, tzinfo=UTC) if year < 9999 else _DT_MAX
        day = int(day_s)
        if hour_s is None:
            low = datetime(year, month, day, tzinfo=UTC)
            return low, _plus(low, _ONE_DAY)
        if second_s is None:
            second, micro, width = 0, 0, _ONE_MINUTE
        else:
            # FHIR allows a leap second (…:60); datetime does not: fold it into :59.
            second = int(second_s)
            if second == 60:
                second = 59
            if fraction is None:
                micro, width = 0, _ONE_SECOND
            else:
                digits = fraction[:6]
                micro = int(digits.ljust(6, "0"))
                width = timedelta(microseconds=10 ** (6 - len(digits)))
        hour, minute = int(hour_s), int(minute_s)
        if zone is None or zone == "Z":
            low = datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        else:
            local = datetime(year, month, day, hour, minute, second, micro, tzinfo=_offset(zone))
            try:
                low = local.astimezone(UTC)
            except OverflowError:
                # Only at the very ends of the calendar (0001-01-01T00:00+01:00).
                low = PERIOD_MIN if local.year == 1 else _DT_MAX
        return low, _plus(low, width)
    except ValueError as exc:  # month 13, Feb 30, hour 25...
        raise ValueError(f"invalid FHIR date {value!r}: {exc}") from None


def format_sort_instant(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC: fixed width, so lexical order is time order.

    (`isoformat` always zero-pads the year to 4 digits; `strftime("%Y")` does not on glibc.)
    """
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"  # "+00:00" -> "Z"


def _date_range(value: Any) -> tuple[datetime, datetime] | None:
    # Stored data was validated on the way in, so a value that does not parse here is a
    # type the index does not cover (a Timing, a time-of-day): skip it, never fail a write.
    if type(value) is str:
        try:
            return parse_date_range(value)
        except ValueError:
            return None
    if type(value) is dict:  # Period
        start, end = value.get("start"), value.get("end")
        if start is None and end is None:
            return None
        try:
            low = parse_date_range(start)[0] if type(start) is str else PERIOD_MIN
            high = parse_date_range(end)[1] if type(end) is str else PERIOD_MAX
        except ValueError:
            return None
        return low, high
    return None


# --- tokens -------------------------------------------------------------------------

# ContactPoint.system codes. A ContactPoint with a value always has a system (cpt-2) and
# it is one of these; an Identifier.system is a URI. That is how the two are told apart.
_CONTACT_POINT_SYSTEMS = frozenset({"phone", "fax", "email", "pager", "url", "sms", "other"})


def _token_pairs(values: list[Any]) -> list[tuple[str, str]]:
    """(system, code) pairs of the elements; system "" when there is none."""
    out: list[tuple[str, str]] = []
    for value in values:
        kind = type(value)
        if kind is str:  # code, string, uri, canonical...
            out.append(("", value))
        elif kind is bool:
            out.append(("", "true" if value else "false"))
        elif kind is dict:
            coding = value.get("coding")
            if coding is not None:  # CodeableConcept (its text is not a token)
                if type(coding) is list:
                    for item in coding:
                        if type(item) is dict:
                            _coding_pair(item, out)
            elif "value" in value:  # Identifier or ContactPoint
                code = value["value"]
                if type(code) is str and code:
                    system = value.get("system")
                    if type(system) is not str or system in _CONTACT_POINT_SYSTEMS:
                        system = ""
                    out.append((system, code))
            else:
                _coding_pair(value, out)
    return out


def _coding_pair(coding: dict[str, Any], out: list[tuple[str, str]]) -> None:
    code = coding.get("code")
    if type(code) is str and code:
        system = coding.get("system")
        out.append((system if type(system) is str else "", code))


# --- path compilation ---------------------------------------------------------------

# JSON key suffixes a choice element can carry, restricted to the datatypes each kind
# indexes (so `effective` never reaches effectiveTiming, `value` never valueQuantity).
_CHOICE_SUFFIXES: dict[ParamKind, tuple[str, ...]] = {
    ParamKind.TOKEN: (
        "CodeableConcept",
        "Coding",
        "Identifier",
        "Code",
        "String",
        "Boolean",
        "Uri",
        "Canonical",
        "Id",
    ),
    ParamKind.REFERENCE: ("Reference", "Canonical"),
    ParamKind.STRING: ("String", "Markdown", "HumanName", "Address"),
    ParamKind.DATE: ("DateTime", "Period", "Instant", "Date"),
}

# A compiled path: per segment, the JSON keys to try in order. Intermediate segments are
# exact keys; the last one is the key itself, then its choice variants (`effective` ->
# effective, effectiveDateTime, effectivePeriod...). A plain element and a choice never
# share a base name in R4 (the registry test checks no path could pick up another element).
_Path = tuple[tuple[str, ...], ...]


# One compiled parameter. A plain tuple, unpacked in the extraction loop's `for`
# statement: ~27 parameters x 6 fields per write made attribute loads a measurable cost.
_Compiled = tuple[
    str,  # name
    str,  # "name=", the head of every entry
    ParamKind,  # kind
    int,  # path id when the parameter has one path, else -1
    tuple[int, ...],  # all its path ids (into the plan's path table), in registry order
    frozenset[str],  # reference targets (empty: any)
    tuple[str, str] | None,  # where filter (element, value)
]


@dataclass(frozen=True, slots=True)
class _Plan:
    """One resource type's parameters, compiled so that a write only touches what it has.

    `roots` maps each top-level JSON key a path can start with to (path id, rest of the
    path): extraction iterates the resource's own keys, so parameters whose elements are
    absent cost nothing, and a path shared by several parameters (Appointment's
    participant.actor feeds actor/patient/practitioner/location) is walked once.
    """

    params: tuple[_Compiled, ...]
    roots: dict[str, tuple[tuple[int, _Path], ...]]


def _compile_path(dotted: str, kind: ParamKind) -> _Path:
    *inner, last = dotted.split(".")
    variants = (last, *(last + suffix for suffix in _CHOICE_SUFFIXES[kind]))
    return (*((segment,) for segment in inner), variants)


def _compile_plan(params: Iterable[SearchParam]) -> _Plan:
    path_ids: dict[_Path, int] = {}
    compiled: list[_Compiled] = []
    for param in params:
        ids: list[int] = []
        for dotted in param.paths:
            path = _compile_path(dotted, param.kind)
            ids.append(path_ids.setdefault(path, len(path_ids)))
        single = ids[0] if len(ids) == 1 else -1
        compiled.append(
            (
                param.name,
                param.name + "=",
                param.kind,
                single,
                tuple(ids),
                frozenset(param.targets),
                param.where,
            )
        )
    roots: dict[str, list[tuple[int, _Path]]] = {}
    for path, path_id in path_ids.items():
        for key in path[0]:
            roots.setdefault(key, []).append((path_id, path[1:]))
    return _Plan(
        params=tuple(compiled),
        roots={key: tuple(entries) for key, entries in roots.items()},
    )


_PLANS: dict[str, _Plan] = {}


def _plan_for(resource_type: str) -> _Plan:
    plan = _PLANS.get(resource_type)
    if plan is None:
        plan = _PLANS[resource_type] = _compile_plan(params_for(resource_type).values())
    return plan


def _walk(value: Any, rest: _Path) -> list[Any]:
    """The elements at `rest` below `value`, flattening lists at every level."""
    current: list[Any] = value if type(value) is list else [value]
    for keys in rest:
        found: list[Any] = []
        for node in current:
            if type(node) is not dict:
                continue
            for key in keys:
                item = node.get(key)
                if item is not None:
                    if type(item) is list:
                        found.extend(item)
                    else:
                        found.append(item)
                    break  # at most one variant of a choice element is present
        if not found:
            return found
        current = found
    return current


def _collect(plan: _Plan, resource: dict[str, Any]) -> dict[int, list[Any]]:
    """Path id -> the elements found there (only paths with at least one element)."""
    found: dict[int, list[Any]] = {}
    roots = plan.roots
    for key, value in resource.items():
        entries = roots.get(key)
        if entries is None:
            continue
        for path_id, rest in entries:
            if rest:
                values = _walk(value, rest)
                if not values:
                    continue
            else:
                # The resource's own list is shared, never mutated (see the merge below).
                values = value if type(value) is list else [value]
            previous = found.get(path_id)
            found[path_id] = values if previous is None else previous + values
    return found


def _dedupe(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


# --- extraction ---------------------------------------------------------------------

# Module constants: cheaper to compare against in the hot loop than enum attribute lookups.
_TOKEN, _REFERENCE, _STRING = ParamKind.TOKEN, ParamKind.REFERENCE, ParamKind.STRING


def extract_index(resource_type: str, resource: dict[str, Any]) -> IndexValues:
    """Everything `resource` is searched and sorted by (see the module docstring)."""
    tokens: list[str] = []
    refs: list[str] = []
    strings: list[str] = []
    dates: list[tuple[str, datetime, datetime]] = []
    sort: dict[str, str] = {}

    plan = _plan_for(resource_type)
    found = _collect(plan, resource)
    for name, head, kind, single, ids, targets, where in plan.params if found else ():
        if single >= 0:
            values = found.get(single)
            if values is None:
                continue
        else:
            values = []
            for path_id in ids:
                values.extend(found.get(path_id, ()))
            if not values:
                continue
        if where is not None:
            element, wanted = where
            values = [v for v in values if type(v) is dict and v.get(element) == wanted]
            if not values:
                continue

        if kind is _TOKEN:
            pairs = _token_pairs(values)
            if not pairs:
                continue
            for system, code in pairs:
                if len(code) + len(system) > EXACT_VALUE_MAX:
                    continue
                tokens.append(head + code)
                tokens.append(f"{head}{system}|{code}")
                if system:
                    tokens.append(f"{head}{system}|")
            sort[name] = pairs[0][1][:SORT_KEY_MAX]

        elif kind is _REFERENCE:
            first: str | None = None
            for value in values:
                # Reference.reference, or a canonical string (QuestionnaireResponse.
                # questionnaire). A Reference with only an identifier has no target.
                raw = value.get("reference") if type(value) is dict else value
                if type(raw) is not str:
                    continue
                target = _target(raw)
                if target is None:
                    continue
                slash = target.index("/")
                if targets and target[:slash] not in targets:
                    continue
                refs.append(head + target)
                refs.append(head + target[slash + 1 :])
                if first is None:
                    first = target
            if first is not None:
                sort[name] = first

        elif kind is _STRING:
            exact_head = name + ":exact="
            first_norm: str | None = None
            for value in values:
                for text in _string_values(value):
                    norm, prefixes = _text_entries(text)
                    if not norm:
                        continue
                    if len(text) <= EXACT_VALUE_MAX:
                        strings.append(exact_head + text)
                    strings.extend([head + prefix for prefix in prefixes])
                    if first_norm is None:
                        first_norm = norm
            if first_norm is not None:
                sort[name] = first_norm[:SORT_KEY_MAX]

        else:  # ParamKind.DATE
            first_low: datetime | None = None
            for value in values:
                span = _date_range(value)
                if span is None:
                    continue
                dates.append((name, span[0], span[1]))
                if first_low is None:
                    first_low = span[0]
            if first_low is not None:
                sort[name] = format_sort_instant(first_low)

    return IndexValues(
        tokens=_dedupe(tokens),
        refs=_dedupe(refs),
        strings=_dedupe(strings),
        dates=_dedupe(dates),
        sort=sort,
        all_refs=_collect_all_refs(resource),
    )
