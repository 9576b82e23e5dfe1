"""What the run page shows of captures (docs/console.md): the run's capture endpoints in
"Hand it to an agent" (the auth token behind "show", in no URL), and each captured SMS,
e-mail and integration call as a system line of the conversation, in time order with the
messages, arriving live with the page's poll; every part escaped; nothing wider than a
phone's screen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from playwright.async_api import Page, expect

from app.console import run_views as rv
from tests.conftest import TenantHandle
from tests.console.conftest import shot
from tests.console.run_helpers import TASKS, staff_message, start
from tests.mcp.client import call_ok, mcp_session
from understudy_client.contract.capture import CapturedEffect

LIVE_MS = 4_000
XSS = "<script>window.__x=1</script>"
SCENARIO: dict[str, Any] = {
    **TASKS,
    "id": "custom.console-captures",
    "integrations": [
        {"name": "pharmacy", "method": "POST", "path": "/orders", "status": 201, "answer": {}}
    ],
}


async def _sms(run: dict[str, Any], body: str) -> None:
    c = run["capture"]
    async with httpx.AsyncClient(auth=(c["accountSid"], c["authToken"]), timeout=30) as http:
        sent = await http.post(
            f"{c['smsBase']}/2010-04-01/Accounts/{c['accountSid']}/Messages.json",
            data={"To": "+15555550123", "From": c["from"], "Body": body},
        )
    assert sent.status_code == 201, sent.text


async def _order(run: dict[str, Any]) -> None:
    c = run["capture"]
    headers = {"Authorization": f"Bearer {c['authToken']}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        called = await http.post(f"{c['integrationsBase']}/pharmacy/orders", json={"rx": XSS})
    assert called.status_code == 201, called.text


async def test_captures_show_in_the_conversation_and_the_endpoints_in_the_details(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    run = await start(tenant, SCENARIO, label="console-captures")
    capture = run["capture"]
    await page.goto(f"/runs/{run['id']}")

    endpoints = page.locator("#capture-endpoints")
    for value in (
        capture["smsBase"],
        capture["accountSid"],
        capture["from"],
        capture["integrationsBase"],
    ):
        await expect(endpoints).to_contain_text(value)
    token = page.locator("#capture-token")
    await expect(token.locator("code")).to_be_hidden()
    hrefs = await page.eval_on_selector_all("[href], [src]", "els => els.map(e => e.href || e.src)")
    assert not [h for h in hrefs if capture["authToken"] in h]
    await token.locator("summary").click()
    await expect(token.locator("code")).to_have_text(capture["authToken"])

    # The agent works while the page is open: a portal message, then an SMS (with a
    # script in it), an e-mail over MCP and a pharmacy order.
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        posted = await fhir.post("/Communication", json=staff_message(run, "We will call you."))
        assert posted.status_code == 201
    await _sms(run, f"Your visit is Monday at 9. {XSS}")
    async with mcp_session(tenant.server, tenant.key) as client:
        await call_ok(
            client,
            "send_email",
            {
                "to": ["maja@example.org"],
                "subject": f"Your visit {XSS}",
                "body": "Dear Maja,\nsee you Monday at 9.",
                "run_id": run["id"],
            },
        )
    await _order(run)

    thread = page.locator('[data-live="thread"] ol.thread > li')
    await expect(thread).to_have_count(4, timeout=LIVE_MS)
    await expect(thread.nth(0)).to_contain_text("We will call you.")
    await expect(thread.nth(1)).to_contain_text(
        f"[sms to +15555550123: Your visit is Monday at 9. {XSS}]"
    )
    await expect(thread.nth(2)).to_contain_text(
        f"[email to maja@example.org: Your visit {XSS} — Dear Maja,]"
    )
    await expect(thread.nth(3)).to_contain_text("[integration POST pharmacy /orders → 201]")
    assert await page.evaluate("typeof window.__x") == "undefined"
    await thread.nth(2).locator("summary").click()
    await expect(thread.nth(2).locator("pre")).to_have_text("Dear Maja,\nsee you Monday at 9.")
    trace = page.locator('[data-live="trace"]')
    for label in ("SMS", "e-mail", "integration"):
        await expect(trace.locator("td", has_text=label).first).to_be_visible()
    await shot(page, "run-captures")

    # A reload renders the same lines; at 390 px nothing is wider than the screen.
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.reload()
    await expect(thread).to_have_count(4)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    await shot(page, "run-captures-phone")


def _effect(kind: str, at: datetime, **fields: Any) -> CapturedEffect:
    base: dict[str, Any] = {
        "id": f"{kind[:2].upper()}1",
        "kind": kind,
        "direction": "outbound",
        "at": at,
        "to": None,
        "from": None,
        "subject": None,
        "body": None,
        "data": {},
        "status": "queued",
    }
    return CapturedEffect.model_validate({**base, **fields})


def test_each_kind_reads_as_one_line() -> None:
    at = datetime(2026, 1, 5, 9, tzinfo=UTC)
    sms = rv.capture_line(_effect("sms", at, to="+15555550123", body="Hi"))
    assert sms.line == "sms to +15555550123: Hi" and sms.body is None
    mail = rv.capture_line(
        _effect("email", at, to="a@b.org", subject="Visit", body="\n First line\nsecond")
    )
    assert mail.line == "email to a@b.org: Visit — First line"
    assert mail.body == "\n First line\nsecond"
    one_line = rv.capture_line(_effect("email", at, to="a@b.org", subject=None, body="Only"))
    assert one_line.line == "email to a@b.org: (no subject) — Only" and one_line.body is None
    call = {"method": "GET", "path": "/orders/1", "answer": {"status": 404, "body": None}}
    refused = rv.capture_line(_effect("integration", at, to="pharmacy", data=call))
    assert refused.line == "integration GET pharmacy /orders/1 → 404" and refused.bad


def test_captures_take_their_place_among_the_messages() -> None:
    at = datetime(2026, 1, 5, 9, tzinfo=UTC)

    def message(i: int, when: datetime | None) -> rv.Message:
        return rv.Message(
            id=str(i),
            ref=f"Communication/{i}",
            at=when,
            sent=None,
            sender="–",
            from_patient=False,
            recipients=[],
            text="",
            in_response_to=None,
            engine=None,
            model=None,
            engine_note=None,
        )

    first, second = message(1, at), message(2, at + timedelta(minutes=2))
    early = rv.capture_line(_effect("sms", at - timedelta(minutes=1), id="SMa", to="1"))
    between = rv.capture_line(_effect("sms", at + timedelta(minutes=1), id="SMb", to="1"))
    late = rv.capture_line(_effect("sms", at + timedelta(minutes=3), id="SMc", to="1"))
    items = rv.conversation([first, second], [late, between, early])
    order = [i.message.id if i.message else i.capture.id if i.capture else "?" for i in items]
    assert order == ["SMa", "1", "SMb", "2", "SMc"]
