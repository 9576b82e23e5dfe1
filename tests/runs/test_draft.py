"""A scenario from a run (`POST /api/testing/runs/{id}/scenario`): the draft of a
reference run passes its own scenario check, adversaries and all; a human-driven run's
writes become the draft's oracle; a live run is a 409 and another tenant's a 404."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
from pydantic import TypeAdapter

from app.db import Database
from app.scenarios.expansion import expand_value
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle, make_tenant
from tests.contract.test_contract import Declared, same_json
from understudy_client.contract.scenarios import ScenarioDraftOut

BOOKING = "scheduling.book-named-practitioner"
SMS = "Your annual physical with Dr. Chen is booked. See you at Riverside."


async def _draft(client: httpx.AsyncClient, tenant: TenantHandle, run_id: str) -> dict[str, Any]:
    r = await client.post(f"{tenant.server}/api/testing/runs/{run_id}/scenario")
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert answer["runId"] == run_id
    return answer


async def test_a_reference_runs_draft_passes_its_own_check(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{BOOKING}/reference-run")
        assert r.status_code == 200, r.text
        run = r.json()
        assert run["passed"] is True
        answer = await _draft(client, tenant, run["id"])
        draft = answer["draft"]
        assert answer["problems"] == []
        assert draft["id"].startswith(f"{BOOKING}.from-")
        # The oracle is what the system did, in scenario terms.
        assert [(c["method"], c["path"]) for c in draft["oracle"]] == [
            ("POST", "/Appointment/$find"),
            ("POST", "/Appointment"),
        ]
        booking = draft["oracle"][1]
        assert booking["saveAs"] == "appointment1"
        assert booking["body"]["start"] == {"$time": "+2wd@10:00"}
        assert {"reference": "@patient", "display": "Alex Rivera"} in [
            p["actor"] for p in booking["body"]["participant"]
        ]
        assert "id" not in booking["body"] and "meta" not in booking["body"]
        kinds = [e["type"] for e in draft["expectations"]]
        assert "reference" not in kinds and "changes" in kinds
        lookups = [e for e in draft["expectations"] if e["type"] == "api_call"]
        assert [(e["method"], e["path"], e["required"]) for e in lookups] == [
            ("POST", "/Appointment/$find", False)
        ]
        r = await client.post(f"{tenant.server}/api/testing/scenarios", json=draft)
        assert r.status_code == 201, r.text
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{draft['id']}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["ok"], report
    (variant,) = report["variants"]
    assert variant["oraclePasses"] and variant["nothingFails"]
    # The check really tried to break it: near misses, the check's own adversaries and
    # equivalent rewrites, every one judged as it should be.
    assert variant["mutants"] >= 5 and variant["mutantsCaught"] == variant["mutants"]
    assert variant["generated"], variant
    assert variant["rewrites"] > 0 and variant["rewritesPassing"] == variant["rewrites"]


async def test_a_live_run_is_a_conflict_and_another_tenants_run_not_found(
    tenant: TenantHandle, db: Database
) -> None:
    other = await make_tenant(db, tenant.server)
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        r = await client.post(f"{tenant.server}/api/testing/runs", json={"scenarioId": BOOKING})
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        live = await client.post(f"{tenant.server}/api/testing/runs/{run_id}/scenario")
        assert live.status_code == 409, live.text
        assert "still live" in live.text
        elsewhere = await client.post(
            f"{tenant.server}/api/testing/runs/{run_id}/scenario", headers=other.headers
        )
        assert elsewhere.status_code == 404, elsewhere.text
        await client.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel")
        # Cancelled, it drafts (its system wrote nothing: no oracle, and the lint says so),
        # as the OpenAPI document and the client's contract declare the answer.
        r = await client.post(f"{tenant.server}/api/testing/runs/{run_id}/scenario")
        declared = await Declared.of(tenant)
        answer = declared.check("POST", "/api/testing/runs/{run_id}/scenario", r)
        same_json(TypeAdapter(ScenarioDraftOut), answer)
        operation = declared.document["paths"]["/api/testing/runs/{run_id}/scenario"]["post"]
        assert {"200", "404", "409"} <= set(operation["responses"])
        assert answer["draft"]["oracle"] == []
        assert answer["warnings"], answer


async def test_the_sms_a_run_sent_is_in_its_draft(tenant: TenantHandle) -> None:
    scenario = builtin_scenarios()[BOOKING].scenario
    booking = next(c for c in scenario.oracle if c.path == "/Appointment")
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        r = await client.post(f"{tenant.server}/api/testing/runs", json={"scenarioId": BOOKING})
        assert r.status_code == 201, r.text
        run = r.json()
        started = datetime.fromisoformat(run["startedAt"])
        body = expand_value(booking.body, run["fixture"], started)
        booked = await client.post(f"{run['fhirBase']}/Appointment", json=body)
        assert booked.status_code == 201, booked.text
        c = run["capture"]
        sent = await client.post(
            f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json",
            data={"To": "+15550142", "From": c["from"], "Body": SMS},
            auth=(c["accountSid"], c["authToken"]),
            headers={"Authorization": ""},
        )
        assert sent.status_code == 201, sent.text
        finished = await client.post(f"{tenant.server}/api/testing/runs/{run['id']}/finish")
        assert finished.status_code == 200, finished.text
        answer = await _draft(client, tenant, run["id"])
        draft = answer["draft"]
        assert answer["problems"] == []
        assert [(c["method"], c["path"]) for c in draft["oracle"]] == [
            ("POST", "/Appointment"),
            ("POST", "/sms/Messages"),
        ]
        assert draft["oracle"][1]["body"] == {"to": "+15550142", "body": SMS}
        [message] = [e for e in draft["expectations"] if e["type"] == "message"]
        assert message["saysAny"] == ["riverside", "physical", "annual"]
        r = await client.post(f"{tenant.server}/api/testing/scenarios", json=draft)
        assert r.status_code == 201, r.text
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{draft['id']}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["ok"], report
    # The check's text adversaries reached the SMS, and were caught.
    caught = report["variants"][0]["caught"]
    assert any("POST /sms/Messages" in m["description"] for m in caught), caught


async def test_a_persona_runs_draft_is_that_persona_and_passes_its_check(
    tenant: TenantHandle,
) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        r = await client.post(
            f"{tenant.server}/api/testing/scenarios/{BOOKING}/reference-run",
            params={"variant": "spanish"},
        )
        assert r.status_code == 200, r.text
        draft = (await _draft(client, tenant, r.json()["id"]))["draft"]
        # The scenario as the run had it: the persona's brief and fixture, no variants.
        assert draft["brief"].startswith("{{patient.name}} (ID de paciente")
        [patient] = draft["fixture"]
        assert patient["communication"][0]["language"]["coding"][0]["code"] == "es"
        assert "variants" not in draft
        r = await client.post(f"{tenant.server}/api/testing/scenarios", json=draft)
        assert r.status_code == 201, r.text
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{draft['id']}/check")
    assert r.status_code == 200, r.text
    assert r.json()["ok"], r.json()


async def test_a_create_answered_without_a_body_is_saved_for_later_calls(
    tenant: TenantHandle,
) -> None:
    scenario = builtin_scenarios()[BOOKING].scenario
    booking = next(c for c in scenario.oracle if c.path == "/Appointment")
    async with httpx.AsyncClient(headers=tenant.headers, timeout=60) as client:
        r = await client.post(f"{tenant.server}/api/testing/runs", json={"scenarioId": BOOKING})
        run = r.json()
        body = expand_value(booking.body, run["fixture"], datetime.fromisoformat(run["startedAt"]))
        booked = await client.post(
            f"{run['fhirBase']}/Appointment", json=body, headers={"Prefer": "return=minimal"}
        )
        assert booked.status_code == 201 and not booked.content, booked.text
        made = booked.headers["location"].split("/Appointment/")[1].split("/")[0]
        patch = [{"op": "add", "path": "/comment", "value": "Bring your insurance card"}]
        patched = await client.patch(
            f"{run['fhirBase']}/Appointment/{made}",
            json=patch,
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert patched.status_code == 200, patched.text
        await client.post(f"{tenant.server}/api/testing/runs/{run['id']}/finish")
        draft = (await _draft(client, tenant, run["id"]))["draft"]
    assert [(c["method"], c["path"], c.get("saveAs")) for c in draft["oracle"]] == [
        ("POST", "/Appointment", "appointment1"),
        ("PATCH", "/Appointment/@appointment1", None),
    ]
