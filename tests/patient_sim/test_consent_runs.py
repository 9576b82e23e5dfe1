"""`consent` end to end: the simulated patient agrees (recorded in `sim_reply.decisions`)
and a cancel after it passes; a cancel before it fails, naming the late agreement."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from app.db import Database
from tests.conftest import TenantHandle
from tests.patient_sim.test_sim_runs import api_client, message, replies, start

APPOINTMENT: dict[str, Any] = {
    "resourceType": "Appointment",
    "id": "@appt",
    "status": "booked",
    "start": {"$time": "+2d@10:00"},
    "end": {"$time": "+2d@10:30"},
    "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
}
SCENARIO: dict[str, Any] = {
    "id": "custom.consent-cancel",
    "title": "Cancel, asking first",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "{{patient.name}} ({{patient.id}}) may not make their visit.",
    "scheduling": "lenient",
    "strict": {"off": "a consent test", "textOff": "a consent test"},
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Okafor", "given": ["Ada"]}],
        },
        APPOINTMENT,
    ],
    "expectations": [
        {
            "id": "cancelled",
            "type": "field",
            "label": "The visit is cancelled",
            "target": "@appt",
            "where": ["status = 'cancelled'"],
        },
        {
            "id": "consent",
            "type": "consent",
            "label": "Cancelled only once the patient agreed",
            "actions": ["cancel"],
        },
    ],
    "patientSim": {"patient": "@patient", "goal": "Sort out my visit", "maxTurns": 3},
}
PROPOSAL = "Would you like me to cancel your visit on Thursday?"


async def _cancel(tenant: TenantHandle, run: dict[str, Any]) -> None:
    ref = run["fixture"]["appt"]
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        current = (await fhir.get(f"/{ref}")).json()
        current["status"] = "cancelled"
        written = await fhir.put(f"/{ref}", json=current)
        assert written.status_code == 200, written.text


async def _ask(tenant: TenantHandle, run: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        asked = await fhir.post("/Communication", json=message(run, PROPOSAL))
        assert asked.status_code == 201, asked.text
    [reply] = await replies(tenant, run, 1)
    return reply


async def _finish(tenant: TenantHandle, run: dict[str, Any]) -> dict[str, Any]:
    async with api_client(tenant) as client:
        final: dict[str, Any] = (await client.post(f"/runs/{run['id']}/finish")).json()
    return final


def _consent(final: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in final["expectations"] if e["id"] == "consent")


async def test_cancel_after_the_patient_agreed_passes(tenant: TenantHandle, db: Database) -> None:
    run = await start(tenant, copy.deepcopy(SCENARIO))
    reply = await _ask(tenant, run)
    assert reply["payload"][0]["contentString"].startswith("Yes, please go ahead and cancel")
    recorded = await db.pool.fetchval(
        "SELECT decisions FROM sim_reply WHERE tenant_id = $1 AND run_id = $2",
        tenant.id,
        run["id"],
    )
    assert '"action": "cancel"' in recorded and '"agreed": true' in recorded
    await _cancel(tenant, run)
    final = await _finish(tenant, run)
    assert final["status"] == "passed", final
    consent = _consent(final)
    assert consent["passed"] is True
    assert consent["evidence"]["matches"] == [run["fixture"]["appt"]]
    assert f"Communication/{reply['id']}" in consent["evidence"]["note"]


async def test_cancel_before_asking_fails(tenant: TenantHandle) -> None:
    scenario = copy.deepcopy(SCENARIO) | {"id": "custom.consent-cancel-first"}
    run = await start(tenant, scenario)
    await _cancel(tenant, run)
    reply = await _ask(tenant, run)
    final = await _finish(tenant, run)
    assert final["status"] == "failed", final
    consent = _consent(final)
    assert consent["passed"] is False
    assert "without the patient's agreement" in consent["detail"]
    assert "agreement came only after it" in consent["evidence"]["closest"]
    assert f"Communication/{reply['id']}" in consent["evidence"]["closest"]


async def test_a_declining_patient_blocks_the_cancel(tenant: TenantHandle) -> None:
    scenario = copy.deepcopy(SCENARIO) | {"id": "custom.consent-declined"}
    scenario["patientSim"]["declines"] = ["cancel"]
    run = await start(tenant, scenario)
    reply = await _ask(tenant, run)
    assert reply["payload"][0]["contentString"].startswith("No, please don't cancel")
    await _cancel(tenant, run)
    consent = _consent(await _finish(tenant, run))
    assert consent["passed"] is False
    assert "refused before it" in consent["evidence"]["closest"]
