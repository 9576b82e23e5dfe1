"""Console test fixtures: signing in over plain httpx (security tests) and a real
Chromium driven by Playwright (browser tests), against the session's test server.

- `sign_in(server_url, key)`: an httpx.AsyncClient holding a session cookie, as a
  browser would after the sign-in form; `csrf_of(html)` reads a page's CSRF token.
- `browser` (session): one Chromium for the whole session. `page` (per test): a fresh
  context (its own cookies) and page. `signed_in_page`: that page, signed in as the
  test's tenant through the sign-in form.
- `shot(page, name)`: a full-page screenshot under test-output/console/ (gitignored),
  so a failure can be looked at; the README's screenshot comes from here.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.conftest import TenantHandle

CHROMIUM = os.environ.get("UNDERSTUDY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "console"
# Playwright's waits. A page of this server answers in milliseconds, but CI runs three
# test processes on two cores beside this browser, and there a page once took over 5 s
# (Redis itself timed out at that moment): a passing test never waits this long, so the
# allowance costs nothing, and how fast the pages are is scripts/bench_board.py's job.
WAIT_MS = 20_000

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_LOGIN_TOKEN = re.compile(r'name="token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no CSRF field"
    return found.group(1)


async def sign_in(server_url: str, key: str) -> httpx.AsyncClient:
    """A client signed in through the sign-in form (the caller closes it)."""
    client = httpx.AsyncClient(base_url=server_url, timeout=30)
    form = await client.get("/login")
    token = _LOGIN_TOKEN.search(form.text)
    assert token, form.text
    answer = await client.post("/login", data={"key": key, "token": token.group(1), "next": "/"})
    assert answer.status_code == 303, answer.text
    return client


@pytest.fixture
async def console(tenant: TenantHandle) -> AsyncIterator[httpx.AsyncClient]:
    client = await sign_in(tenant.server, tenant.key)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (once per session)
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Browser, server_url: str) -> AsyncIterator[Page]:
    context = await browser.new_context(
        base_url=server_url, viewport={"width": 1280, "height": 800}
    )
    context.set_default_timeout(WAIT_MS)
    opened = await context.new_page()
    # A CSP violation or a script error shows in the console: none is allowed.
    errors: list[str] = []
    opened.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    await context.close()
    # Pages the test meant to be refused (a 401, a 404) log their status; nothing else.
    unexpected = [e for e in errors if "Failed to load resource" not in e]
    assert unexpected == [], unexpected


async def sign_in_page(page: Page, key: str) -> None:
    await page.goto("/login")
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(re.compile(r"/$"))


@pytest.fixture
async def signed_in_page(page: Page, tenant: TenantHandle) -> Page:
    await sign_in_page(page, tenant.key)
    return page


# The README's pictures of the console: taken by the browser tests, so they stay true.
DOCS = Path(__file__).resolve().parents[2] / "docs"


async def shot(page: Page, name: str, docs: str | None = None) -> Path:
    """A full-page screenshot under test-output/; with `docs` and UNDERSTUDY_DOCS_SHOTS
    set, also the first screen of it as docs/<docs>.png (the README shows it; a plain
    test run leaves the checkout clean)."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    if docs is not None and os.environ.get("UNDERSTUDY_DOCS_SHOTS"):
        DOCS.mkdir(exist_ok=True)
        await page.screenshot(path=str(DOCS / f"{docs}.png"))
    return path
