"""The run page shows the simulated patient's SMS reply (docs/capture.md "Inbound SMS")
as the patient's line of the conversation, after the text it answers, and where replies
are posted under the capture endpoints."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.capture.test_sms_inbound import ANSWER, E164, SCENARIO, text_patient
from tests.conftest import TenantHandle
from tests.console.run_helpers import start
from tests.threaded_server import free_port

LIVE_MS = 10_000


async def test_the_patients_text_reply_is_the_patients_line(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    reply_url = f"http://127.0.0.1:{free_port()}/twilio/inbound"  # nobody answers there
    run = await start(tenant, SCENARIO, smsReplyUrl=reply_url)
    await page.goto(f"/runs/{run['id']}")
    await expect(page.locator("#capture-endpoints")).to_contain_text(reply_url)

    await text_patient(run, "Hi Maja, which day and time would suit you?")
    thread = page.locator('[data-live="thread"] ol.thread > li')
    await expect(thread).to_have_count(2, timeout=LIVE_MS)
    await expect(thread.nth(0)).to_contain_text(f"[sms to {E164}: Hi Maja")
    await expect(thread.nth(1)).to_contain_text(f"[sms from {E164}: ")
    await expect(thread.nth(1)).to_contain_text(ANSWER)
