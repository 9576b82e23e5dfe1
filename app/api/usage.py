"""The tenant's usage (`/api/usage`): today's FHIR writes against the daily quota, and per
UTC day of the last few the runs decided (the billable unit) and the model calls made
(app/runs/usage.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.api.deps import Tenant
from app.request_state import pool_of
from app.runs.usage import tenant_usage
from app.tenants.quota import QuotaGuard
from understudy_client.contract.runs import Usage

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
    return await tenant_usage(pool_of(request), tenant.id, quota, days)
