"""MCP tools call the REST API in process, through the whole ASGI stack.

A tool that stands for a REST call *is* that call: same route, validation, quota,
events, run view and trace (recorded with transport `mcp`), so grading cannot tell
the two apart and there is one code path to keep right. The call never leaves the
process: the scope is built here and the response collected from `send`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.types import ASGIApp, Message, Scope

from app.trace.recorder import TRANSPORT_KEY

TRANSPORT = "mcp"


@dataclass(frozen=True)
class Origin:
    """What the in-process call copies from the MCP HTTP request: where the client
    reached us (so absolute URLs in answers are the ones it can use) and its key."""

    scheme: str
    server: tuple[str, int] | None
    host_header: bytes
    authorization: bytes
    client: tuple[str, int] | None

    @classmethod
    def of(cls, scope: Scope) -> Origin:
        headers = dict(scope.get("headers") or [])
        return cls(
            scheme=scope.get("scheme", "http"),
            server=scope.get("server"),
            host_header=headers.get(b"host", b"localhost"),
            authorization=headers.get(b"authorization", b""),
            client=scope.get("client"),
        )


@dataclass
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    @property
    def ok(self) -> bool:
        return self.status < 400


async def call(
    app: ASGIApp,
    origin: Origin,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
    content_type: str = "application/fhir+json",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> Reply:
    """One request through `app` as if `origin`'s client had sent it over HTTP."""
    raw = b"" if body is None else orjson.dumps(body)
    headers = [
        *(headers or []),
        (b"host", origin.host_header),
        (b"authorization", origin.authorization),
        (b"accept", b"application/fhir+json, application/json"),
        (b"user-agent", b"understudy-mcp"),
    ]
    if body is not None:
        headers.append((b"content-type", content_type.encode()))
        headers.append((b"content-length", str(len(raw)).encode()))
    query_string = urlencode(query or [], doseq=False).encode()
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": origin.scheme,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query_string,
        "headers": headers,
        "client": origin.client,
        "server": origin.server,
        "state": {TRANSPORT_KEY: TRANSPORT},
    }
    sent_body = False

    async def receive() -> Message:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return {"type": "http.disconnect"}

    reply = Reply(status=500)
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = {
                k.decode("latin-1").lower(): v.decode("latin-1")
                for k, v in message.get("headers", [])
            }
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    reply.body = b"".join(chunks)
    return reply


def problem_text(reply: Reply) -> str:
    """A readable one-paragraph account of a 4xx/5xx answer (OperationOutcome or
    problem+json), naming the element or field each issue is about."""
    try:
        document = reply.json()
    except orjson.JSONDecodeError:
        document = None
    parts: list[str] = []
    if isinstance(document, dict) and document.get("resourceType") == "OperationOutcome":
        for issue in document.get("issue") or []:
            text = str(issue.get("diagnostics") or issue.get("code") or "error")
            where = ", ".join(issue.get("expression") or [])
            parts.append(f"{where}: {text}" if where and not text.startswith(where) else text)
    elif isinstance(document, dict):
        title = str(document.get("detail") or document.get("title") or "")
        errors = document.get("errors") or []
        if title:
            parts.append(title)
        for error in errors:
            where = error.get("path") or ""
            parts.append(f"{where}: {error.get('message')}" if where else str(error.get("message")))
    if not parts:
        parts.append(reply.body.decode("utf-8", "replace")[:300] or "no details")
    return f"{reply.status} {_REASONS.get(reply.status, 'error')}: " + "; ".join(parts)


_REASONS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "not allowed",
    409: "conflict",
    410: "gone (deleted)",
    412: "version conflict (If-Match)",
    413: "too large",
    415: "unsupported media type",
    422: "not valid",
    429: "limit reached",
    500: "server error",
}
