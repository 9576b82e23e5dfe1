"""An eval's per-run timeout is checked when the eval is created, naming the field."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import TenantHandle


@pytest.mark.parametrize("seconds", [10, 1801, 10**15, -5])
async def test_a_timeout_out_of_bounds_is_a_422(tenant: TenantHandle, seconds: int) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        r = await client.post(
            "/api/testing/evals",
            json={
                "mode": "workflow",
                "label": "bounds",
                "scenarios": ["scheduling.noshow-outreach"],
                "timeoutSeconds": seconds,
            },
        )
        listed = (await client.get("/api/testing/evals")).json()
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == ["timeoutSeconds"]
    assert listed["evals"] == []


async def test_a_timeout_in_bounds_is_taken(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        r = await client.post(
            "/api/testing/evals",
            json={
                "mode": "workflow",
                "label": "bounds",
                "scenarios": ["scheduling.noshow-outreach"],
                "timeoutSeconds": 60,
            },
        )
        assert r.status_code == 201, r.text
        await client.post(f"/api/testing/evals/{r.json()['id']}/cancel")
