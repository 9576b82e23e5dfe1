"""The console in a real browser (Chromium through Playwright), driven as a person
would: type, click, wait for text. One browser for the session; each test its own
context (cookies) and page. Screenshots land in test-output/console/."""

from __future__ import annotations

import re

from playwright.async_api import Page, expect

from app.db import Database, Scopes
from app.tenants import service as tenants
from tests.conftest import TenantHandle
from tests.console.conftest import shot, sign_in_page


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
