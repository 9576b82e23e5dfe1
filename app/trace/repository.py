"""The SQL of `trace_call`: the recorder COPYs rows in, runs read their window, the
worker purges old calls."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from app.db import Conn


async def insert_calls(conn: Conn, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
    await conn.copy_records_to_table("trace_call", records=rows, columns=columns)


async def calls_for_grading(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
    with_bodies: bool = False,
) -> list[asyncpg.Record]:
    """The run's own calls and the tenant's unattributed ones in its window, oldest first;
    `with_bodies`: their kept request and response bodies too (NULL otherwise)."""
    bodies = "request, response" if with_bodies else "NULL AS request, NULL AS response"
    return await conn.fetch(
        f"""SELECT at, method, path, query, status, transport, refs, run_id, {bodies}
            FROM trace_call
            WHERE tenant_id = $1 AND (run_id = $2 OR (run_id IS NULL AND at >= $3 AND at <= $4))
            ORDER BY at""",
        tenant_id,
        run_id,
        since,
        until,
    )


async def responses_of_run(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, since: datetime, until: datetime
) -> list[asyncpg.Record]:
    """The kept response bodies (at, method, path, response) of the successful calls
    the run's system made up to `until`, oldest first: its own, and the calls shared by
    every live run of the tenant in its window (a `$find` on the tenant base touches no
    run's fixture, yet it is what the system read)."""
    return await conn.fetch(
        """SELECT at, method, path, response FROM trace_call
            WHERE tenant_id = $1 AND (run_id = $2 OR (run_id IS NULL AND at >= $3))
                AND at <= $4 AND status < 400 AND response IS NOT NULL
            ORDER BY at""",
        tenant_id,
        run_id,
        since,
        until,
    )


async def calls_of_run(
    conn: Conn | asyncpg.Pool,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT at, method, path, query, status, duration_ms, transport, refs, run_id
        FROM trace_call WHERE tenant_id = $1
        AND (run_id = $2 OR (run_id IS NULL AND at >= $3 AND at <= $4)) ORDER BY at""",
        tenant_id,
        run_id,
        since,
        until,
    )


async def delete_calls_before(conn: Conn, cutoff: datetime) -> int:
    """Every tenant's calls older than `cutoff` (retention); returns how many."""
    status = await conn.execute("DELETE FROM trace_call WHERE at < $1", cutoff)
    return int(status.split()[-1])
