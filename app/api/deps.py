"""The auth dependency shared by every router: the tenant from the bearer key.

It also tells the trace middleware whether to record the request (the tenant records
everything, or has a live run) and how to attribute it to a run.
"""

from __future__ import annotations

from typing import Annotated

import asyncpg
from fastapi import Depends, Request

from app.db import Scopes
from app.runs.live import LiveRuns
from app.tenants.quota import RunLimits
from app.tenants.service import TenantInfo, authenticate
from app.trace.recorder import set_trace_tenant


def pool_of(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.db.pool
    return pool


def scopes_of(request: Request) -> Scopes:
    """The request scope: `async with scopes_of(request).transaction() as tx:` commits
    on leaving, then sends what the services noted in `tx.after`."""
    scopes: Scopes = request.app.state.scopes
    return scopes


def limits_of(request: Request) -> RunLimits:
    limits: RunLimits = request.app.state.run_limits
    return limits


def root_url(request: Request) -> str:
    configured: str | None = request.app.state.settings.public_url
    return configured.rstrip("/") if configured else str(request.base_url).rstrip("/")


async def tenant_of(request: Request) -> TenantInfo:
    tenant = await authenticate(pool_of(request), request.headers.get("authorization"))
    live_runs: LiveRuns = request.app.state.live_runs
    live = await live_runs.get(tenant.id)
    set_trace_tenant(
        request.scope,
        tenant.id,
        tenant.trace_enabled or live.any,
        request.path_params.get("run_id"),
        live.run_for,
    )
    return tenant


Tenant = Annotated[TenantInfo, Depends(tenant_of)]
