"""Turning a scenario into what one run writes: symbols, time tokens, variants, briefs.

Everything here is a pure function of the scenario, a run key and the run's start, so a
run (and a reference run) can be reproduced from those three values alone.

Symbols are names matching `SYMBOL_NAME` written `@name`. A string that starts with "@"
but is not `@` + such a name (`"@2025-03-07"`, `"@ me"`) and any string that merely
contains "@" (`"alex@example.com"`) is ordinary text and left alone.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import json_merge_patch

from app.kit.clock import fhir_instant
from app.scenarios.schema import Scenario

# The same shape as OracleCall.save_as, so that every symbol is also a FHIRPath
# identifier (`%fixture.name`) and `{{name.field}}` stays unambiguous.
SYMBOL_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_SYMBOL_RE = re.compile(rf"@({SYMBOL_NAME})")
_TIME_KEYS = ("$time", "$date")
# A sign is required so that a token always reads as "relative to the run start";
# HH:MM is exactly two digits each so that "9:00" is caught as a typo for "09:00".
_TOKEN_RE = re.compile(r"([+-])(\d+)(wd|d|h|m)(?:@(\d{2}):(\d{2}))?")
# A million days is ~2700 years; more digits can only be a mistake (and int() of
# thousands of digits raises a plain ValueError).
_MAX_DIGITS = 6
_FHIR_ID_MAX = 64
_ID_UNSAFE_RE = re.compile(r"[^A-Za-z0-9.-]")
_RUN_KEY_RE = re.compile(r"[a-z0-9]{1,32}")
# Eight hex digits of a hash make a shortened id unique among a scenario's few symbols.
_ID_HASH_LENGTH = 8
_WEEKDAYS_PER_WEEK = 5
_FRIDAY = 4
_BRIEF_TOKEN_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_TOKEN_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")
# A FHIR dateTime/instant with a clock and a zone; dates and partial dates stay as written.
_DATETIME_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})"
)
# Scenario fields a brief may quote; `brief` itself is excluded so a brief cannot nest.
_SCENARIO_TEXT_FIELDS = ("id", "title", "category", "summary", "workflow")


class ExpansionError(ValueError):
    """A scenario cannot be expanded; the message names the token or symbol."""


# --- time tokens -------------------------------------------------------------------------


def is_time_token(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) == 1
        and next(iter(value)) in _TIME_KEYS
        and isinstance(next(iter(value.values())), str)
    )


def resolve_time_token(token: str, run_start: datetime, *, as_date: bool = False) -> str:
    """Resolve a time token against the run start, in UTC.

    Grammar: `now`, or `<sign><N><unit>[@HH:MM]` with sign `+`/`-` (required), N decimal
    digits, unit `d` (days), `wd` (weekdays, Monday to Friday), `h` (hours) or
    `m` (minutes). `@HH:MM` (two digits each, 00:00-23:59) sets the clock, seconds and
    fraction to zero, after the offset is applied; it is only allowed with `d`/`wd`.
    Without it the result keeps the run start's time of day.

    `d`: the run start's date plus N calendar days (`+0d@09:00` at 10:00 is today 09:00,
    in the past: `d` never looks at the clock).

    `wd` ("today" is the run start's UTC date):
      * `+0wd`: today, if today is a weekday and (with `@HH:MM`) that time is strictly
        after the run start; otherwise the next weekday after today.
        Without `@HH:MM` on a weekday it is the run start itself.
      * `+Nwd`, N > 0: the N-th weekday after today; the clock plays no part.
        `+1wd` is "the next business day": Fri/Sat/Sun -> Mon, Mon -> Tue.
      * `-Nwd`, N > 0: the N-th weekday before today. `-1wd`: Sat/Sun/Mon -> Fri,
        Tue -> Mon.
      * `-0wd` is `+0wd`.
    So on a Saturday `+0wd` and `+1wd` are both Monday, and on Monday 16:00
    `+0wd@10:00` and `+1wd@10:00` are both Tuesday 10:00.

    Returns `2025-03-07T10:00:00.000+00:00` (UTC, milliseconds, numeric offset: the one
    form fhirpathpy's date arithmetic handles), or with `as_date` the UTC date
    `2025-03-07` of that moment.
    """
    start = _utc(run_start)
    moment = _resolve_moment(token, start)
    return moment.date().isoformat() if as_date else fhir_instant(moment)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        # A naive time would be read as machine-local time somewhere downstream.
        raise ExpansionError("run start must be timezone-aware")
    return moment.astimezone(UTC)


def _resolve_moment(token: str, start: datetime) -> datetime:
    if token == "now":
        return start
    match = _TOKEN_RE.fullmatch(token)
    if match is None:
        raise ExpansionError(f"bad time token {token!r}: expected 'now' or [+-]N(d|wd|h|m)[@HH:MM]")
    sign, digits, unit, hour, minute = match.groups()
    if len(digits) > _MAX_DIGITS:
        raise ExpansionError(f"bad time token {token!r}: out of range")
    count = int(digits) * (-1 if sign == "-" else 1)
    clock: time | None = None
    if hour is not None:
        if unit not in ("d", "wd"):
            raise ExpansionError(f"bad time token {token!r}: @HH:MM needs unit d or wd")
        if int(hour) > 23 or int(minute) > 59:
            raise ExpansionError(f"bad time token {token!r}: no such time {hour}:{minute}")
        clock = time(int(hour), int(minute), tzinfo=UTC)
    try:
        if unit == "h":
            return start + timedelta(hours=count)
        if unit == "m":
            return start + timedelta(minutes=count)
        if unit == "d":
            day = start.date() + timedelta(days=count)
        else:
            day = _weekday_for(count, start, clock)
    except OverflowError as exc:
        raise ExpansionError(f"bad time token {token!r}: out of range") from exc
    return datetime.combine(day, clock or start.timetz())


def _weekday_for(count: int, start: datetime, clock: time | None) -> date:
    today = start.date()
    if count == 0:
        if _is_weekday(today) and (clock is None or datetime.combine(today, clock) > start):
            return today
        return _step_weekdays(today, 1)
    return _step_weekdays(today, count)


def _is_weekday(day: date) -> bool:
    return day.weekday() <= _FRIDAY


def _step_weekdays(day: date, count: int) -> date:
    """The |count|-th weekday strictly after (count > 0) or before (count < 0) `day`.

    Arithmetic rather than a loop so that an absurd N fails fast with OverflowError.
    A weekend day steps like the Friday before it (forward) or the Monday after it
    (backward): those have the same weekday neighbours.
    """
    if count > 0:
        if not _is_weekday(day):
            day -= timedelta(days=day.weekday() - _FRIDAY)
        weeks, rest = divmod(count, _WEEKDAYS_PER_WEEK)
        # Crossing a weekend within the remainder costs two extra calendar days.
        extra = 2 if day.weekday() + rest > _FRIDAY else 0
        return day + timedelta(days=7 * weeks + rest + extra)
    if not _is_weekday(day):
        day += timedelta(days=7 - day.weekday())
    weeks, rest = divmod(-count, _WEEKDAYS_PER_WEEK)
    extra = 2 if day.weekday() - rest < 0 else 0
    return day - timedelta(days=7 * weeks + rest + extra)


# --- symbols -----------------------------------------------------------------------------


def symbol_of(value: Any) -> str | None:
    """The symbol name if `value` is a string that is exactly `@name`, else None."""
    if isinstance(value, str):
        match = _SYMBOL_RE.fullmatch(value)
        if match is not None:
            return match.group(1)
    return None


def _defined_symbol(resource: Any, where: str) -> tuple[str, str] | None:
    """(symbol, resourceType) if the resource's id is a symbol definition."""
    if not isinstance(resource, dict):
        raise ExpansionError(f"{where}: a resource must be a JSON object")
    rid = resource.get("id")
    if not (isinstance(rid, str) and rid.startswith("@")):
        return None
    symbol = symbol_of(rid)
    if symbol is None:
        raise ExpansionError(f"{where}: bad symbol {rid!r}: expected @ + {SYMBOL_NAME}")
    rtype = resource.get("resourceType")
    if not isinstance(rtype, str) or not rtype:
        raise ExpansionError(f"{where}: resource {rid} has no resourceType")
    return symbol, rtype


def fixture_symbols(scenario: Scenario) -> dict[str, str]:
    """Symbol (without "@") -> resourceType, for fixture and stimulus resources with an
    `"id": "@name"`. A stimulus resource may reuse a symbol (fixture or an earlier
    stimulus) of the same type: it then updates that resource. An id that starts with
    "@" but is not a valid symbol is an error, not a literal id."""
    symbols: dict[str, str] = {}
    for index, resource in enumerate(scenario.fixture):
        found = _defined_symbol(resource, f"fixture[{index}]")
        if found is None:
            continue
        symbol, rtype = found
        if symbol in symbols:
            raise ExpansionError(f"fixture[{index}]: symbol @{symbol} is defined twice")
        symbols[symbol] = rtype
    for index, resource in enumerate(scenario.stimulus):
        found = _defined_symbol(resource, f"stimulus[{index}]")
        if found is None:
            continue
        symbol, rtype = found
        known = symbols.setdefault(symbol, rtype)
        if known != rtype:
            raise ExpansionError(f"stimulus[{index}]: symbol @{symbol} is a {known}, not a {rtype}")
    return symbols


def used_symbols(value: Any) -> set[str]:
    """Every symbol used in a JSON value: any string exactly `@name`, at any depth.

    When `value` itself is a JSON object, its own `"id"` is a definition, not a use,
    and is not counted; so pass each fixture/stimulus resource (or oracle body) on its
    own, not a list of them. Nested `"id"`s (contained resources, Bundle entries)
    count as uses.
    """
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "id":
                _collect_symbols(item, found)
    else:
        _collect_symbols(value, found)
    return found


def _collect_symbols(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _collect_symbols(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect_symbols(item, found)
    else:
        symbol = symbol_of(value)
        if symbol is not None:
            found.add(symbol)


def run_ids(symbols: Iterable[str], run_key: str) -> dict[str, str]:
    """Symbol -> a FHIR id unique to the run: `<run_key>-<symbol>`, with characters FHIR
    ids do not allow replaced by "-".

    When that is longer than 64 characters, or two symbols would get the same id
    (`a_b` and `a b` after replacement), each affected symbol gets instead that id cut
    short and ending in "-" + 8 hex digits of a hash of the symbol: still readable, and
    the same in every run but for the key.
    """
    if not _RUN_KEY_RE.fullmatch(run_key):
        raise ExpansionError(f"bad run key {run_key!r}: expected 1-32 of [a-z0-9]")
    wanted = sorted(set(symbols))
    plain: dict[str, str] = {}
    for symbol in wanted:
        if not symbol:
            raise ExpansionError("empty symbol")
        plain[symbol] = f"{run_key}-{_ID_UNSAFE_RE.sub('-', symbol)}"
    claims: dict[str, int] = {}
    for rid in plain.values():
        claims[rid] = claims.get(rid, 0) + 1
    ids: dict[str, str] = {}
    taken: set[str] = set()
    # Symbols whose plain id is usable go first, so a hashed id can avoid all of them.
    for symbol in wanted:
        rid = plain[symbol]
        if len(rid) <= _FHIR_ID_MAX and claims[rid] == 1:
            ids[symbol] = rid
            taken.add(rid)
    for symbol in wanted:
        if symbol in ids:
            continue
        digest = hashlib.sha256(symbol.encode()).hexdigest()
        for salt in range(len(digest) - _ID_HASH_LENGTH + 1):
            suffix = "-" + digest[salt : salt + _ID_HASH_LENGTH]
            rid = plain[symbol][: _FHIR_ID_MAX - len(suffix)] + suffix
            if rid not in taken:
                break
        else:  # pragma: no cover - needs 57 hash collisions in a row
            raise ExpansionError(f"cannot make a unique id for symbol @{symbol}")
        ids[symbol] = rid
        taken.add(rid)
    return ids


def expand_value(value: Any, refs: Mapping[str, str], run_start: datetime) -> Any:
    """A deep copy of a JSON value with symbols and time tokens replaced.

    `refs` maps symbol -> "Type/id". A string `"@name"` under the key `"reference"`
    becomes "Type/id"; any other string `"@name"` (an id, an identifier value) the bare
    id. `{"$time": ...}` becomes an instant string, `{"$date": ...}` a date string. An
    object with a `$time`/`$date` key that is not exactly a token is an error: FHIR JSON
    has no such keys, so it can only be a mistyped token.
    """
    if isinstance(value, dict):
        if any(key in value for key in _TIME_KEYS):
            if not is_time_token(value):
                raise ExpansionError(
                    f"bad time token {value!r}: expected one key $time or $date with a string"
                )
            ((key, token),) = value.items()
            return resolve_time_token(token, run_start, as_date=key == "$date")
        return {
            key: _expand_reference(item, refs, run_start)
            if key == "reference"
            else expand_value(item, refs, run_start)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [expand_value(item, refs, run_start) for item in value]
    symbol = symbol_of(value)
    if symbol is not None:
        return _ref_of(symbol, refs).rpartition("/")[2]
    # Remaining scalars (str, int, bool, None, Decimal) are immutable: share them.
    return value


def _expand_reference(value: Any, refs: Mapping[str, str], run_start: datetime) -> Any:
    symbol = symbol_of(value)
    if symbol is None:
        return expand_value(value, refs, run_start)
    return _ref_of(symbol, refs)


def _ref_of(symbol: str, refs: Mapping[str, str]) -> str:
    try:
        return refs[symbol]
    except KeyError:
        raise ExpansionError(f"unknown symbol @{symbol}") from None


# --- variants ----------------------------------------------------------------------------


def apply_variant(scenario: Scenario, persona: str) -> Scenario:
    """The scenario as persona `persona` sees it.

    Each override `"@name": patch` is an RFC 7396 merge patch applied to every fixture
    and stimulus resource with that symbol (a stimulus that updates a fixture resource
    gets it too, so the persona's traits survive the update). A variant `brief`
    replaces the brief; its `expectations` are appended to the scenario's. Raises
    KeyError for an unknown persona, ExpansionError for an override on an unknown symbol
    or one that changes a resource's resourceType or id.
    """
    variant = next((v for v in scenario.variants if v.persona == persona), None)
    if variant is None:
        raise KeyError(persona)
    fixture = [copy.deepcopy(resource) for resource in scenario.fixture]
    stimulus = [copy.deepcopy(resource) for resource in scenario.stimulus]
    for key, patch in variant.overrides.items():
        symbol = symbol_of(key)
        if symbol is None:
            raise ExpansionError(f"variant {persona}: override key {key!r} is not a symbol")
        hits = 0
        for resources in (fixture, stimulus):
            for index, resource in enumerate(resources):
                if resource.get("id") == key:
                    resources[index] = _merge_patch(resource, patch, persona, key)
                    hits += 1
        if hits == 0:
            raise ExpansionError(f"variant {persona}: unknown symbol {key}")
    data = scenario.model_dump(by_alias=True)
    data["fixture"] = fixture
    data["stimulus"] = stimulus
    if variant.brief is not None:
        data["brief"] = variant.brief
    if variant.expectations:
        # Moved, not copied: the result applied again is the same scenario.
        dumped = next(v for v in data["variants"] if v["persona"] == persona)
        data["expectations"] = [*data["expectations"], *dumped["expectations"]]
        dumped["expectations"] = []
    return Scenario.model_validate(data)


def _merge_patch(
    resource: dict[str, Any], patch: dict[str, Any], persona: str, key: str
) -> dict[str, Any]:
    # The library merges in place and shares the patch's lists: give it copies.
    merged: Any = json_merge_patch.merge(copy.deepcopy(resource), copy.deepcopy(patch))
    for field in ("resourceType", "id"):
        if merged.get(field) != resource.get(field):
            raise ExpansionError(f"variant {persona}: override {key} changes {field}")
    result: dict[str, Any] = merged
    return result


# --- briefs ------------------------------------------------------------------------------


def brief_tokens(template: str) -> list[str]:
    """The tokens of a brief in order of appearance, without braces or surrounding
    spaces (`"{{ patient.name }}"` -> `"patient.name"`), repeats included."""
    return [match.group(1) for match in _BRIEF_TOKEN_RE.finditer(template)]


def render_brief(
    template: str,
    scenario: Scenario,
    resources: Mapping[str, dict[str, Any]],
    refs: Mapping[str, str],
) -> str:
    """Replace every `{{...}}` token of a brief.

    * `{{field}}`: a top-level text field of the scenario (id, title, category,
      summary, workflow).
    * `{{sym.id}}`: the run's id; `{{sym.ref}}`: "Type/id".
    * `{{sym.a.b}}`: the value at that path of the expanded resource; a list on the way
      is read at its first item (`{{patient.name.family}}`), and a numeric step picks
      an item (`{{patient.telecom.1.value}}`). The value shown is: a string as
      written, except a dateTime/instant which reads "Tuesday 3 December 2024 at 10:00
      UTC"; a number or boolean as in JSON; a HumanName (or list of them: the first)
      as its given names and family, or its text; a CodeableConcept as its text or
      first coding's display.
    """

    def replace(match: re.Match[str]) -> str:
        return _render_token(match.group(1), scenario, resources, refs)

    return _BRIEF_TOKEN_RE.sub(replace, template)


def _render_token(
    token: str,
    scenario: Scenario,
    resources: Mapping[str, dict[str, Any]],
    refs: Mapping[str, str],
) -> str:
    shown = "{{" + token + "}}"
    if not _TOKEN_PATH_RE.fullmatch(token):
        raise ExpansionError(f"bad brief token {shown}")
    head, _, path = token.partition(".")
    if not path:
        text = getattr(scenario, head, None) if head in _SCENARIO_TEXT_FIELDS else None
        if isinstance(text, str):
            return text
        if head in resources or head in refs:
            raise ExpansionError(f"brief token {shown} needs a field, e.g. {{{{{head}.id}}}}")
        raise ExpansionError(f"unknown brief token {shown}")
    if head not in refs:
        raise ExpansionError(f"unknown symbol @{head} in brief token {shown}")
    if path == "ref":
        return refs[head]
    if path == "id":
        return refs[head].rpartition("/")[2]
    if head not in resources:
        raise ExpansionError(f"no resource for @{head} in brief token {shown}")
    value: Any = resources[head]
    for step in path.split("."):
        if isinstance(value, list):
            if step.isdigit():
                if int(step) >= len(value):
                    raise ExpansionError(f"no item {step} for brief token {shown}")
                value = value[int(step)]
                continue
            if not value:
                raise ExpansionError(f"empty list on the way to brief token {shown}")
            value = value[0]
        if not (isinstance(value, dict) and step in value):
            raise ExpansionError(f"unknown field in brief token {shown}")
        value = value[step]
    text = _readable(value)
    if text is None:
        raise ExpansionError(f"brief token {shown} is not a text value")
    return text


def _readable(value: Any) -> str | None:
    if isinstance(value, list):
        return _readable(value[0]) if value else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if _DATETIME_RE.fullmatch(value):
            return _readable_datetime(value)
        return value
    if isinstance(value, dict):
        return _readable_object(value)
    if value is None:
        return None
    # int, float, Decimal: as written in JSON.
    return str(value)


def _readable_object(value: dict[str, Any]) -> str | None:
    given = value.get("given")
    family = value.get("family")
    parts = [*(given if isinstance(given, list) else []), *([family] if family else [])]
    if parts:  # HumanName
        return " ".join(str(part) for part in parts)
    if isinstance(value.get("text"), str):  # HumanName with text only, CodeableConcept
        text: str = value["text"]
        return text
    coding = value.get("coding")
    if isinstance(coding, list) and coding and isinstance(coding[0], dict):
        display = coding[0].get("display")
        return display if isinstance(display, str) else None
    display = value.get("display")  # Coding, Reference
    return display if isinstance(display, str) else None


def _readable_datetime(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        # Shaped like a dateTime but not one (Feb 30): FHIR validation reports it; the
        # brief shows it as written.
        return value
    # Not strftime: %A/%B follow the process locale, and %-d is not portable.
    return (
        f"{_DAY_NAMES[moment.weekday()]} {moment.day} {_MONTH_NAMES[moment.month - 1]} "
        f"{moment.year} at {moment:%H:%M} UTC"
    )


_DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


# --- whole scenario ----------------------------------------------------------------------


@dataclass
class ExpandedScenario:
    refs: dict[str, str]  # symbol -> "Type/id"
    fixture: list[dict[str, Any]]  # expanded, each with its real "id"
    stimulus: list[dict[str, Any]]
    brief: str | None


def expand_scenario(
    scenario: Scenario, run_key: str, run_start: datetime, persona: str | None = None
) -> ExpandedScenario:
    """Everything one run writes and shows: the persona's variant applied, symbols
    replaced by ids unique to `run_key`, time tokens resolved against `run_start`, and
    the brief rendered. Brief tokens read a symbol's last version (a stimulus update
    over the fixture), as the system under test would read it when it acts."""
    if persona is not None:
        scenario = apply_variant(scenario, persona)
    types = fixture_symbols(scenario)
    ids = run_ids(types, run_key)
    refs = {symbol: f"{rtype}/{ids[symbol]}" for symbol, rtype in types.items()}
    fixture: list[dict[str, Any]] = [expand_value(r, refs, run_start) for r in scenario.fixture]
    stimulus: list[dict[str, Any]] = [expand_value(r, refs, run_start) for r in scenario.stimulus]
    brief = None
    if scenario.brief is not None:
        latest: dict[str, dict[str, Any]] = {}
        for source, expanded in ((scenario.fixture, fixture), (scenario.stimulus, stimulus)):
            for original, resource in zip(source, expanded, strict=True):
                symbol = symbol_of(original.get("id"))
                if symbol is not None:
                    latest[symbol] = resource
        brief = render_brief(scenario.brief, scenario, latest, refs)
    return ExpandedScenario(refs=refs, fixture=fixture, stimulus=stimulus, brief=brief)


_PATH_SYMBOL = re.compile(r"(?<=[/=,])@([A-Za-z][A-Za-z0-9_]*)")


def expand_path(path: str, refs: dict[str, str]) -> str:
    """Oracle paths may name symbols as a segment or a query value:
    /Appointment/@appt, /Slot?patient=@patient -> their ids."""

    def replace(match: re.Match[str]) -> str:
        ref = refs.get(match.group(1))
        if ref is None:
            raise ExpansionError(f"unknown symbol '@{match.group(1)}' in path '{path}'")
        return ref.split("/", 1)[1]

    return _PATH_SYMBOL.sub(replace, path)
