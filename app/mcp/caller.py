"""Who is calling an MCP tool: what the `/mcp` endpoint (endpoint.py) puts in the request's
scope after checking the key, and the tools read back (tool_call.py). Its own module so the
endpoint, which builds the tools, and the tools, which read the caller, need not import
each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.types import Scope

from app.mcp.sessions import CurrentRuns
from app.tenants.service import TenantInfo

SCOPE_KEY = "understudy.mcp"


@dataclass(frozen=True)
class Caller:
    """Who is calling, put in the scope for the tools to read."""

    tenant: TenantInfo
    app: Any  # the whole API (FastAPI), for the tools' in-process REST calls
    runs: CurrentRuns


def caller_of(scope: Scope) -> Caller:
    caller: Caller = scope[SCOPE_KEY]
    return caller
