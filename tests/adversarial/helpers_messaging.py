"""Bodies and small moves the messaging, medications, results, intake and inbox agents
share: a reply in the patient's thread, a Task, marking the incoming message read, and the
collateral edits wrong agents make (a drug put on hold, a problem added or retired, the
Patient's telecom rewritten, a report's conclusion edited)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from tests.adversarial.harness import ORG, REPLY_WITHIN, AgentError, Run, iso, urn

CHICAGO = ZoneInfo("America/Chicago")
KOLKATA = ZoneInfo("Asia/Kolkata")
OKAFOR = "Practitioner/demo-canonical-prac-okafor"
CHEN_ROLE = "PractitionerRole/demo-canonical-role-chen"
PATEL_ROLE = "PractitionerRole/demo-canonical-role-patel"
OKAFOR_ROLE = "PractitionerRole/demo-canonical-role-okafor"
SNOMED = "http://snomed.info/sct"
READ_TAG = {"system": "urn:example:inbox", "code": "read", "display": "Read by staff"}


def now(zone: ZoneInfo | None = None) -> str:
    return iso(datetime.now(UTC), zone)


def reply(
    run: Run,
    text: str,
    *,
    sender: str = ORG,
    in_response_to: str | None = "msg",
    **extra: Any,
) -> dict[str, Any]:
    """A completed Communication to the fixture patient, in the thread of `in_response_to`."""
    patient = run.ref("patient")
    body: dict[str, Any] = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": patient},
        "sent": now(),
        "sender": {"reference": sender},
        "recipient": [{"reference": patient}],
        "payload": [{"contentString": text}],
    }
    if in_response_to:
        body["inResponseTo"] = [{"reference": run.ref(in_response_to)}]
    body.update(extra)
    return body


def task(
    run: Run,
    owner: str,
    description: str,
    *,
    focus: str | None = "msg",
    priority: str | None = "routine",
    status: str = "requested",
    **extra: Any,
) -> dict[str, Any]:
    """A Task for the fixture patient; `focus` is a fixture symbol or a "Type/id"."""
    body: dict[str, Any] = {
        "resourceType": "Task",
        "status": status,
        "intent": "order",
        "description": description,
        "for": {"reference": run.ref("patient")},
        "authoredOn": now(),
        "requester": {"reference": ORG},
        "owner": {"reference": owner},
    }
    if priority:
        body["priority"] = priority
    if focus:
        body["focus"] = {"reference": focus if "/" in focus else run.ref(focus)}
    body.update(extra)
    return body


async def post_all(run: Run, *bodies: dict[str, Any]) -> dict[str, Any]:
    """Several creates in one transaction Bundle (all land at once, so none is graded
    alone)."""
    return await run.transaction(
        [
            {"method": "POST", "url": b["resourceType"], "fullUrl": urn(), "resource": b}
            for b in bodies
        ]
    )


async def put_new(run: Run, body: dict[str, Any], client_id: str) -> dict[str, Any]:
    """Create with a client-chosen id (update-as-create)."""
    rid = f"{client_id}-{run.rid('patient')}"[:64]
    return await run.put(f"{body['resourceType']}/{rid}", {**body, "id": rid})


async def mark_read(run: Run, symbol: str = "msg") -> None:
    """Marks the incoming message read the way FHIR allows without touching its content:
    a `meta.tag` (Communication has no read flag; its status is already completed)."""
    msg = await run.read(symbol)
    meta = msg.setdefault("meta", {})
    meta["tag"] = [*meta.get("tag", []), READ_TAG]
    await run.update(msg)


async def hold_statement(run: Run, medication: str, why: str, status: str = "on-hold") -> None:
    """Records the patient's drug as on hold (a MedicationStatement nobody asked for)."""
    med = await run.read(medication)
    await run.create(
        {
            "resourceType": "MedicationStatement",
            "status": status,
            "medicationCodeableConcept": med["medicationCodeableConcept"],
            "subject": {"reference": run.ref("patient")},
            "basedOn": [{"reference": run.ref(medication)}],
            "dateAsserted": now(),
            "note": [{"text": why}],
        }
    )


async def add_problem(run: Run, text: str, code: str, display: str) -> None:
    """Adds a problem-list Condition from a message (nobody asked to)."""
    await run.create(
        {
            "resourceType": "Condition",
            "clinicalStatus": {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                        "code": "active",
                    }
                ]
            },
            "code": {
                "coding": [{"system": SNOMED, "code": code, "display": display}],
                "text": text,
            },
            "subject": {"reference": run.ref("patient")},
            "recordedDate": now(),
        }
    )


async def retire_condition(run: Run, symbol: str) -> None:
    """Sets a fixture Condition to entered-in-error."""
    cond = await run.read(symbol)
    cond["verificationStatus"] = {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                "code": "entered-in-error",
            }
        ]
    }
    cond.pop("clinicalStatus", None)  # not allowed with entered-in-error
    await run.update(cond)


async def rewrite_telecom(run: Run, email: str = "portal-only@example.net") -> None:
    """Rewrites the Patient's telecom ("reach me on the portal")."""
    patient = await run.read("patient")
    patient["telecom"] = [{"system": "email", "value": email, "use": "home", "rank": 1}]
    await run.update(patient)


async def edit_conclusion(run: Run, text: str, symbol: str = "report") -> None:
    """Writes onto the lab's DiagnosticReport conclusion."""
    report = await run.read(symbol)
    report["conclusion"] = f"{report.get('conclusion', '')} {text}".strip()
    await run.update(report)


def when(moment: str) -> datetime:
    """A FHIR dateTime as a UTC datetime."""
    return datetime.fromisoformat(moment).astimezone(UTC)


def short_date(moment: datetime) -> str:
    """'Fri, Dec 11 at 15:30' (UTC, the clinic's clock)."""
    m = moment.astimezone(UTC)
    return f"{m:%a}, {m:%b} {m.day} at {m:%H:%M}"


def tenant_base(run: Run, path: str = "") -> str:
    """The tenant-wide FHIR base (what a workflow engine with one base URL writes to),
    rather than the run's own view."""
    return f"{run.tenant.server}/api/fhir/r4/{path.lstrip('/')}".rstrip("/")


async def post_tenant(run: Run, *bodies: dict[str, Any]) -> None:
    """Creates each body through the tenant-wide base, one POST each."""
    for body in bodies:
        await run.post(tenant_base(run, body["resourceType"]), body)


async def reply_to(run: Run, sent: dict[str, Any], within: float = REPLY_WITHIN) -> str:
    """Waits for the simulated patient's reply to a message already sent: its text (for
    agents that act before the answer comes)."""
    mine = f"Communication/{sent['id']}"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for c in await run.search("Communication", sender=run.ref("patient")):
            if any(r.get("reference") == mine for r in c.get("inResponseTo", [])):
                return " ".join(p.get("contentString", "") for p in c.get("payload", []))
        await asyncio.sleep(0.15)
    raise AgentError(f"no reply to {mine} within {within} s")
