"""The simulated patient in live runs: over HTTP with the worker (scripted stand-in), and
in LLM mode against a real local chat-completions server."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import httpx

from app.db import Database, Scopes
from app.llm.client import LlmClient
from app.runs import simulated_patient as sim_service
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.llm.fake_llm import FakeLlm

ANSWER = "Any weekday afternoon after 2 pm works for me."
TASK: dict[str, Any] = {
    "resourceType": "Task",
    "status": "requested",
    "intent": "order",
    "for": {"reference": "@patient"},
    "description": "Rebook the appointment on a weekday afternoon.",
}
SCENARIO: dict[str, Any] = {
    "id": "custom.sim-reschedule",
    "title": "Reschedule, asking when",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "{{patient.name}} ({{patient.id}}) wrote: I can't make my appointment.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Lindqvist", "given": ["Maja"]}],
        }
    ],
    "expectations": [
        {
            "id": "task",
            "type": "resource",
            "label": "A Task to rebook the patient",
            "resourceType": "Task",
            "where": ["for.reference = 'Patient/' + %fixture.patient"],
        },
        {
            "id": "asked",
            "type": "resource",
            "label": "A message to the patient",
            "resourceType": "Communication",
            "where": ["recipient.where(reference = 'Patient/' + %fixture.patient).exists()"],
        },
        {
            "id": "no-rx",
            "type": "resource",
            "label": "No prescription",
            "resourceType": "MedicationRequest",
            "count": {"max": 0},
        },
        {
            "id": "tone",
            "type": "rubric",
            "label": "Polite and confirms the time",
            "rubric": "The message is polite, asks which day and time suit the patient, and "
            "must not mention medication.",
        },
    ],
    "patientSim": {
        "patient": "@patient",
        "goal": "Move my appointment to another day",
        "facts": [
            {"topic": "preferred time", "keywords": ["day", "time", "when"], "answer": ANSWER}
        ],
        "maxTurns": 2,
    },
    "oracle": [
        {
            "method": "POST",
            "path": "/Communication",
            "body": {
                "resourceType": "Communication",
                "status": "completed",
                "subject": {"reference": "@patient"},
                "recipient": [{"reference": "@patient"}],
                "sender": {"reference": "Practitioner/demo-canonical-prac-chen"},
                "payload": [{"contentString": "Which day and time would suit you?"}],
            },
        },
        {
            "method": "POST",
            "path": "/Task",
            "body": TASK,
        },
    ],
}


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    )


async def start(tenant: TenantHandle, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    scenario = scenario or SCENARIO
    async with api_client(tenant) as client:
        imported = await client.post("/scenarios", json=scenario)
        assert imported.status_code == 201, imported.text
        run = await client.post("/runs", json={"scenarioId": scenario["id"]})
    assert run.status_code == 201, run.text
    started: dict[str, Any] = run.json()
    return started


def message(run: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": run["fixture"]["patient"]},
        "recipient": [{"reference": run["fixture"]["patient"]}],
        "sender": {"reference": "Practitioner/demo-canonical-prac-chen"},
        "payload": [{"contentString": text}],
    }


async def replies(
    tenant: TenantHandle, run: dict[str, Any], count: int, within: float = 10
) -> list[dict[str, Any]]:
    patient = run["fixture"]["patient"]
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        while True:
            bundle = (
                await client.get(
                    f"{run['fhirBase']}/Communication",
                    params={"sender": patient, "_sort": "_lastUpdated"},
                )
            ).json()
            found = [e["resource"] for e in bundle.get("entry", [])]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.1)


async def test_scripted_patient_reveals_only_when_asked(
    tenant: TenantHandle, db: Database, settings: Settings
) -> None:
    run = await start(tenant)
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        first = await fhir.post("/Communication", json=message(run, "Hello, sorry to hear that."))
        assert first.status_code == 201
        [reply] = await replies(tenant, run, 1)
        assert ANSWER not in reply["payload"][0]["contentString"]
        assert reply["inResponseTo"] == [{"reference": f"Communication/{first.json()['id']}"}]
        assert reply["sender"] == {"reference": run["fixture"]["patient"]}
        tags = {(t["system"], t["code"]) for t in reply["meta"]["tag"]}
        assert ("urn:understudy:source", "simulated-patient") in tags

        await fhir.post("/Communication", json=message(run, "Which day and time suit you?"))
        both = await replies(tenant, run, 2)
        assert len(both) == 2
        assert any(ANSWER in r["payload"][0]["contentString"] for r in both)

        # maxTurns is 2: a third message gets no reply.
        await fhir.post("/Communication", json=message(run, "And what time exactly?"))
        # The patient's turn taken here, not waited for: once it returns, every message
        # written before it was considered (a reply would be committed by then).
        async with httpx.AsyncClient(timeout=10) as http:
            llm = LlmClient(http, settings, db.pool)
            await sim_service.reply_to_messages(Scopes(db.pool), llm, tenant.id, run["id"])
        assert len(await replies(tenant, run, 3, within=0)) == 2

        thread = (
            await fhir.get(
                "/Communication",
                params={"patient": run["fixture"]["patient"], "_sort": "_lastUpdated"},
            )
        ).json()
        assert thread["total"] == 5
        task = {**TASK, "for": {"reference": run["fixture"]["patient"]}}
        assert (await fhir.post("/Task", json=task)).status_code == 201
    async with api_client(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "passed", final
    assert [r["engine"] for r in final["simulatedPatient"]] == ["scripted", "scripted", "none"]
    assert final["simulatorIssues"] == []
    tone = next(e for e in final["expectations"] if e["id"] == "tone")
    # No model in the test app: the rubric is not judged, the heuristic only informs.
    assert tone["passed"] is None
    assert tone["detail"] == "not judged: no model configured"
    assert tone["evidence"]["note"].startswith("heuristic reading, not a verdict")


async def test_rubric_is_skipped_when_a_required_check_failed(tenant: TenantHandle) -> None:
    run = await start(tenant)
    async with api_client(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed"
    tone = next(e for e in final["expectations"] if e["id"] == "tone")
    assert tone["passed"] is None
    assert "skipped" in tone["detail"]


def llm_settings(settings: Settings, fake: FakeLlm, **changes: Any) -> Settings:
    return settings.clone(
        llm_base_url=fake.base_url,
        llm_model="fake-model",
        llm_timeout_seconds=1.0,
        **changes,
    )


async def test_llm_patient_reply_audit_and_allowance(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    scenario = copy.deepcopy(SCENARIO)
    scenario["id"] = "custom.sim-llm"
    scenario["patientSim"]["maxTurns"] = 6
    run = await start(tenant, scenario)
    # The worker of the test app answers with the scripted stand-in; here the simulator is
    # driven directly with a model client, before the worker gets to these messages.
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, llm_settings(settings, fake_llm, llm_calls_per_hour=2), db.pool)
        # 1: the model answers; 2: the model leaks the unasked fact (audit flag);
        # 3: the allowance (2 calls an hour) is used up -> scripted stand-in, said so.
        fake_llm.script = [
            {"reply": "Hi, yes I need to move it.", "revealed_topics": []},
            {"reply": f"Sure. {ANSWER}", "revealed_topics": ["preferred time"]},
        ]
        for text in ("Hello there", "Thanks for writing", "Anything else?"):
            async with httpx.AsyncClient(headers=tenant.headers) as client:
                r = await client.post(f"{run['fhirBase']}/Communication", json=message(run, text))
                assert r.status_code == 201
            await sim_service.reply_to_messages(Scopes(db.pool), llm, tenant.id, run["id"])
    rows = await db.pool.fetch(
        "SELECT engine, model, prompt_version, seed, note, issues FROM sim_reply "
        "WHERE tenant_id = $1 AND run_id = $2 ORDER BY turn",
        tenant.id,
        run["id"],
    )
    assert [r["engine"] for r in rows] == ["llm", "llm", "scripted"]
    assert rows[0]["model"] == "fake-model" and rows[0]["prompt_version"]
    assert rows[0]["seed"] is not None
    assert rows[1]["issues"] and "preferred time" in rows[1]["issues"]
    assert "allowance" in rows[2]["note"]
    calls = await db.pool.fetch(
        "SELECT purpose, model, prompt_tokens, outcome FROM llm_call WHERE tenant_id = $1",
        tenant.id,
    )
    assert len(calls) == 2 and {c["purpose"] for c in calls} == {"patient-sim"}
    async with api_client(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["simulatorIssues"], final


async def test_a_run_that_never_asks_fails(tenant: TenantHandle) -> None:
    """The refill scenario: creating the right Task without asking which medication first
    is a failure (the patient's hidden fact must be asked for)."""
    async with api_client(tenant) as client:
        run = (
            await client.post("/runs", json={"scenarioId": "medications.refill-ask-which"})
        ).json()
        task = {
            "resourceType": "Task",
            "status": "requested",
            "intent": "order",
            "description": "Refill request: atorvastatin 20 mg",
            "for": {"reference": run["fixture"]["patient"]},
            "focus": {"reference": run["fixture"]["statin"]},
            "owner": {"reference": "Practitioner/demo-canonical-prac-chen"},
        }
        async with httpx.AsyncClient(headers=tenant.headers) as fhir:
            assert (await fhir.post(f"{run['fhirBase']}/Task", json=task)).status_code == 201
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed", final
    failing = [e for e in final["expectations"] if e["required"] and not e["passed"]]
    assert any(e["type"] == "api_call" for e in failing), failing


async def test_llm_judge_pass_and_fail(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    """Rubrics judged by a model: the score and reason come from it, and the engine,
    model and prompt version are recorded; a low score fails the (bonus) check."""
    from app.judges.service import judge_rubrics
    from app.scenarios.schema import RubricExpectation
    from understudy_client.contract.runs import Evidence, ExpectationResult, Verdict

    run = await start(tenant)
    async with httpx.AsyncClient(headers=tenant.headers) as fhir:
        r = await fhir.post(
            f"{run['fhirBase']}/Communication",
            json=message(run, "Hello Maja, which day and time would suit you best?"),
        )
        assert r.status_code == 201
    rubric = RubricExpectation.model_validate(
        {"id": "tone", "type": "rubric", "label": "Polite", "rubric": "Polite and asks when."}
    )
    patients = frozenset({run["fixture"]["patient"]})
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, llm_settings(settings, fake_llm), db.pool)
        for score, passed in ((0.9, True), (0.2, False)):
            fake_llm.script = [{"score": score, "reason": 'Quotes "which day and time".'}]
            result = ExpectationResult(
                id="tone",
                label="Polite",
                type="rubric",
                required=False,
                weight=1.0,
                passed=None,
                score=0.0,
                evidence=Evidence(matches=[]),
                detail="pending",
            )
            verdict = Verdict(passed=True, score=1.0, expectations=[result])
            judged = await judge_rubrics(
                db.pool, llm, tenant.id, run["id"], [rubric], verdict, patients
            )
            assert judged.expectations[0].passed is passed
            assert judged.expectations[0].score == score
            assert "which day and time" in judged.expectations[0].detail
            note = judged.expectations[0].evidence.note or ""
            assert "engine llm" in note and "fake-model" in note and "judge/1" in note
    judged_text = fake_llm.requests[-1].messages[-1]["content"]
    assert "which day and time would suit you best" in judged_text
