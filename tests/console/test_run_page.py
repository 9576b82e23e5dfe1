"""The run page in a real browser, as a builder watches it: the agent (this test, over
httpx against the run's fhirBase, and over MCP) works while the page stays open; checks
turn green without a reload; Finish shows the verdict with its evidence and chart links;
Delete run data. The patient's side: a simulated reply appears in the thread, and a
person driving the patient answers from the page. Few tests, each covering a lot, since
a browser test costs seconds."""

from __future__ import annotations

import re
import time

import httpx
from playwright.async_api import Dialog, Locator, Page, expect

from tests.conftest import TenantHandle
from tests.console.conftest import shot
from tests.console.run_helpers import SIM, SIM_ANSWER, api, staff_message, start, task_for
from tests.mcp.client import call_ok, mcp_session
from tests.webhooks.receiver import Receiver

# A write reaches the page within a second (one poll); the wait allows for a slow CI box.
LIVE_MS = 4_000


async def _accept(dialog: Dialog) -> None:
    await dialog.accept()


def _check(page: Page, check_id: str) -> Locator:
    return page.locator(f'[data-check="{check_id}"]')


async def test_a_live_run_turns_green_then_shows_its_verdict(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    page.on("dialog", _accept)
    run = await start(tenant, label="console-live")
    await page.goto(f"/runs/{run['id']}")
    await expect(
        page.get_by_role("heading", name="Two steps: a Task, then a message")
    ).to_be_visible()
    await expect(page.locator("#brief-text")).to_contain_text("asked for a call back")
    await expect(page.locator(".run-state")).to_contain_text("live")
    await expect(_check(page, "task")).to_contain_text("not yet")
    await expect(page.get_by_text("No calls yet.")).to_be_visible()
    await shot(page, "run-live-start")

    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        started = time.monotonic()
        assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
        await expect(_check(page, "task")).to_contain_text("holding", timeout=LIVE_MS)
        shown_after = time.monotonic() - started
        await expect(_check(page, "message")).to_contain_text("not yet")
        # A near miss: a message to the patient, but not completed.
        near = staff_message(run, "We will call you.", status="in-progress")
        assert (await fhir.post("/Communication", json=near)).status_code == 201
    # An MCP call of the run shows in the trace as MCP.
    async with mcp_session(tenant.server, tenant.key) as client:
        await call_ok(
            client, "fhir_search", {"resource_type": "Task", "params": {}, "run_id": run["id"]}
        )
    trace = page.locator('[data-live="trace"]')
    await expect(trace.locator("tr", has_text="MCP")).to_have_count(1, timeout=LIVE_MS)
    await expect(trace.locator("tr", has_text="REST")).to_have_count(2)
    assert shown_after < LIVE_MS / 1000
    await shot(page, "run-live-holding")

    await page.get_by_role("button", name="Finish").click()
    await expect(page.locator(".run-state")).to_contain_text("failed")
    await expect(_check(page, "task")).to_contain_text("passed")
    failed = _check(page, "message")
    await expect(failed).to_contain_text("failed")
    await expect(failed).to_contain_text("closest candidate")
    await expect(failed.locator(".clauses li", has_text="fails")).to_have_count(1)
    await expect(failed.locator(".clauses li", has_text="holds")).to_have_count(1)
    await shot(page, "run-final", docs="console-run-page")

    # The evidence links to the chart, where the Task is marked as the run's.
    await _check(page, "task").locator("a.ref").first.click()
    await expect(page).to_have_url(re.compile(r"/chart/Patient/.+#r-Task-"))
    await expect(page.get_by_role("heading", name="Task")).to_be_visible()
    task_entry = page.locator("#type-Task .chart-entry")
    await expect(task_entry).to_contain_text("created by this run")
    await expect(task_entry.locator("pre").first).to_contain_text('"resourceType": "Task"')
    await expect(page.locator("#type-Patient .chart-entry")).to_contain_text("this run's fixture")
    await task_entry.locator("ol.history summary").first.click()
    await expect(task_entry.locator("ol.history")).to_contain_text("v1 · create · client")
    await shot(page, "chart")

    await page.go_back()
    await page.get_by_role("button", name="Delete run data").click()
    await expect(page.get_by_role("status").first).to_contain_text("Run data deleted")
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.get(f"/{run['fixture']['patient']}")).status_code in (404, 410)


async def test_the_patient_side_simulated_and_human(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    # The simulated patient's reply appears in the thread without a reload.
    simulated = await start(tenant, SIM)
    await page.goto(f"/runs/{simulated['id']}")
    await expect(page.get_by_text("No messages yet.")).to_be_visible()
    async with httpx.AsyncClient(base_url=simulated["fhirBase"], headers=tenant.headers) as fhir:
        asked = staff_message(simulated, "Which day and time would suit you?")
        assert (await fhir.post("/Communication", json=asked)).status_code == 201
    thread = page.locator(".thread")
    await expect(thread.locator(".msg.patient")).to_contain_text(SIM_ANSWER, timeout=LIVE_MS)
    await expect(thread.locator(".msg.patient")).to_contain_text("scripted stand-in")
    await shot(page, "run-sim-thread")

    # A person drives the patient: no simulated reply; the reply box answers.
    receiver = Receiver()
    receiver.start()
    try:
        async with api(tenant) as client:
            hook = await client.post(
                "/api/webhooks", json={"url": receiver.url, "events": ["message.received"]}
            )
            assert hook.status_code == 201, hook.text
        human = await start(tenant, SIM, patientDriver="human")
        await page.goto(f"/runs/{human['id']}")
        await expect(page.locator(".reply-box")).to_contain_text("No message to the patient yet")
        async with httpx.AsyncClient(base_url=human["fhirBase"], headers=tenant.headers) as fhir:
            asked = staff_message(human, "When would you like to come in?")
            first = await fhir.post("/Communication", json=asked)
            assert first.status_code == 201
            staff_id = first.json()["id"]
            typed = "Thursday morning, please."
            box = page.get_by_label(f"Answer to Communication/{staff_id}")
            await box.fill(typed, timeout=LIVE_MS)
            await shot(page, "run-human-reply")
            await page.get_by_role("button", name="Send as the patient").click()
            await expect(thread.locator(".msg.patient")).to_contain_text(typed)
            await expect(thread.locator(".msg.patient")).to_contain_text("typed by a person")
            patient = human["fixture"]["patient"]
            bundle = (await fhir.get("/Communication", params={"sender": patient})).json()
        [reply] = [e["resource"] for e in bundle["entry"]]
        assert reply["payload"] == [{"contentString": typed}]
        assert reply["inResponseTo"] == [{"reference": f"Communication/{staff_id}"}]
        assert reply["recipient"] == [{"reference": "Practitioner/demo-canonical-prac-chen"}]
        tags = {(t["system"], t["code"]) for t in reply["meta"]["tag"]}
        assert ("urn:understudy:source", "simulated-patient") in tags
        got = await receiver.wait_for(1)
        events = [r.json() for r in got]
        assert [e["type"] for e in events] == ["message.received"]
        assert events[0]["resource"]["id"] == reply["id"]
    finally:
        receiver.stop()
    # Finished elsewhere (over the API): the open page shows the verdict without a reload,
    # and its reply box is gone.
    async with api(tenant) as client:
        final = (await client.post(f"/api/testing/runs/{human['id']}/finish")).json()
    assert [(r["engine"], r["turn"]) for r in final["simulatedPatient"]] == [("human", 1)]
    await expect(page.locator(".run-state")).to_contain_text("failed", timeout=LIVE_MS)
    await expect(page.locator(".reply-box")).to_have_count(0)
    await expect(page.get_by_role("button", name="Delete run data")).to_be_visible()
    await page.set_viewport_size({"width": 390, "height": 800})
    await shot(page, "run-phone")


async def test_on_a_phone_every_check_reads_without_scrolling_sideways(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    """At 390 px the checks stack as cards: each one's state, expectation and detail lie
    inside the screen (as table columns the detail sat off screen, behind a scroll)."""
    page = signed_in_page
    run = await start(tenant, label="console-phone")
    async with api(tenant) as client:
        assert (await client.post(f"/api/testing/runs/{run['id']}/finish")).status_code == 200
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.goto(f"/runs/{run['id']}")
    await expect(page.locator(".run-state")).to_contain_text("failed")
    cells = page.locator("table.checks td")
    assert await cells.count() > 0
    outside = await cells.evaluate_all(
        """cells => cells.filter(c => getComputedStyle(c).display !== 'none')
            .filter(c => c.getBoundingClientRect().right > window.innerWidth + 1)
            .map(c => c.textContent.trim().slice(0, 40))"""
    )
    assert outside == [], outside
    await shot(page, "run-checks-phone")
