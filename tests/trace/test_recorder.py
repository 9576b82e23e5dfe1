"""The trace over real HTTP: each call attributed to the run it belongs to (its run view,
a resource of its fixture, shared data in every live run), and old calls purged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx

from app.db import Database, Scopes
from tests.conftest import TenantHandle
from tests.runs.test_run_flow import api, start


async def test_trace_attribution(tenant: TenantHandle) -> None:
    first, second = await asyncio.gather(start(tenant), start(tenant))
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        await client.get(f"{first['fhirBase']}/Slot?status=free&_count=1")
        await client.get(f"{tenant.fhir_base}/{second['fixture']['patient']}")
        await client.get(f"{tenant.fhir_base}/Practitioner?family=Chen")
    async with api(tenant) as client:
        one = (await client.get(f"/runs/{first['id']}/trace")).json()["calls"]
        two = (await client.get(f"/runs/{second['id']}/trace")).json()["calls"]
    one_paths = {(c["path"], c["shared"]) for c in one}
    two_paths = {(c["path"], c["shared"]) for c in two}
    assert (f"/api/testing/runs/{first['id']}/fhir/r4/Slot", False) in one_paths
    assert (f"/api/fhir/r4/{second['fixture']['patient']}", False) in two_paths
    assert (f"/api/fhir/r4/{second['fixture']['patient']}", False) not in one_paths
    assert ("/api/fhir/r4/Practitioner", True) in one_paths
    assert ("/api/fhir/r4/Practitioner", True) in two_paths
    assert not any("/Slot" in p for p, _ in two_paths)


async def test_trace_retention(tenant: TenantHandle, db: Database) -> None:
    from app.worker import purge_trace

    old = datetime.now(UTC) - timedelta(days=8)
    await db.pool.execute(
        """INSERT INTO trace_call (tenant_id, at, method, path, query, status, duration_ms,
            transport, refs) VALUES ($1, $2, 'GET', '/api/fhir/r4/Patient', '', 200, 1, 'rest',
            '{}'), ($1, now(), 'GET', '/api/fhir/r4/Patient', '', 200, 1, 'rest', '{}')""",
        tenant.id,
        old,
    )
    # A job context as the worker builds it: the job opens its unit on `scopes`.
    assert await purge_trace({"db": db, "scopes": Scopes(db.pool)}) >= 1
    left = await db.pool.fetch("SELECT at FROM trace_call WHERE tenant_id = $1", tenant.id)
    assert len(left) == 1 and left[0]["at"] > old
