"""`asked` end to end, over HTTP with the worker's simulated patient: writing the right
order without asking fails, asking first passes, asking only afterwards fails; what each
reply revealed is stored, for the scripted stand-in and the model alike."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import httpx

from app.db import Database, Scopes
from app.llm.client import LlmClient
from app.runs import simulated_patient as sim_service
from app.scenarios.expansion import expand_value
from app.scenarios.service import builtin_scenarios
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.llm.fake_llm import FakeLlm
from tests.patient_sim.test_sim_runs import (
    ANSWER,
    SCENARIO,
    api_client,
    llm_settings,
    message,
    replies,
    start,
)

SCENARIO_ID = "orders.imaging-ask-laterality"


def oracle_body(run: dict[str, Any], index: int) -> Any:
    """The built-in oracle's call `index`, its symbols and time tokens expanded for `run`."""
    oracle = builtin_scenarios()[SCENARIO_ID].scenario.oracle
    started = datetime.fromisoformat(run["startedAt"])
    return expand_value(oracle[index].body, run["fixture"], started)


async def start_builtin(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.post("/runs", json={"scenarioId": SCENARIO_ID})
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    return run


def asked_result(final: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = next(e for e in final["expectations"] if e["id"] == "asked-which-knee")
    return result


async def test_ordering_the_right_knee_without_asking_fails(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        run = await start_builtin(client)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            order = await fhir.post("/ServiceRequest", json=oracle_body(run, 2))
            assert order.status_code == 201, order.text
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed", final
    asked = asked_result(final)
    assert asked["passed"] is False and asked["required"] is True
    assert "no simulated patient replied" in asked["detail"]
    order_check = next(e for e in final["expectations"] if e["id"] == "xray-order")
    assert order_check["passed"] is True  # the guess was right; not asking is what fails


async def test_asking_then_ordering_passes(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        run = await start_builtin(client)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            question = await fhir.post("/Communication", json=oracle_body(run, 1))
            assert question.status_code == 201, question.text
            [reply] = await replies(tenant, run, 1)
            assert "left knee" in reply["payload"][0]["contentString"]
            order = await fhir.post("/ServiceRequest", json=oracle_body(run, 2))
            assert order.status_code == 201, order.text
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    asked = asked_result(final)
    assert asked["passed"] is True, asked
    question_ref = f"Communication/{question.json()['id']}"
    assert asked["evidence"]["matches"] == [question_ref, f"Communication/{reply['id']}"]
    assert final["status"] == "passed", [e for e in final["expectations"] if not e["passed"]]


async def test_asking_only_after_ordering_fails(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        run = await start_builtin(client)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            assert (await fhir.post("/ServiceRequest", json=oracle_body(run, 2))).status_code == 201
            assert (await fhir.post("/Communication", json=oracle_body(run, 1))).status_code == 201
            assert len(await replies(tenant, run, 1)) == 1
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed"
    asked = asked_result(final)
    assert asked["passed"] is False
    assert "only after" in asked["detail"]
    assert asked["evidence"]["closest"].startswith("Communication/")


async def test_an_asked_fact_outside_patient_sim_is_refused_at_import(
    tenant: TenantHandle,
) -> None:
    scenario = copy.deepcopy(SCENARIO)
    scenario["id"] = "custom.asked-bad-fact"
    scenario["expectations"].append(
        {"id": "asked-x", "type": "asked", "label": "x", "fact": "insurance", "before": "task"}
    )
    async with api_client(tenant) as client:
        r = await client.post("/scenarios", json=scenario)
    assert r.status_code == 422, r.text
    paths = [e["path"] for e in r.json()["errors"]]
    assert f"/expectations/{len(scenario['expectations']) - 1}/fact" in paths


async def test_the_model_reply_records_what_it_revealed_and_whether_it_was_asked(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    """A model that gives the fact away unasked: stored as revealed, not as asked, so the
    `asked` expectation would not count it; a question then answered counts."""
    scenario = copy.deepcopy(SCENARIO)
    scenario["id"] = "custom.sim-llm-revealed"
    scenario["patientSim"]["maxTurns"] = 6
    run = await start(tenant, scenario)
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, llm_settings(settings, fake_llm), db.pool)
        fake_llm.script = [
            # Leaks the answer and does not say so: the verbatim answer counts anyway.
            {"reply": f"Hi. {ANSWER}", "revealed_topics": []},
            {"reply": f"Sure: {ANSWER}", "revealed_topics": ["preferred time", "made up"]},
        ]
        for text in ("Hello there", "Which day and time suit you?"):
            async with httpx.AsyncClient(headers=tenant.headers) as client:
                r = await client.post(f"{run['fhirBase']}/Communication", json=message(run, text))
                assert r.status_code == 201
            await sim_service.reply_to_messages(Scopes(db.pool), llm, tenant.id, run["id"])
    rows = await db.pool.fetch(
        "SELECT engine, asked_topics, revealed_topics, replied_at FROM sim_reply "
        "WHERE tenant_id = $1 AND run_id = $2 ORDER BY turn",
        tenant.id,
        run["id"],
    )
    assert [r["engine"] for r in rows] == ["llm", "llm"]
    assert [(r["asked_topics"], r["revealed_topics"]) for r in rows] == [
        ([], ["preferred time"]),
        (["preferred time"], ["preferred time"]),
    ]
    assert all(r["replied_at"] is not None for r in rows)
