"""Text checked once at the edge: no NUL or other control character FHIR forbids, no lone
surrogate, no invalid UTF-8.

PostgreSQL text and JSONB cannot hold U+0000, and a lone surrogate cannot be encoded
to UTF-8 at all, so either one reaching a handler ends as a 500 somewhere deep in it.
This pure ASGI middleware answers such a request with a 400 naming the field (the
query parameter, `path`, the header, or the JSON path of the body field) before any
route runs, for every surface alike.

Normal requests pay a byte scan: the path, the query and a form body only when they
hold a `%` or a non-ASCII byte, headers for a raw NUL, and any other body for a raw NUL
or an escape `\\u0000` / `\\ud800`-`\\udfff`. Only a body that trips the scan is parsed, to
find the field, or to see that the escape was itself escaped (`"\\\\u0000"`) and
harmless. The body is buffered once, as received, and replayed to the app; a body over
`max_body_bytes` is answered 413 here, for every route, as soon as it grows past it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Issue
from app.kit.text import BadText, check_form, decoded, describe, needs_decoding

# (request, status, issues, title, headers) -> response: main.py's error renderer, which
# answers problem+json or, on FHIR paths, an OperationOutcome.
Render = Callable[[Request, int, list[Issue], str, dict[str, str] | None], Response]

# A raw control character (JSON forbids them inside strings; tab, LF and CR are also
# whitespace between tokens), or an escape of one (\u0000-\u001f) or of a surrogate.
_SUSPICIOUS_BODY = re.compile(
    rb"[\x00-\x08\x0b\x0c\x0e-\x1f]|\\u(?:00[01][0-9a-fA-F]|[dD][89a-fA-F])"
)
# The longest match above, less one: what a match split over two chunks can leave behind.
_BOUNDARY = 5
_FORM = "application/x-www-form-urlencoded"


def check_path(scope: Scope) -> None:
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        if needs_decoding(raw):
            decoded(unquote_to_bytes(raw), "path", "the URL path")
    else:
        problem = describe(scope.get("path", ""))
        if problem is not None:
            raise BadText("path", f"the URL path contains {problem}")


# Headers whose value is a query string that a route percent-decodes and searches with.
_QUERY_HEADERS = (b"if-none-exist",)


def check_headers(scope: Scope) -> None:
    # The HTTP parser already refuses a raw NUL in a header; in-process callers do not.
    for name, value in scope.get("headers") or ():
        header = name.decode("latin-1").lower()
        if b"\x00" in value:
            raise BadText(f"header.{header}", f"the {header} header contains a NUL character")
        if name.lower() in _QUERY_HEADERS:
            query = value.partition(b"?")[2] if b"?" in value else value
            check_form(query, f"header.{header}", f"the {header} parameter")


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def find_bad_json(document: Any) -> tuple[str, str] | None:
    """The JSON path of the first string (name or value) with a NUL or lone surrogate,
    and what is wrong with it. Iterative: a deeply nested body cannot exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            problem = describe(value)
            if problem is not None:
                return path or "body", f"'{path or 'body'}' contains {problem}"
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                problem = describe(key)
                if problem is not None:
                    return path or "body", f"a field name in '{path or 'body'}' contains {problem}"
                stack.append((_join(path, key), item))
        elif isinstance(value, list):
            stack.extend((_join(path, i), item) for i, item in reversed(list(enumerate(value))))
    return None


def check_json_body(body: bytes) -> None:
    try:
        # strict=False: a raw control character in a string is named too, not just refused.
        document = json.loads(body.decode("utf-8"), strict=False)
    except (ValueError, RecursionError):
        return  # not JSON (or not UTF-8): the route says so in its own words
    found = find_bad_json(document)
    if found is not None:
        raise BadText(*found)


def _content_type(scope: Scope) -> str:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-type":
            content_type: str = value.decode("latin-1")
            return content_type.split(";")[0].strip().lower()
    return ""


def _framing(scope: Scope) -> tuple[bool, int | None]:
    """Whether the request has a body, and its declared length if it says."""
    chunked = False
    for name, value in scope.get("headers") or ():
        lowered = name.lower()
        if lowered == b"content-length":
            length = int(value) if value.strip().isdigit() else None
            return length != 0, length
        if lowered == b"transfer-encoding":
            chunked = True
    # In-process callers (the MCP tools) may send a body without framing headers.
    return chunked or scope.get("method", "GET") not in ("GET", "HEAD", "OPTIONS"), None


class EdgeTextCheck:
    def __init__(self, app: ASGIApp, render: Render, max_body_bytes: int) -> None:
        self.app = app
        self.render = render
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            check_path(scope)
            check_form(scope.get("query_string", b""), "query", "query parameter")
            check_headers(scope)
        except BadText as bad:
            await self._reject(scope, receive, send, bad)
            return
        has_body, declared = _framing(scope)
        if not has_body:
            await self.app(scope, receive, send)
            return
        if declared is not None and declared > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        messages, size, suspicious = await self._buffer(receive)
        if size > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        form = _content_type(scope) == _FORM
        if (suspicious or form) and messages[-1]["type"] == "http.request":
            body = b"".join(m.get("body", b"") for m in messages)
            try:
                if form:  # percent-encoded: its own fast path
                    check_form(body, "", "form field")
                else:
                    check_json_body(body)
            except BadText as bad:
                await self._reject(scope, receive, send, bad)
                return
        await self.app(scope, _replay(messages, receive), send)

    async def _buffer(self, receive: Receive) -> tuple[list[Message], int, bool]:
        """The body's messages, until its end or the size limit; its size, and whether
        the scan found anything worth a closer look."""
        messages: list[Message] = []
        size = 0
        tail = b""
        suspicious = False
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages, size, suspicious  # the client went away
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes or not message.get("more_body", False):
                suspicious = suspicious or bool(_SUSPICIOUS_BODY.search(tail + chunk))
                return messages, size, suspicious
            if not suspicious and _SUSPICIOUS_BODY.search(tail + chunk):
                suspicious = True
            tail = (tail + chunk)[-_BOUNDARY:]

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        too_large = f"the body is over the limit of {self.max_body_bytes} bytes"
        await self._reject(scope, receive, send, BadText("body", too_large), 413)

    async def _reject(
        self, scope: Scope, receive: Receive, send: Send, bad: BadText, status: int = 400
    ) -> None:
        issue = Issue(bad.message, expression=bad.field)
        response = self.render(Request(scope), status, [issue], bad.message, None)
        await response(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(reversed(messages))

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
