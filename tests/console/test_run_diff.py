"""The run page shows what the agent did differently from the reference solution: per
resource, the reference's end state beside the run's, element by element, the
consequential differences marked, collateral and missing first; and each text fact
highlighted where it stands in the text."""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx
from playwright.async_api import Page

from tests.conftest import TenantHandle
from tests.console.conftest import shot
from tests.console.run_helpers import TASKS, api, staff_message, start, task_for

PROBLEM: dict[str, Any] = {
    "resourceType": "Condition",
    "id": "@problem",
    "clinicalStatus": {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                "code": "active",
            }
        ]
    },
    "code": {"text": "Seasonal allergic rhinitis"},
    "subject": {"reference": "@patient"},
}
SCENARIO = copy.deepcopy(TASKS) | {
    "id": "custom.console-diff",
    "fixture": [*copy.deepcopy(TASKS["fixture"]), PROBLEM],
}


async def _wrong_agent(tenant: TenantHandle) -> dict[str, Any]:
    """Does the reference's work, and also resolves the patient's unrelated Condition."""
    run = await start(tenant, SCENARIO)
    problem = run["fixture"]["problem"]
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
        message = staff_message(run, "We will call you back today.")
        assert (await fhir.post("/Communication", json=message)).status_code == 201
        body = (await fhir.get(f"/{problem}")).json()
        body["clinicalStatus"]["coding"][0]["code"] = "resolved"
        assert (await fhir.put(f"/{problem}", json=body)).status_code == 200
    async with api(tenant) as client:
        final = (await client.post(f"/api/testing/runs/{run['id']}/finish")).json()
    strict = next(e for e in final["expectations"] if e["id"] == "matches-reference")
    assert strict["passed"] is False, strict
    return run


async def test_a_collateral_edit_is_listed_first_with_its_element_marked(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await _wrong_agent(tenant)
    problem = run["fixture"]["problem"]
    html = (await console.get(f"/runs/{run['id']}")).text
    assert 'id="diff-h"' in html
    entries = re.findall(
        r'<details class="diff-entry (\w+)" id="diff-\d+"[^>]*>(.*?)</details>', html, re.S
    )
    assert entries, html
    kind, first = entries[0]
    assert kind == "collateral" and problem in first, entries[0][1][:500]
    # Side by side: the reference leaves it active, the run resolved it; that row marked.
    row = re.search(
        r'<tr class="diff-row differs" data-differs="differs">\s*<th scope="row">'
        r"<code>clinicalStatus</code>.*?</tr>",
        first,
        re.S,
    )
    assert row, first
    cells = re.findall(r"<td>(.*?)</td>", row.group(0), re.S)
    assert "active" in cells[0] and "resolved" in cells[1], cells
    # An element both leave alike is not marked.
    code_row = re.search(r'<tr class="diff-row ">\s*<th scope="row"><code>code</code>', first)
    assert code_row, first
    # What matched the reference is listed after, closed.
    kinds = [k for k, _ in entries]
    assert kinds.index("collateral") < kinds.index("same"), kinds
    assert "differs" not in kinds[kinds.index("same") :], kinds


async def test_the_diff_is_in_the_verdict_the_api_returns(tenant: TenantHandle) -> None:
    run = await _wrong_agent(tenant)
    async with api(tenant) as client:
        view = (await client.get(f"/api/testing/runs/{run['id']}")).json()
    strict = next(e for e in view["expectations"] if e["id"] == "matches-reference")
    diff = strict["evidence"]["diff"]
    assert diff[0]["kind"] == "collateral" and diff[0]["ref"] == run["fixture"]["problem"]
    assert "clinicalStatus" in diff[0]["paths"]
    assert diff[0]["expected"]["clinicalStatus"]["coding"][0]["code"] == "active"
    assert diff[0]["actual"]["clinicalStatus"]["coding"][0]["code"] == "resolved"
    assert "meta" not in diff[0]["actual"]


async def test_text_facts_are_marked_where_they_stand(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant, copy.deepcopy(TASKS) | {"id": "custom.console-diff-facts"})
    text = "I've booked you a follow-up visit. <b>Call</b> us at 555-0100."
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
        assert (await fhir.post("/Communication", json=staff_message(run, text))).status_code == 201
    async with api(tenant) as client:
        await client.post(f"/api/testing/runs/{run['id']}/finish")
    html = (await console.get(f"/runs/{run['id']}")).text
    quoted = re.search(r'<blockquote class="read-text">(.*?)</blockquote>', html, re.S)
    assert quoted, "no highlighted text"
    marks = re.findall(
        r'<mark class="fact (\w+)" data-context="(\w+)" title="([^"]*)">', quoted.group(1)
    )
    assert any(state == "bad" and "claims fails" in title for state, _, title in marks), marks
    assert "&lt;b&gt;Call&lt;/b&gt;" in quoted.group(1)  # escaped, never markup


async def test_the_diff_page_in_a_browser(signed_in_page: Page, tenant: TenantHandle) -> None:
    run = await _wrong_agent(tenant)
    page = signed_in_page
    await page.goto(f"/runs/{run['id']}")
    first = page.locator("details.diff-entry").first
    await first.wait_for()
    assert "collateral" in (await first.get_attribute("class") or "")
    await first.locator("tr.diff-row.differs").first.wait_for()
    await page.evaluate("document.getElementById('diff-h').scrollIntoView()")
    await shot(page, "run-diff", docs="console-run-diff")
