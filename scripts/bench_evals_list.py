"""What the evals list costs, as a person and a client see it: the console's `/evals`
page (signed in) and `GET /api/testing/evals`, p50/p95, for a page of 50 evals of 100
runs each (5,000 run rows behind the page). Goal: p95 <= 10 ms for the API, <= 100 ms for
the page (issue 26's list goal).

    python scripts/bench_evals_list.py [--requests N] [--evals N] [--runs N] [--keep]

Set-up: `understudy serve --dev` (benchkit.server_env: a scratch database `--database`,
default understudy_bench_evals_list, created afresh and migrated by the server, and a Redis
queue of its own) serves on --port; then the dev tenant gets --evals evals (default 50)
of --runs items each (default 100: 20 built-in agent scenarios x 5 repeats, the most an
eval may repeat; fewer runs, fewer scenarios), each item started with a finished run
(passed, failed or timed out, with a verdict as grading stores it), and a further --evals
evals of older, unlisted history, so the page is not the whole table. The rows are the
product's ORM models (`Eval`, `EvalItem`, `Run` of app.models) written with COPY, the
eval's request echo built as the contract's `EvalRequestEcho` and each verdict as its
`Verdict` (bench_board.verdict_of), so every page of them renders: before timing, the
list page must name the newest eval and that eval's own page must answer 200. N requests
(default 200, after 10 warm-ups) of the default page (limit 50) are timed one at a time
over loopback, for the API and the page. Afterwards the server is stopped, Redis cleaned
of its queue (benchkit.clean_queue) and the scratch database dropped unless --keep. The
one-line summary is printed last.
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
from bench_board import copy_models, run_model, tenant_id_of, verdict_of
from bench_console import sign_in
from benchkit import (
    HOST,
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
    verdict,
)

from app.evals.service import BASELINE, MAX_REPEATS
from app.models.eval import Eval, EvalItem
from app.models.run import Run
from app.scenarios import service as scenarios_service
from understudy_client.contract.evals import EvalRequestEcho

GOAL_P95_MS = 10.0
GOAL_PAGE_P95_MS = 100.0
STATUSES = ["passed"] * 7 + ["failed"] * 2 + ["timed_out"]
CHECKS = 4


def agent_scenarios() -> list[scenarios_service.LoadedScenario]:
    return sorted(
        (
            s
            for s in scenarios_service.builtin_scenarios().values()
            if "agent" in {str(m) for m in s.scenario.modes}
        ),
        key=lambda s: s.scenario.id,
    )


def max_runs() -> int:
    """The most runs one eval may plan: every built-in agent scenario, repeated the most."""
    return len(agent_scenarios()) * MAX_REPEATS


async def seed(url: str, evals: int, runs: int) -> int:
    """The dev tenant's evals, items and runs; returns the run rows written. An eval of
    `runs` runs plans `runs // repeats` built-in agent scenarios x `repeats` (at most
    MAX_REPEATS) in create_eval's order, every item started with its run, the run ended
    and the eval marked completed as the worker marks it."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        tenant_id = await tenant_id_of(conn)
        repeats = min(MAX_REPEATS, runs)
        plan = agent_scenarios()[: runs // repeats]
        if not plan:
            raise BenchError("no built-in agent scenario to plan an eval of")
        rng = random.Random(19)
        now = datetime.now(UTC)
        eval_rows: list[Eval] = []
        item_rows: list[EvalItem] = []
        run_rows: list[Run] = []
        request = EvalRequestEcho(
            repeats=repeats,
            personas=BASELINE,
            scenarios=[s.scenario.id for s in plan],
            timeout_seconds=None,
        ).model_dump(mode="json", by_alias=True)
        for e in range(2 * evals):  # the second half older: history below the page
            eval_id = f"eval_bench{e:05d}"
            label = f"bench-{e:05d}"
            revision = f"rev-{e // 10:02d}"
            created = now - timedelta(hours=e + 1)
            ended = created
            for position in range(repeats * len(plan)):
                repeat, scenario = divmod(position, len(plan))
                run_id = f"run_b{e:05d}{position:04d}"
                status = rng.choice(STATUSES)
                at = created + timedelta(seconds=position)
                run = run_model(
                    tenant_id,
                    run_id,
                    plan[scenario],
                    status,
                    at,
                    revision,
                    verdict_of(status, CHECKS, rng),
                    label=label,
                )
                run_rows.append(run)
                ended = max(ended, run.finished_at or at)
                item_rows.append(
                    EvalItem(
                        tenant_id=tenant_id,
                        eval_id=eval_id,
                        position=position,
                        scenario_id=plan[scenario].scenario.id,
                        persona=None,
                        repeat_index=repeat,
                        state="started",
                        run_id=run_id,
                        note=None,
                        queued_at=created,
                        claimed_at=None,
                    )
                )
            eval_rows.append(
                Eval(
                    tenant_id=tenant_id,
                    id=eval_id,
                    label=label,
                    mode="agent",
                    repeats=repeats,
                    request=request,
                    timeout_seconds=None,
                    root_url=f"http://{HOST}",
                    created_at=created,
                    cancelled_at=None,
                    revision=revision,
                    completed_at=ended,
                    baseline_id=None,
                    schedule_id=None,
                )
            )
        # Runs before items: an item's trigger copies its run's status (migration 0019).
        await copy_models(conn, eval_rows)
        await copy_models(conn, run_rows)
        await copy_models(conn, item_rows)
        await conn.execute("ANALYZE eval; ANALYZE eval_item; ANALYZE run")
        return len(run_rows)
    finally:
        await conn.close()


async def _timed(client: httpx.AsyncClient, path: str, n: int) -> list[float]:
    for _ in range(10):
        (await client.get(path)).raise_for_status()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await client.get(path)
        times.append(time.perf_counter() - t0)
        r.raise_for_status()
    return times


async def time_list(base: str, key: str, n: int, page: int) -> dict[str, Any]:
    path = f"/api/testing/evals?limit={page}"
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30, trust_env=False
    ) as api:
        first = await api.get(path)
        if first.status_code != 200:
            raise BenchError(f"GET {path}: HTTP {first.status_code}: {first.text}")
        listed = first.json()["evals"]
        console = await sign_in(base, key)
        try:
            newest = listed[0]
            shown = await console.get("/evals")
            if shown.status_code != 200 or newest["id"] not in shown.text:
                raise BenchError(f"/evals did not list {newest['id']}: HTTP {shown.status_code}")
            one = await console.get(f"/evals/{newest['id']}")
            if one.status_code != 200:
                raise BenchError(f"/evals/{newest['id']} did not render: HTTP {one.status_code}")
            api_times = await _timed(api, path, n)
            page_times = await _timed(console, "/evals", n)
        finally:
            await console.aclose()
    return {
        "page": {"listed": len(listed), "total_runs_listed": sum(e["total"] for e in listed)},
        "list": summarize(api_times) | {"p95_ms": round(percentile(api_times, 95) * 1000, 2)},
        "console_page": summarize(page_times)
        | {"p95_ms": round(percentile(page_times, 95) * 1000, 2)},
    }


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
    if not 1 <= args.runs <= max_runs():
        parser.error(f"--runs must be 1..{max_runs()} (built-in agent scenarios x {MAX_REPEATS})")
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
            report["seeded_runs"] = written
            report.update(
                asyncio.run(
                    time_list(f"http://{HOST}:{args.port}", server.key, args.requests, args.evals)
                )
            )

    def table(r: dict[str, Any]) -> None:
        shown = f"{r['page']['listed']} evals ({r['page']['total_runs_listed']} runs)"
        rows = []
        for name, key, goal in (
            ("GET /api/testing/evals", "list", GOAL_P95_MS),
            ("console /evals page", "console_page", GOAL_PAGE_P95_MS),
        ):
            m = r[key]
            rows.append(
                (
                    f"{name}, {shown}",
                    f"p95 <= {goal:.0f} ms",
                    f"p50 {m['p50_ms']} ms, p95 {m['p95_ms']} ms",
                    mark(m["p95_ms"] <= goal),
                )
            )
        print_rows(rows)

    def summary(r: dict[str, Any], error: str | None) -> str:
        if error is not None:
            return f"bench_evals_list: failed — {error}"
        api_p95, page_p95 = r["list"]["p95_ms"], r["console_page"]["p95_ms"]
        met = verdict([api_p95 <= GOAL_P95_MS, page_p95 <= GOAL_PAGE_P95_MS])
        return (
            f"bench_evals_list: {r['page']['listed']} evals of "
            f"{r['page']['total_runs_listed'] // max(1, r['page']['listed'])} runs; API "
            f"p50 {figure(r['list']['p50_ms'])} ms, p95 {figure(api_p95)} ms (goal <= "
            f"{GOAL_P95_MS:.0f} ms); page p50 {figure(r['console_page']['p50_ms'])} ms, p95 "
            f"{figure(page_p95)} ms (goal <= {GOAL_PAGE_P95_MS:.0f} ms) — {met}"
        )

    return run_report(report, args.json_out, serve_and_measure, table, summary)


if __name__ == "__main__":
    sys.exit(main())
