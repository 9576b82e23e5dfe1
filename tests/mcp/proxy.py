"""A round-robin HTTP proxy for tests: each request goes to the next upstream in turn
(no affinity of any kind), responses are streamed back as they come (SSE included)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import httpx
from starlette.types import Message, Receive, Scope, Send

# Hop-by-hop headers a proxy does not forward (RFC 9110 section 7.6.1), and Host.
_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"host"}


@dataclass
class Forwarded:
    method: str
    upstream: int
    session: str | None
    status: int = 0


@dataclass
class RoundRobinProxy:
    upstreams: list[str]
    log: list[Forwarded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._turn = itertools.cycle(range(len(self.upstreams)))
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if self._client is None:  # made in the proxy's own event loop
            self._client = httpx.AsyncClient(timeout=120)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        session = dict(headers).get(b"mcp-session-id")
        upstream = next(self._turn)
        record = Forwarded(scope["method"], upstream, session.decode() if session else None)
        self.log.append(record)
        url = self.upstreams[upstream] + scope["path"]
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode()
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        response = await self._client.send(request, stream=True)
        try:
            record.status = response.status_code
            out = [
                (k.lower(), v)
                for k, v in response.headers.raw
                if k.lower() not in _HOP and k.lower() != b"content-length"
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": out}
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def served_by(log: list[Forwarded], session: str) -> list[int]:
    """Which upstream answered each request of one session, in order."""
    return [f.upstream for f in log if f.session == session]
