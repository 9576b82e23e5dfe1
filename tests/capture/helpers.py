"""What the capture tests share: a scenario with integration stubs, starting runs of it;
a run of messaging.answer-from-chart that also sends the patient a text, for text truth."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import httpx

from app.openapi import SCENARIO_EXAMPLE
from tests.conftest import TenantHandle
from tests.runs.test_message_checks_http import CHEN, failing, right
from tests.runs.test_message_checks_http import SCENARIO as ANSWER_SCENARIO

# The API document's own example scenario, with stubs of a pharmacy integration.
SCENARIO: dict[str, Any] = {
    **copy.deepcopy(SCENARIO_EXAMPLE),
    "id": "custom.capture-pharmacy",
    "integrations": [
        {
            "name": "pharmacy",
            "method": "POST",
            "path": "/orders",
            "status": 201,
            "answer": {"orderId": "ord-1", "status": "accepted"},
        },
        {"name": "pharmacy", "method": "GET", "path": "/orders/*", "answer": {"status": "filled"}},
        {"name": "fax", "path": "/*", "status": 204},
    ],
}


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    )


async def start_run(tenant: TenantHandle, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """Import the scenario (the stubbed one by default) and start a run of it."""
    scenario = scenario or SCENARIO
    async with api_client(tenant) as client:
        imported = await client.post("/scenarios", json=scenario)
        assert imported.status_code == 201, imported.text
        started = await client.post("/runs", json={"scenarioId": scenario["id"]})
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    return run


async def finish(tenant: TenantHandle, run_id: str) -> None:
    async with api_client(tenant) as client:
        r = await client.post(f"/runs/{run_id}/cancel")
    assert r.status_code == 200, r.text


async def captures(tenant: TenantHandle, run_id: str, **params: Any) -> dict[str, Any]:
    async with api_client(tenant) as client:
        r = await client.get(f"/runs/{run_id}/captures", params=params)
    assert r.status_code == 200, r.text
    listed: dict[str, Any] = r.json()
    return listed


# --- text truth over captured texts (messaging.answer-from-chart) ------------------------

Send = Callable[[dict[str, Any], dict[str, Any], datetime], Awaitable[None]]


async def text_truth_verdict(tenant: TenantHandle, send: Send) -> dict[str, Any]:
    """The verdict of a run of messaging.answer-from-chart where the portal reply is right
    and the system also sends the patient a text: `send(run, patient, start)`, with the
    fixture patient and the visit's start."""
    async with (
        httpx.AsyncClient(
            base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
        ) as api,
        httpx.AsyncClient(headers=tenant.headers, timeout=60) as fhir,
    ):
        started = await api.post("/runs", json={"scenarioId": ANSWER_SCENARIO, "mode": "agent"})
        assert started.status_code == 201, started.text
        run = started.json()
        base, refs = run["fhirBase"], run["fixture"]
        appt = (await fhir.get(f"{base}/{refs['appt']}")).json()
        patient = (await fhir.get(f"{base}/{refs['patient']}")).json()
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
        await send(run, patient, start)
        finished = await api.post(f"/runs/{run['id']}/finish")
        assert finished.status_code == 200, finished.text
        verdict: dict[str, Any] = finished.json()
        return verdict


def failed_text_truth(verdict: dict[str, Any], ref_prefix: str) -> dict[str, Any]:
    """The verdict failed text truth and the message check's `grounded`, on the captured
    text `ref_prefix…` (`sms:SM`, `email:EM`), read as written to the patient with an
    asserted wrong date and time: its clause, which quotes the text."""
    assert verdict["status"] == "failed"
    # Text truth, and the message check too: a captured text is a message to it.
    assert set(failing(verdict)) == {"text-truth", "reply-answers"}
    grounded = failing(verdict)["reply-answers"]["detail"]
    assert "grounded fails" in grounded and f"in {ref_prefix}" in grounded, grounded
    truth = failing(verdict)["text-truth"]
    broken = [c for c in truth["evidence"]["clauses"] if not c["holds"]]
    consistent = next(c for c in broken if c["where"] == "consistent")
    assert f"in {ref_prefix}" in consistent["value"], consistent
    [read] = [c for c in broken if c["where"].startswith(f"facts: {ref_prefix}")]
    # Read as written to the patient (sent to the patient's phone or address).
    assert read["value"].endswith("to patient"), read
    [fact] = [f for f in read["facts"] if f.get("holds") is False]
    assert fact["kind"] == "datetime" and fact["context"] == "asserted", fact
    quoted: dict[str, Any] = read
    return quoted
