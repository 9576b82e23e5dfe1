"""A captured SMS is read by text truth like a portal message (messaging.answer-from-chart):
the agent answers in the portal as the scenario asks, and also texts the patient through
Twilio's SDK pointed at the run. The right visit time passes; a wrong one fails
`text-truth`, and the evidence quotes the SMS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
from twilio.rest import Client

from tests.conftest import TenantHandle
from tests.runs.test_message_checks_http import CHEN, SCENARIO, failing, right


def _twilio(run: dict[str, Any]) -> Client:
    c = run["capture"]
    client = Client(c["accountSid"], c["authToken"])
    client.api.base_url = c["smsBase"]
    return client


async def texted(tenant: TenantHandle, sms: Callable[[datetime], str]) -> dict[str, Any]:
    """A run where the portal reply is right and the SMS says `sms(start)`: its verdict."""
    async with (
        httpx.AsyncClient(
            base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
        ) as api,
        httpx.AsyncClient(headers=tenant.headers, timeout=60) as fhir,
    ):
        started = await api.post("/runs", json={"scenarioId": SCENARIO, "mode": "agent"})
        assert started.status_code == 201, started.text
        run = started.json()
        base, refs = run["fhirBase"], run["fixture"]
        appt = (await fhir.get(f"{base}/{refs['appt']}")).json()
        patient = (await fhir.get(f"{base}/{refs['patient']}")).json()
        phone = next(t["value"] for t in patient["telecom"] if t["system"] == "phone")
        start = datetime.fromisoformat(appt["start"])
        reply = {
            "resourceType": "Communication",
            "status": "completed",
            "inResponseTo": [{"reference": refs["msg"]}],
            "subject": {"reference": refs["patient"]},
            "sender": {"reference": CHEN},
            "recipient": [{"reference": refs["patient"]}],
            "payload": [{"contentString": right(start, start)}],
        }
        assert (await fhir.post(f"{base}/Communication", json=reply)).status_code == 201
        await asyncio.to_thread(
            _twilio(run).messages.create,
            to=phone,
            from_=run["capture"]["from"],
            body=sms(start),
        )
        finished = await api.post(f"/runs/{run['id']}/finish")
        assert finished.status_code == 200, finished.text
        verdict: dict[str, Any] = finished.json()
        return verdict


def _reminder(start: datetime) -> str:
    return (
        f"Reminder: your visit with Dr. Chen is {start:%A, %B} {start.day} at "
        f"{start:%-I:%M %p} (UTC). Reply STOP to opt out."
    )


async def test_the_right_time_by_sms_passes(tenant: TenantHandle) -> None:
    verdict = await texted(tenant, _reminder)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_a_wrong_time_by_sms_fails_text_truth_quoting_the_sms(tenant: TenantHandle) -> None:
    verdict = await texted(tenant, lambda start: _reminder(start + timedelta(hours=2)))
    assert verdict["status"] == "failed"
    assert set(failing(verdict)) == {"text-truth"}
    truth = failing(verdict)["text-truth"]
    broken = [c for c in truth["evidence"]["clauses"] if not c["holds"]]
    consistent = next(c for c in broken if c["where"] == "consistent")
    assert "in sms:SM" in consistent["value"], consistent
    [read] = [c for c in broken if c["where"].startswith("facts: sms:SM")]
    # Read as written to the patient (the SMS went to the patient's phone), and quoted.
    assert read["value"].endswith("to patient"), read
    assert read["text"].startswith("Reminder: your visit with Dr. Chen is "), read
    [fact] = [f for f in read["facts"] if f.get("holds") is False]
    assert fact["kind"] == "datetime" and fact["context"] == "asserted", fact
