"""The tenant's usage (`/api/usage`): today's FHIR writes against the daily quota, and per
UTC day of the last few the runs decided (the billable unit) and the model calls made."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Annotated

import asyncpg
from fastapi import APIRouter, Query, Request

from app.api.deps import Tenant
from app.kit.clock import utcnow
from app.llm import repository as llm_calls
from app.request_state import pool_of
from app.runs import repository as runs
from app.tenants.quota import QuotaGuard, resets_at, used_today
from understudy_client.contract.runs import (
    MODEL_CALL_PURPOSES,
    DecidedRuns,
    ModelCallUsage,
    Usage,
    UsageDay,
)

router = APIRouter(tags=["Usage"])

MAX_DAYS = 90


@router.get(
    "/api/usage",
    summary="Today's FHIR writes against the daily quota; decided runs and model calls per day",
    description="`days` lists the last `days` UTC days, today first, every day present "
    "(zeros when nothing happened). A run counts on the UTC day it ended: `passed`, or "
    "`failed` (a failed or timed-out run: a timeout is a failure); errored and cancelled "
    "runs are not decided and are not counted. Model calls are every call that reached "
    "the provider, by purpose (patient-sim, judge), with their tokens.",
)
async def usage(
    request: Request,
    tenant: Tenant,
    days: Annotated[
        int, Query(ge=1, le=MAX_DAYS, description="How many UTC days to list, today first")
    ] = 7,
) -> Usage:
    quota: QuotaGuard = request.app.state.quota
    pool = pool_of(request)
    today = utcnow().date()
    used = await used_today(pool, tenant.id, today)
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, dtime.min, UTC)
    until = resets_at(today)
    decided = await runs.decided_runs_by_day(pool, tenant_id=tenant.id, since=since, until=until)
    calls = await llm_calls.calls_by_day(pool, tenant_id=tenant.id, since=since, until=until)
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
