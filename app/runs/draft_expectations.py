"""The expectations a draft derives from its oracle (docs/scenarios.md "A scenario from a
run"):

- `matches-reference` is not written (no scenario may): the oracle makes it the default,
  the strict end state of docs/grading.md "Strict by default";
- a `changes` guard allowing exactly the kinds of change the oracle makes;
- one bonus `api_call` per distinct lookup (ids as `*`): how the system found things
  out, which a correct system may do differently (required only when the run wrote
  nothing, so that doing nothing still fails);
- one `message` check per message to a patient: `saysAny` of its most distinctive words
  (no times, dates or numbers, which text truth checks against the chart and a
  paraphrase restates), so a correct system that words it differently but says the
  same thing still passes more often than one that says something else;
- the codes it writes where the end-state comparison does not look, pinned; a required
  `api_call` per integration call; and in a `patientSim` scenario, asking first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from app.grading.message.claims import Write, claims, unbacked
from app.kit.date_words import MONTHS, SPANISH_MONTHS, SPANISH_WEEKDAYS, WEEKDAYS
from app.runs.draft_oracle import Symbols, SystemCall, is_capture, is_lookup
from app.scenarios.calls import EMAIL_PATH, SMS_PATH, capture_kind
from app.scenarios.consequential import element_paths
from app.scenarios.schema import Scenario

# A message check names at most this many words of the message, each at least this long.
MESSAGE_WORDS = 3
MIN_WORD = 5

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
    }
    | set(MONTHS)
    | set(WEEKDAYS)
    | set(SPANISH_MONTHS)
    | set(SPANISH_WEEKDAYS)
)


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


def written_types(oracle: list[dict[str, Any]], symbols: Symbols) -> tuple[set[str], set[str]]:
    """The types the oracle creates, and the fixture symbols whose resources it updates
    or deletes (by path)."""
    created: set[str] = set()
    updated: set[str] = set()
    for call in oracle:
        path = str(call["path"]).split("?", 1)[0]
        if is_lookup(call["method"], path) or is_capture(path):
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


def fixture_patients(symbols: Symbols, fixture: dict[str, str]) -> list[str]:
    return [s for s, ref in fixture.items() if ref.startswith("Patient/")]


def changes_guard(
    oracle: list[dict[str, Any]], symbols: Symbols, fixture: dict[str, str]
) -> dict[str, Any]:
    created, updated = written_types(oracle, symbols)
    allow = [f"resourceType = '{t}'" for t in sorted(created)]
    allow += [f"resourceType = '{symbols.types[s]}' and id = %fixture.{s}" for s in sorted(updated)]
    books = "Appointment" in created or any(symbols.types[s] == "Appointment" for s in updated)
    if books:  # a booking's Slot may follow it
        allow.append("resourceType = 'Slot' and (status = 'busy' or status = 'free')")
    if "Communication" not in created:
        for patient in fixture_patients(symbols, fixture):
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


def lookups(calls: list[SystemCall], required: bool) -> list[dict[str, Any]]:
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


def patient_addresses(scenario: Scenario, patients: list[str]) -> set[str]:
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


def messages(
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
        if is_lookup(call["method"], path) or is_capture(path) or path.strip("/") == "":
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


def pinned_codes(oracle: list[dict[str, Any]], symbols: Symbols) -> list[dict[str, Any]]:
    """The codes the oracle writes where the end-state comparison does not look (an
    Appointment's `cancelationReason`: informational elements), each pinned by a check
    on what was written: a `field` on a fixture resource it updates, a `resource` of
    the type it creates. Consequential codes are `matches-reference`'s already."""
    pins: dict[tuple[str, str], list[str]] = {}  # (target symbol or "", type) -> clauses
    for call in oracle:
        path = str(call["path"]).split("?", 1)[0]
        if is_lookup(call["method"], path) or is_capture(path) or path.strip("/") == "":
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


def integration_calls(oracle: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def asked_first(oracle: list[dict[str, Any]], patients: list[str]) -> list[dict[str, Any]]:
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
        skip = is_lookup(call["method"], path) or is_capture(path)
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
