"""What the evals list costs: `GET /api/testing/evals` p50/p95 for a page of 50 evals of
100 runs each (5,000 run rows behind the page). Goal: p95 <= 10 ms.

    python scripts/bench_evals_list.py [--requests N] [--evals N] [--runs N] [--keep]

Set-up: `understudy serve --dev` (benchkit.server_env: a scratch database `--database`,
default understudy_bench_evals_list, created afresh and migrated by the server, and a Redis
queue of its own) serves on --port; then the dev tenant gets --evals evals (default 50)
of --runs items each (default 100), each item started with a finished run (passed,
failed or timed out) written straight into `eval`, `eval_item` and `run` with COPY, and a
further --evals evals of older, unlisted history, so the page is not the whole table.
N requests (default 200, after 10 warm-ups) of the default page (limit 50) are timed one
at a time over loopback. Afterwards the server is stopped, Redis cleaned of its queue
(benchkit.clean_queue) and the scratch database dropped unless --keep. The one-line
summary is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
from benchkit import (
    HOST,
    TENANT,
    BenchError,
    add_scratch_arguments,
    check_scratch_arguments,
    check_services,
    database_url,
    figure,
    log,
    mark,
    percentile,
    print_rows,
    run_report,
    scratch_server,
    summarize,
)

GOAL_P95_MS = 10.0
STATUSES = ["passed"] * 7 + ["failed"] * 2 + ["timed_out"]


async def seed(url: str, evals: int, runs: int) -> int:
    """The dev tenant's evals, items and runs; returns the run rows written."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        tenant_id = await conn.fetchval("SELECT id FROM tenant WHERE name = $1", TENANT)
        if tenant_id is None:
            raise BenchError(f"no tenant named {TENANT!r} in the scratch database")
        rng = random.Random(19)
        now = datetime.now(UTC)
        eval_rows: list[tuple[Any, ...]] = []
        item_rows: list[tuple[Any, ...]] = []
        run_rows: list[tuple[Any, ...]] = []
        request = orjson.dumps({"scenarios": ["bench.evals-list"], "repeats": runs}).decode()
        for e in range(2 * evals):  # the second half older: history below the page
            eval_id = f"eval_bench{e:05d}"
            created = now - timedelta(hours=e)
            eval_rows.append(
                (tenant_id, eval_id, f"bench-{e:05d}", "agent", runs, request, None,
                 f"http://{HOST}", created, None, f"rev-{e // 10:02d}")
            )  # fmt: skip
            for p in range(runs):
                run_id = f"run_b{e:05d}{p:04d}"
                status = rng.choice(STATUSES)
                at = created + timedelta(seconds=p)
                item_rows.append(
                    (tenant_id, eval_id, p, "bench.evals-list", None, p, "started", run_id,
                     created, at)
                )  # fmt: skip
                run_rows.append(
                    (tenant_id, run_id, "bench.evals-list", 1, "0" * 64, False, "agent",
                     status, "{}", "[]", at, at + timedelta(minutes=5),
                     at + timedelta(seconds=40), at, f"rev-{e // 10:02d}")
                )  # fmt: skip
        await conn.copy_records_to_table(
            "eval",
            records=eval_rows,
            columns=["tenant_id", "id", "label", "mode", "repeats", "request",
                     "timeout_seconds", "root_url", "created_at", "cancelled_at", "revision"],
        )  # fmt: skip
        await conn.copy_records_to_table(
            "eval_item",
            records=item_rows,
            columns=["tenant_id", "eval_id", "position", "scenario_id", "persona",
                     "repeat_index", "state", "run_id", "queued_at", "claimed_at"],
        )  # fmt: skip
        await conn.copy_records_to_table(
            "run",
            records=run_rows,
            columns=["tenant_id", "id", "scenario_id", "scenario_version", "scenario_hash",
                     "builtin", "mode", "status", "fixture", "expectations", "started_at",
                     "deadline", "finished_at", "changed_at", "revision"],
        )  # fmt: skip
        await conn.execute("ANALYZE eval; ANALYZE eval_item; ANALYZE run")
        return len(run_rows)
    finally:
        await conn.close()


def time_list(base: str, key: str, n: int, page: int) -> tuple[list[float], dict[str, Any]]:
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30, trust_env=False
    ) as client:
        params = {"limit": str(page)}
        first = client.get("/api/testing/evals", params=params)
        if first.status_code != 200:
            raise BenchError(f"GET /api/testing/evals: HTTP {first.status_code}: {first.text}")
        body = first.json()
        for _ in range(10):
            client.get("/api/testing/evals", params=params).raise_for_status()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = client.get("/api/testing/evals", params=params)
            times.append(time.perf_counter() - t0)
            r.raise_for_status()
    listed = body["evals"]
    return times, {"listed": len(listed), "total_runs_listed": sum(e["total"] for e in listed)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_scratch_arguments(parser, "understudy_bench_evals_list", 0)
    parser.add_argument("--requests", type=int, default=200, help="timed requests (200)")
    parser.add_argument("--evals", type=int, default=50, help="evals on the page (50)")
    parser.add_argument("--runs", type=int, default=100, help="runs of each eval (100)")
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 1 <= args.requests <= 100_000 or not 1 <= args.evals <= 200:
        parser.error("--requests must be 1..100000 and --evals 1..200 (the page's limit)")
    if not 1 <= args.runs <= 1_000:
        parser.error("--runs must be 1..1000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--dev", "--port", str(args.port)]
    queue = f"understudy:bench-evals-list:{os.getpid()}"
    report: dict[str, Any] = {"command": command, "database": args.database, "queue": queue}

    def serve_and_measure() -> None:
        with scratch_server(args, queue, "bench_evals_list_", command) as server:
            t0 = time.perf_counter()
            url = database_url(args.pg_port, args.database)
            written = asyncio.run(seed(url, args.evals, args.runs))
            log(f"seeded {written} runs in {time.perf_counter() - t0:.1f} s")
            times, seen = time_list(
                f"http://{HOST}:{args.port}", server.key, args.requests, args.evals
            )
            report["seeded_runs"] = written
            report["page"] = seen
            report["list"] = summarize(times) | {"p95_ms": round(percentile(times, 95) * 1000, 2)}

    def table(r: dict[str, Any]) -> None:
        p95 = r["list"]["p95_ms"]
        print_rows(
            [
                (
                    f"GET /api/testing/evals, {r['page']['listed']} evals "
                    f"({r['page']['total_runs_listed']} runs)",
                    f"p95 <= {GOAL_P95_MS:.0f} ms",
                    f"p50 {r['list']['p50_ms']} ms, p95 {p95} ms",
                    mark(p95 <= GOAL_P95_MS),
                )
            ]
        )

    def summary(r: dict[str, Any], error: str | None) -> str:
        if error is not None:
            return f"bench_evals_list: failed — {error}"
        p95 = r["list"]["p95_ms"]
        met = "goal met" if p95 <= GOAL_P95_MS else "goal missed"
        return (
            f"bench_evals_list: {r['page']['listed']} evals of {args.runs} runs, "
            f"p50 {figure(r['list']['p50_ms'])} ms, p95 {figure(p95)} ms "
            f"(goal <= {GOAL_P95_MS:.0f} ms) — {met}"
        )

    return run_report(report, args.json_out, serve_and_measure, table, summary)


if __name__ == "__main__":
    sys.exit(main())
