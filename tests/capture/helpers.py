"""What the capture tests share: a scenario with integration stubs, starting runs of it."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from app.openapi import SCENARIO_EXAMPLE
from tests.conftest import TenantHandle

# The API document's own example scenario, with stubs of a pharmacy integration.
SCENARIO: dict[str, Any] = {
    **copy.deepcopy(SCENARIO_EXAMPLE),
    "id": "custom.capture-pharmacy",
    "integrations": [
        {
            "name": "pharmacy",
            "method": "POST",
            "path": "/orders",
            "status": 201,
            "answer": {"orderId": "ord-1", "status": "accepted"},
        },
        {"name": "pharmacy", "method": "GET", "path": "/orders/*", "answer": {"status": "filled"}},
        {"name": "fax", "path": "/*", "status": 204},
    ],
}


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    )


async def start_run(tenant: TenantHandle, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """Import the scenario (the stubbed one by default) and start a run of it."""
    scenario = scenario or SCENARIO
    async with api_client(tenant) as client:
        imported = await client.post("/scenarios", json=scenario)
        assert imported.status_code == 201, imported.text
        started = await client.post("/runs", json={"scenarioId": scenario["id"]})
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    return run


async def finish(tenant: TenantHandle, run_id: str) -> None:
    async with api_client(tenant) as client:
        r = await client.post(f"/runs/{run_id}/cancel")
    assert r.status_code == 200, r.text


async def captures(tenant: TenantHandle, run_id: str, **params: Any) -> dict[str, Any]:
    async with api_client(tenant) as client:
        r = await client.get(f"/runs/{run_id}/captures", params=params)
    assert r.status_code == 200, r.text
    listed: dict[str, Any] = r.json()
    return listed
