"""A rubric no model judged shows on the run page as "not judged": neutral (never the
red of a failure or the green of a pass), no score of its own, its detail saying why and
the heuristic's reading beside it as information. Over plain HTTP: the test app has no
model configured."""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx

from app.console.run_views import check_of
from app.console.views import state_badge
from tests.conftest import TenantHandle
from tests.console.run_helpers import TASKS, api, staff_message, start, task_for
from understudy_client.contract.runs import Evidence, ExpectationResult

RUBRIC: dict[str, Any] = {
    "id": "tone",
    "type": "rubric",
    "label": "Says when the call back is",
    "rubric": "The message tells the patient the practice will call back today.",
    "of": ["communications"],
}
SCENARIO = copy.deepcopy(TASKS) | {"id": "custom.console-not-judged"}
SCENARIO["expectations"] = [*TASKS["expectations"], RUBRIC]


def _row(html: str, check_id: str) -> str:
    found = re.search(rf'<tr class="check[^"]*" data-check="{check_id}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {check_id}"
    return found.group(1)


def _result(passed: bool | None, type_: str = "rubric") -> ExpectationResult:
    return ExpectationResult(
        id="tone",
        label="Tone",
        type=type_,
        required=False,
        weight=1.0,
        passed=passed,
        score=0.0,
        evidence=Evidence(matches=[]),
        detail="",
    )


def test_a_rubric_without_a_verdict_is_not_judged_and_neutral() -> None:
    assert check_of(_result(None), live=False).state == "not_judged"
    assert check_of(_result(None, "webhook"), live=False).state == "not_graded"
    assert check_of(_result(True), live=False).state == "passed"
    assert check_of(_result(False), live=False).state == "failed"
    badge = str(state_badge("not_judged"))
    assert 'class="state idle"' in badge and "not judged" in badge


async def test_the_run_page_shows_a_rubric_no_model_judged_as_not_judged(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant, SCENARIO)
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
        message = staff_message(run, "We will call you back today.")
        assert (await fhir.post("/Communication", json=message)).status_code == 201
    async with api(tenant) as client:
        final = (await client.post(f"/api/testing/runs/{run['id']}/finish")).json()
    assert final["status"] == "passed", final
    assert final["score"] == 1.0  # the rubric, not judged, is left out of the score
    tone = next(e for e in final["expectations"] if e["id"] == "tone")
    assert tone["passed"] is None and tone["detail"] == "not judged: no model configured"

    html = (await console.get(f"/runs/{run['id']}")).text
    row = _row(html, "tone")
    assert '<span class="state idle"><span aria-hidden="true">○</span> not judged</span>' in row
    assert "state bad" not in row and "state ok" not in row
    assert "failed" not in row and "passed" not in row
    assert '<td class="num opt">–</td>' in row  # no score of its own
    assert "not judged: no model configured" in row
    assert "heuristic reading, not a verdict" in row
    # The checks that were graded still show their verdict and score.
    assert "passed" in _row(html, "task") and "1.00" in _row(html, "task")
