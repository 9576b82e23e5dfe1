"""Scale-out on this machine behind a real load balancer: HAProxy in front of three API
processes and two workers on one PostgreSQL and Redis, 3 tenants × 10 live runs with
MCP sessions and webhooks through it (tests/faults/scale_out.py). The issue's full size,
5 tenants × 20 live runs, is `python scripts/scale_out.py` (it keeps the suite's time in
bounds: the load is the same shape, only less of it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.db import Database
from tests.faults.conftest import connect
from tests.faults.scale_out import exercise, idle_connection_survives, stack
from tests.faults.services import PrivateRedis
from tests.webhooks.receiver import Receiver

TENANTS, RUNS = 3, 10


async def test_three_apis_and_two_workers_behind_haproxy(
    database_url: str,
    redis: PrivateRedis,
    tmp_path: Path,
    open_db: list[Database],
    receiver: Receiver,
) -> None:
    with stack(database_url, redis.url, tmp_path / "stack") as running:
        db = await connect(database_url, open_db)
        # Beside the load: a connection to an API process left idle past the 5 s after
        # which uvicorn would close it (and HAProxy reuse it) still answers, on the same
        # socket (UNDERSTUDY_KEEP_ALIVE_SECONDS).
        report, kept_alive = await asyncio.gather(
            exercise(running.balancer, db, receiver, tenants=TENANTS, runs=RUNS),
            idle_connection_survives(running.apis[0].url, idle_s=7),
        )
        assert kept_alive, "an idle connection to an API process was closed within 7 s"
        print(report.summary())
        assert running.alive() == [], running.alive()
    assert report.problems == [], "\n".join(report.problems[:20])
    # Every live run and each tenant's MCP session's run passed.
    assert report.verdicts == {"passed": TENANTS * RUNS + TENANTS}, report.verdicts
    # Each run finished twice at once: both answered, with one and the same verdict.
    assert sum(report.finish_answers.values()) == 2 * TENANTS * RUNS, report.finish_answers
    assert report.mcp_sessions == TENANTS
    # Every copy received is an attempt (a copy beyond its attempts is a problem above):
    # one per event, plus the retries of attempts that failed after the receiver got them
    # (under load its answer can take longer than the attempt timeout). An attempt whose
    # connection was reset (a reused keep-alive connection the receiver had closed) may
    # never have reached it, so retries bound the extra copies from above.
    assert report.events > 0
    extra = report.deliveries - report.events
    assert 0 <= extra <= report.retries, report.retried_because
