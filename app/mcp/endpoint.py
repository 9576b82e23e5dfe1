"""The `/mcp` endpoint: the tenant's bearer key in front of the SDK's streamable-HTTP app.

The key is checked on every HTTP request (401 with a readable body without one). The
tenant becomes the request's authenticated user, so the SDK binds each MCP session to
the tenant that opened it: another key presenting the session id is answered 404.

The SDK (its import alone costs ~0.4 s and ~17 MB) and its session manager start with
the first authenticated request, in a task of their own that `close()` ends at shutdown:
a deployment nobody reaches over MCP pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import AppError
from app.settings import Settings
from app.tenants.service import TenantInfo, authenticate

if TYPE_CHECKING:
    from app.mcp.sessions import CurrentRuns

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
    def __init__(self, api: Any, settings: Settings) -> None:
        self.api = api  # the FastAPI app: its state holds the pool once the lifespan ran
        self.settings = settings
        self._started: tuple[ASGIApp, CurrentRuns] | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _start(self) -> tuple[ASGIApp, CurrentRuns]:
        async with self._lock:
            if self._started is None:
                from app.mcp.server import build_mcp
                from app.mcp.sessions import CurrentRuns

                server, mcp_app = build_mcp(self.settings)
                ready = asyncio.Event()

                async def hold() -> None:
                    # Entered and left in this one task, as the SDK's task group requires.
                    async with server.session_manager.run():
                        ready.set()
                        await self._stop.wait()

                self._task = asyncio.create_task(hold(), name="mcp-sessions")
                waiting = asyncio.create_task(ready.wait())
                await asyncio.wait({self._task, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if not ready.is_set():
                    waiting.cancel()
                    self._task.result()  # raises what stopped the session manager
                self._started = (mcp_app, CurrentRuns())
            return self._started

    async def close(self) -> None:
        """End the session manager (if MCP was used) in the task that started it."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1") or None
        try:
            tenant = await authenticate(self.api.state.db.pool, authorization)
        except AppError as exc:
            await _problem(send, exc.status, exc.message)
            return
        mcp_app, runs = self._started or await self._start()
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        token = AccessToken(token="tenant", client_id=str(tenant.id), scopes=[])
        inner = dict(scope)
        # The SDK's app serves its one route at "/": mounted here at /mcp and /mcp/.
        inner["path"] = "/"
        inner["raw_path"] = b"/"
        inner["user"] = AuthenticatedUser(token)
        inner[SCOPE_KEY] = Caller(tenant=tenant, app=self.api, runs=runs)
        await mcp_app(inner, receive, send)


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
