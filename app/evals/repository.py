"""The SQL of `eval` and `eval_item`. Every function takes the connection it runs on and
the tenant explicitly; the promoter's sweep spans tenants and says so."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from app.db import Conn

# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool

ITEM_COLUMNS = (
    "tenant_id",
    "eval_id",
    "position",
    "scenario_id",
    "persona",
    "repeat_index",
    "state",
    "queued_at",
)


async def insert_eval(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    eval_id: str,
    label: str,
    mode: str,
    repeats: int,
    request_json: str,
    timeout_seconds: int | None,
    root_url: str,
    created_at: datetime,
    revision: str | None = None,
    schedule_id: str | None = None,
    baseline_id: str | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO eval (tenant_id, id, label, mode, repeats, request, timeout_seconds,
            root_url, created_at, revision, schedule_id, baseline_id)
            VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12)""",
        tenant_id,
        eval_id,
        label,
        mode,
        repeats,
        request_json,
        timeout_seconds,
        root_url,
        created_at,
        revision,
        schedule_id,
        baseline_id,
    )


async def insert_items(conn: Conn, rows: Sequence[Sequence[Any]]) -> None:
    """Rows of ITEM_COLUMNS (each leads with its tenant_id)."""
    await conn.copy_records_to_table("eval_item", records=rows, columns=ITEM_COLUMNS)


async def expire_queued(conn: Conn, *, tenant_id: uuid.UUID, queued_before: datetime) -> None:
    await conn.execute(
        """UPDATE eval_item SET state = 'cancelled', note = 'not started within 24 hours'
            WHERE tenant_id = $1 AND state = 'queued' AND queued_at < $2""",
        tenant_id,
        queued_before,
    )


async def release_stale_claims(
    conn: Conn, *, tenant_id: uuid.UUID, claimed_before: datetime
) -> None:
    await conn.execute(
        """UPDATE eval_item SET state = 'queued', claimed_at = NULL
            WHERE tenant_id = $1 AND state = 'starting' AND claimed_at < $2""",
        tenant_id,
        claimed_before,
    )


async def lock_next_queued(conn: Conn, *, tenant_id: uuid.UUID) -> asyncpg.Record | None:
    """The next queued item of a live eval, locked (its eval share-locked), or None."""
    return await conn.fetchrow(
        """SELECT i.eval_id, i.position, i.scenario_id, i.persona, e.mode, e.label,
            e.timeout_seconds, e.root_url, e.revision
        FROM eval_item i JOIN eval e ON e.tenant_id = i.tenant_id AND e.id = i.eval_id
        WHERE i.tenant_id = $1 AND i.state = 'queued' AND e.cancelled_at IS NULL
        ORDER BY e.created_at, i.position LIMIT 1
        FOR UPDATE OF i SKIP LOCKED FOR SHARE OF e SKIP LOCKED""",
        tenant_id,
    )


async def cancel_queued_item(
    conn: Conn, *, tenant_id: uuid.UUID, eval_id: str, position: int, note: str
) -> None:
    await conn.execute(
        """UPDATE eval_item SET state = 'cancelled', note = $4, claimed_at = NULL
            WHERE tenant_id = $1 AND eval_id = $2 AND position = $3 AND state = 'queued'""",
        tenant_id,
        eval_id,
        position,
        note,
    )


async def set_item(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    eval_id: str,
    position: int,
    state: str,
    run_id: str | None,
    note: str | None,
) -> None:
    await conn.execute(
        """UPDATE eval_item SET state = $4, run_id = $5, note = $6, claimed_at = NULL
        WHERE tenant_id = $1 AND eval_id = $2 AND position = $3""",
        tenant_id,
        eval_id,
        position,
        state,
        run_id,
        note,
    )


async def tenants_with_queued(conn: Reader) -> list[uuid.UUID]:
    """Across tenants: those with items waiting to start."""
    rows = await conn.fetch(
        "SELECT DISTINCT tenant_id FROM eval_item WHERE state IN ('queued', 'starting')"
    )
    return [r["tenant_id"] for r in rows]


async def count_queued(conn: Reader, *, tenant_id: uuid.UUID) -> int:
    """Items of the tenant's live evals waiting to start (they start before a new eval's)."""
    waiting: int = await conn.fetchval(
        """SELECT count(*) FROM eval_item i
        JOIN eval e ON e.tenant_id = i.tenant_id AND e.id = i.eval_id
        WHERE i.tenant_id = $1 AND i.state IN ('queued', 'starting') AND e.cancelled_at IS NULL""",
        tenant_id,
    )
    return waiting


async def lock_eval(conn: Conn, *, tenant_id: uuid.UUID, eval_id: str) -> bool:
    row = await conn.fetchrow(
        "SELECT id FROM eval WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenant_id, eval_id
    )
    return row is not None


async def mark_cancelled(
    conn: Conn, *, tenant_id: uuid.UUID, eval_id: str, at: datetime
) -> list[str]:
    """Mark the eval cancelled and its waiting items with it; returns the runs its
    started items made."""
    await conn.execute(
        """UPDATE eval SET cancelled_at = coalesce(cancelled_at, $3)
        WHERE tenant_id = $1 AND id = $2""",
        tenant_id,
        eval_id,
        at,
    )
    await conn.execute(
        """UPDATE eval_item SET state = 'cancelled', note = 'eval cancelled'
        WHERE tenant_id = $1 AND eval_id = $2 AND state IN ('queued', 'starting')""",
        tenant_id,
        eval_id,
    )
    rows = await conn.fetch(
        """SELECT run_id FROM eval_item
        WHERE tenant_id = $1 AND eval_id = $2 AND run_id IS NOT NULL""",
        tenant_id,
        eval_id,
    )
    return [r["run_id"] for r in rows]


async def eval_row(conn: Reader, *, tenant_id: uuid.UUID, eval_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM eval WHERE tenant_id = $1 AND id = $2", tenant_id, eval_id
    )


async def items(conn: Reader, *, tenant_id: uuid.UUID, eval_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT position, scenario_id, persona, repeat_index, state, note, run_id
        FROM eval_item WHERE tenant_id = $1 AND eval_id = $2 ORDER BY position""",
        tenant_id,
        eval_id,
    )


# An item's status as the lists count it: its run's (`run_status`), else its own state.
_ITEM_STATUS_SQL = """CASE WHEN i.run_id IS NOT NULL THEN i.run_status
    WHEN i.state = 'cancelled' THEN 'cancelled' ELSE 'queued' END"""


def _items_where(condition: str) -> str:
    return f"""EXISTS (SELECT 1 FROM eval_item i
        WHERE i.tenant_id = e.tenant_id AND i.eval_id = e.id AND {condition})"""


# An eval's status in SQL, as the service derives it from the counts (`_status_of`):
# cancelled when cancelled; completed when no item is queued or live; queued when every
# item is queued; running otherwise.
_UNFINISHED = _items_where(f"{_ITEM_STATUS_SQL} IN ('queued', 'live')")
EVAL_STATUS_SQL = {
    "cancelled": "e.cancelled_at IS NOT NULL",
    "completed": f"e.cancelled_at IS NULL AND NOT {_UNFINISHED}",
    "queued": f"""e.cancelled_at IS NULL AND {_UNFINISHED}
        AND NOT {_items_where(f"{_ITEM_STATUS_SQL} <> 'queued'")}""",
    "running": f"""e.cancelled_at IS NULL AND {_UNFINISHED}
        AND {_items_where(f"{_ITEM_STATUS_SQL} <> 'queued'")}""",
}


async def status_counts(
    conn: Reader, *, tenant_id: uuid.UUID, eval_ids: list[str]
) -> list[asyncpg.Record]:
    """(eval_id, status, n) for the items of those evals, counted in one statement:
    an item's status is its run's (`run_status`, which triggers keep equal to it: no run
    row is read), else cancelled or queued by its own state."""
    return await conn.fetch(
        f"""SELECT i.eval_id, {_ITEM_STATUS_SQL} AS status, count(*) AS n
        FROM eval_item i WHERE i.tenant_id = $1 AND i.eval_id = ANY($2::text[])
        GROUP BY 1, 2""",
        tenant_id,
        eval_ids,
    )


async def evals(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    label_like: str | None,
    limit: int,
    revision: str | None = None,
    schedule_id: str | None = None,
    status: str | None = None,
    scenario_id: str | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[asyncpg.Record]:
    """Newest first; `label_like` a LIKE pattern; `revision`, `schedule_id` exact;
    `status` one of EVAL_STATUS_SQL; `scenario_id` an eval that runs that scenario;
    `before` the (created_at, id) of the last eval of the previous page."""
    status_sql = EVAL_STATUS_SQL[status] if status else "TRUE"
    return await conn.fetch(
        f"""SELECT e.* FROM eval e WHERE e.tenant_id = $1
        AND ($2::text IS NULL OR e.label LIKE $2)
        AND ($4::text IS NULL OR e.revision = $4)
        AND ($5::text IS NULL OR e.schedule_id = $5)
        AND ($6::text IS NULL OR {_items_where("i.scenario_id = $6")})
        AND ($7::timestamptz IS NULL OR (e.created_at, e.id) < ($7, $8))
        AND {status_sql}
        ORDER BY e.created_at DESC, e.id DESC LIMIT $3""",
        tenant_id,
        label_like,
        limit,
        revision,
        schedule_id,
        scenario_id,
        before[0] if before else None,
        before[1] if before else "",
    )


# An eval is finished when none of its items waits to start and none of its runs is live
# (`run_status`, which triggers keep equal to the run's status in the run's own writes).
_FINISHED_SQL = """NOT EXISTS (
    SELECT 1 FROM eval_item i WHERE i.tenant_id = e.tenant_id AND i.eval_id = e.id
        AND (i.state IN ('queued', 'starting')
            OR (i.run_id IS NOT NULL AND i.run_status = 'live')))"""


async def tenants_with_unfinished(conn: Reader) -> list[uuid.UUID]:
    """Across tenants: those with an eval not yet marked completed nor cancelled (the
    partial index `ix_eval_unfinished`)."""
    rows = await conn.fetch(
        """SELECT DISTINCT tenant_id FROM eval
        WHERE completed_at IS NULL AND cancelled_at IS NULL"""
    )
    return [r["tenant_id"] for r in rows]


async def finished_unmarked(conn: Reader, *, tenant_id: uuid.UUID) -> list[str]:
    """The tenant's evals not marked completed nor cancelled whose items are all done,
    oldest first."""
    rows = await conn.fetch(
        f"""SELECT e.id FROM eval e
        WHERE e.tenant_id = $1 AND e.completed_at IS NULL AND e.cancelled_at IS NULL
            AND {_FINISHED_SQL}
        ORDER BY e.created_at""",
        tenant_id,
    )
    return [r["id"] for r in rows]


async def mark_completed(
    conn: Conn, *, tenant_id: uuid.UUID, eval_id: str, at: datetime
) -> asyncpg.Record | None:
    """Set the eval's `completed_at` if it is still unset, the eval not cancelled and
    finished; the row when this call set it, else None (another caller did, or it is not
    finished). Two callers at once: the second waits for the first's row lock and then
    sees `completed_at` set."""
    return await conn.fetchrow(
        f"""UPDATE eval e SET completed_at = $3
        WHERE e.tenant_id = $1 AND e.id = $2 AND e.completed_at IS NULL
            AND e.cancelled_at IS NULL AND {_FINISHED_SQL}
        RETURNING e.*""",
        tenant_id,
        eval_id,
        at,
    )
