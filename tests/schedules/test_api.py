"""The schedules API over real HTTP: named 422s for each rule, CRUD, pause and resume,
and tenant isolation."""

from __future__ import annotations

from typing import Any

import httpx

from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.evals.test_evals import api_client

SCENARIO = "results.critical-lab"
# Once a year: the test server's own worker will not start it while a test runs.
YEARLY = "0 3 1 1 *"


def body(**changes: Any) -> dict[str, Any]:
    evaluation = {"mode": "workflow", "labelPrefix": "nightly", "scenarios": [SCENARIO]}
    evaluation.update(changes.pop("eval", {}))
    return {"name": "nightly", "cron": YEARLY, "eval": evaluation, **changes}


def paths(response: httpx.Response) -> list[str]:
    return [e["path"] for e in response.json().get("errors", [])]


async def test_each_rule_is_a_named_422(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        too_often = await client.post("/schedules", json=body(cron="*/10 * * * *"))
        bad = await client.post("/schedules", json=body(cron="61 * * * *"))
        few_fields = await client.post("/schedules", json=body(cron="* * *"))
        agent = await client.post("/schedules", json=body(eval={"mode": "agent"}))
        timeout = await client.post("/schedules", json=body(eval={"timeoutSeconds": 5}))
        repeats = await client.post("/schedules", json=body(eval={"repeats": 9}))
        unknown = await client.post("/schedules", json=body(eval={"scenarios": ["nope"]}))
        no_prefix = await client.post("/schedules", json=body(eval={"labelPrefix": ""}))
        listed = (await client.get("/schedules")).json()
    assert too_often.status_code == 422, too_often.text
    assert paths(too_often) == ["cron"]
    assert "fires 10 minute(s) apart" in too_often.json()["detail"]
    assert "at least 15 minutes apart" in too_often.json()["detail"]
    assert bad.status_code == 422 and paths(bad) == ["cron"]
    assert "Bad minute" in bad.json()["detail"]
    assert few_fields.status_code == 422 and "must have 5 fields" in few_fields.json()["detail"]
    assert agent.status_code == 422 and paths(agent) == ["eval.mode"]
    assert "agent mode needs an agent" in agent.json()["detail"]
    # The eval is checked as POST /evals checks it, its fields named under `eval`.
    assert timeout.status_code == 422 and paths(timeout) == ["eval.timeoutSeconds"]
    assert repeats.status_code == 422 and "repeats must be 1 to 5" in repeats.json()["detail"]
    assert unknown.status_code == 404, unknown.text  # as POST /evals answers it
    assert "unknown scenario(s): nope" in unknown.json()["detail"]
    assert no_prefix.status_code == 422 and paths(no_prefix) == ["eval.labelPrefix"]
    assert listed == {"schedules": []}


async def test_at_most_ten_schedules_a_tenant(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        for i in range(10):
            r = await client.post("/schedules", json=body(name=f"s{i}"))
            assert r.status_code == 201, r.text
        eleventh = await client.post("/schedules", json=body(name="s10"))
        assert eleventh.status_code == 422
        assert paths(eleventh) == ["schedules"]
        assert "at most 10 schedules" in eleventh.json()["detail"]
        first = (await client.get("/schedules")).json()["schedules"][0]["id"]
        assert (await client.delete(f"/schedules/{first}")).status_code == 204
        assert (await client.post("/schedules", json=body(name="s10"))).status_code == 201


async def test_create_get_list_pause_resume_delete(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        created = await client.post(
            "/schedules",
            json=body(
                name="weekday mornings",
                cron="0  6 * * 1-5",
                eval={"repeats": 2, "revision": "v7", "labelPrefix": "morning"},
            ),
        )
        assert created.status_code == 201, created.text
        view = created.json()
        schedule_id = view["id"]
        assert view["cron"] == "0 6 * * 1-5"
        assert view["description"] == "At 06:00 on Monday through Friday"
        assert view["eval"] == {
            "mode": "workflow",
            "labelPrefix": "morning",
            "scenarios": [SCENARIO],
            "personas": "baseline",
            "repeats": 2,
            "revision": "v7",
        }
        assert view["paused"] is False and view["nextDueAt"].endswith("T06:00:00+00:00")
        assert view["evals"] == [] and view["history"] == [] and view["latestCompare"] is None
        assert (await client.get(f"/schedules/{schedule_id}")).json() == view
        listed = (await client.get("/schedules")).json()["schedules"]
        assert [s["id"] for s in listed] == [schedule_id]
        paused = (await client.post(f"/schedules/{schedule_id}/pause")).json()
        assert paused["paused"] is True and paused["nextDueAt"] is None
        resumed = (await client.post(f"/schedules/{schedule_id}/resume")).json()
        assert resumed["paused"] is False and resumed["nextDueAt"] == view["nextDueAt"]
        assert (await client.delete(f"/schedules/{schedule_id}")).status_code == 204
        for method, path in (
            ("GET", f"/schedules/{schedule_id}"),
            ("POST", f"/schedules/{schedule_id}/pause"),
            ("POST", f"/schedules/{schedule_id}/resume"),
            ("DELETE", f"/schedules/{schedule_id}"),
        ):
            gone = await client.request(method, path)
            assert gone.status_code == 404, (method, path, gone.text)
            assert f"no schedule '{schedule_id}'" in gone.json()["detail"]


async def test_another_tenant_cannot_see_pause_or_delete_it(
    tenant: TenantHandle, db: Database, server_url: str
) -> None:
    other = await make_tenant(db, server_url)
    async with api_client(tenant) as client:
        schedule_id = (await client.post("/schedules", json=body())).json()["id"]
    async with api_client(other) as client:
        assert (await client.get("/schedules")).json() == {"schedules": []}
        assert (await client.get(f"/schedules/{schedule_id}")).status_code == 404
        assert (await client.post(f"/schedules/{schedule_id}/pause")).status_code == 404
        assert (await client.delete(f"/schedules/{schedule_id}")).status_code == 404
        # Its own ten are its own: the first tenant's schedule does not count against it.
        for i in range(10):
            assert (await client.post("/schedules", json=body(name=f"o{i}"))).status_code == 201
    async with api_client(tenant) as client:
        view = (await client.get(f"/schedules/{schedule_id}")).json()
    assert view["paused"] is False
