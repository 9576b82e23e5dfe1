"""The CI gate and flip attribution (issue 18): by default it fails only on regressions
attributed to the agent or the platform, and says why it ignored the others;
`--gate-on all` counts every regression (the strict rule, under which a changed scenario
was already left out of the test)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from app.db import Database
from app.scenarios.schema import Scenario
from tests.client.test_ci import eval_ci
from tests.conftest import TenantHandle
from tests.evals.test_attribution import (
    BUILTIN,
    CUSTOM,
    ROOT,
    custom_scenario,
    import_scenario,
)
from tests.evals.test_evals import api_client, do_the_work, started_runs


def args(label: str, scenario: str, repeats: int, *extra: str) -> list[str]:
    return [
        "--mode",
        "workflow",
        "--scenarios",
        scenario,
        "--label",
        label,
        "--repeats",
        str(repeats),
        "--baseline",
        "label:main",
        *extra,
    ]


async def _automation(
    tenant: TenantHandle, label: str, document: dict[str, Any] | None, worked: int | None
) -> None:
    handled: set[str] = set()
    per_scenario: Counter[str] = Counter()
    eval_id: str | None = None
    async with api_client(tenant) as client:
        while True:
            if eval_id is None:
                listed = (await client.get("/evals", params={"labelPrefix": label})).json()
                eval_id = next((e["id"] for e in listed["evals"] if e["label"] == label), None)
            if eval_id is not None:
                for item in await started_runs(client, eval_id):
                    if item["runId"] in handled or item["status"] != "live":
                        continue
                    handled.add(item["runId"])
                    per_scenario[item["scenarioId"]] += 1
                    if document is not None and (
                        worked is None or per_scenario[item["scenarioId"]] <= worked
                    ):
                        await do_the_work(tenant, item, Scenario.model_validate(document))
                    await client.post(f"/runs/{item['runId']}/finish")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def automating(
    tenant: TenantHandle, label: str, document: dict[str, Any] | None, worked: int | None = None
) -> AsyncIterator[None]:
    """Do (document given) or skip the work of each run of the eval labelled `label`;
    `worked`: only of the first that many runs of each scenario (the others are only
    finished). One document serves copies of a scenario under other ids."""
    task = asyncio.create_task(_automation(tenant, label, document, worked))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def gate(
    tenant: TenantHandle,
    label: str,
    scenario: str,
    repeats: int,
    doc: Any,
    *extra: str,
    worked: int | None = None,
) -> tuple[int, str]:
    async with automating(tenant, label, doc, worked):
        code, out, err = await eval_ci(tenant, *args(label, scenario, repeats, *extra))
    return code, out + err


async def test_a_changed_scenario_is_ignored_by_the_gate_with_a_note(
    tenant: TenantHandle,
) -> None:
    first = custom_scenario("Critical potassium, first wording")
    await import_scenario(tenant, first)
    code, out = await gate(tenant, "main 1", CUSTOM, 2, first)
    assert code == 0, out
    await import_scenario(tenant, custom_scenario("Critical potassium, second wording"))
    code, out = await gate(tenant, "pr-1 a", CUSTOM, 2, None)
    assert code == 0, out
    assert (
        f"ignored cell {CUSTOM} × baseline regressed: attributed to scenario "
        "(the scenario changed between the evals)" in out
    )
    # The strict rule: a changed scenario's cell was already out of the test.
    code, out = await gate(tenant, "pr-1 b", CUSTOM, 2, None, "--gate-on", "all")
    assert code == 0, out
    assert "ignored cell" not in out


async def test_an_agent_regression_fails_under_either_rule(tenant: TenantHandle) -> None:
    document = json.loads((ROOT / "scenarios" / f"{BUILTIN}.json").read_text())
    code, out = await gate(tenant, "main 1", BUILTIN, 5, document)
    assert code == 0, out
    code, out = await gate(tenant, "pr-2 a", BUILTIN, 5, None)
    assert code == 1, out
    assert "rule: significant regression" in out and "ignored cell" not in out
    code, out = await gate(tenant, "pr-2 b", BUILTIN, 5, None, "--gate-on", "all")
    assert code == 1, out


async def test_a_simulator_change_is_ignored_unless_gating_on_all(
    tenant: TenantHandle, db: Database
) -> None:
    """The patient's model changed between the evals: here the baseline's recorded
    provenance is rewritten to say so (a second model server is not needed to test the
    gate's rule; the attribution rule itself is tested in tests/evals)."""
    document = custom_scenario("Critical potassium, with a patient")
    document["patientSim"] = {"patient": "@patient", "goal": "Know what my result means"}
    await import_scenario(tenant, document)
    code, out = await gate(tenant, "main 1", CUSTOM, 5, document)
    assert code == 0, out
    old = {"engine": "llm", "model": "old-model", "promptVersion": "patient-sim/1"}
    await db.pool.execute(
        """UPDATE run SET provenance = provenance || $2::jsonb
            WHERE tenant_id = $1 AND label = 'main 1'""",
        tenant.id,
        json.dumps({"patientSim": old, "patientSimUsed": [old]}),
    )
    code, out = await gate(tenant, "pr-3 a", CUSTOM, 5, None)
    assert code == 0, out
    assert f"ignored cell {CUSTOM} × baseline regressed: attributed to simulator" in out
    code, out = await gate(tenant, "pr-3 b", CUSTOM, 5, None, "--gate-on", "all")
    assert code == 1, out
    assert "rule: significant regression" in out
