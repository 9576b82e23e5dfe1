"""A run's snapshot for grading (`app.grading.snapshot.RunSnapshot`), read from the
database: the fixture as it is now, what the system under test changed, its traced
calls, the webhook deliveries, what the simulated patient revealed and, when a message
check needs it, what the system was shown. Each part is read only when an expectation
looks at it."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, cast

from pydantic import TypeAdapter

from app.capture import service as capture_service
from app.db import Conn
from app.fhir import service as fhir_service
from app.grading.consent import opt_outs
from app.grading.snapshot import (
    Call,
    ChangedResource,
    Delivery,
    RunSnapshot,
    SentText,
    Version,
)
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.urls import FHIR_PREFIX, RUNS_PREFIX
from app.patient_sim.report import consent_decisions, revealed_facts
from app.runs.row import RunRow
from app.scenarios.schema import ConsentExpectation, Expectation, walk_expectations
from app.tenants.directory import aliases as directory_aliases
from app.tenants.directory import names as directory_names
from app.trace import service as trace_service
from app.webhooks import service as webhooks_service

_EXPECTATIONS = TypeAdapter(list[Expectation])


def expectations_of(run: RunRow) -> list[Expectation]:
    return _EXPECTATIONS.validate_python(run.expectations)


def _relative_path(path: str) -> str:
    """Trace paths as api_call expectations see them: FHIR calls relative to the base."""
    if path.startswith(FHIR_PREFIX):
        return path[len(FHIR_PREFIX) :] or "/"
    if path.startswith(RUNS_PREFIX + "/"):
        marker = "/fhir/r4"
        index = path.find(marker)
        if index >= 0:
            return path[index + len(marker) :] or "/"
    return path


_CAPTURE_PATH = re.compile(r"^/api/testing/runs/[^/]+/(sms|integrations)(/.*)?$")
_TWILIO_MESSAGES = re.compile(r"^/2010-04-01/Accounts/[^/]+/Messages(?:/([^/]+?))?\.json$")


def _call_key(transport: str, method: str, path: str) -> tuple[str, str]:
    """A traced call's method and path as api_call expectations match them: FHIR calls
    relative to the FHIR base; a captured effect's call by what it did, whichever way it
    came (docs/grading.md "api_call"): an SMS sent is `POST /sms/Messages` (over the
    Twilio API or MCP's `send_sms`), one read `GET /sms/Messages/<sid>`, an e-mail `POST
    /email` (over SMTP or MCP's `send_email`), an integration call `<method>
    /integrations/<name>/<path>`."""
    if transport == "email":
        return "POST", "/email"
    if transport == "sms" and path == "/mcp":
        return "POST", "/sms/Messages"
    found = _CAPTURE_PATH.match(path) if transport in ("sms", "integration") else None
    if found is None:
        return method, _relative_path(path)
    kind, rest = found.group(1), found.group(2) or ""
    if kind == "integrations":
        return method, "/integrations" + rest
    twilio = _TWILIO_MESSAGES.match(rest)
    if twilio is None:
        return method, "/sms" + rest
    return method, "/sms/Messages" + (f"/{twilio.group(1)}" if twilio.group(1) else "")


def _resource_types(expectations: list[Expectation], scope: str) -> set[str] | None:
    """The resource types grading needs of a scope; None: every type (a `changes`
    expectation looks at everything written)."""
    out: set[str] = set()
    for e in walk_expectations(expectations):
        if e.type == "changes" and e.scope in (scope, "tenant"):
            return None
        if e.type in ("reference", "text-truth"):
            return None
        if e.type == "resource" and e.scope == scope:
            out.add(e.resource_type)
        elif e.type == "message" and scope == "patient":
            out.add("Communication")
        elif e.type == "consent" and scope == "patient" and e.actions:
            out |= CONSENT_TYPES
    return out


# What the `consent` expectation's actions write (docs/grading.md "Consent").
CONSENT_TYPES = frozenset({"Appointment", "ServiceRequest", "MedicationRequest", "Communication"})
# The resources whose every version `consent` reads: when a booking became cancelled, a
# draft order active.
VERSIONED_TYPES = ("Appointment", "MedicationRequest", "ServiceRequest")
# Captured integration calls read per grading pass, at most: far more than a run makes.
MAX_INTEGRATION_CALLS = 1000
# Who wrote a version other than the system under test.
_NOT_SYSTEM = frozenset({"setup", "stimulus", "sim"})


def _consents(expectations: list[Expectation]) -> list[ConsentExpectation]:
    return [e for e in walk_expectations(expectations) if isinstance(e, ConsentExpectation)]


def _has_changes(expectations: list[Expectation]) -> bool:
    """Whether grading needs each update's version from before the run."""
    return any(e.type in ("changes", "reference") for e in walk_expectations(expectations))


# What the system writes text in (messages, and `text-truth`'s staff texts).
TEXT_TYPES = frozenset(
    {
        "Communication",
        "Task",
        "ServiceRequest",
        "MedicationRequest",
        "Appointment",
        "DocumentReference",
    }
)


def needs_grounding(expectations: list[Expectation]) -> bool:
    """Whether a message check needs what the system was shown (`grounded`)."""
    return any(
        (e.type == "message" and e.grounded) or e.type == "text-truth"
        for e in walk_expectations(expectations)
    )


async def _shown(conn: Conn, run: RunRow, snapshot: RunSnapshot, until: datetime) -> list[Any]:
    """What the system under test was shown: the brief and the run's start (so "tomorrow"
    can be checked against a date), the fixture and stimulus as they read before its
    writes, the patient's messages, the resource versions its webhook deliveries carried
    (workflow mode), and the kept response bodies of its reads and operations (`GET`,
    `$`-operations, `_search`: a write's answer echoes what it wrote).
    """
    shown: list[Any] = [run.brief or "", run.started_at.date().isoformat()]
    befores = {f"{c.resource_type}/{c.id}": c.before for c in snapshot.changed}
    for symbol, ref in snapshot.fixture.items():
        body = befores.get(ref) or snapshot.current.get(symbol)
        if body is not None:
            shown.append(body)
    for patient in snapshot.patient_refs:
        for message in await fhir_service.communications_of(conn, run.tenant_id, run.id, patient):
            body = jsontext.loads(message.resource)
            sender = (body.get("sender") or {}).get("reference")
            if sender in snapshot.patient_refs:
                shown.append(body)
    sent = await webhooks_service.run_delivered_versions(conn, run.tenant_id, run.id)
    if sent:  # a workflow was sent these versions in its webhook payloads
        wanted = {(t, i, v) for t, i, v in sent}
        for version in await fhir_service.versions_of(
            conn, run.tenant_id, sorted({(t, i) for t, i, _ in sent})
        ):
            key = (version.resource_type, version.id, version.version_id)
            if key in wanted and version.resource is not None:
                shown.append(jsontext.loads(version.resource))
    for seen in await trace_service.responses_of_run(
        conn, tenant_id=run.tenant_id, run_id=run.id, since=run.started_at, until=until
    ):
        path = seen.path
        if seen.method == "GET" or "/$" in path or path.endswith("/_search"):
            # Kept whole up to the cap, a longer Bundle as its resources, else cut text.
            shown.append(_parsed(seen.response))
    return shown


async def build_snapshot(
    conn: Conn, run: RunRow, expectations: list[Expectation], *, final: bool
) -> RunSnapshot:
    now = utcnow()
    refs = run.fixture
    pairs = [cast(tuple[str, str], tuple(ref.split("/", 1))) for ref in refs.values()]
    rows = await fhir_service.current_or_deleted(conn, run.tenant_id, pairs)
    by_ref = {
        f"{r.resource_type}/{r.id}": (
            None if r.deleted or r.resource is None else jsontext.loads(r.resource)
        )
        for r in rows
    }
    current = {symbol: by_ref.get(ref) for symbol, ref in refs.items()}
    changed = await _changed(conn, run, expectations)
    bodies = _reads_calls(expectations)
    calls = [
        Call(
            at=c.at,
            method=key[0],
            path=key[1],
            query=c.query,
            status=c.status,
            transport=c.transport,
            refs=c.refs,
            request=_parsed(c.request),
            response=_parsed(c.response),
        )
        for c in await trace_service.calls_for_grading(
            conn,
            tenant_id=run.tenant_id,
            run_id=run.id,
            since=run.started_at,
            until=now,
            with_bodies=bodies,
        )
        # A full URL is the sandbox's own call out (a reply posted to the run's SMS
        # webhook), not the system's.
        if not c.path.startswith(("http://", "https://"))
        for key in [_call_key(c.transport, c.method, c.path)]
    ]
    deliveries = [
        Delivery(at=at, event=event, resource_ref=ref)
        for at, event, ref in await webhooks_service.run_deliveries(conn, run.tenant_id, run.id)
    ]
    revealed, patient_replies = (
        await revealed_facts(conn, run.tenant_id, run.id) if _asks(expectations) else ([], 0)
    )
    snapshot = RunSnapshot(
        run_id=run.id,
        started_at=run.started_at,
        now=now,
        deadline=run.deadline,
        fixture=dict(refs),
        current=current,
        patient_refs=frozenset(r for r in refs.values() if r.startswith("Patient/")),
        changed=changed,
        calls=calls,
        deliveries=deliveries,
        webhooks_supported=True,
        revealed=revealed,
        patient_replies=patient_replies,
        final=final,
        aliases=directory_aliases(),
        names=directory_names(),
    )
    consents = _consents(expectations)
    if _reads_texts(expectations) or consents:
        snapshot.sent = [
            SentText(f"{e.kind}:{e.id}", e.kind, e.at, e.to_address or "", e.body or "")
            for e in await capture_service.sent_texts(conn, run.tenant_id, run.id)
        ]
    if needs_grounding(expectations) and (
        snapshot.sent
        or any(
            c.resource_type in TEXT_TYPES and (c.via_run or c.run_id is not None) for c in changed
        )
    ):
        # Read (and sent over the wire) only once there is a message to check: a run
        # is graded after every write, most of them before anything was said.
        snapshot.shown = await _shown(conn, run, snapshot, now)
    if consents:
        await _read_consent(conn, run, snapshot, consents)
    return snapshot


async def _read_consent(
    conn: Conn, run: RunRow, snapshot: RunSnapshot, consents: list[ConsentExpectation]
) -> None:
    """What `consent` reads: the patient's decisions, who takes no SMS, the integration
    calls (for `send`) and every version of the bookings and prescriptions changed."""
    patients = sorted(snapshot.patient_refs)
    actions = {a for e in consents for a in e.actions}
    if actions:
        snapshot.decisions = await consent_decisions(conn, run.tenant_id, run.id, patients)
    if "send" in actions:
        snapshot.integration_calls = [
            SentText(f"integration:{e.id}", e.kind, e.at, e.to_address or "", e.subject or "")
            for e in await capture_service.list_effects(
                conn, run.tenant_id, run.id, after=0, limit=MAX_INTEGRATION_CALLS
            )
            if e.kind == "integration" and e.direction == "outbound"
        ]
    refs = sorted(
        (c.resource_type, c.id) for c in snapshot.changed if c.resource_type in VERSIONED_TYPES
    )
    if actions and refs:
        for v in reversed(await fhir_service.versions_of(conn, run.tenant_id, refs)):
            snapshot.versions.setdefault(f"{v.resource_type}/{v.id}", []).append(
                Version(
                    at=v.last_updated,
                    resource=None if v.resource is None else jsontext.loads(v.resource),
                    by_system=v.source not in _NOT_SYSTEM and v.last_updated >= run.started_at,
                )
            )
    texted = any(s.kind == "sms" for s in snapshot.sent)
    if any(e.opt_out for e in consents) and (texted or snapshot.final):
        # Read once there is a text to check (most passes grade a run that sent none),
        # and at the end: the scenario check replays from a final snapshot.
        resources = [r for r in snapshot.current.values() if r]
        for patient in patients:
            chart = await fhir_service.patient_chart(
                conn, run.tenant_id, patient.removeprefix("Patient/")
            )
            resources += [jsontext.loads(c.resource) for c in chart]
        snapshot.opted_out = opt_outs(resources, patients)


def _reads_calls(expectations: list[Expectation]) -> bool:
    """Whether an api_call expectation's `where` reads what calls asked and answered."""
    return any(e.type == "api_call" and e.where for e in walk_expectations(expectations))


def _parsed(text: str | None) -> Any:
    """A kept body as JSON, else as its text (cut at the cap, or not JSON)."""
    if text is None:
        return None
    try:
        return jsontext.loads(text)
    except ValueError:
        return text


def _reads_texts(expectations: list[Expectation]) -> bool:
    """Whether an expectation reads the texts the run sent out (captured SMS and e-mail):
    text truth and message checks read them like messages, consent the SMS it sent."""
    return any(
        e.type in ("text-truth", "message", "consent", "reference")
        for e in walk_expectations(expectations)
    )


def _asks(expectations: list[Expectation]) -> bool:
    """Whether any expectation (any_of children included) is an `asked`."""
    return any(e.type == "asked" for e in walk_expectations(expectations))


async def _changed(
    conn: Conn, run: RunRow, expectations: list[Expectation]
) -> list[ChangedResource]:
    """Resources the system under test wrote during the run, filtered in SQL to the types
    the expectations ask about: the run's own (patient scope) and, for tenant-scope
    expectations, any tenant write in the run's window not owned by another run."""
    own = _resource_types(expectations, "patient")
    tenant = _resource_types(expectations, "tenant")
    if own is not None and not own and tenant is not None and not tenant:
        return []
    with_before = _has_changes(expectations)
    rows = await fhir_service.resources_changed_by_run(
        conn,
        run.tenant_id,
        run.id,
        own_types=None if own is None else sorted(own),
        tenant_types=None if tenant is None else sorted(tenant),
        since=run.started_at,
        with_before=with_before,
    )
    out: list[ChangedResource] = []
    for r in rows:
        out.append(
            ChangedResource(
                resource_type=r.resource_type,
                id=r.id,
                resource=None if r.deleted or r.resource is None else jsontext.loads(r.resource),
                first_changed_at=r.first_at,
                last_changed_at=r.last_at,
                created=r.created,
                all_refs=tuple(k.split("|", 1)[1] for k in r.all_refs or ()),
                run_id=r.run_id,
                before=jsontext.loads(r.before) if with_before and r.before else None,
                via_run=r.via_run,
            )
        )
    return out
