"""The run page shows text-truth's reading of what the system wrote: each fact found in a
text, its context, and the check it met or broke."""

from __future__ import annotations

import copy
import re

import httpx

from tests.conftest import TenantHandle
from tests.console.run_helpers import TASKS, api, staff_message, start, task_for

SCENARIO = copy.deepcopy(TASKS) | {"id": "custom.console-text-facts"}


async def test_the_run_page_lists_each_fact_with_its_context_and_check(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant, SCENARIO)
    text = (
        "We will call you back today. I've booked you a follow-up visit. "
        "If it gets worse, call 911. Questions? Call us at 555-0100."
    )
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
        assert (await fhir.post("/Communication", json=staff_message(run, text))).status_code == 201
    async with api(tenant) as client:
        final = (await client.post(f"/api/testing/runs/{run['id']}/finish")).json()
    truth = next(e for e in final["expectations"] if e["id"] == "text-truth")
    assert truth["passed"] is False and "I've booked" in truth["detail"], truth

    html = (await console.get(f"/runs/{run['id']}")).text
    row = re.search(r'<tr class="check[^"]*" data-check="text-truth">(.*?)</tr>', html, re.S)
    assert row, "no text-truth row"
    facts = re.findall(
        r'<li class="fact (\w+)" data-context="(\w+)">(.*?)</li>', row.group(1), re.S
    )
    assert facts, row.group(1)
    broken = [f for f in facts if f[0] == "bad"]
    assert broken and "claim" in broken[0][2] and "claims fails" in broken[0][2], broken
    assert all(
        context in {"asserted", "negated", "historical", "hypothetical", "other", "superseded"}
        for _, context, _ in facts
    )
