"""Integration calls of a run: captured, answered by the scenario's stub (or 202 when none
is declared), with the run's token or the tenant's key; refused otherwise and once the
run has ended."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.capture.helpers import SCENARIO, captures, finish, start_run
from tests.conftest import TenantHandle


def token_auth(run: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {run['capture']['authToken']}"}


async def test_a_stub_answers_and_the_call_is_captured(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    base = run["capture"]["integrationsBase"]
    async with httpx.AsyncClient(headers=token_auth(run)) as client:
        order = await client.post(
            f"{base}/pharmacy/orders",
            json={"drug": "amoxicillin 500 mg", "patient": run["fixture"]["patient"]},
            headers={"X-Request-Id": "abc"},
            params={"priority": "routine"},
        )
        assert order.status_code == 201, order.text
        assert order.json() == {"orderId": "ord-1", "status": "accepted"}
        status = await client.get(f"{base}/pharmacy/orders/ord-1")
        assert status.status_code == 200 and status.json() == {"status": "filled"}
        fax = await client.put(f"{base}/fax/send", content=b"plain text")
        assert fax.status_code == 204 and fax.content == b""

    kept = (await captures(tenant, run["id"]))["captures"]
    assert [(e["kind"], e["to"], e["status"]) for e in kept] == [
        ("integration", "pharmacy", "stubbed"),
        ("integration", "pharmacy", "stubbed"),
        ("integration", "fax", "stubbed"),
    ]
    data = kept[0]["data"]
    assert data["method"] == "POST" and data["path"] == "/orders"
    assert data["query"] == "priority=routine"
    assert data["body"] == {"drug": "amoxicillin 500 mg", "patient": run["fixture"]["patient"]}
    assert data["headers"]["x-request-id"] == "abc"
    assert "authorization" not in {h.lower() for h in data["headers"]}
    assert data["answer"] == {"status": 201, "body": {"orderId": "ord-1", "status": "accepted"}}
    assert kept[2]["body"] == "plain text" and kept[2]["data"]["body"] == "plain text"


async def test_a_call_without_a_stub_is_captured_with_202(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    base = run["capture"]["integrationsBase"]
    async with httpx.AsyncClient(headers=token_auth(run)) as client:
        for url in (f"{base}/pharmacy/refills", f"{base}/labs", f"{base}/pharmacy/orders/x/y"):
            r = await client.delete(url)
            assert r.status_code == 202, r.text
            answer = r.json()
            assert answer["captured"] is True and answer["id"].startswith("IE")
            assert "no stub declared" in answer["note"]
    kept = (await captures(tenant, run["id"]))["captures"]
    assert [e["status"] for e in kept] == ["unstubbed"] * 3
    assert [e["data"]["path"] for e in kept] == ["/refills", "/", "/orders/x/y"]


@pytest.mark.parametrize("how", ["bearer-token", "basic-password", "tenant-key"])
async def test_each_credential_is_accepted(tenant: TenantHandle, how: str) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    auth: Any = None
    headers: dict[str, str] = {}
    if how == "bearer-token":
        headers = token_auth(run)
    elif how == "basic-password":
        auth = (c["accountSid"], c["authToken"])
    else:
        headers = tenant.headers
    async with httpx.AsyncClient(headers=headers, auth=auth) as client:
        r = await client.post(f"{c['integrationsBase']}/pharmacy/orders", json={})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer " + "0" * 32},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic !!!"},
        {"Authorization": "Bearer usk_unknown"},
    ],
)
async def test_wrong_credentials_are_401(tenant: TenantHandle, headers: dict[str, str]) -> None:
    run = await start_run(tenant)
    async with httpx.AsyncClient(headers=headers) as client:
        r = await client.post(f"{run['capture']['integrationsBase']}/pharmacy/orders", json={})
    assert r.status_code == 401, r.text
    assert (await captures(tenant, run["id"]))["captures"] == []


async def test_another_runs_token_is_refused(tenant: TenantHandle) -> None:
    run, other = await start_run(tenant), await start_run(tenant)
    async with httpx.AsyncClient(headers=token_auth(other)) as client:
        r = await client.post(f"{run['capture']['integrationsBase']}/pharmacy/orders", json={})
    assert r.status_code == 401


async def test_an_ended_run_takes_no_more_calls(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    await finish(tenant, run["id"])
    async with httpx.AsyncClient(headers=token_auth(run)) as client:
        r = await client.post(f"{run['capture']['integrationsBase']}/pharmacy/orders", json={})
    assert r.status_code == 409
    assert "has ended" in r.json()["detail"]


async def test_a_scenario_without_integrations_answers_202(tenant: TenantHandle) -> None:
    plain = {k: v for k, v in SCENARIO.items() if k != "integrations"}
    run = await start_run(tenant, {**plain, "id": "custom.capture-plain"})
    async with httpx.AsyncClient(headers=token_auth(run)) as client:
        r = await client.get(f"{run['capture']['integrationsBase']}/pharmacy/orders/1")
    assert r.status_code == 202
