"""Request trace: a pure ASGI middleware and a buffered writer.

Recording must cost little on the hot path, so a request only appends a tuple to an
in-process buffer; a background task COPYs the buffer into `trace_call` every
`FLUSH_SECONDS` (or sooner when it fills). The handler tells the middleware which
resources it touched through `scope["state"]`, so nothing re-parses bodies here.
Trade-off: a process killed hard loses at most the last flush interval of trace rows;
`flush()` runs on shutdown and whenever a reader needs the trace to be complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.kit.clock import utcnow
from app.outage import OutageLog, is_outage
from app.trace import repository

log = logging.getLogger("understudy.trace")

FLUSH_SECONDS = 0.2
FLUSH_ROWS = 1000
# Rows per COPY statement of a flush.
COPY_ROWS = 100
# Beyond this many unflushed rows (the database is down), the oldest are dropped and
# logged rather than growing memory without bound.
MAX_BUFFERED = 100_000
COLUMNS = (
    "tenant_id",
    "run_id",
    "at",
    "method",
    "path",
    "query",
    "status",
    "duration_ms",
    "transport",
    "refs",
    "response",
    "response_bytes",
    "request",
)
# What is kept of a call's response body: what the system under test was shown, for the
# message checks' `grounded` (a two-week `$find` of every practitioner fits; 32 KiB cut
# such an answer after its first days, so later times were "never shown"). A longer body
# is cut there, but for a Bundle (below); `response_bytes` keeps its full size.
RESPONSE_CAP = 262_144
# A longer Bundle (a month of Slots) is kept as data instead of cut as text: its resources,
# in order, up to BUNDLE_ENTRIES of them (and BUNDLE_CAP bytes of JSON), so every time it
# offered was shown; it is read in full while it streams, up to BUFFER_CAP bytes.
BUNDLE_ENTRIES = 2000
BUNDLE_CAP = 2_097_152
BUFFER_CAP = 8_388_608
_JSON_TYPES = (b"application/json", b"application/fhir+json", b"application/problem+json")
# Requests under these path prefixes are recorded.
RECORDED_PREFIXES = ("/api/fhir/r4", "/api/eligibility", "/api/testing/runs/")
NOT_RECORDED = ("/api/fhir/r4/metadata",)

# Set in the ASGI scope's state by in-process callers (the MCP tools) that stand for a
# REST call: the call is recorded as that REST call, with their transport name.
TRANSPORT_KEY = "trace_transport"

TraceRow = tuple[
    uuid.UUID,
    str | None,
    datetime,
    str,
    str,
    str,
    int,
    float,
    str,
    list[str],
    str | None,
    int | None,
    str | None,
]


OnFlush = Callable[[list["TraceRow"]], Awaitable[None]]


class TraceRecorder:
    def __init__(self, pool: asyncpg.Pool, on_flush: OnFlush | None = None) -> None:
        self._pool = pool
        self._on_flush = on_flush
        self._rows: list[TraceRow] = []
        # Rows a flush wrote before the database went away, not yet given to `on_flush`.
        self._unannounced: list[TraceRow] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._outage = OutageLog(log, "trace_database")

    def add(self, row: TraceRow) -> None:
        self._rows.append(row)
        if len(self._rows) >= FLUSH_ROWS:
            self._wake.set()
        if len(self._rows) > MAX_BUFFERED:
            dropped = len(self._rows) - MAX_BUFFERED
            del self._rows[:dropped]
            log.warning("trace_rows_dropped count=%d", dropped)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="trace-flusher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_SECONDS)
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:
                if is_outage(exc):
                    # PostgreSQL away: the rows wait in the buffer; said once.
                    self._outage.failed(exc, "traced calls wait in memory until it is back")
                else:
                    log.exception("trace_flush_failed")
                await asyncio.sleep(1.0)
            else:
                self._outage.ok()

    async def flush(self) -> None:
        async with self._lock:
            if not self._rows:
                return
            rows, self._rows = self._rows, []
            written: list[TraceRow] = []
            done = 0
            try:
                async with self._pool.acquire() as conn:
                    # In pieces: asyncpg encodes a COPY's rows in one go, without yielding
                    # to the loop (~3.5 µs a row), so a thousand at once held every
                    # request up for ~3 ms.
                    while done < len(rows):
                        piece = rows[done : done + COPY_ROWS]
                        try:
                            await repository.insert_calls(conn, piece, COLUMNS)
                        except (asyncpg.DataError, OverflowError, TypeError, ValueError):
                            # Rows PostgreSQL refuses (or asyncpg cannot encode) would be
                            # refused forever: drop them.
                            log.exception("trace_rows_rejected count=%d", len(piece))
                        else:
                            written.extend(piece)
                        done += len(piece)
            except Exception:
                self._rows[:0] = rows[done:]  # the rest waits for the next attempt
                self._unannounced.extend(written)  # told to `on_flush` with it
                raise
            written, self._unannounced = self._unannounced + written, []
        if self._on_flush is not None and written:
            try:
                await self._on_flush(written)
            except Exception as exc:
                if not is_outage(exc):
                    log.exception("trace_on_flush_failed")
                    return
                # The database went away after the rows were written: they are announced
                # with the next flush, and the flusher logs the outage once.
                self._unannounced[:0] = written
                raise


def _text(value: str) -> str:
    # PostgreSQL text cannot hold NUL; a hostile URL may carry one.
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def record_refs(scope: Scope, refs: list[str]) -> None:
    """Called by handlers: the resources this request touched."""
    scope.setdefault("state", {})["trace_refs"] = refs


def set_trace_tenant(
    scope: Scope,
    tenant_id: uuid.UUID,
    enabled: bool,
    run_id: str | None,
    run_of_refs: Callable[[list[str]], str | None] | None = None,
) -> None:
    """Called by the auth dependency: whether to record this request, the run it came
    through (a run view), and how to find the run its touched references belong to."""
    state = scope.setdefault("state", {})
    state["trace_tenant"] = (tenant_id, enabled, run_id, run_of_refs)


class TraceMiddleware:
    def __init__(self, app: ASGIApp, recorder_ref: dict[str, Any], transport: str = "rest") -> None:
        self.app = app
        # The recorder is created in the lifespan, after the middleware stack is built.
        self.recorder_ref = recorder_ref
        self.transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if (
            scope["type"] != "http"
            or not path.startswith(RECORDED_PREFIXES)
            or path.startswith(NOT_RECORDED)
            # Under /api/testing/runs/ only the run views' FHIR calls are the system's
            # work; polling a run or finishing it is not.
            or (path.startswith("/api/testing/runs/") and "/fhir/r4" not in path)
        ):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        at = utcnow()
        status = 500
        body = _Body()
        asked = _Body(wanted=True)  # the request: kept whatever its type says

        async def receive_wrapper() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                asked.add(message.get("body", b""))
            return message

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                body.start(message)
            elif message["type"] == "http.response.body":
                body.add(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        finally:
            state = scope.get("state") or {}
            tenant = state.get("trace_tenant")
            recorder: TraceRecorder | None = self.recorder_ref.get("recorder")
            if tenant is not None and tenant[1] and recorder is not None:
                tenant_id, _, run_id, run_of_refs = tenant
                refs = list(dict.fromkeys(state.get("trace_refs") or ()))
                if run_id is None and run_of_refs is not None:
                    # On the tenant base: the run whose fixture the call touched, if any;
                    # a call touching none is shared by all live runs (run_id NULL).
                    run_id = run_of_refs(refs)
                recorder.add(
                    (
                        tenant_id,
                        run_id,
                        at,
                        scope["method"],
                        _text(path),
                        _text(scope.get("query_string", b"").decode("latin-1")),
                        status,
                        (time.perf_counter() - started) * 1000.0,
                        state.get(TRANSPORT_KEY, self.transport),
                        [_text(r) for r in refs],
                        # Kept for shared calls too: a run's system may read the tenant
                        # base (a `$find` touches no fixture), and it was shown that.
                        *body.kept(),
                        asked.kept()[0] or None,
                    )
                )


class _Body:
    """The first RESPONSE_CAP bytes of a JSON response body (or of a request's, made
    `wanted` from the start), and its full size."""

    __slots__ = ("chunks", "kept_bytes", "size", "wanted")

    def __init__(self, *, wanted: bool = False) -> None:
        self.chunks: list[bytes] = []
        self.kept_bytes = 0
        self.size = 0
        self.wanted = wanted  # a response's: set once its content type says JSON

    def start(self, message: Message) -> None:
        for name, value in message.get("headers", ()):
            if name.lower() == b"content-type":
                self.wanted = value.split(b";", 1)[0].strip().lower() in _JSON_TYPES
                return

    def add(self, chunk: bytes) -> None:
        if not self.wanted or not chunk:
            return
        self.size += len(chunk)
        room = BUFFER_CAP - self.kept_bytes
        if room > 0:
            piece = chunk[:room]
            self.chunks.append(piece)
            self.kept_bytes += len(piece)

    def kept(self) -> tuple[str | None, int | None]:
        if not self.wanted:
            return None, None
        raw = b"".join(self.chunks)
        if len(raw) > RESPONSE_CAP:
            bundle = _bounded_bundle(raw) if self.size == len(raw) else None
            if bundle is not None:
                return bundle, self.size
            raw = raw[:RESPONSE_CAP]
        # A cut may split a character: what remains of it is replaced, never an error.
        return _text(raw.decode("utf-8", "replace")), self.size


def _bounded_bundle(raw: bytes) -> str | None:
    """A Bundle longer than the cap, kept as data: its resources in order, up to
    BUNDLE_ENTRIES and BUNDLE_CAP bytes, `total` and `type` kept, the rest (links, search
    modes, narratives) left out. None for anything else (cut as text then)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict) or body.get("resourceType") != "Bundle":
        return None
    kept: list[dict[str, Any]] = []
    size = 0
    for entry in body.get("entry") or []:
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if not isinstance(resource, dict):
            continue
        resource = {k: v for k, v in resource.items() if k not in ("text", "meta")}
        piece = len(orjson.dumps(resource))
        if len(kept) >= BUNDLE_ENTRIES or size + piece > BUNDLE_CAP:
            break
        kept.append({"resource": resource})
        size += piece
    out = {"resourceType": "Bundle", "type": body.get("type"), "entry": kept}
    if "total" in body:
        out["total"] = body["total"]
    return _text(orjson.dumps(out).decode())
