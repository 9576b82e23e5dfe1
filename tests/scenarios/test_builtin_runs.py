"""Built-in scenarios over the HTTP API: listing, reading and a reference run."""

from __future__ import annotations

import httpx

from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle


def api_client(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    )


async def test_reference_run_endpoint(tenant: TenantHandle) -> None:
    """What passing looks like, over HTTP (every scenario's oracle, for every persona, is
    replayed by the library check in tests/orchestration/test_check.py)."""
    async with api_client(tenant) as client:
        r = await client.post(
            "/scenarios/scheduling.book-named-practitioner/reference-run",
            params={"variant": "spanish"},
        )
        assert r.status_code == 200, r.text
        verdict = r.json()
        assert verdict["status"] == "passed", verdict["expectations"]
        assert verdict["variant"] == "spanish"
        assert verdict["label"] == "reference-run"
        bad = await client.post(
            "/scenarios/scheduling.book-named-practitioner/reference-run",
            params={"variant": "klingon"},
        )
        assert bad.status_code == 422


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
