"""A run's provenance: recorded as it starts (scenario, platform, revision, the configured
patient and judge), completed as it is judged (the engines actually used), and unchanged
after the run ended, whatever grades or settings come later."""

from __future__ import annotations

import importlib.metadata
from datetime import UTC, datetime

import httpx

from app.db import Database, Scopes
from app.llm.client import LlmClient
from app.runs import provenance
from app.runs import service as runs_service
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.runs.test_run_flow import SCENARIO, api, start


async def test_provenance_is_recorded_as_the_run_starts(tenant: TenantHandle) -> None:
    run = await start(tenant, revision="agent v7")
    p = run["provenance"]
    assert p["scenario"] == {
        "id": SCENARIO,
        "version": run["scenarioVersion"],
        "hash": run["scenarioHash"],
    }
    assert p["platform"]["version"] == importlib.metadata.version("understudy")
    assert "gitSha" in p["platform"]
    assert p["revision"] == "agent v7"
    assert p["patientSim"] is None  # the scenario has no patientSim
    # No model configured: no engine judges (rubrics are not judged).
    assert p["judge"] == {"engine": "none", "model": None, "promptVersion": None}
    assert p["judgedAt"] is None and p["judgeUsed"] is None and p["patientSimUsed"] is None
    async with api(tenant) as client:
        live = (await client.get(f"/runs/{run['id']}")).json()
    assert live["provenance"] == p


async def test_provenance_is_completed_at_judging_and_unchanged_after(
    tenant: TenantHandle, db: Database, settings: Settings
) -> None:
    run = await start(tenant)
    async with api(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
        p = final["provenance"]
        assert p["judgedAt"] is not None
        assert p["judgeUsed"] == [] and p["patientSimUsed"] == []
        assert p["recordedAt"] == run["provenance"]["recordedAt"]
        assert {
            k: v for k, v in p.items() if k not in ("judgedAt", "judgeUsed", "patientSimUsed")
        } == {
            k: v
            for k, v in run["provenance"].items()
            if k not in ("judgedAt", "judgeUsed", "patientSimUsed")
        }
        # A later grading (finish again, the grader) leaves it as it was.
        await client.post(f"/runs/{run['id']}/finish")
        scopes = Scopes(db.pool)
        await runs_service.grade_run(scopes, tenant.id, run["id"], final=True)
        # A model configured since (a settings change) does not rewrite it either.
        changed = settings.clone(llm_base_url="http://127.0.0.1:9/v1", llm_model="other-model")
        async with httpx.AsyncClient() as http:
            llm = LlmClient(http, changed, db.pool)
            await runs_service.grade_run(scopes, tenant.id, run["id"], final=True, llm=llm)
        again = (await client.get(f"/runs/{run['id']}")).json()
        assert again["provenance"] == p
        [listed] = (await client.get("/runs")).json()["runs"]
        assert listed["provenance"] == p


def test_configured_engines_follow_the_model_setting() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    with_model = provenance.at_start(
        scenario_id="s",
        scenario_version=2,
        scenario_hash="h",
        revision=None,
        has_patient_sim=True,
        llm_model="m-1",
        at=at,
    )
    assert with_model["patientSim"] == {
        "engine": "llm",
        "model": "m-1",
        "promptVersion": "patient-sim/2",
    }
    assert with_model["judge"]["engine"] == "llm" and with_model["judge"]["model"] == "m-1"
    without = provenance.at_start(
        scenario_id="s",
        scenario_version=2,
        scenario_hash="h",
        revision=None,
        has_patient_sim=True,
        llm_model=None,
        at=at,
    )
    assert without["patientSim"]["engine"] == "scripted"
    assert without["judge"] == {"engine": "none", "model": None, "promptVersion": None}
    judged = provenance.judged(
        with_model,
        patient_used=[
            ("llm", "m-1", "patient-sim/1"),
            ("scripted", None, None),
            ("llm", "m-1", "patient-sim/1"),
        ],
        judge_used=[("llm", "m-1", "judge/1"), ("llm", "m-1", "judge/1")],
        at=at,
    )
    assert judged is not None
    assert [e["engine"] for e in judged["patientSimUsed"]] == ["llm", "scripted"]
    assert judged["judgeUsed"] == [{"engine": "llm", "model": "m-1", "promptVersion": "judge/1"}]
    assert provenance.judged(None, patient_used=[], judge_used=[], at=at) is None
