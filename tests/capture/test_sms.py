"""A run's Twilio-compatible Messages API: Twilio's own SDK and plain httpx send, list and
fetch; wrong credentials, missing fields and ended runs are refused as Twilio would."""

from __future__ import annotations

import asyncio
import email.utils
import re
from typing import Any

import httpx
import pytest
from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client

from tests.capture.helpers import captures, finish, start_run
from tests.conftest import TenantHandle

SID = re.compile(r"^SM[0-9a-f]{32}$")


def messages_url(run: dict[str, Any]) -> str:
    c = run["capture"]
    return f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json"


def twilio_client(run: dict[str, Any]) -> Client:
    c = run["capture"]
    client = Client(c["accountSid"], c["authToken"])
    client.api.base_url = c["smsBase"]  # the one change an agent makes
    return client


async def test_run_view_carries_the_capture_credentials(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    assert re.fullmatch(r"AC[0-9a-f]{32}", c["accountSid"])
    assert re.fullmatch(r"[0-9a-f]{32}", c["authToken"])
    assert re.fullmatch(r"\+1555\d{7}", c["from"])
    assert c["smsBase"] == f"{tenant.server}/api/testing/runs/{run['id']}/sms"
    assert c["integrationsBase"] == f"{tenant.server}/api/testing/runs/{run['id']}/integrations"
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        again = (await client.get(f"{tenant.server}/api/testing/runs/{run['id']}")).json()
    assert again["capture"] == c  # derived, the same every time
    other = await start_run(tenant)
    assert other["capture"]["accountSid"] != c["accountSid"]
    assert other["capture"]["authToken"] != c["authToken"]


async def test_twilio_sdk_sends_lists_and_fetches(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    client = twilio_client(run)
    sent = await asyncio.to_thread(
        client.messages.create,
        to="+15555550123",
        from_=run["capture"]["from"],
        body="Your appointment is confirmed for Tuesday 10:00.",
    )
    assert SID.match(sent.sid)
    assert sent.account_sid == run["capture"]["accountSid"]
    assert sent.status == "queued" and sent.direction == "outbound-api"
    assert sent.to == "+15555550123" and sent.from_ == run["capture"]["from"]
    assert sent.body == "Your appointment is confirmed for Tuesday 10:00."
    assert sent.num_segments == "1" and sent.num_media == "0" and sent.price is None
    assert sent.error_code is None and sent.api_version == "2010-04-01"
    assert sent.date_created is not None  # the SDK parsed the RFC 2822 date

    second = await asyncio.to_thread(
        client.messages.create,
        to="+15555550199",
        messaging_service_sid="MG" + "0" * 32,
        body="Reminder: bring your insurance card.",
        status_callback="http://example.invalid/status",
    )
    assert second.from_ == run["capture"]["from"]  # the run's number stands in

    fetched = await asyncio.to_thread(client.messages(sent.sid).fetch)
    assert fetched.body == sent.body and fetched.sid == sent.sid
    listed = await asyncio.to_thread(client.messages.list)
    assert [m.sid for m in listed] == [second.sid, sent.sid]  # newest first, as Twilio
    paged = await asyncio.to_thread(client.messages.list, page_size=1)
    assert [m.sid for m in paged] == [second.sid, sent.sid]  # followed next_page_uri
    to_one = await asyncio.to_thread(client.messages.list, to="+15555550123")
    assert [m.sid for m in to_one] == [sent.sid]

    kept = await captures(tenant, run["id"])
    assert [e["id"] for e in kept["captures"]] == [sent.sid, second.sid]  # oldest first
    first = kept["captures"][0]
    assert first["kind"] == "sms" and first["direction"] == "outbound"
    assert first["to"] == "+15555550123" and first["from"] == run["capture"]["from"]
    assert first["status"] == "queued"
    assert first["data"]["params"]["Body"] == sent.body
    assert kept["captures"][1]["data"]["params"]["StatusCallback"] == (
        "http://example.invalid/status"
    )


async def test_plain_httpx_gets_twilio_json(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        r = await client.post(
            messages_url(run), data={"To": "+15555550123", "From": c["from"], "Body": "ł" * 71}
        )
        assert r.status_code == 201, r.text
        message = r.json()
        assert SID.match(message["sid"])
        assert message["num_segments"] == "2"  # UCS-2: 70 a segment
        assert email.utils.parsedate_to_datetime(message["date_created"]).tzinfo is not None
        assert message["uri"] == (
            f"/2010-04-01/Accounts/{c['accountSid']}/Messages/{message['sid']}.json"
        )
        assert set(message["subresource_uris"]) == {"media"}
        page = (await client.get(messages_url(run), params={"PageSize": 5})).json()
        assert [m["sid"] for m in page["messages"]] == [message["sid"]]
        assert page["page"] == 0 and page["page_size"] == 5 and page["next_page_uri"] is None


@pytest.mark.parametrize(
    "auth",
    [
        None,
        ("wrong", "credentials"),
        "other-account",  # the token of this run, another SID
        "other-token",
    ],
)
async def test_wrong_credentials_get_twilio_401(tenant: TenantHandle, auth: Any) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    if auth == "other-account":
        auth = ("AC" + "0" * 32, c["authToken"])
    elif auth == "other-token":
        auth = (c["accountSid"], "f" * 32)
    async with httpx.AsyncClient() as client:
        r = await client.post(
            messages_url(run), data={"To": "+15555550123", "Body": "hi"}, auth=auth
        )
        listed = await client.get(messages_url(run), auth=auth)
    for answer in (r, listed):
        assert answer.status_code == 401
        body = answer.json()
        assert body["code"] == 20003 and body["status"] == 401
        assert set(body) == {"code", "message", "more_info", "status"}
    assert (await captures(tenant, run["id"]))["captures"] == []


async def test_another_runs_credentials_are_refused(tenant: TenantHandle) -> None:
    run, other = await start_run(tenant), await start_run(tenant)
    o = other["capture"]
    async with httpx.AsyncClient(auth=(o["accountSid"], o["authToken"])) as client:
        url = f"{run['capture']['smsBase']}/2010-04-01/Accounts/{o['accountSid']}/Messages.json"
        r = await client.post(url, data={"To": "+15555550123", "Body": "hi"})
    assert r.status_code == 401


async def test_sdk_sees_a_twilio_error(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    client = Client(run["capture"]["accountSid"], "0" * 32)
    client.api.base_url = run["capture"]["smsBase"]
    with pytest.raises(TwilioRestException) as raised:
        await asyncio.to_thread(client.messages.create, to="+15555550123", body="x", from_="+1")
    assert raised.value.status == 401 and raised.value.code == 20003


@pytest.mark.parametrize(
    ("form", "code", "field"),
    [
        ({"From": "+15555550100", "Body": "hi"}, 21604, "To"),
        ({"To": "+15555550123", "From": "+15555550100"}, 21602, "Body"),
        ({"To": "+15555550123", "From": "+15555550100", "Body": "  "}, 21602, "Body"),
        ({"To": "+15555550123", "Body": "hi"}, 21603, "From"),
        ({"To": "+15555550123", "From": "+15555550100", "Body": "x" * 1601}, 21617, "1600"),
    ],
)
async def test_missing_fields_are_named(
    tenant: TenantHandle, form: dict[str, str], code: int, field: str
) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        r = await client.post(messages_url(run), data=form)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == code and field in r.json()["message"]
    assert (await captures(tenant, run["id"]))["captures"] == []


async def test_fetching_an_unknown_message_is_404(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    base = messages_url(run).removesuffix(".json")
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        for sid in ("SM" + "0" * 32, "nonsense"):
            r = await client.get(f"{base}/{sid}.json")
            assert r.status_code == 404 and r.json()["code"] == 20404


async def test_an_ended_run_takes_no_more_sms(tenant: TenantHandle) -> None:
    run = await start_run(tenant)
    c = run["capture"]
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"])) as client:
        sent = await client.post(
            messages_url(run), data={"To": "+15555550123", "From": c["from"], "Body": "before"}
        )
        assert sent.status_code == 201
        await finish(tenant, run["id"])
        r = await client.post(
            messages_url(run), data={"To": "+15555550123", "From": c["from"], "Body": "after"}
        )
        assert r.status_code == 409
        assert "has ended" in r.json()["message"]
        # What was captured stays readable.
        listed = (await client.get(messages_url(run))).json()["messages"]
    assert [m["body"] for m in listed] == ["before"]
