"""What every router shares: the tenant from the bearer key (the auth dependency), the
request's database, scopes and limits, and the shape of request bodies.

The auth dependency also tells the trace middleware whether to record the request (the
tenant records everything, or has a live run) and how to attribute it to a run.
"""

from __future__ import annotations

from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from app.db import Scopes
from app.evals.service import MAX_REPEATS
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


# The root URL by what Starlette builds it from (scheme, Host header, server address,
# root path), so a request does not build a URL object for it (a few per cent of a FHIR
# read). Bounded, as the Host header is the client's to choose: emptied when full.
_ROOTS: dict[tuple[Any, ...], str] = {}
ROOTS_CACHED = 256


def root_url(request: Request) -> str:
    configured: str | None = request.app.state.settings.public_url
    if configured:
        return configured.rstrip("/")
    scope = request.scope
    key = (
        scope.get("scheme"),
        request.headers.get("host"),
        scope.get("server"),
        scope.get("app_root_path"),
        scope.get("root_path"),
    )
    root = _ROOTS.get(key)
    if root is None:
        if len(_ROOTS) >= ROOTS_CACHED:
            _ROOTS.clear()
        root = _ROOTS[key] = str(request.base_url).rstrip("/")
    return root


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


class RequestBody(BaseModel):
    """A JSON request body: camelCase on the wire (snake_case accepted), unknown fields
    refused. Subclasses add their own `model_config` (examples), merged with this one."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


# `timeoutSeconds` wherever runs are started (a run, each run of an eval).
TIMEOUT_FIELD: dict[str, Any] = {
    "description": "30 to 1800 seconds per run; 0 or null: the scenario's own",
    "json_schema_extra": {
        "anyOf": [
            {"type": "integer", "minimum": 30, "maximum": 1800},
            {"const": 0},
            {"type": "null"},
        ]
    },
}


# An eval's `repeats` and `personas`, wherever an eval is asked for (one now, a schedule's).
REPEATS_FIELD: dict[str, Any] = {
    "default": 1,
    "description": f"1 to {MAX_REPEATS} runs of each scenario × persona",
    "json_schema_extra": {"minimum": 1, "maximum": MAX_REPEATS},
}
PERSONAS_FIELD: dict[str, Any] = {
    "default": "baseline",
    "description": "'baseline', 'all' (baseline + every variant) or names",
}


# `revision` wherever runs are started: the system under test's version, as the caller
# names it (a git sha, "triage-agent v3"); the board and compare group runs by it.
REVISION_FIELD: dict[str, Any] = {
    "default": None,
    "min_length": 1,
    "max_length": 100,
    "description": "The version of the system under test: a git sha, 'triage-agent v3' "
    "(1 to 100 characters)",
    "examples": ["1a2b3c4", "triage-agent v3"],
}
