"""A run's captures are its tenant's alone: another tenant can neither read them nor
capture on the run, with its own key or its own run's credentials."""

from __future__ import annotations

import httpx

from app.db import Database
from tests.capture.helpers import captures, start_run
from tests.conftest import TenantHandle, make_tenant


async def test_another_tenant_cannot_read_or_write(
    tenant: TenantHandle, db: Database, server_url: str
) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        sent = await client.post(
            f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json",
            data={"To": "+15555550123", "From": c["from"], "Body": "hello"},
        )
    assert sent.status_code == 201

    other = await make_tenant(db, server_url)
    theirs = await start_run(other)
    t = theirs["capture"]
    async with httpx.AsyncClient(headers=other.headers) as client:
        listed = await client.get(f"{server_url}/api/testing/runs/{run['id']}/captures")
        assert listed.status_code == 404
        called = await client.post(f"{c['integrationsBase']}/pharmacy/orders", json={})
        assert called.status_code == 404  # the key's tenant has no such run
    async with httpx.AsyncClient(auth=(t["accountSid"], t["authToken"])) as client:
        base = f"{c['smsBase']}/2010-04-01/Accounts/{t['accountSid']}/Messages"
        assert (await client.get(base + ".json")).status_code == 401
        assert (await client.get(f"{base}/{sent.json()['sid']}.json")).status_code == 401
        posted = await client.post(
            base + ".json", data={"To": "+15555550123", "From": t["from"], "Body": "x"}
        )
        assert posted.status_code == 401
        called = await client.post(f"{c['integrationsBase']}/pharmacy/orders", json={})
        assert called.status_code == 401
    assert [e["body"] for e in (await captures(tenant, run["id"]))["captures"]] == ["hello"]
    assert (await captures(other, theirs["id"]))["captures"] == []


async def test_the_captures_list_pages_oldest_first(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    base = run["capture"]["integrationsBase"]
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        for n in range(5):
            assert (await client.post(f"{base}/labs/{n}", json={"n": n})).status_code == 202
        page = await captures(tenant, run["id"], limit=2)
        seen = [e["data"]["body"]["n"] for e in page["captures"]]
        while page["next"]:
            page = (await client.get(page["next"])).json()
            seen += [e["data"]["body"]["n"] for e in page["captures"]]
    assert seen == [0, 1, 2, 3, 4]
