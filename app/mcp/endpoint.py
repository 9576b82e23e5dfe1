"""The `/mcp` endpoint: the tenant's bearer key in front of the SDK's streamable-HTTP app.

The key is checked on every HTTP request (401 with a readable body without one). The
tenant becomes the request's authenticated user, so the SDK binds each MCP session to
the tenant that opened it: another key presenting the session id is answered 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import AppError
from app.mcp.sessions import CurrentRuns
from app.tenants.service import TenantInfo, authenticate

MCP_PATH = "/mcp"
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


class McpEndpoint:
    def __init__(self, api: Any, mcp_app: ASGIApp) -> None:
        self.api = api  # the FastAPI app: its state holds the pool once the lifespan ran
        self.mcp_app = mcp_app
        self.runs = CurrentRuns()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.mcp_app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1") or None
        try:
            tenant = await authenticate(self.api.state.db.pool, authorization)
        except AppError as exc:
            await _problem(send, exc.status, exc.message)
            return
        token = AccessToken(token="tenant", client_id=str(tenant.id), scopes=[])
        inner = dict(scope)
        # The SDK's app serves its one route at "/": mounted here at /mcp and /mcp/.
        inner["path"] = "/"
        inner["raw_path"] = b"/"
        inner["user"] = AuthenticatedUser(token)
        inner[SCOPE_KEY] = Caller(tenant=tenant, app=self.api, runs=self.runs)
        await self.mcp_app(inner, receive, send)


async def _problem(send: Send, status: int, message: str) -> None:
    body = orjson.dumps({"title": message, "status": status, "detail": message})
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="understudy"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
