"""The eval pages in a real browser: start an eval from the form and watch it complete
while an in-test automation does the work of each run over HTTP; the grid links to the
run pages; the compare page of a correct then a broken automation shows the regression.
The automation of the compare test is an in-test webhook receiver that writes back.
Kept to two tests (the CI budget): the numbers and sentences are covered over HTTP in
test_eval_pages.py."""

from __future__ import annotations

import asyncio
import re
import time

from playwright.async_api import Page, expect

from tests.conftest import TenantHandle
from tests.console.conftest import shot
from tests.evals.test_evals import WORKFLOW, api_client, do_the_work, started_runs
from tests.webhooks.conftest import receiver  # noqa: F401 (the fixture)
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_workflow_runs import (
    Handler,
    api,
    automation,
    reach_out_after_noshow,
    route_critical_result,
    subscribe,
    triage_portal_message,
)

# The in-test automation: what a workflow does on each webhook, over the run's FHIR base.
CORRECT: dict[str, Handler] = {
    "result.final": route_critical_result,
    "message.received": triage_portal_message,
    "appointment.noshow": reach_out_after_noshow,
}


async def _ignore(fhir: object, event: object) -> None:
    """The broken automation: takes the webhook, writes nothing back."""


BROKEN: dict[str, Handler] = dict.fromkeys(CORRECT, _ignore)


async def _workflow_eval(
    tenant: TenantHandle,
    hooks: Receiver,
    secret: str,
    label: str,
    handlers: dict[str, Handler],
) -> str:
    """A workflow eval of WORKFLOW × 3 whose automation is an in-test webhook receiver
    that writes back; a run the automation left alone is finished once its events came."""
    hooks.received.clear()  # what an earlier automation took is not this one's
    async with (
        api_client(tenant) as client,
        automation(tenant, hooks, secret, handlers) as auto,
    ):
        body = {"mode": "workflow", "label": label, "scenarios": WORKFLOW, "repeats": 3}
        created = await client.post("/evals", json=body)
        assert created.status_code == 201, created.text
        eval_id: str = created.json()["id"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if (await client.get(f"/evals/{eval_id}")).json()["status"] == "completed":
                return eval_id
            if handlers is BROKEN:
                seen = {e["runId"] for e in auto.handled}
                for item in await started_runs(client, eval_id):
                    if item["status"] == "live" and item["runId"] in seen:
                        await client.post(f"/runs/{item['runId']}/finish")
            await asyncio.sleep(0.2)
    raise AssertionError(f"eval {eval_id} did not complete")


async def _work_until_done(tenant: TenantHandle, eval_id: str) -> None:
    """The correct automation: each started run gets its writes, then is finished."""
    handled: set[str] = set()
    deadline = time.monotonic() + 60
    async with api_client(tenant) as client:
        while time.monotonic() < deadline:
            if (await client.get(f"/evals/{eval_id}")).json()["status"] == "completed":
                return
            for item in await started_runs(client, eval_id):
                if item["runId"] in handled or item["status"] != "live":
                    continue
                handled.add(item["runId"])
                await do_the_work(tenant, item)
                await client.post(f"/runs/{item['runId']}/finish")
            await asyncio.sleep(0.1)
    raise AssertionError(f"eval {eval_id} did not complete")


async def test_start_an_eval_and_watch_it_complete(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    await page.get_by_role("link", name="Evals").click()
    await page.get_by_role("link", name="Start an eval").click()
    await page.get_by_label("workflow", exact=True).check()
    # The category's box ticks all of its scenarios of the mode.
    await page.locator('input[name="category"][value="results"]').check()
    ticked = page.locator('input[name="scenario"][data-in="results"]:checked')
    assert await ticked.count() >= 1
    await page.locator('input[name="category"][value="results"]').uncheck()
    await expect(ticked).to_have_count(0)
    for scenario in WORKFLOW[:2]:
        await page.locator(f'input[name="scenario"][value="{scenario}"]').check()
    await page.get_by_label("repeats").select_option("2")
    await page.get_by_label("label", exact=True).fill("browser v1")
    await page.get_by_label("revision").fill("abc1234")
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("#preview")).to_contain_text("This eval will start 4 runs")
    await expect(page.locator("#preview")).to_contain_text("4 start at once; 0 will queue")
    await shot(page, "eval-new")
    await page.get_by_role("button", name="Start 4 runs").click()
    await expect(page).to_have_url(re.compile(r"/evals/eval_\w+$"))
    eval_id = page.url.rsplit("/", 1)[1]
    await expect(page.locator("#progress-counts")).to_contain_text("0 of 4 done · 4 live")
    await expect(page.locator("#eval-grid a.mark.live")).to_have_count(4)
    started = time.monotonic()
    await _work_until_done(tenant, eval_id)
    # The page updates on its own (no reload): the poll swaps in the completed figures.
    await expect(page.locator("#progress-counts")).to_contain_text("4 of 4 done", timeout=5_000)
    await expect(page.locator("#pass-rate")).to_contain_text("4/4")
    print(f"page complete {time.monotonic() - started:.2f} s after the work began")
    await expect(page.locator("#indicative")).to_be_visible()
    await expect(page.get_by_role("button", name="Cancel eval")).to_have_count(0)
    await expect(page.locator("#eval-grid a.mark.ok")).to_have_count(4)
    await shot(page, "eval-complete", docs="console-eval")
    first = page.locator("#eval-grid a.mark.ok").first
    href = await first.get_attribute("href")
    assert href and href.startswith("/runs/run_")
    await first.click()
    await expect(page).to_have_url(re.compile(re.escape(href) + "$"))
    await expect(page.locator(".run-state")).to_contain_text("passed")


async def test_compare_shows_the_broken_automation_regressed(
    signed_in_page: Page,
    tenant: TenantHandle,
    receiver: Receiver,  # noqa: F811 (the fixture imported above)
) -> None:
    page = signed_in_page
    async with api(tenant) as root:
        sub = await subscribe(root, receiver.url, list(CORRECT))
    good = await _workflow_eval(tenant, receiver, sub["secret"], "automation v1", CORRECT)
    bad = await _workflow_eval(tenant, receiver, sub["secret"], "automation v2", BROKEN)
    await page.goto(f"/evals/{bad}")
    await expect(page.locator("#pass-rate")).to_contain_text("0/9")
    await page.get_by_role("link", name="Compare with a baseline").click()
    await expect(page.get_by_label("baseline")).to_have_value(good)
    await expect(page.locator("#verdict")).to_contain_text("bigger than the noise")
    await expect(page.locator("#compare-cells tr.cell-regressed")).to_have_count(len(WORKFLOW))
    await shot(page, "eval-compare", docs="console-compare")
    # Picking the baseline by hand submits the picker.
    await page.get_by_label("baseline").select_option(good)
    await page.get_by_role("button", name="Compare").click()
    await expect(page.locator("#verdict")).to_contain_text("Worse")
    # The evals list shows the tenant's schedules above its evals, wide and narrow.
    async with api_client(tenant) as client:
        created = await client.post(
            "/schedules",
            json={
                "name": "nightly triage",
                "cron": "0 3 * * *",
                "eval": {"mode": "workflow", "labelPrefix": "nightly", "scenarios": WORKFLOW},
            },
        )
        assert created.status_code == 201, created.text
        schedule_id = created.json()["id"]
    try:
        await page.goto("/evals")
        schedules = page.locator("table[data-table=schedules]")
        await expect(schedules).to_contain_text("nightly triage")
        await expect(page.get_by_role("link", name="automation v2")).to_be_visible()
        await shot(page, "evals-list-schedules")
        await page.set_viewport_size({"width": 390, "height": 844})
        await expect(schedules).to_contain_text("nightly triage")
        await shot(page, "evals-list-schedules-narrow")
    finally:
        async with api_client(tenant) as client:
            await client.delete(f"/schedules/{schedule_id}")
