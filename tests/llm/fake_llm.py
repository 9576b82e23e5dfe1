"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests of anything that
calls a model (the LLM client, the simulated patient, the judges).

Each request is answered by the next scripted step (a plain dict in `script` is a `Reply`
with that JSON content), else by `responder` (which sees the request and may return a
step, a dict, or None), else by a 400 "nothing scripted" — so an unexpected call fails
loudly without being retried. Every
request is recorded, before any scripted delay, for assertions on what was sent.

    fake_llm.reply({"answer": "yes"}).fail(429, retry_after=0).delay(2.0)
    client = LlmClient(http, fake_llm.settings_for(settings), db.pool)
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson
import pytest

from app.settings import Settings
from tests.threaded_server import ThreadedServer, free_port

FAKE_MODEL = "fake-model"
# Tests time out fast; a model call to a local server takes milliseconds.
FAKE_TIMEOUT_SECONDS = 0.5


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion. A dict or list `content` is sent as its JSON text; a str as is
    (for fenced or invalid output). `prompt_tokens=None` leaves out the `usage` block."""

    content: dict[str, Any] | list[Any] | str
    model: str | None = None  # default: the model the request named
    prompt_tokens: int | None = 12
    completion_tokens: int = 7
    delay: float = 0.0


@dataclass(frozen=True)
class Fail:
    """An error status, with an optional Retry-After (seconds) and an OpenAI-style body."""

    status: int
    retry_after: float | str | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` (or until the client hangs up), then answer `then`."""

    seconds: float
    then: Reply | Fail = field(default_factory=lambda: Reply({}))


Step: TypeAlias = Reply | Fail | Delay
Responder: TypeAlias = Callable[["LlmRequest"], Step | dict[str, Any] | None]


@dataclass
class LlmRequest:
    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return orjson.loads(self.raw)

    @property
    def model(self) -> Any:
        return self.body.get("model")

    @property
    def messages(self) -> Any:
        return self.body.get("messages")


@dataclass
class FakeLlm:
    port: int = field(default_factory=free_port)
    script: list[Step | dict[str, Any]] = field(default_factory=list)
    requests: list[LlmRequest] = field(default_factory=list)
    responder: Responder | None = None

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- scripting (chainable) -------------------------------------------------------------

    def reply(self, content: dict[str, Any] | list[Any] | str, **options: Any) -> FakeLlm:
        return self.then(Reply(content, **options))

    def fail(self, status: int, retry_after: float | str | None = None) -> FakeLlm:
        return self.then(Fail(status, retry_after))

    def delay(self, seconds: float, then: Reply | Fail | None = None) -> FakeLlm:
        return self.then(Delay(seconds, then if then is not None else Reply({})))

    def invalid(self, text: str = "Sure! Here is my answer, not in JSON.") -> FakeLlm:
        return self.then(Reply(text))

    def then(self, step: Step) -> FakeLlm:
        with self._lock:
            self.script.append(step)
        return self

    # -- use -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def settings_for(self, settings: Settings, **changes: object) -> Settings:
        """`settings` pointing at this server, with a fast timeout; `changes` override."""
        pointing: dict[str, object] = {
            "llm_base_url": self.base_url,
            "llm_model": FAKE_MODEL,
            "llm_timeout_seconds": FAKE_TIMEOUT_SECONDS,
        }
        return settings.clone(**(pointing | changes))

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- the server ------------------------------------------------------------------------

    def _next_step(self, request: LlmRequest) -> Step:
        decided: Step | dict[str, Any] | None = None
        with self._lock:
            if self.script:
                decided = self.script.pop(0)
        if decided is None and self.responder is not None:
            decided = self.responder(request)
        if isinstance(decided, dict):
            return Reply(decided)
        if decided is None:
            return Fail(400, message="fake LLM: nothing scripted for this request")
        return decided

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = LlmRequest(
            time.monotonic(),
            scope["path"],
            {k.decode().lower(): v.decode() for k, v in scope["headers"]},
            raw,
        )
        self.requests.append(request)
        step = self._next_step(request)
        wait = step.seconds if isinstance(step, Delay) else 0.0
        if isinstance(step, Delay):
            step = step.then
        if isinstance(step, Reply):
            wait += step.delay
        if wait > 0 and await _hung_up_within(receive, wait):
            return  # the client timed out: nobody to answer
        if isinstance(step, Fail):
            headers = [(b"content-type", b"application/json")]
            if step.retry_after is not None:
                headers.append((b"retry-after", str(step.retry_after).encode()))
            body = orjson.dumps({"error": {"message": step.message, "type": "fake_error"}})
            await _respond(send, step.status, headers, body)
            return
        await _respond(
            send,
            200,
            [(b"content-type", b"application/json")],
            orjson.dumps(self._completion(step, request)),
        )

    def _completion(self, reply: Reply, request: LlmRequest) -> dict[str, Any]:
        text = reply.content if isinstance(reply.content, str) else orjson.dumps(reply.content)
        try:
            requested_model = request.model
        except orjson.JSONDecodeError:
            requested_model = None
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or requested_model or FAKE_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text if isinstance(text, str) else text.decode(),
                    },
                    "finish_reason": "stop",
                }
            ],
        }
        if reply.prompt_tokens is not None:
            completion["usage"] = {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            }
        return completion

    def start(self) -> None:
        self._server = ThreadedServer(self.app, self.port, "the fake LLM server")
        self._server.start()

    def stop(self) -> None:
        self._server.stop()


async def _hung_up_within(receive: Any, seconds: float) -> bool:
    """Sleep `seconds`, or less if the client disconnects (then True): a timed-out client
    must not leave a sleeping request that holds up the server's shutdown."""
    disconnect = asyncio.ensure_future(receive())
    done, _ = await asyncio.wait({disconnect}, timeout=seconds)
    if done:
        return bool(disconnect.result().get("type") == "http.disconnect")
    disconnect.cancel()
    return False


async def _respond(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def fake_llm() -> Iterator[FakeLlm]:
    server = FakeLlm()
    server.start()
    yield server
    server.stop()
