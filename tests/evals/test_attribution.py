"""Flip attribution in compare (issue 18): each cell whose label is not `same` names whose
change flipped it. Over HTTP: the agent changed (same scenario, broken automation) and the
scenario changed (a custom scenario re-imported between the evals); the simulator, judge
and platform rules on runs built in the test."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.evals.attribution import attribute
from app.runs.service import RunRow
from app.scenarios.schema import Scenario
from tests.conftest import TenantHandle
from tests.evals.test_evals import api_client
from tests.evals.test_evals import run_eval as evals_run

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = "results.critical-lab"
CUSTOM = "custom.critical-lab-copy"


def custom_scenario(title: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "scenarios" / f"{BUILTIN}.json").read_text())
    document = copy.deepcopy(document)
    document["id"], document["title"] = CUSTOM, title
    return document


async def run_eval(
    tenant: TenantHandle, label: str, scenario: str, document: dict[str, Any] | None
) -> str:
    """A workflow eval of one scenario, 2 runs; `document` set: the automation does the
    work of each run, else it only finishes them (broken)."""
    return await evals_run(
        tenant,
        label,
        correct=document is not None,
        scenarios=[scenario],
        scenario=Scenario.model_validate(document) if document is not None else None,
    )


async def import_scenario(tenant: TenantHandle, document: dict[str, Any]) -> None:
    async with api_client(tenant) as client:
        r = await client.post("/scenarios", json=document)
    assert r.status_code == 201, r.text


async def test_a_broken_automation_is_attributed_to_the_agent(tenant: TenantHandle) -> None:
    document = json.loads((ROOT / "scenarios" / f"{BUILTIN}.json").read_text())
    good = await run_eval(tenant, "attr v1", BUILTIN, document)
    bad = await run_eval(tenant, "attr v2", BUILTIN, None)
    async with api_client(tenant) as client:
        compared = (await client.get(f"/evals/{bad}/compare", params={"baseline": good})).json()
        view = (await client.get(f"/evals/{bad}")).json()
    [cell] = compared["cells"]
    assert (cell["label"], cell["comparable"], cell["attribution"]) == ("regressed", True, "agent")
    assert compared["flips"] == {
        "scenario": 0,
        "simulator": 0,
        "judge": 0,
        "platform": 0,
        "agent": 1,
    }
    assert all(r["provenance"]["scenario"]["id"] == BUILTIN for r in view["runs"])
    # An unchanged cell carries no attribution.
    again = await run_eval(tenant, "attr v3", BUILTIN, None)
    async with api_client(tenant) as client:
        same = (await client.get(f"/evals/{again}/compare", params={"baseline": bad})).json()
    [cell] = same["cells"]
    assert cell["label"] == "same" and cell["attribution"] is None
    assert sum(same["flips"].values()) == 0


async def test_a_reimported_scenario_is_attributed_to_the_scenario(tenant: TenantHandle) -> None:
    first = custom_scenario("Critical potassium, first wording")
    await import_scenario(tenant, first)
    good = await run_eval(tenant, "scen v1", CUSTOM, first)
    await import_scenario(tenant, custom_scenario("Critical potassium, second wording"))
    bad = await run_eval(tenant, "scen v2", CUSTOM, None)
    async with api_client(tenant) as client:
        compared = (await client.get(f"/evals/{bad}/compare", params={"baseline": good})).json()
        old, new = [(await client.get(f"/evals/{e}")).json() for e in (good, bad)]
    [cell] = compared["cells"]
    assert (cell["label"], cell["comparable"], cell["attribution"]) == (
        "regressed",
        False,
        "scenario",
    )
    assert compared["flips"]["scenario"] == 1 and compared["flips"]["agent"] == 0
    assert {r["provenance"]["scenario"]["version"] for r in old["runs"]} == {1}
    assert {r["provenance"]["scenario"]["version"] for r in new["runs"]} == {2}


# --- the rules, on runs built here --------------------------------------------------------


def _run(
    *,
    passed: bool,
    hash_: str = "h1",
    sim: dict[str, Any] | None = None,
    judge: dict[str, Any] | None = None,
    platform: str = "0.1.0",
    failing: tuple[tuple[str, str], ...] = (),
    bonus_failing: tuple[tuple[str, str], ...] = (),
) -> RunRow:
    """A decided run; `failing`: its required checks that failed (id, type), and
    `bonus_failing` its bonus ones."""
    now = datetime(2026, 12, 1, tzinfo=UTC)
    heuristic = {"engine": "heuristic", "model": None, "promptVersion": "judge-heuristic/1"}
    return RunRow(
        tenant_id=uuid.uuid4(),
        id="run_x",
        scenario_id="s",
        scenario_version=1,
        scenario_hash=hash_,
        builtin=False,
        mode="workflow",
        variant=None,
        label=None,
        status="passed" if passed else "failed",
        brief=None,
        fixture={},
        expectations=[],
        started_at=now,
        deadline=now,
        finished_at=now,
        changed_at=now,
        graded_change_at=None,
        graded_at=None,
        progress=None,
        verdict={
            "passed": passed,
            "score": 1.0 if passed else 0.0,
            "expectations": [
                {"id": i, "type": t, "required": required, "passed": False}
                for checks, required in ((failing, True), (bonus_failing, False))
                for i, t in checks
            ],
        },
        provenance={
            "platform": {"version": platform, "gitSha": None},
            "patientSim": sim,
            "judge": judge or heuristic,
            "patientSimUsed": [sim] if sim else [],
            "judgeUsed": [judge or heuristic],
        },
    )


SCRIPTED = {"engine": "scripted", "model": None, "promptVersion": None}
LLM = {"engine": "llm", "model": "m-2", "promptVersion": "patient-sim/1"}
LLM_JUDGE = {"engine": "llm", "model": "m-2", "promptVersion": "judge/1"}


def test_the_rules_in_order() -> None:
    ok = _run(passed=True)
    assert attribute([ok], [_run(passed=False, hash_="h2")]) == "scenario"
    assert attribute([_run(passed=True, sim=SCRIPTED)], [_run(passed=False, sim=LLM)]) == (
        "simulator"
    )
    # The patient changing does not count when the scenario has none.
    assert attribute([ok], [_run(passed=False, failing=(("e1", "changes"),))]) == "agent"
    # A required judged check moving with the judge (the scenario validation refuses a
    # required rubric today, so no real run is this one).
    rubric_fail = _run(passed=False, judge=LLM_JUDGE, failing=(("tone", "rubric"),))
    assert attribute([ok], [rubric_fail]) == "judge"
    # A bonus rubric moving with the judge decides no pass: the required check that
    # failed more often (on both sides) flipped the cell, and it is the agent's.
    baseline = [ok, ok, _run(passed=False, failing=(("e1", "resource"),))]
    worse = _run(passed=False, judge=LLM_JUDGE, failing=(("e1", "resource"),))
    judged_low = _run(passed=True, judge=LLM_JUDGE, bonus_failing=(("tone", "rubric"),))
    assert attribute(baseline, [worse, worse, judged_low]) == "agent"
    # A rubric moving without a judge change is the agent's; so is any other check moving.
    assert attribute([ok], [_run(passed=False, failing=(("tone", "rubric"),))]) == "agent"
    mixed = _run(passed=False, judge=LLM_JUDGE, failing=(("tone", "rubric"), ("e1", "changes")))
    assert attribute([ok], [mixed]) == "agent"
    assert attribute([ok], [_run(passed=False, platform="0.2.0")]) == "platform"
    assert attribute([ok], [_run(passed=False)]) == "agent"
    # Runs without provenance (before it was recorded): unknown parts count as unchanged.
    old = _run(passed=True)
    old.provenance = None
    assert attribute([old], [_run(passed=False, platform="0.2.0")]) == "agent"
