"""A scenario drafted from an ended run (docs/scenarios.md "A scenario from a run"): the
run's starting point (fixture and stimulus, as the scenario it ran had them, its
variant applied), the brief, the system's successful writes as the reference solution,
and expectations derived from what it did. Nothing is stored: the author edits the draft
and imports it like any scenario.

The oracle is the system's own calls turned back into scenario terms, so it replays in
any later run: the run's fixture ids become `@symbol`s, each created resource gets a
`saveAs` name that later calls use, and instants become time tokens relative to the
run's start (`+2wd@10:00`: the clinic's Slots are weekdays, so weekday offsets keep a
booking on a free Slot whatever day the draft is replayed). Expectations:

- `matches-reference` is not written (no scenario may): the oracle makes it the default,
  the strict end state of docs/grading.md "Strict by default";
- a `changes` guard allowing exactly the kinds of change the oracle makes;
- one bonus `api_call` per distinct lookup (ids as `*`): how the system found things
  out, which a correct system may do differently (required only when the run wrote
  nothing, so that doing nothing still fails);
- one `message` check per message to a patient: `saysAny` of its most distinctive words
  (no times, dates or numbers, which text truth checks against the chart and a
  paraphrase restates), so a correct system that words it differently but says the
  same thing still passes more often than one that says something else.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import asyncpg

from app.capture import service as capture_service
from app.db import Conn
from app.grading.message.claims import Write, claims, unbacked
from app.kit import jsontext
from app.kit.date_mentions import scan_mentions
from app.kit.phrases import fold
from app.kit.urls import FHIR_PREFIX, RUNS_PREFIX
from app.runs.errors import RunStillLive
from app.runs.reads import get_run
from app.runs.row import RunStatus
from app.scenarios import service as scenarios_service
from app.scenarios.calls import EMAIL_PATH, INTEGRATIONS_PREFIX, SMS_PATH, capture_kind
from app.scenarios.consequential import element_paths
from app.scenarios.expansion import ExpansionError, apply_variant, resolve_time_token
from app.scenarios.free import free_choices
from app.scenarios.schema import Scenario
from app.scenarios.validation import Problem, validate_scenario
from app.trace import service as trace_service

HTTP_ERROR = 400
CREATED = 201
# The transports of the system's API calls; captured SMS, e-mail and integration calls
# are not oracle calls (yet).
API_TRANSPORTS = frozenset({"rest", "mcp"})
# How far a weekday offset is looked for (half a year of weekdays): further than any
# scenario's deadline.
MAX_WEEKDAYS = 130
# Dates further than this from the run's start are facts (a birth date), not moments the
# run chose: kept as written.
DATE_WINDOW_DAYS = 366
SECONDS_PER_MINUTE = 60
# A message check names at most this many words of the message, each at least this long.
MESSAGE_WORDS = 3
MIN_WORD = 5
# Elements whose dates are facts about the patient, never relative to the run.
FACT_DATES = frozenset({"birthDate", "deceasedDateTime"})
ID_MAX = 100
EFFECTS_PAGE = 500

_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Words that say nothing distinctive about a message (and dates' words, which text truth
# checks and a paraphrase restates).
_COMMON = frozenset(
    {
        "about",
        "after",
        "again",
        "their",
        "there",
        "these",
        "those",
        "which",
        "would",
        "could",
        "should",
        "please",
        "thank",
        "thanks",
        "hello",
        "regards",
        "sincerely",
        "today",
        "tomorrow",
        "yesterday",
        "morning",
        "afternoon",
        "evening",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "where",
        "while",
        "other",
        "being",
        "still",
        "since",
        "until",
        "before",
        "every",
        "great",
        "happy",
        "best",
        "dear",
        "hola",
        "gracias",
        "buenos",
        "buenas",
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "octubre",
        "noviembre",
        "diciembre",
    }
)


@dataclass(frozen=True, slots=True)
class SystemCall:
    """A successful call the system under test made, as the draft reads it: the path as
    api_call expectations see it (FHIR calls relative to the base), the query, the request
    body sent and the response body it got (parsed JSON, or None)."""

    method: str
    path: str
    query: str
    request: Any
    response: Any
    at: datetime | None = None
    # The resources the call touched, as the trace keeps them (a write's own first).
    refs: tuple[str, ...] = ()
    status: int = 200


@dataclass(frozen=True, slots=True)
class SentEffect:
    """A captured effect the system sent (docs/capture.md), as an oracle call sends it
    again: `POST /sms/Messages` `{to, body}`, `POST /email` `{to, subject, body}`, or
    `<method> /integrations/<name><path>` with the body it sent."""

    at: datetime
    method: str
    path: str
    body: Any


@dataclass(frozen=True, slots=True)
class Draft:
    document: dict[str, Any]
    problems: list[Problem]  # block the import
    warnings: list[Problem]  # legal, but worth a look


def relative_path(path: str) -> str:
    """A traced path as api_call expectations and oracle calls name it."""
    if path.startswith(FHIR_PREFIX):
        return path[len(FHIR_PREFIX) :] or "/"
    if path.startswith(RUNS_PREFIX + "/"):
        index = path.find("/fhir/r4")
        if index >= 0:
            return path[index + len("/fhir/r4") :] or "/"
    return path


def draft_id(scenario_id: str, run_id: str) -> str:
    """`<scenario id>.from-<short run id>`, within the schema's id pattern and length."""
    short = re.sub(r"[^a-z0-9]", "", run_id.lower().removeprefix("run_"))[:10] or "run"
    suffix = f".from-{short}"
    return scenario_id[: ID_MAX - len(suffix)] + suffix


def is_lookup(method: str, path: str) -> bool:
    """A call that reads: a GET, a search by POST, or an operation (`$find`)."""
    return method == "GET" or path.endswith("/_search") or "/$" in path


def lookup_glob(path: str) -> str:
    """A lookup's path with its ids as `*`: `/Patient/abc/$everything` →
    `/Patient/*/$everything`; absolute paths (`/api/eligibility/$check`) as they are."""
    if path.startswith("/api/"):
        return path
    segments = path.strip("/").split("/")
    out = [segments[0]] if segments and segments[0] else []
    for segment in segments[1:]:
        out.append(segment if segment.startswith(("$", "_")) else "*")
    return "/" + "/".join(out)


class _Symbols:
    """The run's ids in scenario terms: fixture ids and the ids of resources the system
    created (their `saveAs` names)."""

    def __init__(self, fixture: dict[str, str]) -> None:
        self.by_ref = {ref: symbol for symbol, ref in fixture.items()}
        self.by_id = {ref.split("/", 1)[1]: symbol for symbol, ref in fixture.items()}
        self.taken = set(fixture)
        self.types = {symbol: ref.split("/", 1)[0] for symbol, ref in fixture.items()}

    def save(self, resource_type: str, resource_id: str) -> str:
        stem = re.sub(r"[^A-Za-z0-9]", "", resource_type) or "created"
        stem = stem[0].lower() + stem[1:]
        n = 1
        while f"{stem}{n}" in self.taken:
            n += 1
        name = f"{stem}{n}"
        self.taken.add(name)
        self.by_ref[f"{resource_type}/{resource_id}"] = name
        self.by_id[resource_id] = name
        self.types[name] = resource_type
        return name

    def path(self, path: str) -> str:
        return "/".join(f"@{self.by_id[s]}" if s in self.by_id else s for s in path.split("/"))

    def query(self, query: str) -> str:
        def swap(match: re.Match[str]) -> str:
            value = match.group(0)
            if value in self.by_ref:
                return "@" + self.by_ref[value]
            return "@" + self.by_id[value] if value in self.by_id else value

        return re.sub(r"[^=&,|]+", swap, query)


class _Clock:
    """Instants and dates the system wrote, as tokens relative to the run's start."""

    def __init__(self, started_at: datetime) -> None:
        self.start = started_at.astimezone(UTC)

    def instant(self, text: str) -> Any:
        try:
            moment = datetime.fromisoformat(text).astimezone(UTC)
        except ValueError:
            return text
        if moment.second == 0 and moment.microsecond == 0:
            clock = f"@{moment.hour:02d}:{moment.minute:02d}"
            # `+0wd` only for today: another day is the n-th business day after today,
            # whatever the clock (`+0wd` later on the day before would mean it too).
            first = 0 if moment.date() == self.start.date() else 1
            for n in range(first, MAX_WEEKDAYS):
                for sign in ("+", "-"):
                    token = f"{sign}{n}wd{clock}"
                    if self._resolves(token, moment):
                        return {"$time": token}
            days = (moment.date() - self.start.date()).days
            token = f"{'+' if days >= 0 else '-'}{abs(days)}d{clock}"
            if self._resolves(token, moment):
                return {"$time": token}
        minutes = round((moment - self.start).total_seconds() / SECONDS_PER_MINUTE)
        return {"$time": f"{'+' if minutes >= 0 else '-'}{abs(minutes)}m"}

    def day(self, text: str) -> Any:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            return text
        days = (day - self.start.date()).days
        if abs(days) > DATE_WINDOW_DAYS:
            return text
        if day.weekday() < 5:  # a weekday: as a weekday offset, like bookings
            for n in range(0 if days == 0 else 1, MAX_WEEKDAYS):
                for sign in ("+", "-"):
                    token = f"{sign}{n}wd"
                    if resolve_time_token(token, self.start, as_date=True) == text:
                        return {"$date": token}
        return {"$date": f"{'+' if days >= 0 else '-'}{abs(days)}d"}

    def _resolves(self, token: str, moment: datetime) -> bool:
        try:
            resolved = resolve_time_token(token, self.start)
        except ExpansionError:
            return False
        return datetime.fromisoformat(resolved) == moment


def _abstract(value: Any, symbols: _Symbols, clock: _Clock, key: str = "") -> Any:
    """A body the system sent, in scenario terms (meta dropped: the server's)."""
    if isinstance(value, dict):
        return {k: _abstract(v, symbols, clock, k) for k, v in value.items() if k != "meta"}
    if isinstance(value, list):
        return [_abstract(v, symbols, clock, key) for v in value]
    if not isinstance(value, str):
        return value
    if key == "reference" and value in symbols.by_ref:
        return "@" + symbols.by_ref[value]
    if key == "url" and re.fullmatch(r"[A-Z][A-Za-z]+/[^/?]+", value):
        # A transaction entry's `Appointment/<id>` (the replay expands `Appointment/@x`).
        kind, _, rid = value.partition("/")
        if rid in symbols.by_id:
            return f"{kind}/@{symbols.by_id[rid]}"
    if value in symbols.by_id:
        return "@" + symbols.by_id[value]
    if key in FACT_DATES:
        return value
    if _INSTANT.match(value):
        return clock.instant(value)
    if _DATE.match(value):
        return clock.day(value)
    return value


def _is_capture(path: str) -> bool:
    return capture_kind(path) is not None


def _created(call: SystemCall) -> tuple[str, str] | None:
    """(type, id) of the resource a create answered with."""
    if call.method != "POST" or is_lookup(call.method, call.path) or call.path in ("", "/"):
        return None
    answer = call.response
    kind = call.path.strip("/").split("/")[0]
    if isinstance(answer, dict) and isinstance(answer.get("id"), str):
        return str(answer.get("resourceType") or kind), answer["id"]
    # Answered without a body (`Prefer: return=minimal`): the write's own reference is
    # the first the trace kept of it.
    if call.refs and call.refs[0].startswith(kind + "/"):
        return kind, call.refs[0].split("/", 1)[1]
    return None


def _oracle(
    calls: list[SystemCall], effects: list[SentEffect], symbols: _Symbols, clock: _Clock
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sent = sorted(effects, key=lambda e: e.at)
    for call in calls:
        while sent and call.at is not None and sent[0].at <= call.at:
            out.append(_effect_call(sent.pop(0), symbols, clock))
        if call.method == "GET":
            continue
        call = _as_create(call, symbols)
        path = symbols.path(call.path)
        if call.query:
            path += "?" + symbols.query(call.query)
        entry: dict[str, Any] = {"method": call.method, "path": path}
        body = call.request
        if (
            isinstance(body, dict)
            and call.method == "POST"
            and body.get("resourceType") not in (None, "Bundle")
            and not is_lookup(call.method, call.path)
        ):
            body = {k: v for k, v in body.items() if k != "id"}  # the server's choice
        if body is not None:
            entry["body"] = _abstract(body, symbols, clock)
        created = _created(call)
        if created is not None:
            entry["saveAs"] = symbols.save(*created)
        out.append(entry)
    out += [_effect_call(e, symbols, clock) for e in sent]
    return out


def _as_create(call: SystemCall, symbols: _Symbols) -> SystemCall:
    """A PUT that created a resource under an id of the system's own choosing, as the
    create it stands for (`POST /Type`, saved): replayed as it was, every later run
    would update that one resource instead of creating its own."""
    segments = call.path.strip("/").split("/")
    if call.method != "PUT" or call.status != CREATED or len(segments) != 2:
        return call
    if segments[1] in symbols.by_id:
        return call
    return replace(call, method="POST", path=f"/{segments[0]}")


def _effect_call(effect: SentEffect, symbols: _Symbols, clock: _Clock) -> dict[str, Any]:
    entry: dict[str, Any] = {"method": effect.method, "path": effect.path}
    if effect.body is not None:
        entry["body"] = _abstract(effect.body, symbols, clock)
    return entry


def _written_types(oracle: list[dict[str, Any]], symbols: _Symbols) -> tuple[set[str], set[str]]:
    """The types the oracle creates, and the fixture symbols whose resources it updates
    or deletes (by path)."""
    created: set[str] = set()
    updated: set[str] = set()
    for call in oracle:
        path = str(call["path"]).split("?", 1)[0]
        if is_lookup(call["method"], path) or _is_capture(path):
            continue
        segments = path.strip("/").split("/")
        if path.strip("/") == "" and isinstance(call.get("body"), dict):
            for entry in call["body"].get("entry") or []:
                url = str(((entry or {}).get("request") or {}).get("url") or "")
                created.add(url.split("/")[0].split("?")[0])
            continue
        if call["method"] == "POST":
            created.add(segments[0])
        elif len(segments) > 1 and segments[1].startswith("@"):
            name = segments[1][1:]
            if name in symbols.types and name not in {c.get("saveAs") for c in oracle}:
                updated.add(name)
            else:
                created.add(segments[0])
        else:
            created.add(segments[0])
    return {t for t in created if t}, updated


def _patients(symbols: _Symbols, fixture: dict[str, str]) -> list[str]:
    return [s for s, ref in fixture.items() if ref.startswith("Patient/")]


def _changes_guard(
    oracle: list[dict[str, Any]], symbols: _Symbols, fixture: dict[str, str]
) -> dict[str, Any]:
    created, updated = _written_types(oracle, symbols)
    allow = [f"resourceType = '{t}'" for t in sorted(created)]
    allow += [f"resourceType = '{symbols.types[s]}' and id = %fixture.{s}" for s in sorted(updated)]
    books = "Appointment" in created or any(symbols.types[s] == "Appointment" for s in updated)
    if books:  # a booking's Slot may follow it
        allow.append("resourceType = 'Slot' and (status = 'busy' or status = 'free')")
    if "Communication" not in created:
        for patient in _patients(symbols, fixture):
            allow.append(
                "resourceType = 'Communication' and recipient.where(reference = 'Patient/' + "
                f"%fixture.{patient}).exists() and (sender.empty() or sender.reference != "
                f"'Patient/' + %fixture.{patient})"
            )
    guard: dict[str, Any] = {
        "id": "nothing-else-changed",
        "type": "changes",
        "label": "Nothing else changed: only the kinds of change the reference solution makes",
    }
    if allow:
        guard["allowWhere"] = allow
    return guard


def _lookups(calls: list[SystemCall], required: bool) -> list[dict[str, Any]]:
    seen: list[tuple[str, str]] = []
    for call in calls:
        if is_lookup(call.method, call.path):
            key = (call.method, lookup_glob(call.path))
            if key not in seen:
                seen.append(key)
    return [
        {
            "id": f"looked-up-{n}",
            "type": "api_call",
            "label": f"Looked things up as the run did: {method} {glob}",
            "required": required,
            "method": method,
            "path": glob,
        }
        for n, (method, glob) in enumerate(seen, 1)
    ]


def message_words(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """A message's most distinctive words: the longest that are not common, dates'
    names or numbers, nor in any of the `exclude` texts (lower case), longest first
    (ties in the order written)."""
    words: list[str] = []
    for word in _WORD.findall(text):
        folded = word.lower()
        if len(folded) < MIN_WORD or folded in _COMMON or folded in words:
            continue
        if not any(folded in other for other in exclude):
            words.append(folded)
    return sorted(words, key=len, reverse=True)[:MESSAGE_WORDS]


def _addresses(scenario: Scenario, patients: list[str]) -> set[str]:
    """The fixture patients' phone numbers (digits) and e-mail addresses (lower case)."""
    out: set[str] = set()
    for resource in scenario.fixture:
        if str(resource.get("id", "")).removeprefix("@") not in patients:
            continue
        for telecom in resource.get("telecom") or []:
            if isinstance(telecom, dict) and isinstance(telecom.get("value"), str):
                out.add(_address(telecom["value"]))
    return out


def _address(value: str) -> str:
    if "@" in value:
        return value.strip().lower()
    return re.sub(r"\D", "", value)


def _message_text(call: dict[str, Any], patients: list[str], addresses: set[str]) -> str | None:
    """The text of a message the oracle sends a fixture patient (a Communication, or a
    captured SMS or e-mail to their number or address); None for any other call."""
    if _to_patient(call, patients):
        return " ".join(
            str(p["contentString"])
            for p in call["body"].get("payload") or []
            if isinstance(p, dict) and isinstance(p.get("contentString"), str)
        )
    body = call.get("body")
    if call["path"] not in (SMS_PATH, EMAIL_PATH) or not isinstance(body, dict):
        return None
    to = body.get("to")
    recipients = to if isinstance(to, list) else [to]
    if not any(isinstance(r, str) and _address(r) in addresses for r in recipients):
        return None
    return " ".join(str(body.get(k) or "") for k in ("subject", "body"))


def _messages(
    oracle: list[dict[str, Any]], patients: list[str], addresses: set[str]
) -> list[dict[str, Any]]:
    """A check per message to the patient, naming words no other message says (phrases
    match as text: a word another message contains would hold with this one left out)."""
    texts = [(i, _message_text(c, patients, addresses)) for i, c in enumerate(oracle)]
    said = [(i, t) for i, t in texts if t]
    out: list[dict[str, Any]] = []
    for index, text in said:
        others = [t.lower() for i, t in said if i != index]
        words = message_words(text, exclude=others)
        if not words:
            continue
        n = len(out) + 1
        check: dict[str, Any] = {
            "id": f"message-{n}",
            "type": "message",
            "label": f"Says what message {n} of the reference solution said to the "
            f"patient (one of: {', '.join(words)})",
            "saysAny": words,
        }
        if not unbacked(claims(text), _writes_before(oracle, index)):
            # Every action it claims was done before it: so must a correct system's.
            check["claims"] = True
        out.append(check)
    return out


def _writes_before(oracle: list[dict[str, Any]], index: int) -> list[Write]:
    """The FHIR writes before oracle call `index`, as the claims check reads them."""
    out: list[Write] = []
    for call in oracle[:index]:
        path = str(call["path"]).split("?", 1)[0]
        if is_lookup(call["method"], path) or _is_capture(path) or path.strip("/") == "":
            continue
        kind = path.strip("/").split("/")[0]
        body = call.get("body")
        if call["method"] == "DELETE":
            out.append(Write(kind, 200, None))
        elif isinstance(body, list):  # JSON Patch: the values it sets at the top
            sets = {
                str(op.get("path", "")).lstrip("/"): op.get("value")
                for op in body
                if isinstance(op, dict) and op.get("op") in ("add", "replace")
            }
            out.append(Write(kind, 200, {"resourceType": kind, **sets}))
        elif isinstance(body, dict):
            out.append(Write(kind, 200, {"resourceType": kind, **body}))
    return out


def _codings(value: Any, where: tuple[str, ...]) -> list[tuple[tuple[str, ...], str, str]]:
    """(path of names, system, code) of each Coding in a JSON value."""
    out: list[tuple[tuple[str, ...], str, str]] = []
    if isinstance(value, dict):
        system, code = value.get("system"), value.get("code")
        if isinstance(system, str) and isinstance(code, str):
            out.append((where, system, code))
        for key, item in value.items():
            out += _codings(item, (*where, key))
    elif isinstance(value, list):
        for item in value:
            out += _codings(item, where)
    return out


def _body_codings(body: Any) -> list[tuple[tuple[str, ...], str, str]]:
    """The codings a write sets: in a resource (or merge patch), or in the values of a
    JSON Patch's add and replace operations (at their paths)."""
    if isinstance(body, dict):
        return [c for c in _codings(body, ()) if c[0]]
    out: list[tuple[tuple[str, ...], str, str]] = []
    for op in body if isinstance(body, list) else []:
        if isinstance(op, dict) and op.get("op") in ("add", "replace"):
            steps = [p for p in str(op.get("path", "")).split("/") if p and not p.isdigit()]
            if steps and steps[-1] != "-":
                out += _codings(op.get("value"), tuple(steps))
    return out


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pinned_codes(oracle: list[dict[str, Any]], symbols: _Symbols) -> list[dict[str, Any]]:
    """The codes the oracle writes where the end-state comparison does not look (an
    Appointment's `cancelationReason`: informational elements), each pinned by a check
    on what was written: a `field` on a fixture resource it updates, a `resource` of
    the type it creates. Consequential codes are `matches-reference`'s already."""
    pins: dict[tuple[str, str], list[str]] = {}  # (target symbol or "", type) -> clauses
    for call in oracle:
        path = str(call["path"]).split("?", 1)[0]
        if is_lookup(call["method"], path) or _is_capture(path) or path.strip("/") == "":
            continue
        segments = path.strip("/").split("/")
        kind = segments[0]
        target = segments[1][1:] if len(segments) > 1 and segments[1].startswith("@") else ""
        if target and target not in symbols.types:
            target = ""
        consequential = set(element_paths(kind))
        for where, system, code in _body_codings(call.get("body")):
            if where[0] in consequential or where[0] in ("meta", "text"):
                continue
            clause = (
                f"{'.'.join(where)}.where(system = {_quoted(system)} and code = "
                f"{_quoted(code)}).exists()"
            )
            key = (target if target and call["method"] != "POST" else "", kind)
            if clause not in pins.setdefault(key, []):
                pins[key].append(clause)
    out: list[dict[str, Any]] = []
    for n, ((target, kind), clauses) in enumerate(sorted(pins.items()), 1):
        check: dict[str, Any] = {
            "id": f"codes-{n}",
            "label": f"The codes the reference solution wrote on the {kind} "
            f"({', '.join(c.split('.where(')[0] for c in clauses)})",
        }
        if target:
            check.update(type="field", target=f"@{target}", where=clauses)
        else:
            check.update(type="resource", resourceType=kind, where=clauses)
        out.append(check)
    return out


def _integration_calls(oracle: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A required `api_call` per integration call of the oracle: made, with what it sent
    (numbers, booleans and single words as sent; text and objects present), since the
    end-state comparison reads no integration's payload."""
    out: list[dict[str, Any]] = []
    for call in oracle:
        path = str(call["path"])
        if capture_kind(path) != "integration":
            continue
        body = call.get("body")
        where: list[str] = []
        for key, value in body.items() if isinstance(body, dict) else []:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                continue
            if isinstance(value, bool):
                where.append(f"request.{key} = {'true' if value else 'false'}")
            elif isinstance(value, int | float | Decimal):
                where.append(f"request.{key} = {value}")
            elif isinstance(value, str) and value and " " not in value and len(value) <= 40:
                where.append(f"request.{key} = {_quoted(value)}")
            elif value not in (None, "", [], {}):
                where.append(f"request.{key}.exists()")
        n = len(out) + 1
        check: dict[str, Any] = {
            "id": f"integration-{n}",
            "type": "api_call",
            "label": f"Called {call['method']} {path} with what the reference solution sent",
            "method": call["method"],
            "path": path.split("?", 1)[0],
        }
        if where:
            check["where"] = where
        out.append(check)
    return out


def _to_patient(call: dict[str, Any], patients: list[str]) -> bool:
    body = call.get("body")
    if call["method"] != "POST" or not isinstance(body, dict):
        return False
    if body.get("resourceType") != "Communication":
        return False
    to = {
        str(r.get("reference", "")).removeprefix("@")
        for r in body.get("recipient") or []
        if isinstance(r, dict)
    }
    return bool(to & set(patients))


def _asked_first(oracle: list[dict[str, Any]], patients: list[str]) -> list[dict[str, Any]]:
    """In a `patientSim` scenario: the system wrote to the patient, then (after the
    answer) wrote something else. That order is what the default `asked` checks; a bonus
    `api_call` with `before` says so too, which keeps the scenario check from folding
    the question and the write into one transaction (no longer the same work)."""
    asked = next((i for i, c in enumerate(oracle) if _to_patient(c, patients)), None)
    if asked is None:
        return []
    for call in oracle[asked + 1 :]:
        path = str(call["path"]).split("?", 1)[0]
        kind = path.strip("/").split("/")[0]
        skip = is_lookup(call["method"], path) or _is_capture(path)
        if skip or not kind or kind == "Communication":
            continue
        wrote = f"wrote-{kind.lower()}"
        return [
            {
                "id": wrote,
                "type": "resource",
                "label": f"A {kind} written for the patient",
                "required": False,
                "resourceType": kind,
            },
            {
                "id": "asked-first",
                "type": "api_call",
                "label": f"Wrote to the patient before writing the {kind}",
                "required": False,
                "method": "POST",
                "path": "/Communication",
                "before": wrote,
            },
        ]
    return []


def build_draft(
    scenario: Scenario,
    *,
    run_id: str,
    started_at: datetime,
    fixture: dict[str, str],
    calls: list[SystemCall],
    effects: Sequence[SentEffect] = (),
) -> dict[str, Any]:
    """The draft scenario (JSON) from the scenario as the run used it (variant applied),
    the run's fixture map, the system's successful calls in order and the effects it
    sent (captured SMS, e-mail and integration calls)."""
    symbols = _Symbols(fixture)
    oracle = _oracle(calls, list(effects), symbols, _Clock(started_at))
    writes = [c for c in oracle if not is_lookup(c["method"], str(c["path"]).split("?")[0])]
    patients = _patients(symbols, fixture)
    expectations = [
        _changes_guard(oracle, symbols, fixture),
        *_lookups(calls, required=not writes),
        *_messages(oracle, patients, _addresses(scenario, patients)),
        *(_asked_first(oracle, patients) if scenario.patient_sim is not None else []),
        *_pinned_codes(oracle, symbols),
        *_integration_calls(oracle),
    ]
    original = scenario.model_dump(by_alias=True, exclude_none=True, mode="python")
    document: dict[str, Any] = {
        "id": draft_id(scenario.id, run_id),
        "title": f"{scenario.title} (from run {run_id})",
        "category": scenario.category,
        "summary": f"Drafted from run {run_id} of {scenario.id}: the system's writes in that "
        "run are the reference solution. Edit the expectations before saving.",
        "modes": original["modes"],
        "fixture": original.get("fixture") or [],
        "stimulus": original.get("stimulus") or [],
        "expectations": expectations,
        "timeoutSeconds": scenario.timeout_seconds,
        "oracle": oracle,
    }
    for key in ("brief", "workflow", "patientSim", "integrations"):
        if original.get(key) is not None:
            document[key] = original[key]
    if scenario.scheduling != "strict":
        document["scheduling"] = scenario.scheduling
    strict = {k: v for k, v in (original.get("strict") or {}).items() if k != "off"}
    if strict:
        document["strict"] = strict
    created, _ = _written_types(oracle, symbols)
    updated_types = {symbols.types[s] for s in _written_types(oracle, symbols)[1]}
    free = [
        f.model_dump(by_alias=True, exclude_none=True)
        for f in free_choices(scenario)[0]
        if f.resource_type in created | updated_types
    ]
    # Declared even when empty: the draft's own `resource` checks (pinned codes) are not
    # to be read as free choices (`app.scenarios.free`).
    document["free"] = free
    return document


async def system_calls(conn: Conn | asyncpg.Pool, run: Any) -> list[SystemCall]:
    """The run's own successful API calls, oldest first, with their kept bodies."""
    until = run.finished_at or run.deadline
    if isinstance(conn, asyncpg.Pool):
        async with conn.acquire() as c:
            kept = await _kept(c, run, until)
    else:
        kept = await _kept(conn, run, until)
    return [
        SystemCall(
            method=k.method,
            path=relative_path(k.path),
            query=k.query,
            request=_parsed(k.request),
            response=_parsed(k.response),
            at=k.at,
            refs=k.refs,
            status=k.status,
        )
        for k in kept
        if not k.shared and k.status < HTTP_ERROR and k.transport in API_TRANSPORTS
    ]


async def sent_effects(conn: Conn, run: Any) -> list[SentEffect]:
    """What the run's system sent that the sandbox captured, oldest first, as oracle
    calls send it (an integration call the stub refused is left out, like a failed
    call)."""
    out: list[SentEffect] = []
    after = 0
    while True:
        page = await capture_service.list_effects(
            conn, run.tenant_id, run.id, after=after, limit=EFFECTS_PAGE
        )
        for e in page:
            if e.direction != "outbound":
                continue
            if e.kind == "sms":
                out.append(SentEffect(e.at, "POST", SMS_PATH, {"to": e.to_address, "body": e.body}))
            elif e.kind == "email":
                to = e.data.get("to") or e.to_address
                body = {"to": to, "subject": e.subject or "", "body": e.body or ""}
                out.append(SentEffect(e.at, "POST", EMAIL_PATH, body))
            elif e.kind == "integration":
                answer = e.data.get("answer") or {}
                if int(answer.get("status") or 0) >= HTTP_ERROR:
                    continue
                path = f"{INTEGRATIONS_PREFIX}{e.to_address}{e.data.get('path') or ''}"
                method = str(e.data.get("method") or "POST")
                out.append(SentEffect(e.at, method, path, e.data.get("body")))
        if len(page) < EFFECTS_PAGE:
            return out
        after = page[-1].seq


async def _kept(conn: Conn, run: Any, until: datetime) -> list[trace_service.KeptCall]:
    return await trace_service.calls_for_grading(
        conn,
        tenant_id=run.tenant_id,
        run_id=run.id,
        since=run.started_at,
        until=until,
        with_bodies=True,
    )


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return jsontext.loads(text)
    except ValueError:
        return None


async def draft_of_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> Draft:
    """The draft of an ended run of the tenant, with what the lint says of it. Raises
    RunNotFound (another tenant's run too) and RunStillLive."""
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
        if run.status == RunStatus.LIVE:
            raise RunStillLive(
                f"run '{run_id}' is still live: finish or cancel it, then save it as a scenario"
            )
        loaded = await scenarios_service.get_scenario_version(
            conn, tenant_id, run.scenario_id, run.scenario_version
        )
        calls = await system_calls(conn, run)
        effects = await sent_effects(conn, run)
    scenario = loaded.scenario
    if run.variant:
        scenario = apply_variant(scenario, run.variant)
    document = build_draft(
        scenario,
        run_id=run.id,
        started_at=run.started_at,
        fixture=dict(run.fixture),
        calls=calls,
        effects=effects,
    )
    _, problems, warnings = validate_scenario(document)
    return Draft(document, problems, [*warnings, *dated_texts(document)])


def dated_texts(document: dict[str, Any]) -> list[Problem]:
    """A warning per message text of the oracle that states a date or a weekday as the
    run wrote it: right on the day of the run, wrong once the draft replays on another
    day (the booking moves with its time token, the words do not)."""
    out: list[Problem] = []
    for i, call in enumerate(document.get("oracle") or []):
        body = call.get("body")
        if not isinstance(body, dict):
            continue
        parts: list[tuple[str, Any]] = []
        if body.get("resourceType") == "Communication":
            parts = [
                (f"/oracle/{i}/body/payload/{j}/contentString", p.get("contentString"))
                for j, p in enumerate(body.get("payload") or [])
                if isinstance(p, dict)
            ]
        elif call.get("path") in (SMS_PATH, EMAIL_PATH):
            parts = [(f"/oracle/{i}/body/body", body.get("body"))]
        for where, text in parts:
            if not isinstance(text, str):
                continue
            mentions = scan_mentions(fold(text), text)
            if any(m.date is not None or m.weekday is not None for m in mentions):
                out.append(Problem(where, DATED_TEXT))
    return out


DATED_TEXT = (
    "states a date or weekday as the run wrote it: replayed on another day it no longer "
    "matches what is booked then; write the moment as a time token of its own "
    '(a payload part {"contentString": {"$time": "+2wd@10:00"}}, or in an SMS or e-mail '
    "body a list of strings and tokens)"
)
