"""One model call = one JSON answer validated against a Pydantic model, or `LlmUnavailable`.

Callers (the simulated patient, the judges) always have a stand-in to fall back to, so
every provider problem — not configured, allowance used, HTTP errors after retries,
timeouts, output that is not the JSON asked for — surfaces as `LlmUnavailable` with a
short reason they can show. Every call that reaches the provider leaves one `llm_call`
row, whatever its outcome: the rows are both the token accounting and the allowance.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

import asyncpg
import httpx
import orjson
import stamina
from pydantic import BaseModel, ValidationError

from app.kit.clock import utcnow
from app.llm import repository
from app.settings import Settings

log = logging.getLogger("understudy.llm")

M = TypeVar("M", bound=BaseModel)

# The allowance is a sliding window over the tenant's recorded calls.
ALLOWANCE_WINDOW = timedelta(hours=1)
# First wait before a retry on 429/5xx; doubled on each further retry, plus up to
# BACKOFF_JITTER_SECONDS at random so that many runs retrying at once spread out.
FIRST_BACKOFF_SECONDS = 0.2
BACKOFF_JITTER_SECONDS = 0.1
# No wait (ours or the provider's Retry-After) may stall a run longer than this.
MAX_BACKOFF_SECONDS = 5.0
# Reasons end up in run reports and the llm_call table: keep them a line long.
MAX_REASON_CHARS = 300
# Validation errors listed in a reason before "and N more".
MAX_LISTED_ERRORS = 3

_FENCE_RE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.DOTALL)


class LlmOutcome(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    INVALID = "invalid"


class LlmUnavailable(Exception):
    """No model answer: the caller falls back to its stand-in. `reason` is short and human."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LlmResult(Generic[M]):
    value: M
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class _Failed(Exception):
    """A provider problem, with the outcome recorded for it."""

    def __init__(self, outcome: LlmOutcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = _clip(reason)


class LlmClient:
    def __init__(self, http: httpx.AsyncClient, settings: Settings, pool: asyncpg.Pool) -> None:
        self._http = http
        self._settings = settings
        self._pool = pool

    @property
    def configured(self) -> bool:
        return bool(self._settings.llm_base_url and self._settings.llm_model)

    async def calls_last_hour(self, tenant_id: uuid.UUID) -> int:
        return await repository.calls_since(
            self._pool, tenant_id=tenant_id, since=utcnow() - ALLOWANCE_WINDOW
        )

    async def complete_json(
        self,
        *,
        tenant_id: uuid.UUID,
        run_id: str | None,
        purpose: str,
        messages: list[dict[str, str]],
        schema: type[M],
        temperature: float = 0.2,
        seed: int | None = None,
    ) -> LlmResult[M]:
        base_url, configured_model = self._settings.llm_base_url, self._settings.llm_model
        if not base_url or not configured_model:
            raise LlmUnavailable("not configured")
        # Counted before the call, so concurrent calls of one tenant may overshoot the
        # allowance by at most their number: it bounds spend, it is not an exact quota.
        limit = self._settings.llm_calls_per_hour
        if await self.calls_last_hour(tenant_id) >= limit:
            raise LlmUnavailable(f"allowance of {limit} model calls per hour used")

        payload: dict[str, Any] = {
            "model": configured_model,
            "messages": messages,
            "temperature": temperature,
            "response_format": {"type": "json_object"},
        }
        if seed is not None:
            payload["seed"] = seed

        at = utcnow()
        started = time.perf_counter()
        model = configured_model
        prompt_tokens = completion_tokens = 0
        try:
            body = await self._post(f"{base_url.rstrip('/')}/chat/completions", payload)
            if isinstance(body.get("model"), str) and body["model"]:
                model = body["model"]
            prompt_tokens, completion_tokens = _usage(body)
            value = _parse(body, schema)
        except _Failed as failure:
            latency_ms = (time.perf_counter() - started) * 1000
            await self._record(
                tenant_id, run_id, purpose, model, at, prompt_tokens, completion_tokens,
                latency_ms, failure.outcome, failure.reason,
            )  # fmt: skip
            log.warning(
                "llm_call_failed tenant=%s run=%s purpose=%s outcome=%s reason=%s",
                tenant_id, run_id, purpose, failure.outcome, failure.reason,
            )  # fmt: skip
            raise LlmUnavailable(failure.reason) from failure
        latency_ms = (time.perf_counter() - started) * 1000
        await self._record(
            tenant_id, run_id, purpose, model, at, prompt_tokens, completion_tokens,
            latency_ms, LlmOutcome.OK, None,
        )  # fmt: skip
        return LlmResult(value, model, prompt_tokens, completion_tokens, latency_ms)

    async def _post(self, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The response body of a 2xx, retrying 429 and 5xx (stamina: exponential backoff
        with a little jitter, or the provider's Retry-After, each capped); anything else
        is `_Failed`."""
        headers = {"Content-Type": "application/json"}
        if self._settings.llm_api_key:
            headers["Authorization"] = f"Bearer {self._settings.llm_api_key}"
        content = orjson.dumps(payload)
        attempts = max(0, self._settings.llm_max_retries) + 1
        try:
            async for attempt in stamina.retry_context(
                on=_backoff,
                attempts=attempts,
                timeout=None,  # each exchange is bounded; the attempts bound the rest
                wait_initial=FIRST_BACKOFF_SECONDS,
                wait_max=MAX_BACKOFF_SECONDS,
                wait_jitter=BACKOFF_JITTER_SECONDS,
            ):
                with attempt:
                    return await self._exchange(url, content, headers)
        except _Overloaded as exc:
            noun = "attempt" if attempts == 1 else "attempts"
            raise _Failed(LlmOutcome.ERROR, f"HTTP {exc.status} after {attempts} {noun}") from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _exchange(self, url: str, content: bytes, headers: dict[str, str]) -> dict[str, Any]:
        """One request: the body of a 2xx; `_Overloaded` for 429 and 5xx (retried)."""
        timeout = self._settings.llm_timeout_seconds
        try:
            # httpx's timeout is per read; the outer one bounds the whole exchange.
            async with asyncio.timeout(timeout):
                response = await self._http.post(
                    url, content=content, headers=headers, timeout=timeout
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            # Not retried: a run waits on this call, and a slow provider stays slow.
            raise _Failed(LlmOutcome.TIMEOUT, f"timed out after {timeout:g} s") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _Failed(LlmOutcome.ERROR, f"request failed: {_describe_exc(exc)}") from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Overloaded(status, retry_after_seconds(response.headers.get("Retry-After")))
        if status >= 300:
            detail = _provider_message(response)
            raise _Failed(LlmOutcome.ERROR, f"HTTP {status}" + (f": {detail}" if detail else ""))
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            raise _Failed(LlmOutcome.ERROR, "malformed response: not JSON") from exc
        if not isinstance(body, dict):
            raise _Failed(LlmOutcome.ERROR, "malformed response: not a JSON object")
        return body

    async def _record(
        self,
        tenant_id: uuid.UUID,
        run_id: str | None,
        purpose: str,
        model: str,
        at: datetime,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        outcome: LlmOutcome,
        error: str | None,
    ) -> None:
        # Its own statement, right after the provider answered: no transaction is held
        # across a model call, and the allowance counts the call at once.
        await repository.insert_call(
            self._pool,
            tenant_id=tenant_id,
            run_id=run_id,
            purpose=purpose,
            model=model,
            at=at,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            outcome=outcome.value,
            error=error,
        )


class _Overloaded(Exception):
    """A 429 or 5xx answer: retried, after the provider's Retry-After when it gave one."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


def _backoff(exc: Exception) -> bool | float:
    """stamina's hook: retry an overloaded answer, waiting what the provider asked."""
    if not isinstance(exc, _Overloaded):
        return False
    return True if exc.retry_after is None else exc.retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """The wait a Retry-After header asks for, capped; None when there is none or it is
    not a number of seconds (an HTTP date, rare from model APIs: our own schedule)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(seconds, MAX_BACKOFF_SECONDS) if seconds >= 0 else None


def _usage(body: dict[str, Any]) -> tuple[int, int]:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _parse(body: dict[str, Any], schema: type[M]) -> M:
    text = _message_text(body)
    if text is None:
        raise _Failed(LlmOutcome.INVALID, "invalid JSON output: no message content")
    fenced = _FENCE_RE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _Failed(LlmOutcome.INVALID, f"invalid JSON output: {exc}") from exc
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise _Failed(LlmOutcome.INVALID, f"invalid JSON output: {_describe_errors(exc)}") from exc


def _message_text(body: dict[str, Any]) -> str | None:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": "…"}]
        texts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "".join(texts) if texts else None
    return None


def _describe_errors(exc: ValidationError) -> str:
    # Locations and messages only: inputs may carry patient text.
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = [
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
        for e in errors[:MAX_LISTED_ERRORS]
    ]
    if len(errors) > MAX_LISTED_ERRORS:
        parts.append(f"and {len(errors) - MAX_LISTED_ERRORS} more")
    return "; ".join(parts)


def _provider_message(response: httpx.Response) -> str:
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return error if isinstance(error, str) else ""


def _describe_exc(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _clip(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"
