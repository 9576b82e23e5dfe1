"""Every run start is held to the tenant's daily write quota, an eval's included: its
promoted runs count their writes toward it and are refused, with the quota's reason,
once it is used up (before, only the REST start checked it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from app.db import Database
from app.scenarios.service import builtin_scenarios
from app.tenants.quota import REFRESH_SECONDS
from tests.conftest import TenantHandle

# A workflow scenario whose stimulus (quota-counted) is several writes.
SCENARIO = "results.normal-result-notify"


def _eval(label: str) -> dict[str, object]:
    return {"mode": "workflow", "label": label, "scenarios": [SCENARIO], "repeats": 1}


async def test_an_eval_started_run_counts_toward_the_write_quota(
    tenant: TenantHandle, db: Database, quota_clock: Callable[[float], None]
) -> None:
    stimulus = len(builtin_scenarios()[SCENARIO].scenario.stimulus)
    assert stimulus >= 2
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        before = (await client.get("/api/usage")).json()
        created = await client.post("/api/testing/evals", json=_eval("counted"))
        assert created.status_code == 201, created.text
        [item] = created.json()["runs"]
        assert item["status"] == "live" and "runId" in item
        after = (await client.get("/api/usage")).json()
        assert after["writes"] == before["writes"] + stimulus

        # Use up the quota; once the per-process cache refreshes, the next eval's run is
        # refused by the same check the REST start meets, and its item says why.
        limit = after["limit"]
        await db.pool.execute(
            "INSERT INTO usage_counter (tenant_id, day, shard, writes) VALUES ($1, $2, 98, $3)",
            tenant.id,
            datetime.now(UTC).date(),
            limit - after["writes"],
        )
        quota_clock(REFRESH_SECONDS + 0.1)  # past the per-process cache's refresh
        refused = await client.post("/api/testing/evals", json=_eval("over quota"))
        assert refused.status_code == 201, refused.text
        [item] = refused.json()["runs"]
        assert item["status"] == "cancelled" and "runId" not in item
        assert "daily write quota exceeded" in item["note"], item
        assert (await client.get("/api/usage")).json()["writes"] == limit
        direct = await client.post("/api/testing/runs", json={"scenarioId": SCENARIO})
        assert direct.status_code == 429
        assert "daily write quota exceeded" in direct.json()["detail"]
        live = (await client.get("/api/testing/runs", params={"status": "live"})).json()
        assert len(live["runs"]) == 1  # only the first eval's run
