"""What other features ask of the trace: a run's calls, and retention."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn, Tx
from app.trace import repository


async def calls_for_grading(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
    with_bodies: bool = False,
) -> list[asyncpg.Record]:
    return await repository.calls_for_grading(
        conn,
        tenant_id=tenant_id,
        run_id=run_id,
        since=since,
        until=until,
        with_bodies=with_bodies,
    )


async def responses_of_run(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, since: datetime, until: datetime
) -> list[asyncpg.Record]:
    """What the system under test was shown: see `repository.responses_of_run`."""
    return await repository.responses_of_run(
        conn, tenant_id=tenant_id, run_id=run_id, since=since, until=until
    )


async def calls_of_run(
    conn: Conn | asyncpg.Pool,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
) -> list[asyncpg.Record]:
    return await repository.calls_of_run(
        conn, tenant_id=tenant_id, run_id=run_id, since=since, until=until
    )


async def purge_calls(tx: Tx, cutoff: datetime) -> int:
    """Drop calls older than `cutoff`, in the caller's transaction."""
    return await repository.delete_calls_before(tx.conn, cutoff)
