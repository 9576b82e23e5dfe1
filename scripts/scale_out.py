"""Scale-out behind HAProxy, for people: 3 API processes and 2 workers on one PostgreSQL
and Redis, 5 tenants × 20 live runs with MCP sessions and webhooks through the balancer
(the checks of tests/faults/test_scale_out.py, printed), then FHIR read throughput with
1, 2 and 3 API processes behind it.

    python scripts/scale_out.py [--tenants 5] [--runs 20] [--seconds 5] [--skip-load]

Needs Debian's `haproxy` and `wrk` (`apt-get install haproxy wrk`), PostgreSQL at
UNDERSTUDY_DATABASE_URL's server (default 127.0.0.1:5432, user postgres; a scratch
database is made and dropped) and `redis-server` (a private one is started).

Throughput is the same `wrk` load (2 threads, 32 connections, GET of one Patient) first
straight at one API process, the leanest path and the reference, then through the
balancer at 1, 2 and 3 processes; each figure is also given as a ratio to the reference
measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx

from app.db import open_database
from app.embedded import ensure_database
from tests.conftest import make_tenant
from tests.faults.scale_out import exercise, stack
from tests.faults.services import PrivateRedis
from tests.webhooks.receiver import Receiver


def wrk(url: str, key: str, seconds: int) -> float:
    """Requests per second `wrk` reaches on `url`."""
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-H", f"Authorization: Bearer {key}", url],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise RuntimeError(f"wrk printed no rate:\n{out}")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non_2xx:
        raise RuntimeError(f"{non_2xx.group(1)} answers were not 2xx:\n{out}")
    return float(found.group(1))


async def patient_url(base: str, database_url: str) -> tuple[str, str]:
    db = await open_database(database_url, pool_size=2)
    try:
        tenant = await make_tenant(db, base, prefix="load")
    finally:
        await db.close()
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        made = await client.post(
            f"{tenant.fhir_base}/Patient",
            json={"resourceType": "Patient", "name": [{"family": "Load"}]},
        )
    made.raise_for_status()
    return f"{tenant.fhir_base}/Patient/{made.json()['id']}", tenant.key


async def run_exercise(
    database_url: str, redis_url: str, work: Path, tenants: int, runs: int
) -> int:
    receiver = Receiver()
    receiver.start()
    try:
        with stack(database_url, redis_url, work / "exercise") as running:
            db = await open_database(database_url, pool_size=4)
            try:
                report = await exercise(running.balancer, db, receiver, tenants=tenants, runs=runs)
            finally:
                await db.close()
            dead = running.alive()
    finally:
        receiver.stop()
    print(f"scale-out: {report.summary()}")
    for problem in report.problems[:20]:
        print(f"  problem: {problem}")
    if dead:
        print(f"  processes that died: {dead}")
    return 1 if report.problems or dead else 0


def run_load(database_url: str, redis_url: str, work: Path, seconds: int) -> None:
    reference = None
    for apis in (1, 2, 3):
        with stack(database_url, redis_url, work / f"load{apis}", apis=apis, workers=1) as running:
            url, key = asyncio.run(patient_url(running.balancer, database_url))
            if reference is None:
                direct = url.replace(running.balancer, running.apis[0].url)
                reference = wrk(direct, key, seconds)
                print(f"throughput: one API process directly (reference): {reference:.0f} req/s")
            rate = wrk(url, key, seconds)
            print(
                f"throughput: {apis} API process{'es' if apis > 1 else ''} behind haproxy: "
                f"{rate:.0f} req/s ({rate / reference:.2f} × the reference)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5, help="each throughput measurement")
    parser.add_argument("--skip-load", action="store_true", help="only the scale-out checks")
    args = parser.parse_args()
    server = os.environ.get(
        "UNDERSTUDY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    server = server.rsplit("/", 1)[0] + "/postgres"
    name = f"understudy_scale_out_{uuid.uuid4().hex[:6]}"
    asyncio.run(ensure_database(server, name))
    database_url = server.rsplit("/", 1)[0] + f"/{name}"
    redis = PrivateRedis()
    redis.start()
    try:
        with tempfile.TemporaryDirectory(prefix="understudy-scale-out-") as work:
            code = asyncio.run(
                run_exercise(database_url, redis.url, Path(work), args.tenants, args.runs)
            )
            if not args.skip_load:
                run_load(database_url, redis.url, Path(work), args.seconds)
    finally:
        redis.stop()

        async def drop() -> None:
            conn = await asyncpg.connect(server)
            try:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await conn.close()

        asyncio.run(drop())
    return code


if __name__ == "__main__":
    sys.exit(main())
