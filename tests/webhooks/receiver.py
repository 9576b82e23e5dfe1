"""A real HTTP receiver on 127.0.0.1 for webhook tests: records what it gets and answers
with a scripted sequence of status codes (or delays)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.threaded_server import ThreadedServer, free_port


@dataclass
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered (after any scripted sleep)

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Receiver:
    """`script` is consumed one entry per request: an int status, or ("sleep", s) to
    sleep that long and then answer `default_status`. Any path is accepted and recorded,
    so one receiver can serve several subscriptions (`url_for("a")`)."""

    port: int = field(default_factory=free_port)
    script: list[Any] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    default_status: int = 200
    # Optional: decides the status from the path and body before the script is consulted
    # (None: use the script).
    decide: Callable[[str, bytes], int | None] | None = None

    @property
    def url(self) -> str:
        return self.url_for("hook")

    def url_for(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def on(self, name: str) -> list[Received]:
        """What arrived at `/name`, in arrival order."""
        return [r for r in self.received if r.path == f"/{name}"]

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        at = time.time()
        decided = self.decide(scope["path"], body) if self.decide else None
        if decided is not None:
            action: Any = decided
        else:
            action = self.script.pop(0) if self.script else self.default_status
        status = self.default_status if isinstance(action, tuple) else int(action)
        # Recorded before any scripted sleep, with the answer it is going to get.
        self.received.append(Received(at, scope["path"], headers, body, status))
        if isinstance(action, tuple):
            await asyncio.sleep(action[1])
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": f"receiver says {status}".encode()})

    def start(self) -> None:
        self._server = ThreadedServer(self.app, self.port, "the webhook receiver")
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    async def wait_for(
        self, count: int, within: float = 10, path: str | None = None
    ) -> list[Received]:
        """Wait until `count` requests arrived (at `/path` when given); return them."""
        deadline = time.monotonic() + within
        # The receiver runs in its own thread and loop: poll rather than share an Event.
        while time.monotonic() < deadline:
            got = self.received if path is None else self.on(path)
            if len(got) >= count:
                return list(got)
            await asyncio.sleep(0.02)
        return list(self.received if path is None else self.on(path))
