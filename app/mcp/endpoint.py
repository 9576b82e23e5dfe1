"""The `/mcp` endpoint: the tenant's bearer key in front of the SDK's streamable-HTTP app.

The key is checked on every HTTP request (401 with a readable body without one).

The SDK runs stateless: no MCP session lives in this process, so any API process answers
any request and a round-robin load balancer needs no sticky sessions. Clients of the
2025 (initialize-handshake) protocol still get an `Mcp-Session-Id`, issued here on the
initialize answer and echoed by the client on every later request: it keys the
session's current run (`sessions.CurrentRuns`, in Redis), per tenant, so another key
presenting the same id sees nothing of it. Stateless (2026 protocol) clients have no
session; one that sends an `Mcp-Client-Id` header (an id of its own choosing) has its
current run kept under that id the same way, and one that sends none names its run
with `run_id` (see `sessions` for why nothing else identifies a stateless client).
`DELETE` ends the session (its current run is forgotten); `GET` (a stream for
server-initiated messages) is answered 405, which the transport allows: a stateless
server has nothing to send outside a request.

The SDK (its import alone costs ~0.4 s and ~17 MB) and its session manager start with
the first authenticated request, in a task of their own that `close()` ends at shutdown:
a deployment nobody reaches over MCP pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import AppError
from app.settings import Settings
from app.tenants.service import authenticate

if TYPE_CHECKING:
    from app.mcp.sessions import CurrentRuns

MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
CLIENT_HEADER = b"mcp-client-id"
VERSION_HEADER = b"mcp-protocol-version"
# Visible ASCII, as the transport spec requires of a session id; bounded in length (a
# client id is held to the same rule).
_SESSION_ID = re.compile(r"^[\x21-\x7E]{1,128}$")


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
                jobs = self.api.state.jobs
                runs = CurrentRuns(self.api.state.db.pool, jobs.redis if jobs else None)
                self._started = (mcp_app, runs)
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
        session = headers.get(SESSION_HEADER)
        if session is not None and not _SESSION_ID.match(session.decode("latin-1")):
            await _problem(send, 400, "Mcp-Session-Id: not a valid session id")
            return
        client = headers.get(CLIENT_HEADER)
        if client is not None and not _SESSION_ID.match(client.decode("latin-1")):
            await _problem(
                send, 400, "Mcp-Client-Id: not a valid client id (1 to 128 visible ASCII)"
            )
            return
        mcp_app, runs = self._started or await self._start()
        method = scope.get("method", "GET")
        if method == "GET":
            await _reply(send, 405, b"", [(b"allow", b"POST, DELETE")])
            return
        if method == "DELETE":
            if session is None:
                await _problem(send, 400, "Mcp-Session-Id: required to end a session")
                return
            await runs.end_session(tenant.id, session.decode("latin-1"))
            await _reply(send, 204, b"", [])
            return
        if method == "POST" and session is None and _handshake_era(headers):
            receive, opens = await _peek_initialize(receive)
            if opens:
                send = _with_session_id(send, uuid.uuid4().hex.encode())
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        token = AccessToken(token="tenant", client_id=str(tenant.id), scopes=[])
        inner = dict(scope)
        # The SDK's app serves its one route at "/": mounted here at /mcp and /mcp/.
        inner["path"] = "/"
        inner["raw_path"] = b"/"
        inner["user"] = AuthenticatedUser(token)
        from app.mcp.caller import SCOPE_KEY, Caller

        inner[SCOPE_KEY] = Caller(tenant=tenant, app=self.api, runs=runs)
        await mcp_app(inner, receive, send)


def _handshake_era(headers: dict[bytes, bytes]) -> bool:
    """A request of the 2025 protocol: no version header yet (initialize) or a
    handshake-era version (2026 clients name theirs on every request)."""
    version = headers.get(VERSION_HEADER)
    if version is None:
        return True
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


async def _peek_initialize(receive: Receive) -> tuple[Receive, bool]:
    """Read the whole body (the SDK reads it whole too) and whether it is an initialize
    request; the returned `receive` hands the same body on."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        document = None
    opens = isinstance(document, dict) and document.get("method") == "initialize"
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay, opens


def _with_session_id(send: Send, session: bytes) -> Send:
    """`send` that gives a successful answer the new session's id."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] < 400:
            message = {
                **message,
                "headers": [*message.get("headers", []), (SESSION_HEADER, session)],
            }
        await send(message)

    return sending


async def _reply(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
