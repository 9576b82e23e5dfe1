"""Two runs of one scenario side by side: the expectation where they differ comes first,
both change sets show, another scenario is a 400, another tenant's run a 404, text is
escaped; and the page in a browser."""

from __future__ import annotations

import copy
from typing import Any

import httpx
from playwright.async_api import Page, expect

from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import shot
from tests.console.run_helpers import SIM, api, staff_message, start, task_for


async def _two_runs(tenant: TenantHandle) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one writes the Task and the message (passes); run two only a Task with a
    `<script>` in it (fails on the message)."""
    one = await start(tenant, label="vs-one")
    two = await start(tenant, label="vs-two")
    async with httpx.AsyncClient(base_url=one["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Task", json=task_for(one))).status_code == 201
        msg = staff_message(one, "We will call you back.")
        assert (await fhir.post("/Communication", json=msg)).status_code == 201
    async with httpx.AsyncClient(base_url=two["fhirBase"], headers=tenant.headers) as fhir:
        task = {**task_for(two), "description": "<script>alert(1)</script>"}
        assert (await fhir.post("/Task", json=task)).status_code == 201
    async with api(tenant) as client:
        for run in (one, two):
            done = await client.post(f"/api/testing/runs/{run['id']}/finish")
            assert done.status_code == 200, done.text
    return one, two


async def test_two_runs_side_by_side(console: httpx.AsyncClient, tenant: TenantHandle) -> None:
    one, two = await _two_runs(tenant)
    answer = await console.get(f"/runs/{one['id']}/vs/{two['id']}")
    assert answer.status_code == 200, answer.text
    page = answer.text
    # The differing expectation ("message") is the first row, marked.
    assert page.index('data-vs-check="message"') < page.index('data-vs-check="task"')
    assert "≠ differs" in page
    assert f'href="/runs/{one["id"]}"' in page and f'href="/runs/{two["id"]}"' in page
    # Both change sets: each run's Task, and only run one's Communication.
    assert 'data-vs-change="Task #1"' in page
    assert 'data-vs-change="Communication #1"' in page
    assert "We will call you back." in page
    assert "– not written" in page
    assert "/chart/Task/" in page and f"?run={two['id']}" in page
    # Escaped.
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;" in page


async def test_other_scenario_is_400_and_other_tenant_404(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    ours = await start(tenant)
    other_scenario = await start(tenant, copy.deepcopy(SIM))
    answer = await console.get(f"/runs/{ours['id']}/vs/{other_scenario['id']}")
    assert answer.status_code == 400
    assert "same scenario" in answer.text
    other = await make_tenant(db, tenant.server, prefix="other")
    theirs = await start(other)
    for path in (f"/runs/{ours['id']}/vs/{theirs['id']}", f"/runs/{theirs['id']}/vs/{ours['id']}"):
        answer = await console.get(path)
        assert answer.status_code == 404, path
        assert "Lindqvist" not in answer.text


async def test_the_page_in_a_browser(signed_in_page: Page, tenant: TenantHandle) -> None:
    page = signed_in_page
    one, two = await _two_runs(tenant)
    await page.goto(f"/runs/{one['id']}/vs/{two['id']}")
    await expect(page.get_by_role("heading", name="Expectations")).to_be_visible()
    first = page.locator("[data-vs-check]").first
    await expect(first).to_have_attribute("data-vs-check", "message")
    await expect(first).to_contain_text("failed")
    await expect(first).to_contain_text("passed")
    await shot(page, "run-vs", docs="console-run-vs")
