"""Captured calls are in the run's trace with their own transport, and mark the run
changed so it is regraded."""

from __future__ import annotations

import httpx

from app.db import Database
from tests.capture.helpers import api_client, start_run
from tests.conftest import TenantHandle


async def test_captured_calls_are_traced_with_their_transport(
    tenant: TenantHandle, db: Database
) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    before = await db.pool.fetchval(
        "SELECT changed_at FROM run WHERE tenant_id = $1 AND id = $2", tenant.id, run["id"]
    )
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        sent = await client.post(
            f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json",
            data={"To": "+15555550123", "From": c["from"], "Body": "hello"},
        )
        assert sent.status_code == 201
        called = await client.post(f"{c['integrationsBase']}/pharmacy/orders", json={"a": 1})
        assert called.status_code == 201
    after = await db.pool.fetchval(
        "SELECT changed_at FROM run WHERE tenant_id = $1 AND id = $2", tenant.id, run["id"]
    )
    assert after > before  # regraded soon

    async with api_client(tenant) as client:
        calls = (await client.get(f"/runs/{run['id']}/trace")).json()["calls"]
    by_transport = {call["transport"]: call for call in calls}
    sms = by_transport["sms"]
    assert sms["method"] == "POST" and sms["status"] == 201 and not sms["shared"]
    assert sms["path"].endswith("/Messages.json")
    integration = by_transport["integration"]
    assert integration["path"] == f"/api/testing/runs/{run['id']}/integrations/pharmacy/orders"
    assert integration["status"] == 201
    kept = await db.pool.fetchrow(
        "SELECT request, response FROM trace_call WHERE tenant_id = $1 AND run_id = $2"
        " AND transport = 'integration'",
        tenant.id,
        run["id"],
    )
    assert kept is not None
    assert kept["request"] == '{"a":1}' and "ord-1" in kept["response"]
