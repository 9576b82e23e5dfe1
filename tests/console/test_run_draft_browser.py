""" "Save as scenario" in a real browser: a person drives the patient of a run while the
system (this test, over httpx against the run's fhirBase) asks, then files a Task; the
run finished, its page's "Save as scenario" opens the import page with the draft in the
editor and the lint's findings; the author edits the title and saves. The saved
scenario's oracle is the system's writes (not the person's reply), and it passes its own
scenario check: authoring a scenario without writing JSON."""

from __future__ import annotations

import json
import re

import httpx
from playwright.async_api import Page, expect

from tests.conftest import TenantHandle
from tests.console.conftest import csrf_of, shot, sign_in
from tests.console.run_helpers import SIM, api, staff_message, start, task_for

LIVE_MS = 4_000
QUESTION = "When would you like to come in for the rebooked appointment?"


async def test_save_a_human_driven_run_as_a_scenario(
    signed_in_page: Page, tenant: TenantHandle
) -> None:
    page = signed_in_page
    run = await start(tenant, SIM, patientDriver="human")
    await page.goto(f"/runs/{run['id']}")
    # A live run has no "Save as scenario": there is nothing to draft from yet.
    await expect(page.get_by_role("button", name="Save as scenario")).to_have_count(0)
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        first = await fhir.post("/Communication", json=staff_message(run, QUESTION))
        assert first.status_code == 201, first.text
        staff_id = first.json()["id"]
        await page.get_by_label(f"Answer to Communication/{staff_id}").fill(
            "Thursday morning, please.", timeout=LIVE_MS
        )
        await page.get_by_role("button", name="Send as the patient").click()
        await expect(page.locator(".thread .msg.patient")).to_contain_text("Thursday morning")
        task = await fhir.post("/Task", json=task_for(run))
        assert task.status_code == 201, task.text
    async with api(tenant) as client:
        finished = await client.post(f"/api/testing/runs/{run['id']}/finish")
        assert finished.status_code == 200, finished.text

    await page.goto(f"/runs/{run['id']}")
    await page.get_by_role("button", name="Save as scenario").click()
    await page.wait_for_url(re.compile(r"/runs/[^/]+/scenario$"))
    await expect(page.locator("p.alert", has_text="Drafted from run")).to_be_visible()
    await expect(page.locator(".outcome")).to_contain_text("Valid:")
    editor = page.get_by_label("Scenario JSON")
    draft = json.loads(await editor.input_value())
    assert draft["id"] == f"{SIM['id']}.from-{run['id'].removeprefix('run_')[:10]}"
    await shot(page, "run-save-as-scenario")
    # The author edits the draft, then saves it with the import page's Save.
    draft["title"] = "Rebook, asking when (authored by hand)"
    await editor.fill(json.dumps(draft, indent=2))
    await page.get_by_role("button", name="Save", exact=True).click()
    await page.wait_for_url(re.compile(rf"/scenarios/{re.escape(draft['id'])}\?imported=1$"))
    await expect(page.locator("h1")).to_contain_text("authored by hand")

    async with api(tenant) as client:
        saved = (await client.get(f"/api/testing/scenarios/{draft['id']}")).json()["scenario"]
        # The system's writes, in order: the question and the Task; not the person's reply.
        assert [(c["method"], c["path"]) for c in saved["oracle"]] == [
            ("POST", "/Communication"),
            ("POST", "/Task"),
        ]
        question = saved["oracle"][0]["body"]
        assert question["recipient"] == [{"reference": "@patient"}]
        assert question["payload"] == [{"contentString": QUESTION}]
        assert saved["oracle"][1]["body"]["for"] == {"reference": "@patient"}
        [message] = [e for e in saved["expectations"] if e["type"] == "message"]
        assert message["saysAny"] == ["appointment", "rebooked"]
        assert saved["patientSim"] == SIM["patientSim"]
        check = await client.post(f"/api/testing/scenarios/{draft['id']}/check", timeout=120)
    assert check.status_code == 200, check.text
    report = check.json()
    assert report["ok"], json.dumps(report)
    (variant,) = report["variants"]
    assert variant["mutants"] > 0 and variant["mutantsCaught"] == variant["mutants"]


async def test_save_as_scenario_needs_the_csrf_token_and_an_ended_run(
    tenant: TenantHandle,
) -> None:
    run = await start(tenant, SIM)
    console = await sign_in(tenant.server, tenant.key)
    try:
        page = await console.get(f"/runs/{run['id']}")
        token = csrf_of(page.text)
        refused = await console.post(f"/runs/{run['id']}/scenario", data={})
        assert refused.status_code == 403
        live = await console.post(f"/runs/{run['id']}/scenario", data={"csrf": token})
        assert live.status_code == 409
        assert "still live" in live.text
        async with api(tenant) as client:
            await client.post(f"/api/testing/runs/{run['id']}/cancel")
        drafted = await console.post(f"/runs/{run['id']}/scenario", data={"csrf": token})
        assert drafted.status_code == 200
        assert "Drafted from run" in drafted.text
        # The draft is in the editor, escaped as text.
        assert "&#34;oracle&#34;" in drafted.text or "&quot;oracle&quot;" in drafted.text
    finally:
        await console.aclose()
