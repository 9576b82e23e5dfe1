"""The LLM client against a real chat-completions server on 127.0.0.1 (tests/llm/fake_llm.py):
what it sends, how it parses, retries, times out and refuses, and the `llm_call` rows it
leaves for token accounting and the per-tenant allowance."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import BaseModel

from app.db import Database
from app.kit.clock import utcnow
from app.llm.client import LlmClient, LlmUnavailable, retry_after_seconds
from app.settings import Settings
from tests.conftest import TenantHandle, make_tenant
from tests.llm.fake_llm import FAKE_MODEL, FakeLlm, Reply
from tests.llm.fake_llm import fake_llm as fake_llm  # the fixture, for this module
from tests.threaded_server import free_port

MESSAGES = [
    {"role": "system", "content": 'Answer as JSON: {"answer": str, "confidence": number}.'},
    {"role": "user", "content": "Is the appointment on Tuesday?"},
]


class Verdict(BaseModel):
    answer: str
    confidence: float


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def client_for(
    http: httpx.AsyncClient, db: Database, settings: Settings, fake: FakeLlm, **changes: object
) -> LlmClient:
    return LlmClient(http, fake.settings_for(settings, **changes), db.pool)


async def ask(llm: LlmClient, tenant: TenantHandle, **overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "tenant_id": tenant.id,
        "run_id": "run-1",
        "purpose": "judge",
        "messages": MESSAGES,
        "schema": Verdict,
    }
    return await llm.complete_json(**(arguments | overrides))


async def rows(db: Database, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    return await db.pool.fetch("SELECT * FROM llm_call WHERE tenant_id = $1 ORDER BY id", tenant_id)


async def test_json_reply_is_parsed_and_the_request_carries_every_field(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.reply({"answer": "yes", "confidence": 0.9}, model="fake-model-2025-01")
    llm = client_for(http, db, settings, fake_llm, llm_api_key="sk-test")

    result = await ask(llm, tenant, temperature=0.3, seed=7)

    assert result.value == Verdict(answer="yes", confidence=0.9)
    assert result.model == "fake-model-2025-01"  # what answered, not what was asked for
    [request] = fake_llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": FAKE_MODEL,
        "messages": MESSAGES,
        "temperature": 0.3,
        "seed": 7,
        "response_format": {"type": "json_object"},
    }


async def test_no_seed_and_no_key_are_left_out(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.reply({"answer": "no", "confidence": 0.1})
    llm = client_for(http, db, settings, fake_llm, llm_api_key=None)

    await ask(llm, tenant)

    [request] = fake_llm.requests
    assert "authorization" not in request.headers
    assert "seed" not in request.body
    assert request.body["temperature"] == 0.2


async def test_fenced_json_is_accepted(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.reply('```json\n{"answer": "maybe", "confidence": 0.5}\n```')
    llm = client_for(http, db, settings, fake_llm)

    result = await ask(llm, tenant)

    assert result.value == Verdict(answer="maybe", confidence=0.5)


async def test_429_is_retried_after_a_backoff_then_succeeds(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.fail(429).reply({"answer": "yes", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm)

    result = await ask(llm, tenant)

    assert result.value.answer == "yes"
    first, second = fake_llm.requests
    assert second.at - first.at >= 0.2  # the first backoff
    assert first.body == second.body
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "ok"
    assert row["error"] is None


async def test_retry_after_is_honoured(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.fail(503, retry_after=1).reply({"answer": "yes", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm)

    await ask(llm, tenant)

    first, second = fake_llm.requests
    assert second.at - first.at >= 1.0


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [
        (None, None),  # none asked: stamina's exponential schedule
        ("2", 2.0),
        ("0", 0.0),
        ("120", 5.0),  # the provider's wish is capped
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),  # a date: our own schedule
        ("-3", None),
    ],
)
def test_retry_after(retry_after: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(retry_after) == seconds


async def test_backoff_doubles_between_retries(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.fail(500).fail(500).reply({"answer": "yes", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm)

    await ask(llm, tenant)

    first, second, third = (r.at for r in fake_llm.requests)
    assert second - first >= 0.2  # the first wait
    assert third - second >= 0.4  # doubled


async def test_persistent_500_gives_up_after_the_retries(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.fail(500).fail(500).fail(500).reply({"answer": "too late", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm)

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason == "HTTP 500 after 3 attempts"
    assert len(fake_llm.requests) == 3
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "error"
    assert row["error"] == "HTTP 500 after 3 attempts"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (0, 0)


async def test_client_error_is_not_retried(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.fail(401)
    llm = client_for(http, db, settings, fake_llm)

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason == "HTTP 401: scripted failure"
    assert len(fake_llm.requests) == 1
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "error"


async def test_timeout_gives_up_quickly_without_retrying(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.delay(3.0).reply({"answer": "yes", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm)  # 0.5 s timeout

    started = time.monotonic()
    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)
    elapsed = time.monotonic() - started

    assert raised.value.reason == "timed out after 0.5 s"
    assert 0.5 <= elapsed < 1.5
    assert len(fake_llm.requests) == 1
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "timeout"
    assert row["error"] == "timed out after 0.5 s"
    assert row["latency_ms"] >= 500


async def test_unreachable_server_is_unavailable(
    http: httpx.AsyncClient, db: Database, settings: Settings, tenant: TenantHandle
) -> None:
    llm = LlmClient(
        http,
        settings.clone(llm_base_url=f"http://127.0.0.1:{free_port()}/v1", llm_model=FAKE_MODEL),
        db.pool,
    )

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason.startswith("request failed: ConnectError")
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "error"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Sure! The answer is yes.", "invalid JSON output: unexpected character"),
        ('```json\n{"answer": "yes"\n```', "invalid JSON output: "),
        ({"answer": "yes"}, "invalid JSON output: confidence: Field required"),
        ({"answer": ["not", "a", "string"], "confidence": "high"}, "invalid JSON output: answer:"),
        ([1, 2, 3], "invalid JSON output: value: Input should be a valid dictionary"),
    ],
)
async def test_invalid_output_is_unavailable(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
    content: Any,
    reason: str,
) -> None:
    fake_llm.reply(content, prompt_tokens=30, completion_tokens=9)
    llm = client_for(http, db, settings, fake_llm)

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason.startswith(reason)
    assert len(fake_llm.requests) == 1  # the same prompt would fail the same way
    [row] = await rows(db, tenant.id)
    assert row["outcome"] == "invalid"
    assert row["error"] == raised.value.reason
    assert (row["prompt_tokens"], row["completion_tokens"]) == (30, 9)  # it still cost


async def test_invalid_output_reason_does_not_echo_the_model_text(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.reply({"answer": "my date of birth is 1970-01-01", "confidence": "very"})
    llm = client_for(http, db, settings, fake_llm)

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert "1970" not in raised.value.reason
    assert "very" not in raised.value.reason
    assert raised.value.reason.startswith("invalid JSON output: confidence:")


@pytest.mark.parametrize(
    "changes",
    [{"llm_base_url": None}, {"llm_model": None}, {"llm_base_url": "", "llm_model": ""}],
)
async def test_not_configured_makes_no_request_and_no_row(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
    changes: dict[str, object],
) -> None:
    fake_llm.reply({"answer": "yes", "confidence": 1})
    llm = client_for(http, db, settings, fake_llm, **changes)

    assert not llm.configured
    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason == "not configured"
    assert fake_llm.requests == []
    assert await rows(db, tenant.id) == []


async def test_default_settings_are_not_configured(
    http: httpx.AsyncClient, db: Database, settings: Settings
) -> None:
    assert not LlmClient(http, settings, db.pool).configured


async def test_allowance_counts_every_call_of_the_tenant_in_the_last_hour(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    tenant_server: str,
    fake_llm: FakeLlm,
) -> None:
    # Calls older than the hour are free again.
    for _ in range(2):
        await db.pool.execute(
            "INSERT INTO llm_call (tenant_id, run_id, purpose, model, at, prompt_tokens,"
            " completion_tokens, latency_ms, outcome, error)"
            " VALUES ($1, NULL, 'judge', 'old', $2, 1, 1, 1, 'ok', NULL)",
            tenant.id,
            utcnow() - timedelta(minutes=61),
        )
    ok = {"answer": "yes", "confidence": 1}
    # A failed call counts too: it cost the provider.
    fake_llm.reply(ok).invalid().reply(ok)
    llm = client_for(http, db, settings, fake_llm, llm_calls_per_hour=3)

    await ask(llm, tenant, purpose="patient-sim")
    with pytest.raises(LlmUnavailable):
        await ask(llm, tenant, purpose="judge")
    await ask(llm, tenant, purpose="judge")
    assert await llm.calls_last_hour(tenant.id) == 3

    fake_llm.reply(ok)
    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason == "allowance of 3 model calls per hour used"
    assert len(fake_llm.requests) == 3
    assert len(await rows(db, tenant.id)) == 2 + 3  # a refusal leaves no row

    # Another tenant has an allowance of its own.
    other = await make_tenant(db, tenant_server)
    result = await ask(llm, other)
    assert result.value.answer == "yes"
    assert await llm.calls_last_hour(other.id) == 1


async def test_each_call_leaves_a_row_for_token_accounting(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.then(
        Reply(
            {"answer": "a", "confidence": 1}, model="big-1", prompt_tokens=123, completion_tokens=45
        )
    )
    fake_llm.then(Reply({"answer": "b", "confidence": 0}, prompt_tokens=None))  # no usage block
    llm = client_for(http, db, settings, fake_llm)
    before = utcnow()

    first = await ask(llm, tenant, run_id="run-a", purpose="judge")
    second = await ask(llm, tenant, run_id=None, purpose="patient-sim")

    assert (first.prompt_tokens, first.completion_tokens) == (123, 45)
    assert (second.prompt_tokens, second.completion_tokens) == (0, 0)
    one, two = await rows(db, tenant.id)
    assert one["tenant_id"] == tenant.id
    assert (one["run_id"], one["purpose"], one["model"]) == ("run-a", "judge", "big-1")
    assert (one["prompt_tokens"], one["completion_tokens"]) == (123, 45)
    assert one["outcome"] == "ok"
    assert one["error"] is None
    assert one["latency_ms"] == pytest.approx(first.latency_ms)
    assert 0 < one["latency_ms"] < 500
    assert before <= one["at"] <= utcnow()
    assert (two["run_id"], two["purpose"], two["model"]) == (None, "patient-sim", FAKE_MODEL)
    assert (two["prompt_tokens"], two["completion_tokens"]) == (0, 0)


async def test_responder_answers_from_the_request(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.responder = lambda request: {
        "answer": request.messages[-1]["content"].upper(),
        "confidence": 1,
    }
    llm = client_for(http, db, settings, fake_llm)

    result = await ask(llm, tenant, messages=[{"role": "user", "content": "echo"}])

    assert result.value.answer == "ECHO"


async def test_plain_dicts_in_the_script_are_replies(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    fake_llm.script = [{"answer": "one", "confidence": 1}, {"answer": "two", "confidence": 1}]
    llm = client_for(http, db, settings, fake_llm)

    answers = [(await ask(llm, tenant)).value.answer for _ in range(2)]

    assert answers == ["one", "two"]


async def test_nothing_scripted_fails_loudly_without_retries(
    http: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    tenant: TenantHandle,
    fake_llm: FakeLlm,
) -> None:
    llm = client_for(http, db, settings, fake_llm)

    with pytest.raises(LlmUnavailable) as raised:
        await ask(llm, tenant)

    assert raised.value.reason == "HTTP 400: fake LLM: nothing scripted for this request"
    assert len(fake_llm.requests) == 1
