"""`consent` end to end: the simulated patient agrees (recorded in `sim_reply.decisions`)
and a cancel after it passes; a cancel before it fails, naming the late agreement."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import orjson

from app.db import Database, Scopes
from app.llm.client import LlmClient
from app.runs import simulated_patient as sim_service
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.llm.fake_llm import FakeLlm
from tests.patient_sim.test_sim_runs import api_client, llm_settings, message, replies, start

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


async def test_the_patients_own_request_covers_the_cancel(tenant: TenantHandle) -> None:
    """A stimulus message from the patient asking for the cancel is their agreement: the
    system may cancel without asking again."""
    scenario = copy.deepcopy(SCENARIO) | {"id": "custom.consent-requested"}
    scenario["stimulus"] = [
        {
            "resourceType": "Communication",
            "id": "@ask",
            "status": "completed",
            "subject": {"reference": "@patient"},
            "sender": {"reference": "@patient"},
            "recipient": [{"reference": "Organization/demo-canonical-org"}],
            "payload": [{"contentString": "Hi, please cancel my appointment on Thursday."}],
        }
    ]
    run = await start(tenant, scenario)
    await _cancel(tenant, run)
    consent = _consent(await _finish(tenant, run))
    assert consent["passed"] is True, consent
    assert run["fixture"]["ask"] in consent["evidence"]["note"]


async def test_llm_patient_decisions_are_read_from_its_reply(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    scenario = copy.deepcopy(SCENARIO) | {"id": "custom.consent-llm"}
    scenario["patientSim"]["declines"] = ["cancel"]
    run = await start(tenant, scenario)
    fake_llm.script = [{"reply": "Sure, go ahead and cancel it.", "revealed_topics": []}]
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, llm_settings(settings, fake_llm), db.pool)
        async with httpx.AsyncClient(headers=tenant.headers) as client:
            r = await client.post(f"{run['fhirBase']}/Communication", json=message(run, PROPOSAL))
            assert r.status_code == 201
        await sim_service.reply_to_messages(Scopes(db.pool), llm, tenant.id, run["id"])
    row = await db.pool.fetchrow(
        "SELECT engine, decisions, issues FROM sim_reply WHERE tenant_id = $1 AND run_id = $2",
        tenant.id,
        run["id"],
    )
    assert row is not None
    assert row["engine"] == "llm"
    assert orjson.loads(row["decisions"]) == [{"action": "cancel", "agreed": True}]
    assert "agreed to 'cancel', which the patient declines" in row["issues"]
    # What the model said is what counts: the cancel after it is covered.
    await _cancel(tenant, run)
    assert _consent(await _finish(tenant, run))["passed"] is True


OPT_OUT: dict[str, Any] = {
    "id": "custom.consent-opt-out",
    "title": "No texts for Ada",
    "category": "messaging",
    "modes": ["agent"],
    "brief": "Remind {{patient.name}} of the visit.",
    "strict": {"off": "a consent test", "textOff": "a consent test"},
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "active": True,
            "name": [{"family": "Okafor", "given": ["Ada"]}],
            "telecom": [{"system": "phone", "value": "+1 (555) 555-0142", "use": "mobile"}],
        },
        {
            "resourceType": "Consent",
            "id": "@nosms",
            "status": "active",
            "scope": {"coding": [{"code": "patient-privacy"}]},
            "category": [{"text": "Communication preferences"}],
            "patient": {"reference": "@patient"},
            "provision": {"type": "deny", "action": [{"text": "Contact by text message"}]},
        },
    ],
    "expectations": [
        {
            "id": "active",
            "type": "field",
            "label": "The patient is active",
            "target": "@patient",
            "where": ["active = true"],
        }
    ],
}


async def _text(tenant: TenantHandle, run: dict[str, Any], to: str) -> None:
    c = run["capture"]
    url = f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json"
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        r = await client.post(url, data={"To": to, "From": c["from"], "Body": "See you Friday"})
        assert r.status_code == 201, r.text


async def test_texting_a_patient_whose_consent_says_no_fails_by_default(
    tenant: TenantHandle,
) -> None:
    run = await start(tenant, copy.deepcopy(OPT_OUT))
    await _text(tenant, run, "+15555550142")
    final = await _finish(tenant, run)
    assert final["status"] == "failed"
    default = next(e for e in final["expectations"] if e["id"] == "consent-opt-out")
    assert default["passed"] is False
    assert "See you Friday" in default["detail"]
    assert run["fixture"]["nosms"] in default["detail"]


async def test_texting_someone_else_passes(tenant: TenantHandle) -> None:
    run = await start(tenant, copy.deepcopy(OPT_OUT) | {"id": "custom.consent-opt-out-2"})
    await _text(tenant, run, "+15555550999")
    final = await _finish(tenant, run)
    default = next(e for e in final["expectations"] if e["id"] == "consent-opt-out")
    assert default["passed"] is True, default
    assert final["status"] == "passed", final


async def test_a_person_driving_the_patient_agrees_in_their_own_words(
    tenant: TenantHandle, db: Database
) -> None:
    scenario = copy.deepcopy(SCENARIO) | {"id": "custom.consent-human"}
    async with api_client(tenant) as client:
        imported = await client.post("/scenarios", json=scenario)
        assert imported.status_code == 201, imported.text
        started = await client.post(
            "/runs", json={"scenarioId": scenario["id"], "patientDriver": "human"}
        )
    assert started.status_code == 201, started.text
    run = started.json()
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        asked = await fhir.post("/Communication", json=message(run, PROPOSAL))
        assert asked.status_code == 201, asked.text
    await sim_service.human_reply(Scopes(db.pool), tenant.id, run["id"], "Yeah, that's fine.")
    await _cancel(tenant, run)
    consent = _consent(await _finish(tenant, run))
    assert consent["passed"] is True, consent
