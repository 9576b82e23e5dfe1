"""The SQL of `sim_reply`: one row per staff message the simulated patient dealt with."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn
from app.kit import jsontext
from app.kit.consent import Decision

Reader = Conn | asyncpg.Pool


async def answered_messages(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> set[str]:
    rows = await conn.fetch(
        "SELECT message_id FROM sim_reply WHERE tenant_id = $1 AND run_id = $2",
        tenant_id,
        run_id,
    )
    return {r["message_id"] for r in rows}


async def insert_silenced(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, message_id: str, turn: int, at: datetime
) -> None:
    """Record that the turn cap kept the patient from answering (a no-op if recorded)."""
    await conn.execute(
        """INSERT INTO sim_reply (tenant_id, run_id, message_id, turn, engine, note,
                    at)
                VALUES ($1, $2, $3, $4, 'none', 'the patient stopped replying: turn cap', $5)
                ON CONFLICT DO NOTHING""",
        tenant_id,
        run_id,
        message_id,
        turn,
        at,
    )


async def claim_reply(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    message_id: str,
    turn: int,
    engine: str,
    model: str | None,
    prompt_version: str | None,
    temperature: float | None,
    seed: int | None,
    note: str | None,
    issues: str | None,
    at: datetime,
    asked_topics: list[str],
    revealed_topics: list[str],
    decisions: tuple[Decision, ...] | list[Decision] = (),
) -> bool:
    """Claim the message for this answer; False when another worker already did.
    `asked_topics`: the facts the message asked about; `revealed_topics`: those the
    reply reveals; `decisions`: the patient's agreement or refusal of each action."""
    claimed = await conn.fetchval(
        """INSERT INTO sim_reply (tenant_id, run_id, message_id, turn, engine, model,
                prompt_version, temperature, seed, note, issues, at, asked_topics,
                revealed_topics, decisions)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb)
            ON CONFLICT DO NOTHING RETURNING 1""",
        tenant_id,
        run_id,
        message_id,
        turn,
        engine,
        model,
        prompt_version,
        temperature,
        seed,
        note,
        issues,
        at,
        asked_topics,
        revealed_topics,
        jsontext.dumps([{"action": d.action, "agreed": d.agreed} for d in decisions]),
    )
    return claimed is not None


async def set_reply_id(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    message_id: str,
    reply_id: str,
    replied_at: datetime,
) -> None:
    await conn.execute(
        """UPDATE sim_reply SET reply_id = $4, replied_at = $5
            WHERE tenant_id = $1 AND run_id = $2 AND message_id = $3""",
        tenant_id,
        run_id,
        message_id,
        reply_id,
        replied_at,
    )


async def replies_of_run(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT message_id, reply_id, turn, engine, model, prompt_version, note, issues
        FROM sim_reply WHERE tenant_id = $1 AND run_id = $2 ORDER BY turn""",
        tenant_id,
        run_id,
    )


async def reply_to(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str, message_id: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT reply_id, note FROM sim_reply WHERE tenant_id = $1 AND run_id = $2 "
        "AND message_id = $3",
        tenant_id,
        run_id,
        message_id,
    )


async def written_replies(
    conn: Reader, *, tenant_id: uuid.UUID, run_id: str
) -> list[asyncpg.Record]:
    """The replies the patient wrote (not the turns the cap silenced), oldest first:
    message_id, reply_id, replied_at, asked_topics, revealed_topics, decisions (JSON
    text)."""
    return await conn.fetch(
        """SELECT message_id, reply_id, coalesce(replied_at, at) AS replied_at, asked_topics,
                revealed_topics, decisions
        FROM sim_reply WHERE tenant_id = $1 AND run_id = $2 AND reply_id IS NOT NULL
        ORDER BY turn, replied_at""",
        tenant_id,
        run_id,
    )
