"""What the per-day counts of `GET /api/usage` cost in the database: the decided runs
and the model calls of the last 7 and 90 UTC days, p50/p95, with 200,000 runs and
200,000 model calls of one tenant over a year (and as many of another tenant).

    python scripts/bench_usage.py [--queries N] [--database NAME] [--keep]

Set-up: the scratch database `--database` (default understudy_bench_usage) is dropped,
created afresh and migrated; two tenants get, written straight into `run` and
`llm_call` with COPY, runs ended over the past 365 days (passed, failed, timed out,
cancelled, errored; a few live) and model calls (patient-sim and judge). The two
statements the route runs (`app.runs.repository.decided_runs_by_day`,
`app.llm.repository.calls_by_day`) are timed N times each (default 50, after 5
warm-ups) for a 7-day and a 90-day window, and the decided-runs plan is printed (it
should read ix_run_decided alone, as the calls read ix_llm_call_at alone). Goal: p95
<= 100 ms per statement for 90 days (a usage page, not a hot path). The scratch
database is dropped unless --keep; the one-line summary is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
from benchkit import database_url, drop_database, figure, percentile, recreate_database

from app.cli import migrate
from app.db import Scopes, open_database
from app.llm import repository as llm_calls
from app.runs import repository as runs
from app.runs.fhir_writes import FHIR_WRITES
from app.tenants import service as tenants

GOAL_MS = 100.0
ROWS = 200_000
DAYS_SEEDED = 365
STATUSES = ["passed"] * 60 + ["failed"] * 20 + ["timed_out"] * 6 + ["cancelled"] * 6
STATUSES += ["errored"] * 4 + ["live"] * 4
RUN_COLUMNS = [
    "tenant_id", "id", "scenario_id", "scenario_version", "scenario_hash", "builtin", "mode",
    "status", "fixture", "expectations", "started_at", "deadline", "finished_at", "changed_at",
]  # fmt: skip
CALL_COLUMNS = [
    "tenant_id", "run_id", "purpose", "model", "at", "prompt_tokens", "completion_tokens",
    "latency_ms", "outcome",
]  # fmt: skip


async def _seed(pool: asyncpg.Pool, tenant_id: uuid.UUID, rng: random.Random) -> None:
    now = datetime.now(UTC)
    run_rows, call_rows = [], []
    for n in range(ROWS):
        ended = now - timedelta(seconds=rng.uniform(0, DAYS_SEEDED * 86_400))
        status = rng.choice(STATUSES)
        started = ended - timedelta(minutes=5)
        run_rows.append(
            (
                tenant_id,
                f"run_{n:07d}{uuid.uuid4().hex[:6]}",
                "bench.usage",
                1,
                "h",
                False,
                "agent",
                status,
                "{}",
                "[]",
                started,
                started + timedelta(minutes=30),
                None if status == "live" else ended,
                started,
            )
        )
        call_rows.append(
            (
                tenant_id,
                None,
                rng.choice(("patient-sim", "judge")),
                "m",
                now - timedelta(seconds=rng.uniform(0, DAYS_SEEDED * 86_400)),
                rng.randrange(100, 2_000),
                rng.randrange(10, 300),
                50.0,
                "ok",
            )
        )
    async with pool.acquire() as conn:
        await conn.copy_records_to_table("run", records=run_rows, columns=RUN_COLUMNS)
        await conn.copy_records_to_table("llm_call", records=call_rows, columns=CALL_COLUMNS)


async def bench(url: str, queries: int) -> tuple[bool, list[str]]:
    db = await open_database(url, pool_size=2)
    try:
        ids = []
        for name in ("bench-usage", "bench-usage-other"):
            async with Scopes(db.pool).transaction() as tx:
                info, _ = await tenants.create_tenant(tx, name, write_statement=FHIR_WRITES)
            ids.append(info.id)
        t0 = time.perf_counter()
        rng = random.Random(18)
        for tenant_id in ids:
            await _seed(db.pool, tenant_id, rng)
        async with db.pool.acquire() as conn:
            await conn.execute("VACUUM ANALYZE run")
            await conn.execute("VACUUM ANALYZE llm_call")
        print(f"seeded 2 x {ROWS} runs and model calls in {time.perf_counter() - t0:.1f} s")
        tenant_id = ids[0]
        until = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time())
        until = until.replace(tzinfo=UTC)
        async with db.pool.acquire() as conn:
            plan = await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS) " + runs.DECIDED_RUNS_BY_DAY,
                tenant_id,
                until - timedelta(days=90),
                until,
            )
        print("plan of the decided runs, 90 days:")
        print("\n".join("  " + r[0] for r in plan))
        ok, p95s = True, []
        statements = (
            ("decided runs", runs.decided_runs_by_day),
            ("model calls", llm_calls.calls_by_day),
        )
        for days in (7, 90):
            since = until - timedelta(days=days)
            for name, statement in statements:
                for _ in range(5):
                    await statement(db.pool, tenant_id=tenant_id, since=since, until=until)
                times = []
                for _ in range(queries):
                    t = time.perf_counter()
                    rows = await statement(db.pool, tenant_id=tenant_id, since=since, until=until)
                    times.append(time.perf_counter() - t)
                p50, p95 = percentile(times, 50) * 1000, percentile(times, 95) * 1000
                met = days != 90 or p95 <= GOAL_MS
                ok = ok and met
                if days == 90:
                    p95s.append(f"{name} {figure(p95)} ms")
                print(
                    f"{name}, {days} days ({len(rows)} groups): p50 {figure(p50)} ms, "
                    f"p95 {figure(p95)} ms" + ("" if days != 90 else f" {'✓' if met else '✗'}")
                )
        return ok, p95s
    finally:
        await db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--database", default="understudy_bench_usage")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not args.database.startswith("understudy_bench"):
        parser.error("--database must start with understudy_bench (it is dropped)")
    recreate_database(args.pg_port, args.database)
    url = database_url(args.pg_port, args.database)
    summary = "bench_usage: failed before measuring"
    ok = False
    try:
        migrate(url)
        ok, p95s = asyncio.run(bench(url, args.queries))
        summary = (
            f"bench_usage: GET /api/usage?days=90 statements p95 {', '.join(p95s)}, "
            f"{ROWS} runs and calls a tenant (goal <= {GOAL_MS:.0f} ms) — "
            + ("goal met" if ok else "goal missed")
        )
    finally:
        if args.keep:
            print(f"kept {url}")
        else:
            drop_database(args.pg_port, args.database)
        print(summary, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
