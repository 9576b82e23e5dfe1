"""`revision`, the version of the system under test, on runs and evals over HTTP: given or
not, checked, stored, returned in every view and list, filtered on, and carried by the
runs an eval starts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.conftest import TenantHandle
from tests.evals.test_evals import WORKFLOW, api_client
from tests.runs.test_run_flow import SCENARIO, api, start


async def test_a_run_keeps_its_revision_in_every_view(tenant: TenantHandle) -> None:
    run = await start(tenant, label="nightly", revision="1a2b3c4")
    assert run["revision"] == "1a2b3c4"
    async with api(tenant) as client:
        live = (await client.get(f"/runs/{run['id']}")).json()
        assert live["status"] == "live" and live["revision"] == "1a2b3c4"
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
        assert final["status"] == "failed" and final["revision"] == "1a2b3c4"
        [listed] = (await client.get("/runs")).json()["runs"]
        assert listed["revision"] == "1a2b3c4"


async def test_a_run_without_a_revision_says_null(tenant: TenantHandle) -> None:
    run = await start(tenant)
    assert "revision" in run and run["revision"] is None
    async with api(tenant) as client:
        cancelled = (await client.post(f"/runs/{run['id']}/cancel")).json()
    assert cancelled["revision"] is None


async def test_a_bad_revision_is_a_422_naming_the_field(tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        for revision in ("x" * 101, "", 7):
            r = await client.post("/runs", json={"scenarioId": SCENARIO, "revision": revision})
            assert r.status_code == 422, (revision, r.text)
            assert [e["path"] for e in r.json()["errors"]] == ["revision"]
        longest = await client.post("/runs", json={"scenarioId": SCENARIO, "revision": "x" * 100})
        assert longest.status_code == 201, longest.text
        for revision in ("x" * 101, ""):
            r = await client.post(
                "/evals", json={"mode": "workflow", "label": "r", "revision": revision}
            )
            assert r.status_code == 422, (revision, r.text)
            assert [e["path"] for e in r.json()["errors"]] == ["revision"]


async def test_runs_are_filtered_by_revision_exactly(tenant: TenantHandle) -> None:
    v3 = await start(tenant, revision="triage-agent v3")
    v3b = await start(tenant, revision="triage-agent v3")
    await start(tenant, revision="triage-agent v31")
    await start(tenant)
    async with api(tenant) as client:
        found = (await client.get("/runs", params={"revision": "triage-agent v3"})).json()
        assert [r["id"] for r in found["runs"]] == [v3b["id"], v3["id"]]
        none = (await client.get("/runs", params={"revision": "triage-agent"})).json()
        assert none["runs"] == []
        combined = await client.get(
            "/runs", params={"revision": "triage-agent v3", "status": "live", "limit": 1}
        )
        assert [r["id"] for r in combined.json()["runs"]] == [v3b["id"]]
        assert len((await client.get("/runs")).json()["runs"]) == 4


async def _eval(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    created = await client.post(
        "/evals", json={"mode": "workflow", "scenarios": WORKFLOW[:2], **body}
    )
    assert created.status_code == 201, created.text
    view: dict[str, Any] = created.json()
    return view


async def _started(client: httpx.AsyncClient, eval_id: str, count: int) -> list[str]:
    deadline = time.monotonic() + 15
    while True:
        view = (await client.get(f"/evals/{eval_id}")).json()
        run_ids = [r["runId"] for r in view["runs"] if "runId" in r]
        if len(run_ids) == count or time.monotonic() > deadline:
            return run_ids
        await asyncio.sleep(0.1)


async def test_an_eval_keeps_its_revision_and_its_runs_carry_it(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        created = await _eval(client, label="automation v3", revision="abc1234")
        assert created["revision"] == "abc1234"
        run_ids = await _started(client, created["id"], 2)
        assert len(run_ids) == 2
        for run_id in run_ids:
            run = (await client.get(f"/runs/{run_id}")).json()
            assert run["revision"] == "abc1234" and run["label"] == "automation v3"
        by_revision = (await client.get("/runs", params={"revision": "abc1234"})).json()
        assert {r["id"] for r in by_revision["runs"]} == set(run_ids)
        cancelled = (await client.post(f"/evals/{created['id']}/cancel")).json()
        assert cancelled["revision"] == "abc1234"
        assert (await client.get(f"/evals/{created['id']}")).json()["revision"] == "abc1234"


async def test_evals_are_listed_with_and_filtered_by_revision(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        old = await _eval(client, label="main 1", revision="aaa1111")
        new = await _eval(client, label="main 2", revision="bbb2222")
        bare = await _eval(client, label="main 3")
        assert bare["revision"] is None
        listed = (await client.get("/evals")).json()["evals"]
        assert [(e["id"], e["revision"]) for e in listed] == [
            (bare["id"], None),
            (new["id"], "bbb2222"),
            (old["id"], "aaa1111"),
        ]
        found = (await client.get("/evals", params={"revision": "aaa1111"})).json()["evals"]
        assert [e["id"] for e in found] == [old["id"]]
        both = await client.get("/evals", params={"revision": "bbb2222", "labelPrefix": "main"})
        assert [e["id"] for e in both.json()["evals"]] == [new["id"]]
        assert (await client.get("/evals", params={"revision": "aaa"})).json()["evals"] == []
        for view in (old, new, bare):
            await client.post(f"/evals/{view['id']}/cancel")
