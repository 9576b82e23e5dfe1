"""What the scenario health board costs: `GET /api/testing/board` p50/p95 with 25
scenarios x 2,000 runs over 10 revisions (50,000 runs of one mode).

    python scripts/bench_board.py [--requests N] [--database NAME] [--keep]

Set-up: the scratch database `--database` (default understudy_bench_board) is dropped
and created afresh and migrated; one tenant gets 25 imported agent-mode scenarios and,
written straight into `run` with COPY, 2,000 runs of each spread over 10 revisions
(hours apart, so the latest revision is the default): ~86% with a verdict (passed,
failed or timed out, each with a 6-check verdict as grading stores it), some cancelled,
errored and live, and a tenth at the scenario's earlier hash (an edit; not counted).
The API (create_app, no worker: nothing grades the crafted runs) serves on a free port
in this process; N requests (default 50, after 5 warm-ups) of the default revision and
N of an older one are timed one at a time over loopback. Goal: p95 <= 200 ms.
Afterwards its queue is removed from Redis (benchkit.clean_queue) and the scratch database
dropped unless --keep; the one-line summary is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import random
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import uvicorn
from benchkit import (
    clean_queue,
    database_url,
    drop_database,
    figure,
    free_port,
    percentile,
    recreate_database,
)

from app.cli import migrate
from app.db import Scopes, open_database
from app.main import create_app
from app.openapi import SCENARIO_EXAMPLE
from app.runs.fhir_writes import FHIR_WRITES
from app.scenarios.schema import Scenario
from app.scenarios.validation import content_hash
from app.settings import Settings
from app.tenants import service as tenants

GOAL_MS = 200.0
SCENARIOS = 25
RUNS_PER_SCENARIO = 2_000
REVISIONS = 10
CHECKS = 6
STATUSES = ["passed"] * 60 + ["failed"] * 20 + ["timed_out"] * 6 + ["cancelled"] * 6
STATUSES += ["errored"] * 4 + ["live"] * 4
OLD_HASH_SHARE = 0.1


def _scenario(i: int) -> tuple[dict[str, Any], str]:
    doc = copy.deepcopy(SCENARIO_EXAMPLE)
    doc["id"] = f"bench.board-{i:02d}"
    doc["title"] = f"Board bench scenario {i:02d}"
    return doc, content_hash(Scenario.model_validate(doc))


def _verdict(status: str, rng: random.Random) -> str | None:
    if status == "live":
        return None
    if status == "errored":
        return orjson.dumps(
            {"passed": False, "score": 0, "expectations": [], "note": "grading failed"}
        ).decode()
    passed = status == "passed"
    checks = [
        {
            "id": f"check-{k}",
            "label": f"Check number {k} of the scenario",
            "type": "resource",
            "required": True,
            "weight": 1,
            "passed": passed or rng.random() < 0.6,
            "score": 1.0,
            "evidence": {"matches": [f"Task/{uuid.uuid4().hex[:12]}"], "closest": None},
            "detail": "matched 1 resource",
        }
        for k in range(CHECKS)
    ]
    return orjson.dumps(
        {"passed": passed, "score": 1.0 if passed else 0.5, "expectations": checks}
    ).decode()


async def seed(url: str) -> str:
    """The tenant, its scenarios and runs; returns the tenant's key."""
    db = await open_database(url, pool_size=2)
    try:
        async with Scopes(db.pool).transaction() as tx:
            info, key = await tenants.create_tenant(tx, "bench-board", write_statement=FHIR_WRITES)
        rng = random.Random(17)
        start = datetime.now(UTC) - timedelta(days=12)
        rows = []
        async with db.pool.acquire() as conn:
            for i in range(SCENARIOS):
                doc, hash_ = _scenario(i)
                await conn.execute(
                    "INSERT INTO scenario (tenant_id, id, version, document, hash) "
                    "VALUES ($1, $2, 1, $3::jsonb, $4)",
                    info.id,
                    doc["id"],
                    orjson.dumps(doc).decode(),
                    hash_,
                )
                for n in range(RUNS_PER_SCENARIO):
                    rev = n * REVISIONS // RUNS_PER_SCENARIO
                    at = start + timedelta(days=rev, seconds=n * 7 + i)
                    status = rng.choice(STATUSES)
                    old = rng.random() < OLD_HASH_SHARE
                    rows.append(
                        (
                            info.id,
                            f"run_{i:02d}{n:05d}{uuid.uuid4().hex[:6]}",
                            doc["id"],
                            1,
                            "0" * 64 if old else hash_,
                            False,
                            "agent",
                            status,
                            "{}",
                            "[]",
                            at,
                            at + timedelta(days=30 if status == "live" else 0, minutes=5),
                            None if status == "live" else at + timedelta(seconds=40),
                            at,
                            at,
                            _verdict(status, rng),
                            f"rev-{rev:02d}",
                        )
                    )
            columns = [
                "tenant_id", "id", "scenario_id", "scenario_version", "scenario_hash",
                "builtin", "mode", "status", "fixture", "expectations", "started_at",
                "deadline", "finished_at", "changed_at", "graded_change_at", "verdict",
                "revision",
            ]  # fmt: skip
            await conn.copy_records_to_table("run", records=rows, columns=columns)
            await conn.execute("VACUUM ANALYZE run")
        return key
    finally:
        await db.close()


class _Server(threading.Thread):
    def __init__(self, server: uvicorn.Server) -> None:
        super().__init__(daemon=True)
        self.server = server

    def run(self) -> None:
        asyncio.run(self.server.serve())


def _time(client: httpx.Client, params: dict[str, str], n: int) -> list[float]:
    for _ in range(5):
        client.get("/api/testing/board", params=params).raise_for_status()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get("/api/testing/board", params=params)
        times.append(time.perf_counter() - t0)
        r.raise_for_status()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--database", default="understudy_bench_board")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--redis-port", type=int, default=6379)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not args.database.startswith("understudy_bench"):
        parser.error("--database must start with understudy_bench (it is dropped)")
    recreate_database(args.pg_port, args.database)
    url = database_url(args.pg_port, args.database)
    queue = f"understudy:bench-board:{os.getpid()}"
    summary = "bench_board: failed before measuring"
    try:
        migrate(url)
        t0 = time.perf_counter()
        key = asyncio.run(seed(url))
        print(f"seeded {SCENARIOS * RUNS_PER_SCENARIO} runs in {time.perf_counter() - t0:.1f} s")
        settings = Settings(
            database_url=url,
            redis_url=f"redis://127.0.0.1:{args.redis_port}/0",
            secret_key="bench-board-secret-key-0123456789abcdef",
            queue_name=queue,
        )
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = _Server(server)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            ) as client:
                board = client.get("/api/testing/board").json()
                counted = sum(c["counted"] for c in board["cards"])
                print(
                    f"board of revision {board['revision']}: {len(board['cards'])} cards, "
                    f"{counted} counted runs, headline: {board['headline']['text']}"
                )
                ok = True
                p95s = []
                for name, params in (
                    ("default (latest) revision", {"mode": "agent"}),
                    ("an older revision", {"mode": "agent", "revision": "rev-03"}),
                ):
                    times = _time(client, params, args.requests)
                    p50, p95 = percentile(times, 50) * 1000, percentile(times, 95) * 1000
                    met = p95 <= GOAL_MS
                    ok = ok and met
                    p95s.append(figure(p95))
                    print(
                        f"GET /api/testing/board, {name}: p50 {figure(p50)} ms, "
                        f"p95 {figure(p95)} ms (goal <= {GOAL_MS:.0f} ms) {'✓' if met else '✗'}"
                    )
                summary = (
                    f"bench_board: GET /api/testing/board p95 {p95s[0]} ms (latest revision), "
                    f"{p95s[1]} ms (older), {SCENARIOS * RUNS_PER_SCENARIO} runs "
                    f"(goal <= {GOAL_MS:.0f} ms) — " + ("goal met" if ok else "goal missed")
                )
        finally:
            server.should_exit = True
            thread.join(timeout=10)
        return 0 if ok else 1
    finally:
        # The API enqueues no job here (no worker, nothing graded), but whatever its
        # queue holds is this run's: removed like the other benchmarks' (benchkit).
        clean_queue(args.redis_port, queue)
        if args.keep:
            print(f"kept {url}")
        else:
            drop_database(args.pg_port, args.database)
        print(summary, flush=True)


if __name__ == "__main__":
    sys.exit(main())
