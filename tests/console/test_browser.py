"""The console in a real browser (Chromium through Playwright), driven as a person
would: type, click, wait for text. One browser for the session; each test its own
context (cookies) and page. Screenshots land in test-output/console/."""

from __future__ import annotations

import copy
import json
import re

from playwright.async_api import Page, expect

from app.db import Database, Scopes
from app.tenants import service as tenants
from tests.conftest import TenantHandle
from tests.console.conftest import shot, sign_in_page
from tests.scenarios.test_import_api import SCENARIO


async def test_sign_in_with_a_key_then_out(page: Page, tenant: TenantHandle) -> None:
    await sign_in_page(page, tenant.key)
    await expect(page.get_by_role("heading", name="Home")).to_be_visible()
    await expect(page.get_by_text("No runs yet — start one from a scenario.")).to_be_visible()
    await expect(page.locator(".tenant")).to_have_text(tenant.name)
    await shot(page, "home-empty")
    await page.set_viewport_size({"width": 390, "height": 800})
    await shot(page, "home-phone")
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.goto("/")
    await expect(page).to_have_url(re.compile(r"/login"))


async def test_the_scenario_list_reads_on_a_phone(signed_in_page: Page) -> None:
    page = signed_in_page
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.goto("/scenarios")
    await expect(page.get_by_role("link", name="Import a scenario")).to_be_visible()
    # Nothing wider than the screen but the table, which scrolls inside its frame.
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    await shot(page, "scenarios-phone")
    await page.set_viewport_size({"width": 1280, "height": 800})
    await shot(page, "scenarios", docs="console-scenarios")


async def test_a_wrong_key_is_refused(page: Page) -> None:
    await page.goto("/login")
    await page.get_by_label("API key").fill("usk_not-a-key-of-anyone")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("not valid")
    await expect(page.get_by_label("API key")).to_have_value("")
    await shot(page, "login-wrong-key")


async def test_the_one_time_link_works_once(page: Page, tenant: TenantHandle, db: Database) -> None:
    async with Scopes(db.pool).transaction() as tx:
        token = await tenants.create_signin_token(tx, tenant.key)
    await page.goto(f"/login/link/{token}")
    await expect(page.get_by_role("heading", name="Home")).to_be_visible()
    await page.context.clear_cookies()
    await page.goto(f"/login/link/{token}")
    await expect(page.get_by_role("alert")).to_contain_text("used or has expired")
    await page.goto("/")
    await expect(page).to_have_url(re.compile(r"/login"))


async def test_import_shows_each_error_at_its_path_then_saves(signed_in_page: Page) -> None:
    page = signed_in_page
    broken = copy.deepcopy(SCENARIO)
    broken["id"] = "custom.browser-import"
    del broken["title"]
    broken["expectations"][0]["where"].append("status = = 'requested'")
    await page.get_by_role("navigation").get_by_role("link", name="Scenarios").click()
    await page.get_by_role("link", name="Import a scenario").click()
    await page.get_by_label("Scenario JSON").fill(json.dumps(broken, indent=2))
    await page.get_by_role("button", name="Validate").click()
    await expect(page.get_by_role("alert")).to_contain_text("Not valid")
    errors = page.locator("tr.problem.error")
    await expect(errors.filter(has=page.locator("code.path", has_text="/title"))).to_have_count(1)
    where = errors.filter(has=page.locator("code.path", has_text="/expectations/0/where"))
    await expect(where).not_to_have_count(0)
    await shot(page, "import-errors")

    fixed = copy.deepcopy(SCENARIO)
    fixed["id"] = "custom.browser-import"
    await page.get_by_label("Scenario JSON").fill(json.dumps(fixed, indent=2))
    await page.get_by_role("button", name="Validate").click()
    await expect(page.get_by_role("status").filter(has_text="Valid")).to_be_visible()
    await page.get_by_role("button", name="Save").click()
    await page.wait_for_url(re.compile(r"/scenarios/custom\.browser-import\?imported=1$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text(SCENARIO["title"])
    await expect(page.get_by_text("Imported as version 1")).to_be_visible()


async def test_a_variant_starts_from_its_run_button(signed_in_page: Page) -> None:
    page = signed_in_page
    await page.goto("/scenarios?mode=agent")
    await page.get_by_label("Search").fill("book named practitioner")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.get_by_role("status")).to_contain_text("1 of")
    await shot(page, "scenarios-filtered")
    await page.get_by_role("link", name=re.compile("Dr. Chen|named", re.I)).first.click()
    await expect(page.get_by_role("button", name="Run reference solution")).to_be_visible()
    await shot(page, "scenario-details")
    await page.get_by_role("button", name="Run terse").click()
    await page.wait_for_url(re.compile(r"/runs/run_[a-z0-9]+$"))
    await page.goto("/")
    row = page.get_by_role("row").filter(has_text="scheduling.book-named-practitioner")
    await expect(row).to_contain_text("● live")
    await shot(page, "home-runs")
