"""The tenant's usage (`/api/usage`): today's FHIR writes against the daily quota."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import Tenant, pool_of
from app.contract.runs import Usage
from app.kit.clock import utcnow
from app.tenants.quota import QuotaGuard, resets_at, used_today

router = APIRouter(tags=["Usage"])


@router.get("/api/usage", summary="Today's FHIR writes against the daily quota")
async def usage(request: Request, tenant: Tenant) -> Usage:
    quota: QuotaGuard = request.app.state.quota
    day = utcnow().date()
    used = await used_today(pool_of(request), tenant.id, day)
    return Usage(
        day=day,
        writes=used,
        limit=quota.limit,
        remaining=max(0, quota.limit - used),
        resets_at=resets_at(day),
    )
