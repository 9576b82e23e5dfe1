"""Bulk loading and what it leaves in memory: 10k Patients as transaction Bundles of 100
(goal <= 3 s in all), then Patients POSTed one at a time over 8 connections (goal >= 360
Patients/s, twice the 180/s issue 19 measured), and the server's RSS fresh and after
--resources resources were written.

    python scripts/bench_bulk.py [--patients N] [--singles N] [--resources N] [--keep]

Set-up: `understudy serve --dev` (benchkit.server_env: a scratch database `--database`,
default understudy_bench_bulk, created afresh and migrated by the server, and a Redis
queue of its own) serves on --port. The RSS of the server and its child processes
(/proc VmRSS) is read once it answered /health and a first Patient was written and read
(fresh), and again after the last write.

1. Bundles: --patients Patients (10,000) in transaction Bundles of --bundle-size (100),
   --bundle-concurrency (2) in flight; the wall time from the first POST to the last
   answer.
2. One at a time: --singles Patients (4,000), each its own POST /Patient, over
   --connections (8) keep-alive connections; Patients/s over the wall time.
3. Memory: more Bundles of Patients until --resources resources (default 30,000; up to
   200,000) were written in all, then the RSS again. A default run writes fewer than the
   issue's 100k: pass --resources 100000 for the figure itself; the summary says how many
   were written.

Afterwards the server is stopped, Redis cleaned of its queue (benchkit.clean_queue) and
the scratch database dropped unless --keep. The one-line summary is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson
from benchkit import (
    HOST,
    BenchError,
    Server,
    add_scratch_arguments,
    check_scratch_arguments,
    check_services,
    descendants,
    figure,
    log,
    mark,
    print_rows,
    proc_status_kb,
    run_fast,
    run_report,
    scratch_server,
)

BUNDLE_GOAL_S = 3.0
SINGLE_GOAL_PER_S = 2 * 180.0  # issue 19: "180 Patients/s here", to be doubled
MEMORY_GOAL_GROWTH = 0.25
FHIR_JSON = "application/fhir+json"
FAMILIES = ("Smith", "Johnson", "Garcia", "Nguyen", "Okafor", "Kowalski", "Haddad", "Ito")
GIVEN = ("Ana", "Ben", "Chloe", "David", "Emma", "Femi", "Grace", "Hiro", "Ines", "Jon")


def patient(rng: random.Random, index: int) -> dict[str, Any]:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": "urn:bench-bulk:mrn", "value": f"b{index:07d}"}],
        "active": True,
        "name": [{"use": "official", "family": rng.choice(FAMILIES), "given": [rng.choice(GIVEN)]}],
        "telecom": [{"system": "phone", "value": f"555-{rng.randrange(1000, 10000)}"}],
        "gender": rng.choice(("female", "male")),
        "birthDate": f"{rng.randrange(1930, 2024)}-{rng.randrange(1, 13):02d}-15",
    }


def bundle(resources: Sequence[dict[str, Any]]) -> bytes:
    return orjson.dumps(
        {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {"resource": r, "request": {"method": "POST", "url": "Patient"}} for r in resources
            ],
        }
    )


def rss_kb(pid: int) -> int:
    """VmRSS of the server and its child processes, KiB."""
    return sum(proc_status_kb(p).get("VmRSS", 0) for p in [pid, *descendants(pid)])


async def post_bundles(
    client: httpx.AsyncClient, rng: random.Random, first: int, count: int, size: int, flight: int
) -> float:
    """POST `count` Patients (numbered from `first`) in Bundles; the wall seconds."""
    bodies = [
        bundle([patient(rng, first + i) for i in range(start, min(start + size, count))])
        for start in range(0, count, size)
    ]
    semaphore = asyncio.Semaphore(flight)

    async def post(body: bytes) -> None:
        async with semaphore:
            r = await client.post(str(client.base_url).rstrip("/"), content=body)
        if r.status_code != 200:
            raise BenchError(f"transaction Bundle: HTTP {r.status_code}: {r.text[:500]}")

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for body in bodies:
            group.create_task(post(body))
    return time.perf_counter() - t0


async def post_singles(
    client: httpx.AsyncClient, rng: random.Random, first: int, count: int, connections: int
) -> float:
    """POST `count` Patients one at a time over `connections` connections; wall seconds."""
    bodies = [orjson.dumps(patient(rng, first + i)) for i in range(count)]
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(bodies):
            body = bodies[next_index]
            next_index += 1
            r = await client.post("/Patient", content=body)
            if r.status_code != 201:
                raise BenchError(f"POST /Patient: HTTP {r.status_code}: {r.text[:500]}")

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(connections):
            group.create_task(worker())
    return time.perf_counter() - t0


async def measure(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    rng = random.Random(23)
    base = f"http://{HOST}:{args.port}/api/fhir/r4"
    limits = httpx.Limits(max_connections=args.connections, max_keepalive_connections=32)
    async with httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {server.key}", "Content-Type": FHIR_JSON},
        timeout=httpx.Timeout(120, connect=10),
        limits=limits,
        trust_env=False,
    ) as client:
        r = await client.post("/Patient", content=orjson.dumps(patient(rng, 0)))
        if r.status_code != 201:
            raise BenchError(f"first POST /Patient: HTTP {r.status_code}: {r.text[:500]}")
        (await client.get(f"/Patient/{r.json()['id']}")).raise_for_status()
        fresh = rss_kb(server.pid)
        log(f"fresh RSS {fresh / 1024:.0f} MiB; loading {args.patients} Patients in Bundles")
        written = 1
        bundle_s = await post_bundles(
            client, rng, written, args.patients, args.bundle_size, args.bundle_concurrency
        )
        written += args.patients
        log(f"Bundles: {bundle_s:.2f} s; {args.singles} single POSTs")
        single_s = await post_singles(client, rng, written, args.singles, args.connections)
        written += args.singles
        after_load = rss_kb(server.pid)
        while written < args.resources:
            count = min(10_000, args.resources - written)
            await post_bundles(client, rng, written, count, args.bundle_size, 2)
            written += count
            log(f"  written {written}/{args.resources}, RSS {rss_kb(server.pid) / 1024:.0f} MiB")
        after = rss_kb(server.pid)
    peak = proc_status_kb(server.pid).get("VmHWM", 0)
    return {
        "bundles": {
            "patients": args.patients,
            "bundle_size": args.bundle_size,
            "in_flight": args.bundle_concurrency,
            "seconds": round(bundle_s, 3),
            "per_s": round(args.patients / bundle_s, 1),
        },
        "singles": {
            "patients": args.singles,
            "connections": args.connections,
            "seconds": round(single_s, 3),
            "per_s": round(args.singles / single_s, 1),
        },
        "memory": {
            "fresh_mib": round(fresh / 1024, 1),
            "after_load_mib": round(after_load / 1024, 1),
            "after_mib": round(after / 1024, 1),
            "server_peak_mib": round(peak / 1024, 1),
            "resources_written": written,
            "growth": round(after / fresh - 1, 3) if fresh else None,
        },
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_scratch_arguments(parser, "understudy_bench_bulk", 0)
    parser.add_argument("--patients", type=int, default=10_000, help="Bundled (10000)")
    parser.add_argument("--bundle-size", type=int, default=100, help="entries a Bundle (100)")
    parser.add_argument("--bundle-concurrency", type=int, default=2, help="in flight (2)")
    parser.add_argument("--singles", type=int, default=4_000, help="single POSTs (4000)")
    parser.add_argument("--connections", type=int, default=8, help="for the singles (8)")
    parser.add_argument(
        "--resources", type=int, default=30_000, help="written in all before the RSS (30000)"
    )
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 1 <= args.patients <= 100_000 or not 1 <= args.singles <= 100_000:
        parser.error("--patients and --singles must be 1..100000")
    if not 1 <= args.bundle_size <= 1_000 or not 1 <= args.bundle_concurrency <= 16:
        parser.error("--bundle-size must be 1..1000 and --bundle-concurrency 1..16")
    if not 1 <= args.connections <= 64:
        parser.error("--connections must be 1..64")
    if not 1 <= args.resources <= 200_000:
        parser.error("--resources must be 1..200000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--dev", "--port", str(args.port)]
    queue = f"understudy:bench-bulk:{os.getpid()}"
    report: dict[str, Any] = {"command": command, "database": args.database, "queue": queue}

    def serve_and_measure() -> None:
        with scratch_server(args, queue, "bench_bulk_", command) as server:
            report["measured"] = run_fast(measure(args, server))

    def met(m: dict[str, Any]) -> list[bool]:
        return [
            m["bundles"]["seconds"] <= BUNDLE_GOAL_S,
            m["singles"]["per_s"] >= SINGLE_GOAL_PER_S,
            m["memory"]["growth"] is not None and m["memory"]["growth"] <= MEMORY_GOAL_GROWTH,
        ]

    def table(r: dict[str, Any]) -> None:
        m = r["measured"]
        b, s, mem = m["bundles"], m["singles"], m["memory"]
        ok = met(m)
        print_rows(
            [
                (
                    f"{b['patients']} Patients in Bundles of {b['bundle_size']}",
                    f"<= {BUNDLE_GOAL_S:.0f} s",
                    f"{b['seconds']} s ({b['per_s']}/s)",
                    mark(ok[0]),
                ),
                (
                    f"{s['patients']} single POSTs, {s['connections']} connections",
                    f">= {SINGLE_GOAL_PER_S:.0f}/s",
                    f"{s['per_s']}/s",
                    mark(ok[1]),
                ),
                (
                    f"RSS fresh -> after {mem['resources_written']} resources",
                    f"<= +{MEMORY_GOAL_GROWTH:.0%}",
                    f"{mem['fresh_mib']} -> {mem['after_mib']} MiB ({mem['growth']:+.0%})",
                    mark(ok[2]),
                ),
            ]
        )

    def summary(r: dict[str, Any], error: str | None) -> str:
        if error is not None:
            return f"bench_bulk: failed — {error}"
        m = r["measured"]
        mem = m["memory"]
        goals = met(m)
        verdict = f"{sum(goals)} of {len(goals)} goals met"
        return (
            f"bench_bulk: {m['bundles']['patients']} Patients in Bundles "
            f"{figure(m['bundles']['seconds'])} s, single POSTs {figure(m['singles']['per_s'])}/s "
            f"at {m['singles']['connections']} connections, RSS {figure(mem['fresh_mib'])} -> "
            f"{figure(mem['after_mib'])} MiB after {mem['resources_written']} resources "
            f"— {verdict}"
        )

    return run_report(report, args.json_out, serve_and_measure, table, summary)


if __name__ == "__main__":
    sys.exit(main())
