"""What the scenario health board costs, as a person and a client see it: the `/board`
page (signed in, as the console serves it) and its JSON API `GET /api/testing/board`,
p50/p95, with 25 scenarios x 2,000 runs over 10 revisions (50,000 runs of one mode,
`--full`); and the console home page at those 50,000 runs, whose headline is the board's.

    python scripts/bench_board.py [--full] [--runs-per-scenario N] [--requests N] [--keep]

Set-up: `understudy serve --dev --no-worker` (benchkit.server_env: a scratch database
`--database`, default understudy_bench_board, created afresh and migrated by the server,
and a Redis queue of its own) serves on --port in a process of its own, as a user starts
it; no worker, so nothing grades the seeded runs. Then the dev tenant gets 25
agent-mode scenarios imported through the product's scenarios service
(`import_scenario`) and, per scenario, --runs-per-scenario runs (default 40, a quick
run; 2,000 with --full) spread over 10 revisions (hours apart, so the latest revision is
the default): ~86% with a verdict (passed, failed or timed out, each with a 6-check
verdict built as the contract's `Verdict`, as grading stores it), some cancelled, errored
and live, and a tenth at the scenario's earlier hash (an edit; not counted). The rows
are `app.models` ORM instances (`Run`), written with COPY in the model's columns.
Before timing, each page must render: the board page shows the API's headline, the home
page the board's headline.

Timed one at a time over loopback, N requests each (default 20; 50 with --full) after 5
warm-ups: the board page and API for the default (latest) revision and an older one, and
the home page. Goals: board page and API p95 <= 200 ms; home page p95 <= 20 ms (issue
31). Afterwards the server is stopped, Redis cleaned of its queue (benchkit.clean_queue)
and the scratch database dropped unless --keep; the one-line summary is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import random
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
from bench_console import sign_in
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
)

from app.db import Conn, Scopes, open_database
from app.models.base import Base
from app.models.run import Run
from app.openapi import SCENARIO_EXAMPLE
from app.scenarios import service as scenarios_service
from understudy_client.contract.runs import Evidence, ExpectationResult, Verdict

GOAL_MS = 200.0
GOAL_HOME_MS = 20.0
SCENARIOS = 25
RUNS_PER_SCENARIO = 40  # a quick run: 1,000 runs
FULL_RUNS_PER_SCENARIO = 2_000  # the 50,000 runs
REVISIONS = 10
CHECKS = 6
STATUSES = ["passed"] * 60 + ["failed"] * 20 + ["timed_out"] * 6 + ["cancelled"] * 6
STATUSES += ["errored"] * 4 + ["live"] * 4
OLD_HASH_SHARE = 0.1
WARMUPS = 5


# --------------------------------------------------------------------------- seeding


def model_records(rows: Sequence[Base]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and COPY records of ORM instances of one model: every column of the
    model's table, except those left to their server default (unset in every row);
    JSONB values as JSON text (what COPY takes)."""
    table = type(rows[0]).__table__
    columns = [
        c
        for c in table.columns
        if c.server_default is None or any(getattr(r, c.key) is not None for r in rows)
    ]
    json_columns = {c.key for c in columns if c.type.__class__.__name__ == "JSONB"}

    def value(row: Base, key: str) -> Any:
        v = getattr(row, key)
        return orjson.dumps(v).decode() if key in json_columns and v is not None else v

    return [c.name for c in columns], [tuple(value(r, c.key) for c in columns) for r in rows]


async def copy_models(conn: Conn, rows: Sequence[Base]) -> None:
    """Write ORM instances of one model with COPY (the seeds are too many for INSERTs)."""
    if rows:
        columns, records = model_records(rows)
        table = type(rows[0]).__tablename__
        await conn.copy_records_to_table(table, records=records, columns=columns)


def verdict_of(status: str, checks: int, rng: random.Random) -> dict[str, Any] | None:
    """The verdict grading stores for a run that ended `status` (None while live), built
    as the contract's `Verdict` so every view of the run reads it back."""
    if status == "live":
        return None
    if status == "errored":
        built = Verdict(passed=False, score=0.0, expectations=[], note="grading failed")
    else:
        passed = status == "passed"
        results = []
        for k in range(checks):
            held = passed or rng.random() < 0.6
            results.append(
                ExpectationResult(
                    id=f"check-{k}",
                    label=f"Check number {k} of the scenario",
                    type="resource",
                    required=True,
                    weight=1.0,
                    passed=held,
                    score=1.0 if held else 0.0,
                    evidence=Evidence(
                        matches=[f"Task/{uuid.uuid4().hex[:12]}"] if held else [],
                        closest=None if held else f"Task/{uuid.uuid4().hex[:12]}",
                    ),
                    detail="matched 1 resource" if held else "no resource matched",
                )
            )
        score = sum(r.score for r in results) / checks if checks else float(passed)
        built = Verdict(passed=passed, score=score, expectations=results)
    dumped: dict[str, Any] = built.model_dump(mode="json", by_alias=True)
    return dumped


def run_model(
    tenant_id: uuid.UUID,
    run_id: str,
    scenario: scenarios_service.LoadedScenario,
    status: str,
    at: datetime,
    revision: str | None,
    verdict: dict[str, Any] | None,
    *,
    label: str | None = None,
    scenario_hash: str | None = None,
) -> Run:
    """A run as the product stores one that started at `at` and ended `status` 40 s later
    (live: still running, its deadline a month away)."""
    live = status == "live"
    return Run(
        tenant_id=tenant_id,
        id=run_id,
        scenario_id=scenario.scenario.id,
        scenario_version=scenario.version,
        scenario_hash=scenario_hash or scenario.hash,
        builtin=scenario.builtin,
        mode="agent",
        label=label,
        status=status,
        fixture={},
        expectations=[],
        started_at=at,
        deadline=at + timedelta(days=30 if live else 0, minutes=5),
        finished_at=None if live else at + timedelta(seconds=40),
        changed_at=at,
        graded_change_at=at,
        graded_at=None if live else at + timedelta(seconds=40),
        verdict=verdict,
        revision=revision,
        scheduling="strict",
        patient_driver="sim",
    )


def bench_scenario(i: int) -> dict[str, Any]:
    doc = copy.deepcopy(SCENARIO_EXAMPLE)
    doc["id"] = f"bench.board-{i:02d}"
    doc["title"] = f"Board bench scenario {i:02d}"
    return doc


async def tenant_id_of(conn: Conn, name: str = TENANT) -> uuid.UUID:
    found: uuid.UUID | None = await conn.fetchval("SELECT id FROM tenant WHERE name = $1", name)
    if found is None:
        raise BenchError(f"no tenant named {name!r} in the scratch database")
    return found


async def seed(url: str, runs_per_scenario: int, scenarios: int = SCENARIOS) -> int:
    """The dev tenant's scenarios (imported through the scenarios service) and runs
    (ORM `Run` rows); returns the runs written."""
    db = await open_database(url, pool_size=2)
    try:
        async with db.pool.acquire() as conn:
            tenant_id = await tenant_id_of(conn)
        loaded: list[scenarios_service.LoadedScenario] = []
        for i in range(scenarios):
            async with Scopes(db.pool).transaction() as tx:
                imported = await scenarios_service.import_scenario(
                    tx, tenant_id, bench_scenario(i), dry_run=False
                )
            loaded.append(imported.loaded)
        rng = random.Random(17)
        start = datetime.now(UTC) - timedelta(days=12)
        rows: list[Run] = []
        for i, scenario in enumerate(loaded):
            for n in range(runs_per_scenario):
                rev = n * REVISIONS // runs_per_scenario
                status = rng.choice(STATUSES)
                old = rng.random() < OLD_HASH_SHARE
                rows.append(
                    run_model(
                        tenant_id,
                        f"run_{i:02d}{n:05d}{uuid.uuid4().hex[:6]}",
                        scenario,
                        status,
                        start + timedelta(days=rev, seconds=n * 7 + i),
                        f"rev-{rev:02d}",
                        verdict_of(status, CHECKS, rng),
                        scenario_hash="0" * 64 if old else None,
                    )
                )
        async with db.pool.acquire() as conn:
            for chunk in _chunks(rows, 5_000):
                await copy_models(conn, chunk)
            await conn.execute("VACUUM ANALYZE run")
        return len(rows)
    finally:
        await db.close()


def _chunks(rows: Sequence[Run], size: int) -> Iterable[Sequence[Run]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


# --------------------------------------------------------------------------- timing


async def timed(client: httpx.AsyncClient, path: str, n: int) -> list[float]:
    for _ in range(WARMUPS):
        (await client.get(path)).raise_for_status()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        answer = await client.get(path)
        times.append(time.perf_counter() - t0)
        if answer.status_code != 200:
            raise BenchError(f"GET {path}: HTTP {answer.status_code}")
    return times


def figures(times: Sequence[float], goal_ms: float) -> dict[str, Any]:
    p95 = round(percentile(times, 95) * 1000, 2)
    return {
        "n": len(times),
        "p50_ms": round(percentile(times, 50) * 1000, 2),
        "p95_ms": p95,
        "goal_p95_ms": goal_ms,
        "goal_met": p95 <= goal_ms,
    }


async def measure(base: str, key: str, n: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as api:
        board = (await api.get("/api/testing/board")).json()
        console = await sign_in(base, key)
        try:
            page = await console.get("/board")
            if page.status_code != 200 or board["headline"]["text"] not in page.text:
                raise BenchError(f"/board did not render the board: HTTP {page.status_code}")
            home = await console.get("/")
            if home.status_code != 200 or 'data-testid="board-headline"' not in home.text:
                raise BenchError(f"/ did not render the board's headline: {home.status_code}")
            older = "rev-03"
            timings = {
                "board page, latest revision": (console, "/board?mode=agent", GOAL_MS),
                "board API, latest revision": (api, "/api/testing/board?mode=agent", GOAL_MS),
                "board page, an older revision": (
                    console,
                    f"/board?mode=agent&revision={older}",
                    GOAL_MS,
                ),
                "board API, an older revision": (
                    api,
                    f"/api/testing/board?mode=agent&revision={older}",
                    GOAL_MS,
                ),
                "home page": (console, "/", GOAL_HOME_MS),
            }
            out: dict[str, Any] = {
                "board": {
                    "revision": board["revision"],
                    "cards": len(board["cards"]),
                    "counted": sum(c["counted"] for c in board["cards"]),
                    "headline": board["headline"]["text"],
                }
            }
            for name, (client, path, goal) in timings.items():
                out[name] = figures(await timed(client, path, n), goal) | {"path": path}
        finally:
            await console.aclose()
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_scratch_arguments(parser, "understudy_bench_board", 0)
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"the issue's size: {FULL_RUNS_PER_SCENARIO} runs a scenario "
        f"({SCENARIOS * FULL_RUNS_PER_SCENARIO:,} runs), 50 requests",
    )
    parser.add_argument(
        "--runs-per-scenario",
        type=int,
        help=f"runs of each of the {SCENARIOS} scenarios ({RUNS_PER_SCENARIO}; "
        f"{FULL_RUNS_PER_SCENARIO} with --full)",
    )
    parser.add_argument("--requests", type=int, help="timed requests of each (20; 50 with --full)")
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if args.runs_per_scenario is None:
        args.runs_per_scenario = FULL_RUNS_PER_SCENARIO if args.full else RUNS_PER_SCENARIO
    if args.requests is None:
        args.requests = 50 if args.full else 20
    if not REVISIONS <= args.runs_per_scenario <= 20_000:
        parser.error(f"--runs-per-scenario must be {REVISIONS}..20000")
    if not 1 <= args.requests <= 10_000:
        parser.error("--requests must be 1..10000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--dev", "--no-worker", "--port", str(args.port)]
    queue = f"understudy:bench-board:{os.getpid()}"
    report: dict[str, Any] = {"command": command, "database": args.database, "queue": queue}
    timed_names: list[str] = []

    def serve_and_measure() -> None:
        with scratch_server(args, queue, "bench_board_", command) as server:
            t0 = time.perf_counter()
            url = database_url(args.pg_port, args.database)
            report["seeded_runs"] = asyncio.run(seed(url, args.runs_per_scenario))
            log(f"seeded {report['seeded_runs']} runs in {time.perf_counter() - t0:.1f} s")
            measured = asyncio.run(measure(f"http://{HOST}:{args.port}", server.key, args.requests))
            report["board"] = measured.pop("board")
            report["timings"] = measured
            timed_names.extend(measured)

    def table(r: dict[str, Any]) -> None:
        b = r["board"]
        print(
            f"board of revision {b['revision']}: {b['cards']} cards, {b['counted']} counted "
            f"runs, headline: {b['headline']}"
        )
        print_rows(
            [
                (
                    f"{name} ({r['seeded_runs']:,} runs)",
                    f"p95 <= {m['goal_p95_ms']:.0f} ms",
                    f"p50 {m['p50_ms']} ms, p95 {m['p95_ms']} ms",
                    mark(m["goal_met"]),
                )
                for name, m in r["timings"].items()
            ]
        )

    def summary(r: dict[str, Any], error: str | None) -> str:
        if error is not None:
            return f"bench_board: failed — {error}"
        t = r["timings"]
        met = sum(1 for m in t.values() if m["goal_met"])
        shown = ", ".join(f"{name} p95 {figure(m['p95_ms'])} ms" for name, m in t.items())
        return f"bench_board: {r['seeded_runs']:,} runs; {shown} — {met} of {len(t)} goals met"

    return run_report(report, args.json_out, serve_and_measure, table, summary)


if __name__ == "__main__":
    sys.exit(main())
