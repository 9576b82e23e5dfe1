"""Equivalent rewrites of a scenario's oracle (pure): the other direction of the check.

`app.orchestration.mutants` makes near misses that must fail; a rewrite here does the
same work another legitimate way and must still pass. A scenario whose expectations
fail a rewrite is brittle: it grades how the work was written, not what was done. The
rewrites are what real clients do differently:

- `offset`: every dateTime written in another zone (+05:30, -08:00), the same instant
  (a message's text is left as written: it is not a dateTime);
- `choice`: a choice element in its other type where FHIR allows it
  (`occurrenceDateTime` <-> `occurrencePeriod` with start = end, `effective[x]` alike);
- `transaction`: the writes in one transaction Bundle POSTed to the FHIR base, later
  entries referring to earlier creates by their `urn:uuid:` fullUrl (a write that a
  `before` expectation orders, "ask, then act", stays a call of its own);
- `put-create`: each create as a PUT with an id the client chose (again except the
  creates a `before` expectation looks for: it names their method);
- `create-then-patch`: each create made with the required elements only, then
  completed with a JSON Patch;
- `extras`: harmless additions to each written resource: a `note` (where the type has
  one), an `identifier`, a `meta.tag`, and on an Appointment a Location participant.

Most rewrites are plain oracle calls. The offset rewrite needs the expanded instants,
so it carries `expanded`, applied to each call's body after symbols and time tokens
are replaced (by the in-memory replay and the real one alike).
"""

from __future__ import annotations

import copy
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from app.grading.api_call import path_matches
from app.scenarios.calls import is_write
from app.scenarios.expansion import symbol_of
from app.scenarios.schema import AnyOfExpectation, ApiCallExpectation, OracleCall, Scenario

# The zones the offset rewrite writes in: east of UTC with a half hour, and far enough
# west that a morning UTC time falls on the day before.
OFFSETS = ("+05:30", "-08:00")
# Choice elements with a dateTime and a Period form, per resource type (R4).
CHOICES: dict[str, tuple[str, ...]] = {
    "ServiceRequest": ("occurrence",),
    "Observation": ("effective",),
    "DiagnosticReport": ("effective",),
    "MedicationStatement": ("effective",),
    "MedicationAdministration": ("effective",),
    "Procedure": ("performed",),
    "Condition": ("onset", "abatement"),
    "CommunicationRequest": ("occurrence",),
    "DeviceRequest": ("occurrence",),
    "ChargeItem": ("occurrence",),
}
# Types with `note` (Annotation) in R4; an Appointment has none (it has `comment`).
NOTE_TYPES = frozenset(
    {
        "AllergyIntolerance",
        "CarePlan",
        "Communication",
        "CommunicationRequest",
        "Condition",
        "DeviceRequest",
        "Goal",
        "Immunization",
        "MedicationAdministration",
        "MedicationRequest",
        "MedicationStatement",
        "Observation",
        "Procedure",
        "ServiceRequest",
        "Task",
    }
)
# What a create keeps in `create-then-patch` (FHIR's required elements of the types
# scenarios write, and the subject, so the reduced resource is still the patient's).
_REQUIRED = (
    "resourceType",
    "status",
    "intent",
    "subject",
    "patient",
    "participant",
    "code",
    "content",
    "beneficiary",
    "payor",
    "medicationCodeableConcept",
    "medicationReference",
)
EXTRA_SYSTEM = "urn:understudy:scenario-check"
EXTRA_LOCATION = "Location/demo-canonical-loc-main"
_UTC_DATETIME_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})"
)
Transform = Callable[[OracleCall, Any], Any]


@dataclass(frozen=True)
class Rewrite:
    kind: str  # offset | choice | transaction | put-create | create-then-patch | extras
    description: str
    calls: tuple[OracleCall, ...]
    # Applied to a call's body after expansion (None: sent as expanded).
    expanded: Transform | None = None
    # A transaction's creates that later calls name: fullUrl -> the symbol to save.
    saves: Mapping[str, str] = field(default_factory=dict)


def derive_rewrites(scenario: Scenario) -> list[Rewrite]:
    oracle = list(scenario.oracle)
    if not any(is_write(c) for c in oracle):
        return []
    out: list[Rewrite] = []
    out.extend(_offsets(oracle))
    out.extend(_choices(oracle))
    out.extend(_transaction(scenario, oracle))
    out.extend(_put_creates(scenario, oracle))
    out.extend(_create_then_patch(oracle))
    out.extend(_extras(oracle))
    return out


# --- offset ------------------------------------------------------------------------------


def in_offset(offset: str, call: OracleCall, body: Any) -> Any:
    """A write's expanded body with every zoned dateTime in `offset` (same instant)."""
    if not is_write(call):
        return body
    sign = -1 if offset[0] == "-" else 1
    hours, minutes = offset[1:].split(":")
    zone = timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))
    return _shift(body, zone)


def _shift(value: Any, zone: timezone) -> Any:
    if isinstance(value, dict):
        # A message's text is not a dateTime: a client writing its instants in another
        # zone still words its messages as it did (the time it tells the patient).
        return {k: v if k == "contentString" else _shift(v, zone) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift(v, zone) for v in value]
    if isinstance(value, str) and _UTC_DATETIME_RE.fullmatch(value):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(zone)
        spec = "milliseconds" if "." in value else "seconds"
        return moment.isoformat(timespec=spec)
    return value


def _offsets(oracle: list[OracleCall]) -> Iterator[Rewrite]:
    for offset in OFFSETS:
        yield Rewrite(
            "offset",
            f"every dateTime written in {offset} (the same instants)",
            tuple(oracle),
            partial(in_offset, offset),
        )


# --- choice types --------------------------------------------------------------------


def _swap_choices(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out = dict(body)
    swapped = []
    for element in CHOICES.get(str(body.get("resourceType")), ()):
        moment, period = out.get(f"{element}DateTime"), out.get(f"{element}Period")
        if moment is not None:
            del out[f"{element}DateTime"]
            out[f"{element}Period"] = {"start": moment, "end": copy.deepcopy(moment)}
            swapped.append(f"{element}DateTime as {element}Period")
        elif (
            isinstance(period, dict)
            and "start" in period
            and period.get("end", period["start"]) == period["start"]
        ):
            del out[f"{element}Period"]
            out[f"{element}DateTime"] = period["start"]
            swapped.append(f"{element}Period as {element}DateTime")
    return out, swapped


def _choices(oracle: list[OracleCall]) -> Iterator[Rewrite]:
    calls, what = [], []
    for index, call in enumerate(oracle):
        if is_write(call) and isinstance(call.body, dict):
            body, swapped = _swap_choices(call.body)
            if swapped:
                calls.append(call.model_copy(update={"body": body}))
                what += [f"call {index + 1}: {s}" for s in swapped]
                continue
        calls.append(call)
    if what:
        yield Rewrite("choice", "choice types swapped (" + "; ".join(what) + ")", tuple(calls))


# --- transaction Bundle -------------------------------------------------------------


def _saved_symbols(calls: list[OracleCall]) -> set[str]:
    return {c.save_as for c in calls if c.save_as}


def _mentions(value: Any, symbols: set[str]) -> bool:
    if isinstance(value, dict):
        return any(_mentions(v, symbols) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, symbols) for v in value)
    return symbol_of(value) in symbols


def _path_mentions(path: str, symbols: set[str]) -> bool:
    return any(segment[1:] in symbols for segment in re.split(r"[/?&=,|]", path) if segment)


def _to_urns(value: Any, urns: Mapping[str, str]) -> Any:
    """References to a symbol an earlier entry saves become that entry's fullUrl."""
    if isinstance(value, dict):
        return {
            k: urns.get(symbol_of(v) or "", v) if k == "reference" else _to_urns(v, urns)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_to_urns(v, urns) for v in value]
    return value


def _ordered_writes(scenario: Scenario) -> list[ApiCallExpectation]:
    """api_call expectations with `before` (alone or in an any_of): the calls they look
    for carry the order the scenario tests (ask, then act), so a transaction keeps them
    out and sends them where they were."""
    out: list[ApiCallExpectation] = []
    for expectation in scenario.expectations:
        group = (
            expectation.expectations if isinstance(expectation, AnyOfExpectation) else [expectation]
        )
        out += [e for e in group if isinstance(e, ApiCallExpectation) and e.before]
    return out


def _ordered_by(scenario: Scenario) -> Callable[[OracleCall], bool]:
    """Whether a call is one a `before` expectation looks for (by method and path), or,
    in a `patientSim` scenario, a message: the patient answers between calls, so a
    question and the write that waits for its answer (a cancellation the patient must
    agree to) are never one transaction."""
    ordered = _ordered_writes(scenario)
    talks = scenario.patient_sim is not None

    def matches(call: OracleCall) -> bool:
        path = urlsplit(call.path).path
        if talks and call.method == "POST" and path.strip("/") == "Communication":
            return True
        return any(e.method in ("*", call.method) and path_matches(e.path, path) for e in ordered)

    return matches


def _transaction(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Rewrite]:
    """The writes as entries of one transaction Bundle, sent where the last of them was
    (so every lookup that came before a write still does); later entries refer to an
    earlier create by its `urn:uuid:` fullUrl, and later calls by the symbol it saved
    (`Rewrite.saves`). Writes a `before` expectation looks for stay separate calls.
    Not derived when a call before the Bundle, or an entry's URL, names a symbol a
    bundled create saves, or a bundled write is a merge patch (a transaction's PATCH
    entry carries a JSON Patch)."""
    ordered = _ordered_by(scenario)

    def bundled(call: OracleCall) -> bool:
        return is_write(call) and not ordered(call)

    writes = [(i, c) for i, c in enumerate(oracle) if bundled(c)]
    if not writes:
        return
    last = writes[-1][0]
    saved = _saved_symbols([c for _, c in writes])
    for _, call in writes:
        if _path_mentions(call.path, saved) or (
            call.method == "PATCH" and not isinstance(call.body, list)
        ):
            return
    for call in oracle[:last]:
        if not bundled(call) and (_path_mentions(call.path, saved) or _mentions(call.body, saved)):
            return
    urns: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    for i, call in writes:
        url = urlsplit(call.path).path.lstrip("/")
        entry: dict[str, Any] = {"request": {"method": call.method, "url": url}}
        if call.method == "POST":
            entry["fullUrl"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'oracle-call-{i}')}"
        if call.body is not None:
            entry["resource"] = _to_urns(call.body, urns)
        if call.method == "POST" and call.save_as:
            urns[call.save_as] = entry["fullUrl"]
        entries.append(entry)
    bundle = {"resourceType": "Bundle", "type": "transaction", "entry": entries}
    kept = [c for c in oracle[:last] if not bundled(c)]
    after = list(oracle[last + 1 :])
    alone = len([c for c in oracle if is_write(c)]) - len(writes)
    yield Rewrite(
        "transaction",
        f"{len(writes)} write(s) as one transaction Bundle (POST to the FHIR base)"
        + (f"; {alone} write(s) a `before` expectation orders sent alone" if alone else ""),
        (*kept, OracleCall(method="POST", path="/", body=bundle), *after),
        saves={urn: symbol for symbol, urn in urns.items()},
    )


# --- creates as PUT, and create-then-patch -------------------------------------------


def _creates(oracle: list[OracleCall]) -> list[tuple[int, OracleCall, str]]:
    out = []
    for index, call in enumerate(oracle):
        segments = [s for s in urlsplit(call.path).path.split("/") if s]
        if (
            call.method == "POST"
            and is_write(call)
            and len(segments) == 1
            and isinstance(call.body, dict)
        ):
            out.append((index, call, segments[0]))
    return out


def client_id(scenario: Scenario, index: int) -> str:
    """An id the client chose for oracle call `index`'s create: fixed per scenario and
    call (a run's data is deleted after the check, so a later check may reuse it)."""
    digest = hashlib.sha256(scenario.id.encode()).hexdigest()[:10]
    return f"check-{digest}-{index + 1}"


def _put_creates(scenario: Scenario, oracle: list[OracleCall]) -> Iterator[Rewrite]:
    """Each create as a PUT with a client-chosen id, except the creates a `before`
    expectation looks for: it names their method (`POST /Communication` before acting:
    the order of ask and act can only be told from the calls)."""
    ordered = _ordered_by(scenario)
    creates = [c for c in _creates(oracle) if not ordered(c[1])]
    if not creates:
        return
    calls = list(oracle)
    for index, call, resource_type in creates:
        rid = client_id(scenario, index)
        calls[index] = call.model_copy(
            update={
                "method": "PUT",
                "path": f"/{resource_type}/{rid}",
                "body": {**call.body, "id": rid},
            }
        )
    yield Rewrite(
        "put-create",
        f"the {len(creates)} create(s) as PUT with a client-chosen id",
        tuple(calls),
    )


def _create_then_patch(oracle: list[OracleCall]) -> Iterator[Rewrite]:
    calls: list[OracleCall] = []
    done = 0
    creates = {index: resource_type for index, _, resource_type in _creates(oracle)}
    for index, call in enumerate(oracle):
        resource_type = creates.get(index)
        body = call.body
        rest = (
            {k: v for k, v in body.items() if k not in _REQUIRED}
            if resource_type is not None and isinstance(body, dict)
            else {}
        )
        if resource_type is None or not isinstance(body, dict) or not rest:
            calls.append(call)
            continue
        symbol = call.save_as or f"rewrite{index + 1}"
        reduced = {k: v for k, v in body.items() if k in _REQUIRED}
        calls.append(call.model_copy(update={"body": reduced, "save_as": symbol}))
        patch = [{"op": "add", "path": f"/{k}", "value": v} for k, v in rest.items()]
        calls.append(OracleCall(method="PATCH", path=f"/{resource_type}/@{symbol}", body=patch))
        done += 1
    if done:
        yield Rewrite(
            "create-then-patch",
            f"the {done} create(s) made with the required elements only, then completed "
            "with a JSON Patch",
            tuple(calls),
        )


# --- harmless extras ------------------------------------------------------------------


def with_extras(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out = copy.deepcopy(body)
    added = []
    resource_type = str(body.get("resourceType"))
    if resource_type in NOTE_TYPES:
        out["note"] = [*out.get("note", []), {"text": "Handled by the front desk."}]
        added.append("a note")
    out["identifier"] = [
        *out.get("identifier", []),
        {"system": EXTRA_SYSTEM, "value": "extra-identifier"},
    ]
    added.append("an identifier")
    meta = dict(out.get("meta") or {})
    meta["tag"] = [*meta.get("tag", []), {"system": EXTRA_SYSTEM, "code": "harmless"}]
    out["meta"] = meta
    added.append("a meta.tag")
    if resource_type == "Appointment":
        out["participant"] = [
            *out.get("participant", []),
            {"actor": {"reference": EXTRA_LOCATION}, "status": "accepted"},
        ]
        added.append("a Location participant")
    return out, added


def _extras(oracle: list[OracleCall]) -> Iterator[Rewrite]:
    calls, what = [], []
    for index, call in enumerate(oracle):
        if is_write(call) and call.method in ("POST", "PUT") and isinstance(call.body, dict):
            body, added = with_extras(call.body)
            calls.append(call.model_copy(update={"body": body}))
            what.append(f"call {index + 1}: " + ", ".join(added))
        else:
            calls.append(call)
    if what:
        yield Rewrite("extras", "harmless extras (" + "; ".join(what) + ")", tuple(calls))
