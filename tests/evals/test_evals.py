"""Evals over real HTTP: planning, queueing under the live-run limit, summaries and
compare, with an in-test automation that does the work of each started run."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import httpx

from app.scenarios.expansion import expand_path, expand_value
from app.scenarios.schema import Scenario
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle

# Three workflow scenarios keep these evals quick; the library's size does not matter here.
WORKFLOW = ["messaging.portal-triage", "results.critical-lab", "scheduling.noshow-outreach"]


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    )


async def do_the_work(
    tenant: TenantHandle, run: dict[str, Any], scenario: Scenario | None = None
) -> None:
    """A correct automation: writes what the scenario's reference solution writes,
    through the run's own FHIR base (`scenario`: a custom one; else the built-in)."""
    scenario = scenario or builtin_scenarios()[run["scenarioId"]].scenario
    refs = dict(run["fixture"])
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        started = datetime.fromisoformat(run["startedAtRun"])
        for call in scenario.oracle:
            body = expand_value(call.body, refs, started) if call.body else None
            path = expand_path(call.path, refs)
            url = f"{tenant.server}{path}" if path.startswith("/api/") else run["fhirBase"] + path
            r = await client.request(call.method, url, json=body)
            assert r.status_code < 400, r.text
            if call.save_as:
                refs[call.save_as] = f"{r.json()['resourceType']}/{r.json()['id']}"


async def started_runs(client: httpx.AsyncClient, eval_id: str) -> list[dict[str, Any]]:
    view = (await client.get(f"/evals/{eval_id}")).json()
    out = []
    for item in view["runs"]:
        if "runId" in item:
            run = (await client.get(f"/runs/{item['runId']}")).json()
            out.append({**item, "startedAtRun": run["startedAt"], "scenarioId": item["scenarioId"]})
    return out


async def run_eval(
    tenant: TenantHandle,
    label: str,
    *,
    correct: bool,
    repeats: int = 2,
    scenarios: list[str] | None = None,
    scenario: Scenario | None = None,
) -> str:
    """Start a workflow eval (of WORKFLOW, or `scenarios`) and play the automation until
    every run has ended: correct (the reference solution; `scenario` for a custom one),
    or broken (it only finishes the runs)."""
    async with api_client(tenant) as client:
        created = await client.post(
            "/evals",
            json={
                "mode": "workflow",
                "label": label,
                "scenarios": scenarios or WORKFLOW,
                "repeats": repeats,
                "personas": "baseline",
            },
        )
        assert created.status_code == 201, created.text
        eval_id: str = created.json()["id"]
    await drive_eval(tenant, eval_id, correct=correct, scenario=scenario)
    return eval_id


async def drive_eval(
    tenant: TenantHandle, eval_id: str, *, correct: bool, scenario: Scenario | None = None
) -> None:
    """Play the automation on an eval's runs as they start until every run has ended:
    correct (the reference solution; `scenario` for a custom one), or broken (it only
    finishes the runs)."""
    async with api_client(tenant) as client:
        handled: set[str] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            view = (await client.get(f"/evals/{eval_id}")).json()
            if view["status"] == "completed":
                return
            for item in await started_runs(client, eval_id):
                if item["runId"] in handled or item["status"] != "live":
                    continue
                handled.add(item["runId"])
                if correct:
                    await do_the_work(tenant, item, scenario)
                await client.post(f"/runs/{item['runId']}/finish")
            await asyncio.sleep(0.1)
    raise AssertionError(f"eval {eval_id} did not complete")


async def test_correct_automation_passes_and_summary(tenant: TenantHandle) -> None:
    eval_id = await run_eval(tenant, "automation v1", correct=True)
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{eval_id}")).json()
    assert view["status"] == "completed"
    assert view["total"] == len(WORKFLOW) * 2
    summary = view["summary"]
    assert summary["passRate"]["passes"] == summary["passRate"]["runs"] == len(WORKFLOW) * 2
    assert summary["passRate"]["ci95"][1] == 1.0
    assert summary["k"] == 2 and summary["passHatK"] == 1.0 and summary["passAtK"] == 1.0
    assert summary["flakyCells"] == []
    assert summary["incomplete"] is False
    assert "baseline" in summary["personas"]
    assert all("brief" not in r for r in view["runs"])  # workflow mode has no brief


async def test_broken_automation_regresses(tenant: TenantHandle) -> None:
    good = await run_eval(tenant, "automation v1", correct=True, repeats=3)
    bad = await run_eval(tenant, "automation v2", correct=False, repeats=3)
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{bad}")).json()
        compared = (await client.get(f"/evals/{bad}/compare", params={"baseline": good})).json()
        listed = (await client.get("/evals", params={"labelPrefix": "automation v"})).json()
    assert view["summary"]["passRate"]["passes"] == 0
    assert view["summary"]["mostFailedChecks"]
    labels = {c["label"] for c in compared["cells"]}
    assert labels == {"regressed"}
    assert compared["significantRegression"] is True
    assert [e["id"] for e in listed["evals"]] == [bad, good]


async def test_queue_promotion_under_the_live_limit(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        created = await client.post(
            "/evals",
            json={
                "mode": "workflow",
                "label": "queue",
                "scenarios": WORKFLOW,
                "repeats": 5,
                "personas": "all",
            },
        )
        assert created.status_code == 201, created.text
        view = created.json()
        eval_id = view["id"]
        assert view["total"] == 45
        assert view["counts"] == {"live": 20, "queued": 25}
        live = [r["runId"] for r in view["runs"] if r["status"] == "live"]
        for run_id in live[:10]:
            await client.post(f"/runs/{run_id}/cancel")
        view = (await client.get(f"/evals/{eval_id}")).json()
        assert view["counts"].get("live") == 20
        assert view["counts"].get("queued") == 15
        started_order = [r["position"] for r in view["runs"] if r["status"] != "queued"]
        assert started_order == sorted(started_order) == list(range(30))
        cancelled = (await client.post(f"/evals/{eval_id}/cancel")).json()
    assert cancelled["status"] == "cancelled"
    assert set(cancelled["counts"]) == {"cancelled"}
    assert cancelled["summary"]["excluded"]["cancelled"] == 45
    assert cancelled["summary"]["passRate"]["rate"] is None


async def test_eval_requests_are_checked(tenant: TenantHandle) -> None:
    from tests.scenarios.test_import_api import SCENARIO

    many_personas = {
        **SCENARIO,
        "variants": [
            {"persona": f"p{i}", "brief": f"Variant {i}: call {{{{patient.name}}}}."}
            for i in range(12)
        ],
    }
    async with api_client(tenant) as client:
        assert (await client.post("/scenarios", json=many_personas)).status_code == 201
        too_many = await client.post(
            "/evals",
            json={"mode": "agent", "label": "big", "repeats": 5, "personas": "all"},
        )
        assert too_many.status_code == 422
        detail = too_many.json()["detail"]
        agent_cells = sum(
            1 + len(s.scenario.variants)
            for s in builtin_scenarios().values()
            if "agent" in [str(m) for m in s.scenario.modes]
        )
        planned = (agent_cells + 13) * 5
        assert "at most 100" in detail and f"would make {planned} runs" in detail
        bad_repeats = await client.post(
            "/evals", json={"mode": "agent", "label": "x", "repeats": 9}
        )
        assert bad_repeats.status_code == 422
        unknown = await client.post(
            "/evals", json={"mode": "agent", "label": "x", "scenarios": ["nope"]}
        )
        assert unknown.status_code == 404
        assert (await client.get("/evals/eval_nope")).status_code == 404


async def test_an_eval_timeout_out_of_range_is_a_422_naming_the_field(
    tenant: TenantHandle,
) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        for timeout in (5, 2**31):
            response = await client.post(
                f"{tenant.server}/api/testing/evals",
                json={"mode": "workflow", "label": "t", "timeoutSeconds": timeout},
            )
            assert response.status_code == 422, response.text
            assert "timeoutSeconds" in response.text


async def test_the_evals_list_costs_two_statements_whatever_its_length(
    tenant: TenantHandle, db: Any
) -> None:
    """A page of evals is read in a constant number of statements, its counts computed in
    SQL (it was one query per eval, each loading every run row)."""
    from app.evals import service as evals_service

    async def statements_for_list() -> tuple[int, list[Any]]:
        seen: list[str] = []
        async with db.pool.acquire() as conn:
            conn.add_query_logger(lambda record: seen.append(record.query))
            listed = await evals_service.list_evals(conn, tenant.id, None, 50)
        return len(seen), listed

    async with api_client(tenant) as client:
        body = {"mode": "agent", "label": "count", "scenarios": ["referrals.cardiology-referral"]}
        assert (await client.post("/evals", json=body)).status_code == 201
        one, listed = await statements_for_list()
        for _ in range(3):
            assert (await client.post("/evals", json=body)).status_code == 201
        four, listed = await statements_for_list()
    assert len(listed) == 4
    assert one == four == 2
    assert all(item.total == 1 and sum(item.counts.values()) == 1 for item in listed)


async def test_the_evals_list_counts_follow_the_runs(tenant: TenantHandle) -> None:
    """The list counts an item by its run's status as copied onto the item (migration
    0019's triggers): runs starting, ending, cancelled and promoted in their place must
    show there as in the eval's own view, which reads the runs."""

    async def both(client: httpx.AsyncClient, eval_id: str) -> tuple[Any, Any]:
        view = (await client.get(f"/evals/{eval_id}")).json()
        listed = (await client.get("/evals", params={"labelPrefix": "follow"})).json()
        (item,) = [e for e in listed["evals"] if e["id"] == eval_id]
        assert item["total"] == view["total"] and item["status"] == view["status"]
        return item["counts"], view["counts"]

    async with api_client(tenant) as client:
        body = {"mode": "workflow", "label": "follow", "scenarios": WORKFLOW, "repeats": 5}
        created = await client.post("/evals", json={**body, "personas": "all"})
        assert created.status_code == 201, created.text
        eval_id = created.json()["id"]
        assert await both(client, eval_id) == ({"live": 20, "queued": 25},) * 2
        live = [r["runId"] for r in created.json()["runs"] if r["status"] == "live"]
        for run_id in live[:3]:
            assert (await client.post(f"/runs/{run_id}/cancel")).status_code == 200
        for run_id in live[3:5]:  # nothing done: the checks fail
            assert (await client.post(f"/runs/{run_id}/finish")).status_code == 200
        listed, viewed = await both(client, eval_id)
        assert listed == viewed
        assert listed["cancelled"] == 3 and listed["failed"] == 2
        assert listed["live"] == 20 and listed["queued"] == 20  # five promoted in their place
        assert (await client.post(f"/evals/{eval_id}/cancel")).status_code == 200
        listed, viewed = await both(client, eval_id)
    assert listed == viewed == {"cancelled": 43, "failed": 2}
