"""The SQL of `run` and `run_ref`. Every function takes the connection it runs on and
the tenant explicitly; the worker's sweeps span tenants and say so.

At the top, this feature's parts of the FHIR write statement (composed by
`app.runs.fhir_writes`); below, its own queries.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from app.db import Conn
from app.fhir.repository import WriteCall, WritePart
from app.runs.row import COLUMNS, JSON_COLUMNS, RunRow

# --- Parts of the FHIR write statement ----------------------------------------------------
# The FHIR store writes every resource in one statement (`app.fhir.repository`); these are
# the runs tables' share of it, composed in by `app.runs.fhir_writes`.

# The run owning an entry written outside any run view: the run whose fixture holds the
# resource or one it references (`run_ref`). `{refs}` is the entry's text[] of references.
RUN_OWNING_REFS = """(
        SELECT rr.run_id FROM run_ref rr
        WHERE rr.tenant_id = $1 AND rr.ref = ANY({refs})
        LIMIT 1
    )"""


def _now(call: WriteCall) -> tuple[object, ...]:
    return (call.now,)


# A live run whose resources changed is marked (and regraded soon).
TOUCH_LIVE_RUNS = WritePart(
    sql="""touched AS (
    UPDATE run SET changed_at = {now}::timestamptz
    WHERE tenant_id = $1 AND status = 'live'
        AND id IN (SELECT DISTINCT owner FROM done WHERE owner IS NOT NULL)
)""",
    params=("now",),
    args=_now,
)


# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool

# --- runs -------------------------------------------------------------------------------


async def run(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM run WHERE tenant_id = $1 AND id = $2", tenant_id, run_id
    )


async def run_scheduling(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> str | None:
    setting: str | None = await conn.fetchval(
        "SELECT scheduling FROM run WHERE tenant_id = $1 AND id = $2", tenant_id, run_id
    )
    return setting


async def runs_by_id(
    conn: Reader, *, tenant_id: uuid.UUID, run_ids: list[str]
) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT * FROM run WHERE tenant_id = $1 AND id = ANY($2::text[])", tenant_id, run_ids
    )


async def runs(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    label: str | None,
    status: str | None,
    scenario_id: str | None,
    limit: int,
    before: tuple[datetime, str] | None = None,
    revision: str | None = None,
    label_like: str | None = None,
) -> list[asyncpg.Record]:
    """Newest first; `label` exact, `label_like` a LIKE pattern; `before` (started_at, id)
    of the last run of the previous page."""
    return await conn.fetch(
        """SELECT * FROM run WHERE tenant_id = $1
        AND ($2::text IS NULL OR label = $2) AND ($3::text IS NULL OR status = $3)
        AND ($4::text IS NULL OR scenario_id = $4)
        AND ($6::timestamptz IS NULL OR (started_at, id) < ($6, $7))
        AND ($8::text IS NULL OR revision = $8)
        AND ($9::text IS NULL OR label LIKE $9)
        ORDER BY started_at DESC, id DESC LIMIT $5""",
        tenant_id,
        label,
        status,
        scenario_id,
        limit,
        before[0] if before else None,
        before[1] if before else "",
        revision,
        label_like,
    )


async def live_runs(conn: Reader, *, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    """The tenant's live runs, oldest first: id, scenario_id, started_at."""
    return await conn.fetch(
        "SELECT id, scenario_id, started_at FROM run WHERE tenant_id = $1 "
        "AND status = 'live' ORDER BY started_at, id",
        tenant_id,
    )


async def live_runs_with_refs(conn: Reader, *, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    """Each live run with each of its refs (a run without refs: one row, ref NULL)."""
    return await conn.fetch(
        """SELECT r.id, rr.ref FROM run r LEFT JOIN run_ref rr
                ON rr.tenant_id = r.tenant_id AND rr.run_id = r.id
            WHERE r.tenant_id = $1 AND r.status = 'live'""",
        tenant_id,
    )


async def belongs_to_lenient_run(conn: Conn, *, tenant_id: uuid.UUID, refs: list[str]) -> bool:
    """Whether a live run with lenient scheduling owns one of `refs` (`run_ref`)."""
    found = await conn.fetchval(
        """SELECT 1 FROM run_ref rr JOIN run r
            ON r.tenant_id = rr.tenant_id AND r.id = rr.run_id
        WHERE rr.tenant_id = $1 AND rr.ref = ANY($2::text[])
        AND r.status = 'live' AND r.scheduling = 'lenient' LIMIT 1""",
        tenant_id,
        refs,
    )
    return found is not None


async def lock_live_runs(conn: Conn, *, tenant_id: uuid.UUID, run_ids: list[str]) -> list[str]:
    """Lock those of the runs that are live, until the caller's transaction ends."""
    rows = await conn.fetch(
        """SELECT id FROM run WHERE tenant_id = $1 AND id = ANY($2::text[]) AND status = 'live'
        ORDER BY id FOR UPDATE""",
        tenant_id,
        run_ids,
    )
    return [r["id"] for r in rows]


async def lock_starts(conn: Conn, *, tenant_id: uuid.UUID) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"runs:{tenant_id}")


async def count_live(conn: Reader, *, tenant_id: uuid.UUID) -> int:
    live: int = await conn.fetchval(
        "SELECT count(*) FROM run WHERE tenant_id = $1 AND status = 'live'", tenant_id
    )
    return live


async def insert_refs(conn: Conn, *, tenant_id: uuid.UUID, run_id: str, refs: list[str]) -> None:
    await conn.execute(
        "INSERT INTO run_ref (tenant_id, ref, run_id) SELECT $1, unnest($2::text[]), $3",
        tenant_id,
        refs,
        run_id,
    )


# Every column of the row, named once in `app.runs.row.RunRow`; JSONB ones cast.
INSERT_RUN = "INSERT INTO run ({}) VALUES ({}) RETURNING *".format(
    ", ".join(COLUMNS),
    ", ".join(
        f"${i}::jsonb" if name in JSON_COLUMNS else f"${i}"
        for i, name in enumerate(COLUMNS, start=1)
    ),
)


async def insert_run(conn: Conn, run: RunRow) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT_RUN, *run.column_values())
    assert row is not None
    return row


async def delete_refs(conn: Conn, *, tenant_id: uuid.UUID, run_id: str) -> None:
    await conn.execute(
        "DELETE FROM run_ref WHERE tenant_id = $1 AND run_id = $2", tenant_id, run_id
    )


async def end_live_run(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    status: str,
    verdict_json: str,
    at: datetime,
    seen_change: datetime,
    provenance_json: str | None = None,
) -> asyncpg.Record | None:
    """End the run with its verdict if it is still live (None: it had ended). Its
    provenance is completed here, once: an ended run is never updated again."""
    return await conn.fetchrow(
        """UPDATE run SET status = $3, verdict = $4::jsonb, finished_at = $5,
                    graded_at = $5, graded_change_at = $6,
                    provenance = COALESCE($7::jsonb, provenance)
                WHERE tenant_id = $1 AND id = $2 AND status = 'live' RETURNING *""",
        tenant_id,
        run_id,
        status,
        verdict_json,
        at,
        seen_change,
        provenance_json,
    )


async def set_progress(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    progress_json: str,
    at: datetime,
    seen_change: datetime,
    settle_until: datetime | None = None,
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        """UPDATE run SET progress = $3::jsonb, graded_at = $4, graded_change_at = $5,
            settle_until = $6
            WHERE tenant_id = $1 AND id = $2 AND status = 'live' RETURNING *""",
        tenant_id,
        run_id,
        progress_json,
        at,
        seen_change,
        settle_until,
    )


async def cancel_live_run(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, at: datetime
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        """UPDATE run SET status = 'cancelled', finished_at = $3,
            verdict = '{"passed": false, "score": 0, "expectations": [],
                        "note": "cancelled before a verdict"}'::jsonb
        WHERE tenant_id = $1 AND id = $2 AND status = 'live' RETURNING *""",
        tenant_id,
        run_id,
        at,
    )


async def runs_due_grading(conn: Reader, *, now: datetime) -> list[asyncpg.Record]:
    """Every tenant's live runs with news since their last grading, past their deadline,
    or at the end of the quiet a passing grade was waiting for."""
    return await conn.fetch(
        """SELECT tenant_id, id FROM run WHERE status = 'live' AND (
            graded_change_at IS NULL OR changed_at > graded_change_at OR deadline <= $1
            OR settle_until <= $1)""",
        now,
    )


async def mark_changed(
    conn: Conn,
    *,
    tenant_ids: list[uuid.UUID],
    run_ids: list[str],
    shared_tenants: list[uuid.UUID],
    at: datetime,
) -> list[asyncpg.Record]:
    """Across tenants: the live runs named by (tenant, id) pairs, and every live run of
    `shared_tenants`, marked changed at `at`. The rows are locked in (tenant, id) order,
    as every statement locking several runs does (`lock_live_runs`): a plain UPDATE locks
    them in the order it finds them, and two such statements (two writers, or a writer and
    an eval's cancel) could each hold a run the other waits for."""
    return await conn.fetch(
        """WITH target AS (
            SELECT tenant_id, id FROM run WHERE status = 'live' AND (
                (tenant_id, id) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))
                OR tenant_id = ANY($3::uuid[]))
            ORDER BY tenant_id, id FOR UPDATE)
        UPDATE run r SET changed_at = $4 FROM target t
        WHERE r.tenant_id = t.tenant_id AND r.id = t.id AND r.status = 'live'
        RETURNING r.tenant_id, r.id""",
        tenant_ids,
        run_ids,
        shared_tenants,
        at,
    )


async def mark_runs_changed(
    conn: Conn, *, tenant_id: uuid.UUID, run_ids: list[str]
) -> list[asyncpg.Record]:
    return await conn.fetch(
        """WITH target AS (
            SELECT id FROM run WHERE tenant_id = $1 AND id = ANY($2::text[]) AND status = 'live'
            ORDER BY id FOR UPDATE)
        UPDATE run r SET changed_at = now() FROM target t
        WHERE r.tenant_id = $1 AND r.id = t.id AND r.status = 'live' RETURNING r.id""",
        tenant_id,
        run_ids,
    )


async def set_sms_reply_url(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, url: str | None
) -> bool:
    """Where a live run's SMS replies go from now on; False when the run is not live."""
    done = await conn.fetchval(
        """UPDATE run SET sms_reply_url = $3
        WHERE tenant_id = $1 AND id = $2 AND status = 'live' RETURNING 1""",
        tenant_id,
        run_id,
        url,
    )
    return done is not None


async def run_marker(conn: Reader, *, tenant_id: uuid.UUID, run_id: str) -> asyncpg.Record | None:
    """What changes when anything a run page shows changes: status, changed_at (every
    write and traced call of the run moves it), graded_at and progress (a grading pass),
    finished_at."""
    return await conn.fetchrow(
        """SELECT status, changed_at, graded_at, progress::text AS progress, finished_at
        FROM run WHERE tenant_id = $1 AND id = $2""",
        tenant_id,
        run_id,
    )


# --- the scenario health board (app.runs.board) ------------------------------------------

_BOARD_REVISION = "revision = $2"
_BOARD_NO_REVISION = "revision IS NULL AND $2::text IS NULL"


async def board_runs(
    conn: Reader, *, tenant_id: uuid.UUID, mode: str, revision: str | None
) -> list[asyncpg.Record]:
    """The light rows of every run of a mode on a revision (ix_run_revision), oldest
    first; an errored run's note is all of the verdict read."""
    where = _BOARD_REVISION if revision is not None else _BOARD_NO_REVISION
    return await conn.fetch(
        "SELECT id, scenario_id, scenario_hash, status, started_at, deadline, "
        "CASE WHEN status = 'errored' THEN verdict->>'note' END AS note "
        f"FROM run WHERE tenant_id = $1 AND {where} AND mode = $3 ORDER BY started_at, id",
        tenant_id,
        revision,
        mode,
    )


async def board_details(
    conn: Reader, *, tenant_id: uuid.UUID, run_ids: list[str]
) -> list[asyncpg.Record]:
    """Score and checks (id, label, passed) of the runs the cards show in detail."""
    return await conn.fetch(
        """SELECT r.id, (r.verdict->>'score')::float8 AS score,
            COALESCE((SELECT jsonb_agg(jsonb_build_array(e->>'id', e->>'label', e->'passed'))
                      FROM jsonb_array_elements(r.verdict->'expectations') e), '[]') AS checks
        FROM run r WHERE r.tenant_id = $1 AND r.id = ANY($2::text[]) AND r.verdict IS NOT NULL""",
        tenant_id,
        run_ids,
    )


async def board_failures(
    conn: Reader,
    *,
    tenant_id: uuid.UUID,
    mode: str,
    revision: str | None,
    scenario_ids: list[str],
    hashes: list[str],
) -> list[asyncpg.Record]:
    """How often each check failed on the failed runs of each scenario at its hash."""
    where = _BOARD_REVISION if revision is not None else _BOARD_NO_REVISION
    return await conn.fetch(
        "SELECT r.scenario_id, r.scenario_hash, e->>'id' AS check_id, "
        "max(e->>'label') AS label, count(*) AS failures "
        "FROM run r CROSS JOIN LATERAL jsonb_array_elements(r.verdict->'expectations') e "
        f"WHERE r.tenant_id = $1 AND r.{where} AND r.mode = $3 "
        "AND r.status IN ('failed', 'timed_out') "
        "AND (r.scenario_id, r.scenario_hash) IN (SELECT * FROM unnest($4::text[], $5::text[])) "
        "AND e->>'passed' = 'false' GROUP BY 1, 2, 3",
        tenant_id,
        revision,
        mode,
        scenario_ids,
        hashes,
    )


async def board_tallies(
    conn: Reader, *, tenant_id: uuid.UUID, mode: str, scenario_ids: list[str], hashes: list[str]
) -> list[asyncpg.Record]:
    """Verdicts per scenario (at its hash) and revision, from ix_run_board alone."""
    return await conn.fetch(
        """SELECT scenario_id, scenario_hash, revision, min(started_at) AS first_run_at,
            count(*) FILTER (WHERE status IN ('passed', 'failed', 'timed_out')) AS verdicts,
            count(*) FILTER (WHERE status = 'passed') AS passed
        FROM run WHERE tenant_id = $1 AND mode = $2
        AND (scenario_id, scenario_hash) IN (SELECT * FROM unnest($3::text[], $4::text[]))
        GROUP BY 1, 2, 3""",
        tenant_id,
        mode,
        scenario_ids,
        hashes,
    )


async def board_states(
    conn: Reader, *, tenant_id: uuid.UUID, mode: str, revision: str | None, latest: int
) -> list[asyncpg.Record]:
    """Per scenario and hash, on a revision: its verdicts, how many passed, and how many
    of its `latest` newest verdicts passed: what a card's state is read from
    (app.runs.board.state_of), in one index-only scan (ix_run_board_revision)."""
    where = _BOARD_REVISION if revision is not None else _BOARD_NO_REVISION
    return await conn.fetch(
        "SELECT scenario_id, scenario_hash, count(*) AS verdicts, "
        "count(*) FILTER (WHERE status = 'passed') AS passed, "
        "count(*) FILTER (WHERE status = 'passed' AND later < $4) AS latest_passed "
        "FROM (SELECT scenario_id, scenario_hash, status, "
        "count(*) OVER w - row_number() OVER w AS later "
        f"FROM run WHERE tenant_id = $1 AND {where} AND mode = $3 "
        "AND status IN ('passed', 'failed', 'timed_out') "
        "WINDOW w AS (PARTITION BY scenario_id, scenario_hash ORDER BY started_at, id "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) v GROUP BY 1, 2",
        tenant_id,
        revision,
        mode,
        latest,
    )


async def latest_revision(conn: Reader, *, tenant_id: uuid.UUID, mode: str) -> str | None:
    """The revision of the mode's latest run (the board's default; ix_run_mode alone)."""
    found: str | None = await conn.fetchval(
        "SELECT revision FROM run WHERE tenant_id = $1 AND mode = $2 "
        "ORDER BY started_at DESC LIMIT 1",
        tenant_id,
        mode,
    )
    return found


async def board_revisions(
    conn: Reader, *, tenant_id: uuid.UUID, mode: str, limit: int
) -> list[asyncpg.Record]:
    """The revisions run in a mode, newest first by their latest run (ix_run_mode)."""
    return await conn.fetch(
        "SELECT revision, max(started_at) AS last_run_at FROM run "
        "WHERE tenant_id = $1 AND mode = $2 GROUP BY revision ORDER BY 2 DESC LIMIT $3",
        tenant_id,
        mode,
        limit,
    )


# --- usage (app.api.usage) ------------------------------------------------------------------


# Per UTC day a run ended in [$2, $3): its passed and failed runs (a timeout is a failure).
# The status predicate is ix_run_decided's, so the count reads that index alone; errored
# and cancelled runs are not counted.
DECIDED_RUNS_BY_DAY = """SELECT (finished_at AT TIME ZONE 'UTC')::date AS day,
    count(*) FILTER (WHERE status = 'passed') AS passed,
    count(*) FILTER (WHERE status <> 'passed') AS failed
FROM run
WHERE tenant_id = $1 AND status IN ('passed', 'failed', 'timed_out')
    AND finished_at >= $2 AND finished_at < $3
GROUP BY 1"""


async def decided_runs_by_day(
    conn: Reader, *, tenant_id: uuid.UUID, since: datetime, until: datetime
) -> list[asyncpg.Record]:
    return await conn.fetch(DECIDED_RUNS_BY_DAY, tenant_id, since, until)
