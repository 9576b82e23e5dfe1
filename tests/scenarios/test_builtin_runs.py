"""Every built-in scenario, end to end over HTTP: its reference solution passes (for the
baseline and every persona), and doing nothing fails."""

from __future__ import annotations

import httpx
import pytest

from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle

CASES = [
    (scenario_id, persona)
    for scenario_id, loaded in sorted(builtin_scenarios().items())
    for persona in [None, *(v.persona for v in loaded.scenario.variants)]
]


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    )


@pytest.mark.parametrize(("scenario_id", "persona"), CASES)
async def test_reference_run_passes(
    tenant: TenantHandle, scenario_id: str, persona: str | None
) -> None:
    params = {"variant": persona} if persona else {}
    async with api_client(tenant) as client:
        r = await client.post(f"/scenarios/{scenario_id}/reference-run", params=params)
    assert r.status_code == 200, r.text
    verdict = r.json()
    failing = [e for e in verdict["expectations"] if e["required"] and not e["passed"]]
    assert verdict["status"] == "passed", failing
    assert verdict["variant"] == persona


@pytest.mark.parametrize("scenario_id", sorted(builtin_scenarios()))
async def test_doing_nothing_fails(tenant: TenantHandle, scenario_id: str) -> None:
    async with api_client(tenant) as client:
        run = (await client.post("/runs", json={"scenarioId": scenario_id})).json()
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed", final
    assert final["passed"] is False
    assert any(e["required"] and e["passed"] is False for e in final["expectations"])


async def test_scenario_list_and_read(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        listed = (await client.get("/scenarios")).json()["scenarios"]
        ids = {s["id"] for s in listed}
        assert set(builtin_scenarios()) <= ids
        one = listed[0]
        assert {"id", "title", "category", "modes", "summary", "personas", "builtin"} <= set(one)
        full = (await client.get(f"/scenarios/{one['id']}")).json()
        assert full["scenario"]["expectations"]
        assert (await client.get("/scenarios/nope")).status_code == 404
