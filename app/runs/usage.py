"""A tenant's usage: today's FHIR writes against the daily quota, and per UTC day of the
last few the runs decided (the billable unit) and the model calls made (`/api/usage`)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime

import asyncpg

from app.kit.clock import utcnow
from app.llm import repository as llm_calls
from app.runs import repository as runs
from app.tenants.quota import QuotaGuard, resets_at, used_today
from understudy_client.contract.runs import (
    MODEL_CALL_PURPOSES,
    DecidedRuns,
    ModelCallUsage,
    Usage,
    UsageDay,
)


async def tenant_usage(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, quota: QuotaGuard, days: int
) -> Usage:
    """Today's writes against `quota`, and the last `days` UTC days, today first, every
    day present (zeros when nothing happened)."""
    today = utcnow().date()
    used = await used_today(pool, tenant_id, today)
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, dtime.min, UTC)
    until = resets_at(today)
    decided = await runs.decided_runs_by_day(pool, tenant_id=tenant_id, since=since, until=until)
    calls = await llm_calls.calls_by_day(pool, tenant_id=tenant_id, since=since, until=until)
    return Usage(
        day=today,
        writes=used,
        limit=quota.limit,
        remaining=max(0, quota.limit - used),
        resets_at=until,
        days=_days(today, days, decided, calls),
    )


def _days(
    today: date, count: int, decided: list[asyncpg.Record], calls: list[asyncpg.Record]
) -> list[UsageDay]:
    """Every day of the window, today first, zeros where the database had no row."""
    runs_on = {r["day"]: r for r in decided}
    calls_on: dict[date, dict[str, asyncpg.Record]] = {}
    for r in calls:
        calls_on.setdefault(r["day"], {})[r["purpose"]] = r
    listed = []
    for back in range(count):
        day = today - timedelta(days=back)
        ran = runs_on.get(day)
        passed, failed = (ran["passed"], ran["failed"]) if ran is not None else (0, 0)
        by_purpose = calls_on.get(day, {})
        purposes = list(MODEL_CALL_PURPOSES) + sorted(set(by_purpose) - set(MODEL_CALL_PURPOSES))
        listed.append(
            UsageDay(
                day=day,
                runs=DecidedRuns(passed=passed, failed=failed, decided=passed + failed),
                model_calls=[_model_calls(p, by_purpose.get(p)) for p in purposes],
            )
        )
    return listed


def _model_calls(purpose: str, row: asyncpg.Record | None) -> ModelCallUsage:
    if row is None:
        return ModelCallUsage(
            purpose=purpose, calls=0, prompt_tokens=0, completion_tokens=0, total_tokens=0
        )
    prompt, completion = int(row["prompt_tokens"]), int(row["completion_tokens"])
    return ModelCallUsage(
        purpose=purpose,
        calls=row["calls"],
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
    )
