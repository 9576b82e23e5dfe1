"""The daily write quota of a tenant and its usage, over real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from app.db import Database
from app.tenants.quota import REFRESH_SECONDS
from tests.conftest import TenantHandle
from tests.runs.test_run_flow import start


async def test_quota_and_usage(
    tenant: TenantHandle, db: Database, quota_clock: Callable[[float], None]
) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        before = (await client.get("/api/usage")).json()
        assert before["writes"] == 0 and before["limit"] == 20_000
        await client.post("/api/fhir/r4/Patient", json={"resourceType": "Patient"})
        await start(tenant)  # built-in setup writes are free
        after = (await client.get("/api/usage")).json()
        assert after["writes"] == 1
        await db.pool.execute(
            "INSERT INTO usage_counter (tenant_id, day, shard, writes) VALUES ($1, $2, 99, $3)",
            tenant.id,
            datetime.now(UTC).date(),
            20_000,
        )
        quota_clock(REFRESH_SECONDS + 0.1)  # past the per-process cache's refresh
        over = await client.post("/api/fhir/r4/Patient", json={"resourceType": "Patient"})
        assert over.status_code == 429
        outcome = over.json()
        assert outcome["resourceType"] == "OperationOutcome"
        assert "daily write quota" in outcome["issue"][0]["diagnostics"]
        assert "resets at" in outcome["issue"][0]["diagnostics"]
        reads = await client.get("/api/fhir/r4/Patient")
        assert reads.status_code == 200
