"""The SQL of `llm_call`: one row per call that reached the provider (the allowance
counts them)."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn

# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool


async def calls_since(conn: Reader, *, tenant_id: uuid.UUID, since: datetime) -> int:
    count = await conn.fetchval(
        "SELECT count(*) FROM llm_call WHERE tenant_id = $1 AND at > $2", tenant_id, since
    )
    return int(count)


async def insert_call(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    run_id: str | None,
    purpose: str,
    model: str,
    at: datetime,
    prompt_tokens: int,
    completion_tokens: int,
    latency_ms: float,
    outcome: str,
    error: str | None,
) -> None:
    await conn.execute(
        "INSERT INTO llm_call (tenant_id, run_id, purpose, model, at, prompt_tokens,"
        " completion_tokens, latency_ms, outcome, error)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        tenant_id,
        run_id,
        purpose,
        model,
        at,
        prompt_tokens,
        completion_tokens,
        latency_ms,
        outcome,
        error,
    )


# Per UTC day and purpose in [$2, $3): the calls and their tokens, from ix_llm_call_at
# alone (it includes both).
CALLS_BY_DAY = """SELECT (at AT TIME ZONE 'UTC')::date AS day, purpose, count(*) AS calls,
    COALESCE(sum(prompt_tokens), 0) AS prompt_tokens,
    COALESCE(sum(completion_tokens), 0) AS completion_tokens
FROM llm_call WHERE tenant_id = $1 AND at >= $2 AND at < $3
GROUP BY 1, 2"""


async def calls_by_day(
    conn: Reader, *, tenant_id: uuid.UUID, since: datetime, until: datetime
) -> list[asyncpg.Record]:
    return await conn.fetch(CALLS_BY_DAY, tenant_id, since, until)
