"""What every router shares: the tenant from the bearer key (the auth dependency) and the
shape of request bodies (the request's database, scopes and limits: app/request_state.py).

The auth dependency also tells the trace middleware whether to record the request (the
tenant records everything, or has a live run) and how to attribute it to a run.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from app.evals.service import MAX_REPEATS
from app.request_state import pool_of
from app.runs.live import LiveRuns
from app.tenants.service import TenantInfo, authenticate
from app.trace.recorder import set_trace_tenant


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
