"""Workflow-mode runs end to end: the stimulus fires the tenant's subscription, a small
automation in the test (an asyncio task reading the receiver's requests) verifies each
signature, reads the payload's fhirBase and resource, and writes back through that base;
the run passes on its own, with the bonus webhook expectation holding. Doing nothing
fails at finish."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.db import Database
from app.runs import service as runs_service
from app.webhooks import service as webhooks_service
from tests.conftest import TenantHandle
from tests.webhooks.receiver import Receiver

OKAFOR = "Practitioner/demo-canonical-prac-okafor"
CLINIC = "Organization/demo-canonical-org"
CRITICAL = {"HH", "LL", "AA"}

Handler = Callable[[httpx.AsyncClient, dict[str, Any]], Awaitable[None]]


def api(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=30)


async def subscribe(client: httpx.AsyncClient, url: str, events: list[str]) -> Any:
    r = await client.post("/api/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    return r.json()


async def start_workflow(client: httpx.AsyncClient, scenario_id: str) -> dict[str, Any]:
    r = await client.post("/api/testing/runs", json={"scenarioId": scenario_id, "mode": "workflow"})
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    assert run["mode"] == "workflow" and run["status"] == "live"
    assert "brief" not in run  # the scenario's workflow text is the spec, not a brief
    return run


async def wait_for_run(
    client: httpx.AsyncClient, run_id: str, statuses: set[str], within: float = 10
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        view: dict[str, Any] = (await client.get(f"/api/testing/runs/{run_id}")).json()
        if view["status"] in statuses or time.monotonic() > deadline:
            return view
        await asyncio.sleep(0.1)


def expectation(view: dict[str, Any], expectation_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(e for e in view["expectations"] if e["id"] == expectation_id)
    return found


@dataclass
class Automation:
    """What a customer's workflow engine does: take each request the receiver got,
    verify it, skip duplicates (by webhook-id), and run the handler for its type."""

    receiver: Receiver
    secret: str
    fhir: httpx.AsyncClient
    handlers: Mapping[str, Handler]
    seen: set[str] = field(default_factory=set)
    handled: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    errors: list[BaseException] = field(default_factory=list)

    async def run(self) -> None:
        index = 0
        while True:
            while index < len(self.receiver.received):
                got = self.receiver.received[index]
                index += 1
                try:
                    event: dict[str, Any] = Webhook(self.secret).verify(got.body, got.headers)
                except WebhookVerificationError:
                    self.rejected += 1
                    continue
                if event["id"] in self.seen:
                    continue
                self.seen.add(event["id"])
                handler = self.handlers.get(event["type"])
                if handler is None:
                    continue
                try:
                    await handler(self.fhir, event)
                except Exception as exc:  # surfaced by the test, not lost in the task
                    self.errors.append(exc)
                self.handled.append(event)
            await asyncio.sleep(0.02)


@asynccontextmanager
async def automation(
    tenant: TenantHandle, receiver: Receiver, secret: str, handlers: Mapping[str, Handler]
) -> AsyncIterator[Automation]:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as fhir:
        auto = Automation(receiver, secret, fhir, handlers)
        task = asyncio.create_task(auto.run())
        try:
            yield auto
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert auto.errors == [], auto.errors
    assert auto.rejected == 0


async def created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


# --- the automations ---------------------------------------------------------------------


async def route_critical_result(fhir: httpx.AsyncClient, event: dict[str, Any]) -> None:
    """results.critical-lab: a final report with a critical result → an urgent Task
    for the clinician who ordered it (the requester of the report's basedOn order)."""
    report = event["resource"]
    if report["resourceType"] != "DiagnosticReport":
        return
    base = event["fhirBase"]
    critical = []
    for result in report.get("result", []):
        observation = (await fhir.get(f"{base}/{result['reference']}")).json()
        codes = {
            c.get("code")
            for concept in observation.get("interpretation", [])
            for c in concept.get("coding", [])
        }
        if codes & CRITICAL:
            critical.append(observation)
    if not critical:
        return
    order = (await fhir.get(f"{base}/{report['basedOn'][0]['reference']}")).json()
    values = ", ".join(
        f"{o['code']['text']} {o['valueQuantity']['value']} {o['valueQuantity']['unit']}"
        for o in critical
    )
    task = {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "priority": "urgent",
        "description": f"CRITICAL RESULT: {values}. Please review now.",
        "focus": {"reference": f"DiagnosticReport/{report['id']}"},
        "for": report["subject"],
        "basedOn": report["basedOn"],
        "requester": {"reference": CLINIC},
        "owner": order["requester"],
    }
    await created(await fhir.post(f"{base}/Task", json=task))


async def triage_portal_message(fhir: httpx.AsyncClient, event: dict[str, Any]) -> None:
    """messaging.portal-triage: reply to the patient who wrote, and file a routine Task
    owned by the clinician the message was addressed to."""
    message = event["resource"]
    base = event["fhirBase"]
    patient = message["sender"]["reference"]
    addressed = message["recipient"][0]["reference"]
    reply = {
        "resourceType": "Communication",
        "status": "completed",
        "inResponseTo": [{"reference": f"Communication/{message['id']}"}],
        "subject": {"reference": patient},
        "sender": {"reference": CLINIC},
        "recipient": [{"reference": patient}],
        "payload": [
            {
                "contentString": "Thanks for your message. We will post your vaccination "
                "record to the portal within 2-3 business days."
            }
        ],
    }
    sent = await created(await fhir.post(f"{base}/Communication", json=reply))
    task = {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "priority": "routine",
        "description": "Portal request: send the patient a copy of her immunization record.",
        "focus": {"reference": f"Communication/{message['id']}"},
        "for": {"reference": patient},
        "owner": {"reference": addressed},
        "input": [
            {"type": {"text": "Acknowledgement"}, "valueReference": {"reference": sent["id"]}}
        ],
    }
    await created(await fhir.post(f"{base}/Task", json=task))


async def reach_out_after_noshow(fhir: httpx.AsyncClient, event: dict[str, Any]) -> None:
    """scheduling.noshow-outreach: a courteous message to the patient, naming the missed
    appointment; nothing rebooked."""
    appointment = event["resource"]
    base = event["fhirBase"]
    patient = next(
        p["actor"]["reference"]
        for p in appointment["participant"]
        if p.get("actor", {}).get("reference", "").startswith("Patient/")
    )
    outreach = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": patient},
        "about": [{"reference": f"Appointment/{appointment['id']}"}],
        "sender": {"reference": CLINIC},
        "recipient": [{"reference": patient}],
        "payload": [
            {
                "contentString": "We missed you at your blood pressure follow-up today. "
                "Please reply or call us to rebook."
            }
        ],
    }
    await created(await fhir.post(f"{base}/Communication", json=outreach))


# --- the runs ------------------------------------------------------------------------------


async def test_critical_lab_automation_passes(tenant: TenantHandle, receiver: Receiver) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["result.final"])
        handlers = {"result.final": route_critical_result}
        async with automation(tenant, receiver, sub["secret"], handlers) as auto:
            began = time.monotonic()
            run = await start_workflow(client, "results.critical-lab")
            final = await wait_for_run(client, run["id"], {"passed", "failed", "timed_out"})
            took = time.monotonic() - began
        r = await client.get(f"{run['fhirBase']}/Task", params={"_count": "50"})
        tasks = [e["resource"] for e in r.json().get("entry", [])]

    assert final["status"] == "passed", final
    assert took < 8
    assert expectation(final, "urgent-task")["passed"] is True
    assert expectation(final, "no-misrouted-task")["passed"] is True
    assert expectation(final, "no-prescribing")["passed"] is True
    bonus = expectation(final, "result-final-delivered")
    assert bonus["passed"] is True and bonus["required"] is False
    fixture = run["fixture"]
    # Three result.final events (two Observations, the report); one Task, for Okafor.
    assert sorted(
        f"{e['resource']['resourceType']}/{e['resource']['id']}" for e in auto.handled
    ) == sorted([fixture["potassium"], fixture["creatinine"], fixture["report"]])
    assert {e["runId"] for e in auto.handled} == {run["id"]}
    assert {e["fhirBase"] for e in auto.handled} == {run["fhirBase"]}
    assert len(tasks) == 1
    assert tasks[0]["owner"]["reference"] == OKAFOR
    assert tasks[0]["focus"]["reference"] == fixture["report"]
    assert "6.8" in tasks[0]["description"]


async def test_portal_triage_automation_passes(tenant: TenantHandle, receiver: Receiver) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["message.received"])
        handlers = {"message.received": triage_portal_message}
        async with automation(tenant, receiver, sub["secret"], handlers) as auto:
            run = await start_workflow(client, "messaging.portal-triage")
            final = await wait_for_run(client, run["id"], {"passed", "failed", "timed_out"})

    assert final["status"] == "passed", final
    for expectation_id in ("reply", "triage-task", "no-message-to-anyone-else", "no-escalation"):
        assert expectation(final, expectation_id)["passed"] is True, expectation_id
    assert expectation(final, "message-received-delivered")["passed"] is True
    [event] = auto.handled
    assert f"Communication/{event['resource']['id']}" == run["fixture"]["msg"]
    assert event["runId"] == run["id"] and event["fhirBase"] == run["fhirBase"]


async def test_noshow_outreach_automation_passes(
    tenant: TenantHandle, receiver: Receiver, db: Database
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["appointment.noshow"])
        handlers = {"appointment.noshow": reach_out_after_noshow}
        async with automation(tenant, receiver, sub["secret"], handlers) as auto:
            run = await start_workflow(client, "scheduling.noshow-outreach")
            final = await wait_for_run(client, run["id"], {"passed", "failed", "timed_out"})

    assert final["status"] == "passed", final
    assert expectation(final, "outreach")["passed"] is True
    assert expectation(final, "noshow-delivered")["passed"] is True
    # The fixture's booked appointment (a setup write) emitted nothing; the stimulus
    # (booked → noshow) emitted the one appointment.noshow.
    [event] = auto.handled
    assert event["resource"]["status"] == "noshow"
    assert event["resource"]["meta"]["versionId"] == "2"
    assert f"Appointment/{event['resource']['id']}" == run["fixture"]["appt"]
    # What the workflow was sent counts as shown for the message checks' `grounded`: the
    # version its webhook payload carried (the noshow), besides the fixture as set up.
    async with db.pool.acquire() as conn:
        delivered = await webhooks_service.run_delivered_versions(conn, tenant.id, run["id"])
        assert delivered == [("Appointment", event["resource"]["id"], 2)]
        row = await runs_service.get_run(conn, tenant.id, run["id"])
        expectations = runs_service.expectations_of(row)
        snapshot = await runs_service.build_snapshot(conn, row, expectations, final=True)
    sent = [
        body
        for body in snapshot.shown
        if isinstance(body, dict)
        and body.get("id") == event["resource"]["id"]
        and body.get("status") == "noshow"
    ]
    assert sent, "the webhook payload's version is among what the run was shown"


async def test_an_automation_that_does_nothing_fails(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["result.final"])
        run = await start_workflow(client, "results.critical-lab")
        got = await receiver.wait_for(3)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            listed = (await client.get(f"/api/webhooks/{sub['id']}/deliveries")).json()
            if all(d["status"] == "delivered" for d in listed["deliveries"]):
                break
            await asyncio.sleep(0.05)
        r = await client.post(f"/api/testing/runs/{run['id']}/finish")
        assert r.status_code == 200, r.text
        final = r.json()
    assert len(got) == 3
    assert all(Webhook(sub["secret"]).verify(g.body, g.headers)["runId"] == run["id"] for g in got)
    assert final["status"] == "failed"
    assert final["passed"] is False
    assert expectation(final, "urgent-task")["passed"] is False
    # The delivery happened; only the automation's part is missing.
    assert expectation(final, "result-final-delivered")["passed"] is True
