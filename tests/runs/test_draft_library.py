"""Every built-in scenario's reference run, saved as a scenario, passes its own scenario
check: the oracle replays, doing nothing fails, every near miss and generated adversary
fails a required expectation, every equivalent rewrite passes."""

from __future__ import annotations

import httpx
import pytest

from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle
from tests.orchestration.test_check import failures

LIBRARY = sorted(builtin_scenarios())


@pytest.mark.parametrize("scenario_id", LIBRARY)
async def test_a_reference_run_saved_as_a_scenario_passes_its_check(
    tenant: TenantHandle, scenario_id: str
) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=300) as client:
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{scenario_id}/reference-run")
        assert r.status_code == 200, r.text
        run = r.json()
        r = await client.post(f"{tenant.server}/api/testing/runs/{run['id']}/scenario")
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["problems"] == []
        draft = answer["draft"]
        r = await client.post(f"{tenant.server}/api/testing/scenarios", json=draft)
        assert r.status_code == 201, r.text
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{draft['id']}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert failures(report) == [], "\n".join(failures(report))
    assert all(v["mutants"] > 0 and v["rewrites"] > 0 for v in report["variants"])
