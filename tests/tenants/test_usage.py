"""`GET /api/usage` per UTC day: decided runs (passed, failed and timed out; not errored
or cancelled) on the day they ended, model calls and tokens by purpose, only the tenant's
own, every day of the window listed, over real HTTP."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import httpx
import pytest

from app.db import Database
from app.llm import repository as llm_calls
from app.runs import repository as runs
from tests.conftest import TenantHandle, make_tenant
from tests.runs.test_run_flow import api, start


def _at(day: date, hour: int) -> datetime:
    return datetime.combine(day, time(hour), UTC)


async def _ended_run(
    db: Database, tenant: uuid.UUID, status: str, finished: datetime | None
) -> None:
    """A run row as grading leaves it: started 20 minutes before it ended."""
    started = (finished or datetime.now(UTC)) - timedelta(minutes=20)
    await db.pool.execute(
        """INSERT INTO run (tenant_id, id, scenario_id, scenario_version, scenario_hash,
            builtin, mode, status, fixture, expectations, started_at, deadline, changed_at,
            finished_at)
        VALUES ($1, $2, 'usage.test', 1, 'h', false, 'agent', $3, '{}', '[]', $4, $5, $4, $6)""",
        tenant,
        f"run_{uuid.uuid4().hex[:12]}",
        status,
        started,
        started + timedelta(minutes=30),
        finished,
    )


async def _call(
    db: Database, tenant: uuid.UUID, purpose: str, at: datetime, tokens: tuple[int, int]
) -> None:
    await llm_calls.insert_call(
        db.pool,
        tenant_id=tenant,
        run_id=None,
        purpose=purpose,
        model="m",
        at=at,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        latency_ms=5.0,
        outcome="ok",
        error=None,
    )


async def _usage(tenant: TenantHandle, **params: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        r = await client.get("/api/usage", params=params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _calls(day: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    return {
        c["purpose"]: (c["calls"], c["promptTokens"], c["completionTokens"], c["totalTokens"])
        for c in day["modelCalls"]
    }


async def _seed(db: Database, tenant: uuid.UUID, today: date) -> None:
    """Today: 2 passed, 1 failed, 1 timed out, 1 errored, 1 cancelled; 2 judge
    calls and 1 patient-sim call. Two days ago: 1 passed just after midnight and 1 judge
    call just before the next. Eight days ago (outside the default window): 1 failed."""
    for status in ("passed", "passed", "failed", "timed_out", "errored", "cancelled"):
        await _ended_run(db, tenant, status, datetime.now(UTC))
    # Started yesterday (20 minutes before), ended today: it counts today.
    await _ended_run(db, tenant, "passed", _at(today, 0) + timedelta(minutes=10))
    await _ended_run(db, tenant, "passed", _at(today - timedelta(days=2), 0))
    await _ended_run(db, tenant, "failed", _at(today - timedelta(days=8), 12))
    now = datetime.now(UTC)
    await _call(db, tenant, "judge", now, (100, 20))
    await _call(db, tenant, "judge", now, (50, 10))
    await _call(db, tenant, "patient-sim", now, (300, 40))
    await _call(db, tenant, "judge", _at(today - timedelta(days=2), 23), (7, 3))


async def test_usage_per_day_counts_decided_runs_and_model_calls(
    tenant: TenantHandle, db: Database, server_url: str
) -> None:
    # A real run that ends failed by `finish` and one cancelled, through the API.
    # A live run (a real one: the worker grades it) is not decided either.
    failed, cancelled, live = await start(tenant), await start(tenant), await start(tenant)
    async with api(tenant) as client:
        assert (await client.post(f"/runs/{failed['id']}/finish")).json()["status"] == "failed"
        await client.post(f"/runs/{cancelled['id']}/cancel")
    today = datetime.now(UTC).date()
    await _seed(db, tenant.id, today)
    # Another tenant's runs and calls, on the same days, count for it alone.
    other = await make_tenant(db, server_url)
    await _seed(db, other.id, today)
    await _ended_run(db, other.id, "passed", datetime.now(UTC))

    usage = await _usage(tenant)
    assert {"date", "writes", "limit", "remaining", "resetsAt"} <= set(usage)  # unchanged
    days = usage["days"]
    assert [d["date"] for d in days] == [(today - timedelta(days=n)).isoformat() for n in range(7)]
    assert days[0]["runs"] == {"passed": 3, "failed": 3, "decided": 6}
    assert _calls(days[0]) == {"patient-sim": (1, 300, 40, 340), "judge": (2, 150, 30, 180)}
    assert days[1]["runs"] == {"passed": 0, "failed": 0, "decided": 0}
    assert _calls(days[1]) == {"patient-sim": (0, 0, 0, 0), "judge": (0, 0, 0, 0)}
    assert days[2]["runs"] == {"passed": 1, "failed": 0, "decided": 1}
    assert _calls(days[2]) == {"patient-sim": (0, 0, 0, 0), "judge": (1, 7, 3, 10)}
    assert sum(d["runs"]["decided"] for d in days) == 7  # eight days ago is outside

    wider = (await _usage(tenant, days=9))["days"]
    assert len(wider) == 9 and wider[8]["runs"] == {"passed": 0, "failed": 1, "decided": 1}
    assert (await _usage(other, days=1))["days"][0]["runs"] == {
        "passed": 4,
        "failed": 2,
        "decided": 6,
    }
    async with api(tenant) as client:
        await client.post(f"/runs/{live['id']}/cancel")


async def test_usage_days_is_checked(tenant: TenantHandle) -> None:
    assert len((await _usage(tenant, days=1))["days"]) == 1
    assert len((await _usage(tenant, days=90))["days"]) == 90
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        for bad in ("0", "91", "-1", "week"):
            r = await client.get("/api/usage", params={"days": bad})
            assert r.status_code == 422, (bad, r.text)
            assert [e["path"] for e in r.json()["errors"]] == ["query.days"]


@pytest.mark.parametrize(
    ("statement", "index"),
    [(runs.DECIDED_RUNS_BY_DAY, "ix_run_decided"), (llm_calls.CALLS_BY_DAY, "ix_llm_call_at")],
)
async def test_the_per_day_counts_read_an_index_alone(
    tenant: TenantHandle, db: Database, statement: str, index: str
) -> None:
    """Each statement's predicate matches its index's, and the index holds every column
    it reads, so the planner can answer from the index alone (here forced: with a few
    rows it would rather scan the table)."""
    since = datetime.now(UTC) - timedelta(days=7)
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = await conn.fetch("EXPLAIN " + statement, tenant.id, since, datetime.now(UTC))
    assert f"Index Only Scan using {index} " in "\n".join(r[0] for r in plan)
