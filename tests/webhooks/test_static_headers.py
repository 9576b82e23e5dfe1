"""Static delivery headers, over real HTTP to a real receiver: sent with every delivery,
retry, redelivery and ping next to a signature that still verifies; shown once, masked
afterwards; checked (HTTP tokens, no CR/LF/NUL, limits, nothing the delivery sets)."""

from __future__ import annotations

from typing import Any

import pytest

from app.webhooks.service import (
    MAX_HEADER_NAME_CHARS,
    MAX_HEADER_VALUE_CHARS,
    MAX_HEADERS,
    mask_value,
)
from tests.conftest import TenantHandle
from tests.webhooks.receiver import Received, Receiver
from tests.webhooks.test_webhooks import (
    api,
    patient,
    settled,
    subscribe,
    verify,
    wait_deliveries,
    write,
)

TOKEN = "lowcode-header-auth-7f3c9a1b2d4e"
STATIC = {"Authorization": f"Bearer {TOKEN}", "X-Workflow": "lab-orders"}


def carries_static_headers(got: Received) -> bool:
    return (
        got.headers.get("authorization") == f"Bearer {TOKEN}"
        and got.headers.get("x-workflow") == "lab-orders"
    )


async def test_static_headers_ride_along_with_a_verifiable_signature(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    receiver.script = [500, 200]  # the retry must carry them too
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"], headers=STATIC)
        view = (await client.get(f"/api/webhooks/{sub['id']}")).json()
        listing = (await client.get("/api/webhooks")).json()["webhooks"]
        await write(client, "POST", "Patient", patient())
        found = await wait_deliveries(client, sub["id"], settled)
        r = await client.post(f"/api/webhooks/{sub['id']}/deliveries/{found[0]['id']}/redeliver")
        assert r.status_code == 202, r.text
        await receiver.wait_for(3)
        ping = await client.post(f"/api/webhooks/{sub['id']}/test")
        assert ping.status_code == 200, ping.text

    # Shown in clear once, in the answer to the create, then masked.
    assert sub["headers"] == STATIC
    assert view["headers"] == {"Authorization": "••••" + TOKEN[-4:], "X-Workflow": "••••"}
    assert [w["headers"] for w in listing] == [view["headers"]]
    assert TOKEN not in str(view) and TOKEN not in str(listing)

    first, retry, redelivered, pinged = receiver.received
    assert [g.status for g in receiver.received[:2]] == [500, 200]
    for got in receiver.received:
        assert carries_static_headers(got), got.headers
        assert got.headers["content-type"] == "application/json"
        assert got.headers["user-agent"].startswith("Understudy-Webhooks/")
        verify(sub["secret"], got)  # the signature headers are the delivery's own
    assert first.headers["webhook-id"] == retry.headers["webhook-id"]
    assert redelivered.headers["webhook-id"] == found[0]["id"]
    assert verify(sub["secret"], pinged)["type"] == "ping"


async def test_without_headers_nothing_extra_is_sent(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        view = (await client.get(f"/api/webhooks/{sub['id']}")).json()
        await write(client, "POST", "Patient", patient())
        [got] = await receiver.wait_for(1)
    assert sub["headers"] == {} and view["headers"] == {}
    assert "authorization" not in got.headers
    verify(sub["secret"], got)


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("Bearer abc", "••••"),
        ("x" * 15, "••••"),
        ("Bearer 0123456789abcdef", "••••cdef"),
        ("Basic dXNlcjpwYXNzd29yZA==", "••••ZA=="),
    ],
)
def test_masking(value: str, masked: str) -> None:
    assert mask_value(value) == masked


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ({"webhook-signature": "v1,forged"}, "headers.webhook-signature"),
        ({"Webhook-Id": "msg_x"}, "headers.Webhook-Id"),
        ({"webhook-timestamp": "0"}, "headers.webhook-timestamp"),
        ({"Content-Type": "text/plain"}, "headers.Content-Type"),
        ({"content-length": "0"}, "headers.content-length"),
        ({"HOST": "elsewhere.example"}, "headers.HOST"),
        ({"User-Agent": "me"}, "headers.User-Agent"),
        ({"Transfer-Encoding": "chunked"}, "headers.Transfer-Encoding"),
        ({"Connection": "close"}, "headers.Connection"),
        ({"X Bad": "1"}, "headers.X Bad"),
        ({"X-Colon:": "1"}, "headers.X-Colon:"),
        ({"": "1"}, "headers."),
        ({"Ünicode": "1"}, "headers.Ünicode"),
        ({"N" * (MAX_HEADER_NAME_CHARS + 1): "1"}, "headers." + "N" * MAX_HEADER_NAME_CHARS),
        ({"X-Split": "a\r\nX-Injected: 1"}, "headers.X-Split"),
        ({"X-Lf": "a\nb"}, "headers.X-Lf"),
        ({"X-Bell": "a\x07"}, "headers.X-Bell"),
        ({"X-Empty": ""}, "headers.X-Empty"),
        ({"X-Padded": " token "}, "headers.X-Padded"),
        ({"X-Accent": "café"}, "headers.X-Accent"),
        ({"X-Long": "v" * (MAX_HEADER_VALUE_CHARS + 1)}, "headers.X-Long"),
        ({"X-Token": "1", "x-token": "2"}, "headers.x-token"),
        ({f"X-{i}": "1" for i in range(MAX_HEADERS + 1)}, "headers"),
    ],
)
async def test_bad_headers_are_422_naming_the_header(
    tenant: TenantHandle, receiver: Receiver, headers: dict[str, str], path: str
) -> None:
    async with api(tenant) as client:
        r = await client.post(
            "/api/webhooks", json={"url": receiver.url, "events": ["*"], "headers": headers}
        )
        listing = (await client.get("/api/webhooks")).json()
    # A control character FHIR text may not hold (the bell) is refused at the edge (400),
    # before the route's own check (422); both name the header.
    control = any(ord(c) < 32 and c not in "\t\n\r" for v in headers.values() for c in v)
    assert r.status_code == (400 if control else 422), r.text
    assert path in [e["path"] for e in r.json()["errors"]], r.json()
    assert listing == {"webhooks": []}


async def test_a_nul_in_a_header_value_is_refused_at_the_edge(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    """Text with NUL is refused before any route sees it (400 naming the field)."""
    async with api(tenant) as client:
        r = await client.post(
            "/api/webhooks",
            json={"url": receiver.url, "events": ["*"], "headers": {"X-Nul": "a\x00b"}},
        )
        listing = (await client.get("/api/webhooks")).json()
    assert r.status_code == 400, r.text
    assert [e["path"] for e in r.json()["errors"]] == ["headers.X-Nul"]
    assert listing == {"webhooks": []}


@pytest.mark.parametrize("headers", [["Authorization"], "Bearer x", {"X-Number": 5}])
async def test_headers_must_be_an_object_of_strings(
    tenant: TenantHandle, receiver: Receiver, headers: Any
) -> None:
    async with api(tenant) as client:
        r = await client.post(
            "/api/webhooks", json={"url": receiver.url, "events": ["*"], "headers": headers}
        )
    assert r.status_code == 422, r.text
    assert any(e["path"].startswith("headers") for e in r.json()["errors"]), r.json()


async def test_the_limits_themselves_are_allowed(tenant: TenantHandle, receiver: Receiver) -> None:
    headers = {f"X-{i}": "v" for i in range(MAX_HEADERS - 1)}
    headers["N" * MAX_HEADER_NAME_CHARS] = "t\tv " + "v" * (MAX_HEADER_VALUE_CHARS - 4)
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"], headers=headers)
        await write(client, "POST", "Patient", patient())
        [got] = await receiver.wait_for(1)
    assert sub["headers"] == headers
    for name, value in headers.items():
        assert got.headers[name.lower()] == value
    verify(sub["secret"], got)
