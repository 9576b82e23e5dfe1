"""A uvicorn server for a test's own ASGI app (a webhook receiver, a fake model API) on
127.0.0.1, in a thread with its own event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

START_TIMEOUT_S = 10


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ThreadedServer:
    def __init__(self, app: Any, port: int, name: str) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", interface="asgi3"
        )
        self.server = uvicorn.Server(config)
        self.name = name
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.server.started:
            raise RuntimeError(f"{self.name} did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
