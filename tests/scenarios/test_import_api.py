"""Importing custom scenarios through the testing API."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from app.openapi import SCENARIO_EXAMPLE
from tests.conftest import TenantHandle

# The API document's own example scenario (so it stays one that imports and passes),
# under an id of its own and with a persona variant.
SCENARIO: dict[str, Any] = {
    **copy.deepcopy(SCENARIO_EXAMPLE),
    "id": "custom.task-for-chen",
    "variants": [
        {"persona": "terse", "brief": "Chen: call back {{patient.name}} ({{patient.id}})."}
    ],
}


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    )


async def test_import_versions_and_run(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        dry = await client.post("/scenarios", json=SCENARIO, params={"dryRun": "true"})
        assert dry.status_code == 200, dry.text
        assert dry.json()["dryRun"] is True
        assert (await client.get(f"/scenarios/{SCENARIO['id']}")).status_code == 404

        first = await client.post("/scenarios", json=SCENARIO)
        assert first.status_code == 201, first.text
        assert first.json()["version"] == 1
        changed = copy.deepcopy(SCENARIO)
        changed["title"] = "Ask Dr. Chen to call back"
        second = (await client.post("/scenarios", json=changed)).json()
        assert second["version"] == 2
        assert second["hash"] != first.json()["hash"]
        listed = (await client.get("/scenarios")).json()["scenarios"]
        mine = [s for s in listed if s["id"] == SCENARIO["id"]]
        assert len(mine) == 1 and mine[0]["builtin"] is False and mine[0]["version"] == 2

        verdict = (await client.post(f"/scenarios/{SCENARIO['id']}/reference-run")).json()
        assert verdict["status"] == "passed", verdict
        assert verdict["scenarioHash"] == second["hash"]
        run = (await client.post("/runs", json={"scenarioId": SCENARIO["id"]})).json()
        noop = (await client.post(f"/runs/{run['id']}/finish")).json()
        assert noop["status"] == "failed"


async def test_invalid_scenario_lists_every_problem(tenant: TenantHandle) -> None:
    broken = copy.deepcopy(SCENARIO)
    broken["expectations"][0]["where"].append("status = = 'requested'")
    broken["expectations"][0]["where"].append("%nonsense.x = 1")
    broken["expectations"][1]["before"] = "does-not-exist"
    broken["expectations"][1]["type"] = "api_call"
    broken["expectations"][1]["method"] = "GET"
    broken["expectations"][1]["path"] = "/Task"
    del broken["expectations"][1]["resourceType"]
    broken["fixture"][0]["birthDate"] = {"$date": "+1x"}
    broken["fixture"].append({"resourceType": "Patient", "id": "@unused", "gender": "robot"})
    broken["timeoutSeconds"] = 5
    async with api_client(tenant) as client:
        r = await client.post("/scenarios", json=broken)
    assert r.status_code == 422, r.text
    errors = r.json()["errors"]
    paths = {e["path"] for e in errors}
    messages = " | ".join(e["message"] for e in errors)
    assert len(errors) >= 4, errors
    assert any(p.startswith("/timeoutSeconds") for p in paths), errors
    for fragment in ("30", "1800"):
        assert fragment in messages


async def test_builtin_ids_cannot_be_replaced(tenant: TenantHandle) -> None:
    clash = copy.deepcopy(SCENARIO)
    clash["id"] = "scheduling.book-named-practitioner"
    async with api_client(tenant) as client:
        r = await client.post("/scenarios", json=clash)
    assert r.status_code == 409


async def test_custom_scenarios_are_per_tenant(
    tenant: TenantHandle, db: Any, server_url: str
) -> None:
    from tests.conftest import make_tenant

    async with api_client(tenant) as client:
        assert (await client.post("/scenarios", json=SCENARIO)).status_code == 201
    other = await make_tenant(db, server_url)
    async with api_client(other) as client:
        assert (await client.get(f"/scenarios/{SCENARIO['id']}")).status_code == 404
        assert (await client.post("/runs", json={"scenarioId": SCENARIO["id"]})).status_code == 404


async def test_fixture_decimals_keep_their_scale(tenant: TenantHandle) -> None:
    scenario = copy.deepcopy(SCENARIO)
    scenario["id"] = "custom.with-decimal"
    scenario["fixture"].append(
        {
            "resourceType": "Observation",
            "id": "@a1c",
            "status": "final",
            "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4"}]},
            "subject": {"reference": "@patient"},
            "valueQuantity": {"value": 9.10, "unit": "%"},
        }
    )
    scenario["expectations"][0]["where"].append("%current.a1c.value.value > 9")
    body = httpx.Request("POST", "x", json=scenario).content.replace(b"9.1,", b"9.10,")
    async with api_client(tenant) as client:
        imported = await client.post(
            "/scenarios", content=body, headers={"Content-Type": "application/json"}
        )
        assert imported.status_code == 201, imported.text
        run = await client.post("/runs", json={"scenarioId": "custom.with-decimal"})
        assert run.status_code == 201, run.text
        stored = (await client.get("/scenarios/custom.with-decimal")).content
    assert b"9.10" in stored
    async with httpx.AsyncClient(headers=tenant.headers) as fhir:
        obs = await fhir.get(f"{run.json()['fhirBase']}/{run.json()['fixture']['a1c']}")
    assert b"9.10" in obs.content


# --- warnings: a fixture resource the agent must find is referenced by nothing ------------

PATIENT_FIXTURE: dict[str, Any] = SCENARIO["fixture"][0]

FIND_COVERAGE: dict[str, Any] = {
    "id": "custom.find-coverage",
    "title": "Note the patient's health plan",
    "category": "coverage",
    "modes": ["agent"],
    "brief": "Look up {{patient.name}}'s insurance and file a Task for the front desk naming"
    " the health plan that covers her.",
    "fixture": [
        PATIENT_FIXTURE,
        {
            # Only the agent's search finds it: nothing in the scenario mentions @cov.
            "resourceType": "Coverage",
            "id": "@cov",
            "status": "active",
            "beneficiary": {"reference": "@patient"},
            "payor": [{"display": "Prairie Health Plan"}],
        },
    ],
    "expectations": [
        {
            "id": "task-names-plan",
            "type": "resource",
            "label": "A Task for the patient naming the plan",
            "resourceType": "Task",
            "where": [
                "for.reference = 'Patient/' + %fixture.patient",
                "description.contains('Prairie Health Plan')",
                "status = 'requested' and intent = 'order'",
            ],
        },
        {
            "id": "coverage-untouched",
            "type": "resource",
            "label": "No Coverage written",
            "resourceType": "Coverage",
            "count": {"max": 0},
        },
    ],
    "oracle": [
        {"method": "GET", "path": "/Coverage?beneficiary=@patient"},
        {
            "method": "POST",
            "path": "/Task",
            "body": {
                "resourceType": "Task",
                "status": "requested",
                "intent": "order",
                "for": {"reference": "@patient"},
                "description": "Covered by Prairie Health Plan: please note it on the account.",
            },
        },
    ],
}

ANSWER_MESSAGE: dict[str, Any] = {
    "id": "custom.answer-portal-message",
    "title": "Answer the patient's portal message",
    "category": "messaging",
    "modes": ["agent"],
    "brief": "{{patient.name}} sent a portal message: find it and answer her question.",
    "fixture": [
        PATIENT_FIXTURE,
        {
            # The message the agent must find: nothing in the scenario mentions @msg.
            "resourceType": "Communication",
            "id": "@msg",
            "status": "completed",
            "subject": {"reference": "@patient"},
            "sender": {"reference": "@patient"},
            "sent": {"$time": "-1h"},
            "payload": [{"contentString": "Is the clinic open on Saturdays?"}],
        },
    ],
    "expectations": [
        {
            "id": "reply",
            "type": "resource",
            "label": "A message to the patient about Saturday",
            "resourceType": "Communication",
            "where": [
                "recipient.where(reference = 'Patient/' + %fixture.patient).exists()",
                "payload.content.ofType(string).where(contains('Saturday')).exists()",
            ],
        },
        {
            "id": "no-appointment",
            "type": "resource",
            "label": "No appointment booked",
            "resourceType": "Appointment",
            "count": {"max": 0},
        },
    ],
    "oracle": [
        {"method": "GET", "path": "/Communication?subject=@patient"},
        {
            "method": "POST",
            "path": "/Communication",
            "body": {
                "resourceType": "Communication",
                "status": "completed",
                "subject": {"reference": "@patient"},
                "recipient": [{"reference": "@patient"}],
                "payload": [{"contentString": "Yes, we are open on Saturday mornings, 9-12."}],
            },
        },
    ],
}


@pytest.mark.parametrize(
    "document", [FIND_COVERAGE, ANSWER_MESSAGE], ids=["coverage", "portal-message"]
)
async def test_a_resource_only_the_agent_finds_is_a_warning(
    tenant: TenantHandle, document: dict[str, Any]
) -> None:
    symbol = document["fixture"][1]["id"]
    async with api_client(tenant) as client:
        dry = await client.post("/scenarios", json=document, params={"dryRun": "true"})
        assert dry.status_code == 200, dry.text
        imported = await client.post("/scenarios", json=document)
        assert imported.status_code == 201, imported.text
        for body in (dry.json(), imported.json()):
            warnings = body["warnings"]
            assert [w["path"] for w in warnings] == ["/fixture/1/id"], warnings
            assert f"symbol {symbol} is defined but never used" in warnings[0]["message"]

        verdict = (await client.post(f"/scenarios/{document['id']}/reference-run")).json()
        assert verdict["status"] == "passed", verdict
        run = (await client.post("/runs", json={"scenarioId": document["id"]})).json()
        noop = (await client.post(f"/runs/{run['id']}/finish")).json()
        assert noop["status"] == "failed", noop


async def test_a_clean_import_has_no_warnings_and_422_carries_them(
    tenant: TenantHandle,
) -> None:
    broken = copy.deepcopy(FIND_COVERAGE)
    broken["expectations"][0]["where"].append("%fixture.plan = 'x'")  # never defined
    async with api_client(tenant) as client:
        clean = await client.post("/scenarios", json=SCENARIO, params={"dryRun": "true"})
        assert clean.status_code == 200 and clean.json()["warnings"] == [], clean.text
        r = await client.post("/scenarios", json=broken)
    assert r.status_code == 422, r.text
    body = r.json()
    assert [e["path"] for e in body["errors"]] == ["/expectations/0/where/3"], body
    assert "@plan" in body["errors"][0]["message"]
    assert [w["path"] for w in body["warnings"]] == ["/fixture/1/id"], body


async def test_the_openapi_declares_the_warnings(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, timeout=30) as client:
        spec = (await client.get("/openapi.json")).json()
    responses = spec["paths"]["/api/testing/scenarios"]["post"]["responses"]
    schemas = spec["components"]["schemas"]
    for status in ("200", "201", "422"):
        ref = next(iter(responses[status]["content"].values()))["schema"]["$ref"]
        assert "warnings" in schemas[ref.rsplit("/", 1)[1]]["properties"], status
    assert "errors" in schemas["ScenarioInvalidOut"]["properties"]
    check = spec["paths"]["/api/testing/scenarios/{scenario_id}/check"]["post"]["responses"]
    ref = check["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "warnings" in schemas[ref.rsplit("/", 1)[1]]["properties"]
