"""The board in a real browser: the states of a crafted history, the revision picker,
Run 3 times. Few and fast: the rules are tested as tables (tests/runs/test_board_rules.py)
and the JSON over HTTP."""

from __future__ import annotations

import re
from datetime import timedelta

from playwright.async_api import Page, expect

from app.db import Database
from app.kit.clock import utcnow
from tests.conftest import TenantHandle
from tests.console.conftest import shot
from tests.runs.board_history import insert_history, workflow_scenarios


def _card(page: Page, scenario_id: str):  # type: ignore[no-untyped-def]
    return page.locator(f'[data-testid="card"][data-scenario="{scenario_id}"]')


async def test_the_board_shows_each_state(
    signed_in_page: Page, db: Database, tenant: TenantHandle
) -> None:
    page = signed_in_page
    a, b, c, d, e, f, g, *_ = workflow_scenarios()
    for sid, history in {a: "ff", b: "pfp", c: "fppp", e: "e", f: "cl"}.items():
        await insert_history(db, tenant.id, sid, history, revision="rev2")
    # d failed at the scenario's earlier version; one pass since the edit.
    old = utcnow() - timedelta(days=1)
    await insert_history(db, tenant.id, d, "fff", revision="rev2", scenario_hash="old", start=old)
    await insert_history(db, tenant.id, d, "p", revision="rev2")
    await page.goto("/board?mode=workflow")
    await expect(page.get_by_test_id("headline")).to_contain_text("2 of")
    await expect(page.get_by_test_id("headline")).to_contain_text("need attention")
    states = {a: "failing", b: "flaky", c: "passing", d: "passing", e: "no results",
              f: "no results", g: "no results"}  # fmt: skip
    for sid, word in states.items():
        await expect(_card(page, sid).locator("h2")).to_contain_text(word)
    await expect(_card(page, e)).to_contain_text("could not be graded — the grader crashed")
    await expect(_card(page, f)).to_contain_text("a run is still live")
    await expect(_card(page, g)).to_contain_text("not run on this revision")
    await expect(_card(page, d)).to_contain_text("1 passed, 0 failed")
    cards = page.get_by_test_id("card")
    await expect(cards.nth(0)).to_have_attribute("data-scenario", a)
    await expect(cards.nth(1)).to_have_attribute("data-scenario", b)
    await _card(page, a).get_by_text("Details").click()
    await expect(_card(page, a)).to_contain_text("Failed most often: The patient is told")
    await _card(page, a).locator("ol.history a").first.click()
    await expect(page).to_have_url(re.compile(r"/runs/run_"))
    await page.go_back()
    await shot(page, "board")


async def test_the_revision_picker_switches(
    signed_in_page: Page, db: Database, tenant: TenantHandle
) -> None:
    page = signed_in_page
    [a, *_] = workflow_scenarios()
    now = utcnow()
    await insert_history(db, tenant.id, a, "ff", revision="v1", start=now - timedelta(hours=3))
    await insert_history(db, tenant.id, a, "pp", revision="v2", start=now - timedelta(hours=1))
    await page.goto("/board?mode=workflow")
    await expect(page.get_by_test_id("revision")).to_have_text("v2")
    await expect(_card(page, a).locator("h2")).to_contain_text("passing")
    await page.get_by_label("revision", exact=True).select_option("v1")
    await page.get_by_role("button", name="Show").click()
    await expect(page).to_have_url(re.compile(r"revision=v1"))
    await expect(_card(page, a).locator("h2")).to_contain_text("failing")
    await page.get_by_role("link", name="Back to current revision").click()
    await expect(page.get_by_test_id("revision")).to_have_text("v2")
    await expect(page.get_by_role("link", name="Back to current revision")).to_have_count(0)


async def test_run_3_times_starts_three_runs(
    signed_in_page: Page, db: Database, tenant: TenantHandle
) -> None:
    page = signed_in_page
    [a, *_] = workflow_scenarios()
    await insert_history(db, tenant.id, a, "f", revision="rel-7")
    await page.goto("/board?mode=workflow")
    await _card(page, a).get_by_role("button", name="Run 3 times").click()
    await expect(page.get_by_test_id("started")).to_contain_text("Started 3 runs")
    await expect(page.get_by_test_id("started")).to_contain_text("rel-7")
    await expect(page.locator("main ul li a")).to_have_count(3)
    await page.get_by_role("link", name="Back to the board").click()
    await expect(_card(page, a)).to_contain_text("3 live")
