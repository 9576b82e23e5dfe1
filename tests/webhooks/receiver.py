"""A real HTTP receiver on 127.0.0.1 for webhook tests: records what it gets and answers
with a scripted sequence of status codes (or delays)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from tests.conftest import free_port


@dataclass
class Received:
    at: float
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """`script` is consumed one entry per request: an int status, or ("sleep", s)."""

    port: int = field(default_factory=free_port)
    script: list[Any] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    default_status: int = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

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
        self.received.append(Received(time.time(), headers, body))
        action = self.script.pop(0) if self.script else self.default_status
        if isinstance(action, tuple):
            await asyncio.sleep(action[1])
            action = self.default_status
        await send({"type": "http.response.start", "status": action, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def start(self) -> None:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", interface="asgi3"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)

    async def wait_for(self, count: int, within: float = 10) -> list[Received]:
        deadline = time.monotonic() + within
        # The receiver runs in its own thread and loop: poll rather than share an Event.
        while len(self.received) < count and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        return self.received
