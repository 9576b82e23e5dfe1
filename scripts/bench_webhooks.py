#!/usr/bin/env python3
"""Benchmark of webhook delivery: commit → receipt latency and throughput.

Usage:
    scripts/bench_webhooks.py [--port 0] [--writes 1000] [--concurrency 8] [--rate 0]
        [--warmup 20] [--drain-timeout 30] [--max-seconds 300] [--json-out FILE] [--keep]

Run it from the project's virtualenv (`. .venv/bin/activate`). It needs PostgreSQL (user
postgres, trust auth) and Redis answering on 127.0.0.1 (`--pg-port`, `--redis-port`);
it talks to nothing else, and listens only on 127.0.0.1.

Set-up (as scripts/bench_grading.py): the scratch database `--database` (default
understudy_bench_webhooks) is dropped and created afresh, then `understudy serve --dev
--port P` (API and worker in one process and one event loop; P is a free port unless
--port names one; with --worker separate, `serve --dev --no-worker` plus `understudy
worker`) is started as a subprocess with UNDERSTUDY_LOCAL_DATABASE=<scratch
database>, UNDERSTUDY_QUEUE_NAME=understudy:bench-webhooks:<pid> (a Redis queue of its
own), UNDERSTUDY_DATA_DIR=<a temporary directory> (a fresh dev key, read from the
server's output "API key: …"), UNDERSTUDY_DAILY_WRITE_QUOTA=10000000 and
UNDERSTUDY_WEBHOOK_ALLOW_PRIVATE=true; the webhook retry schedule and timeout are the
defaults. UNDERSTUDY_DATABASE_URL/REDIS_URL/PUBLIC_URL are removed so the local servers
are used.

The receiver is benchkit's minimal HTTP/1.1 server (stdlib asyncio, keep-alive) on
127.0.0.1, in a thread with its own event loop (benchkit.ThreadedReceiver), so the load
generator's loop does not delay it. For each request it takes the receipt time
(`time.perf_counter()`, once the body is read), then verifies the Standard Webhooks
signature with the subscription's secret (`standardwebhooks.Webhook.verify`) and answers
204. It is subscribed to `Patient.created` only.

Measured: --warmup Patient creates (not counted; their deliveries are awaited), then
--writes Patient creates via `POST /api/fhir/r4/Patient`, --concurrency at a time over
one httpx client, optionally paced to --rate writes/s (write i is not sent before
i / rate seconds: the latency at a load the worker keeps up with, not at saturation).
A write's commit time is when its 201 response has been read; its delivery is matched
by the payload's `resource.id`. Latency = receipt − commit (it can be slightly
negative: the job is enqueued before the response is sent). After the last write the
receiver is given --drain-timeout seconds to receive the rest. Reported: p50, p90, p99,
max and mean latency (goals p50 ≤ 100 ms, p99 ≤ 1 s), deliveries/s (delivered ÷ time
from the first write sent to the last receipt), writes/s, delivered / missing /
duplicate receipts / bad signatures, CPU share and run-queue wait (other work on the
machine) of each process, the delivery rows' statuses and attempt counts from the
scratch database, and the server's own split of each first attempt (commit → send, i.e.
queue and claim; and the POST). Everything is bounded: --writes ≤ 20,000,
--concurrency ≤ 64, each HTTP call 30 s, the write phase --max-seconds.

Afterwards the server is stopped, what it left in Redis is deleted (the queue, and the
arq job, in-progress, retry and result keys of its own jobs: benchkit.clean_queue) and
the scratch database dropped (unless --keep). Output: a table with each goal met (✓) or
not (✗), the figures as JSON (also written to --json-out FILE), and last a one-line
summary (`bench_webhooks: p50 … ms, p99 … ms, N missing — goal met`).

Exit status: 0 measured (whether or not goals were met); 1 the server or a step failed;
2 usage error or a service missing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import orjson
from benchkit import (
    HOST,
    BenchError,
    Process,
    Server,
    ThreadedReceiver,
    check_scratch_arguments,
    check_services,
    database_url,
    figure,
    loadavg,
    log,
    mark,
    print_rows,
    run_report,
    scratch,
    scratch_parser,
    server_env,
    stop_all,
    summarize,
    verdict,
)
from standardwebhooks import Webhook

EVENT = "Patient.created"

GOAL_P50_MS = 100.0
GOAL_P99_MS = 1000.0

HTTP_TIMEOUT_S = 30.0
MAX_WRITES = 20_000
MAX_CONCURRENCY = 64


# --------------------------------------------------------------------------- receiver


@dataclass
class Receipt:
    at: float  # time.perf_counter() when the body had been read
    webhook_id: str
    resource_id: str | None
    event: str | None


@dataclass
class Recorder:
    """The receiver's handler (in the receiver's thread): the receipt time, then the
    Standard Webhooks signature checked with the subscription's secret; 204 always."""

    secret: str = ""
    receipts: list[Receipt] = field(default_factory=list)
    bad_signatures: int = 0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: bytes, headers: dict[str, str]) -> int:
        at = time.perf_counter()
        try:
            payload = Webhook(self.secret).verify(body, headers)
        except Exception:
            payload = None
        with self.lock:
            self.requests += 1
            if payload is None:
                self.bad_signatures += 1
                return 204
            resource = payload.get("resource") or {}
            self.receipts.append(
                Receipt(at, headers.get("webhook-id", ""), resource.get("id"), payload.get("type"))
            )
        return 204

    def snapshot(self) -> list[Receipt]:
        with self.lock:
            return list(self.receipts)


# --------------------------------------------------------------------------- the load


def patient(index: int) -> bytes:
    return orjson.dumps(
        {
            "resourceType": "Patient",
            "active": True,
            "name": [{"family": f"Bench{index:05d}", "given": ["Webhook"]}],
            "gender": "female" if index % 2 else "male",
            "birthDate": f"19{50 + index % 50:02d}-0{1 + index % 9}-1{index % 10}",
        }
    )


async def subscribe(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    r = await client.post("/api/webhooks", json={"url": url, "events": [EVENT]})
    if r.status_code != 201:
        raise BenchError(f"subscribing: HTTP {r.status_code}: {r.text[:2000]}")
    body: dict[str, Any] = r.json()
    return body


async def write_patients(
    client: httpx.AsyncClient,
    count: int,
    concurrency: int,
    offset: int,
    deadline: float,
    rate: float = 0.0,
) -> tuple[dict[str, float], float, float, int]:
    """POST `count` Patients, `concurrency` at a time (write i not sent before i / rate
    seconds when `rate` is set). Returns {resource id: commit time}, the time the first
    was sent, the time the last answered, and how many were not written (errors, or the
    deadline)."""
    commits: dict[str, float] = {}
    failed = 0
    next_index = 0
    first_sent = time.perf_counter()
    last_done = first_sent

    async def one_worker() -> None:
        nonlocal next_index, failed, last_done
        while next_index < count and time.perf_counter() < deadline:
            index = next_index
            next_index += 1
            if rate > 0:
                wait = first_sent + index / rate - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
            try:
                r = await client.post(
                    "/api/fhir/r4/Patient",
                    content=patient(offset + index),
                    headers={"Content-Type": "application/fhir+json", "Prefer": "return=minimal"},
                )
            except httpx.HTTPError as exc:
                failed += 1
                log(f"    write {index}: {type(exc).__name__}: {exc}")
                continue
            done = time.perf_counter()
            if r.status_code != 201:
                failed += 1
                log(f"    write {index}: HTTP {r.status_code}: {r.text[:300]}")
                continue
            location = r.headers.get("location", "")
            resource_id = location.split("/_history")[0].rsplit("/", 1)[-1]
            if not resource_id:
                failed += 1
                continue
            commits[resource_id] = done
            last_done = max(last_done, done)

    await asyncio.gather(*(one_worker() for _ in range(concurrency)))
    failed += count - next_index  # never sent: the deadline passed
    return commits, first_sent, last_done, failed


async def wait_received(receiver: Recorder, ids: set[str], within: float) -> float:
    """Wait until every id was received (or `within` seconds); returns the seconds waited."""
    began = time.perf_counter()
    while time.perf_counter() - began < within:
        got = {r.resource_id for r in receiver.snapshot()}
        if ids <= got:
            break
        await asyncio.sleep(0.05)
    return time.perf_counter() - began


SPLIT_SQL = """
WITH measured AS (
    SELECT * FROM webhook_delivery ORDER BY created_at, seq OFFSET $1
), first_attempt AS (
    SELECT extract(epoch FROM a.at - m.created_at) * 1000 AS wait_ms, a.latency_ms
    FROM measured m JOIN webhook_attempt a
        ON a.tenant_id = m.tenant_id AND a.delivery_id = m.id AND a.attempt = 1
)
SELECT count(*) AS n,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_ms) AS wait_p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY wait_ms) AS wait_p99,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS http_p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) AS http_p99
FROM first_attempt
"""


async def delivery_rows(pg_port: int, database: str, skip: int) -> dict[str, Any]:
    """Statuses and attempt counts of every delivery row; and, for the measured ones (the
    first `skip`, the warm-up, left out), the server's own split of the first attempt:
    commit → send (queue, claim) and the POST to the receiver."""
    conn = await asyncpg.connect(database_url(pg_port, database), timeout=10)
    try:
        split = await conn.fetchrow(SPLIT_SQL, skip)
        statuses = await conn.fetch(
            "SELECT status, count(*) AS n FROM webhook_delivery GROUP BY status ORDER BY status"
        )
        attempts = await conn.fetch(
            "SELECT attempts, count(*) AS n FROM webhook_delivery GROUP BY attempts "
            "ORDER BY attempts"
        )
    finally:
        await conn.close()
    assert split is not None

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        "by_status": {r["status"]: r["n"] for r in statuses},
        "by_attempts": {str(r["attempts"]): r["n"] for r in attempts},
        "first_attempt": {
            "n": split["n"],
            "commit_to_send_p50_ms": ms(split["wait_p50"]),
            "commit_to_send_p99_ms": ms(split["wait_p99"]),
            "post_p50_ms": ms(split["http_p50"]),
            "post_p99_ms": ms(split["http_p99"]),
        },
    }


async def measure(
    args: argparse.Namespace, base: str, key: str, processes: list[Process]
) -> dict[str, Any]:
    receiver = Recorder()
    threaded = ThreadedReceiver(receiver)
    threaded.start()
    log(f"receiver on {HOST}:{threaded.port}")
    try:
        limits = httpx.Limits(
            max_connections=args.concurrency, max_keepalive_connections=args.concurrency
        )
        async with httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {key}"},
            timeout=HTTP_TIMEOUT_S,
            limits=limits,
            trust_env=False,
        ) as client:
            sub = await subscribe(client, f"http://{HOST}:{threaded.port}/hook")
            receiver.secret = sub["secret"]
            log(f"subscribed {sub['id']} to {EVENT}")
            deadline = time.perf_counter() + args.max_seconds
            if args.warmup:
                warm, _, _, warm_failed = await write_patients(
                    client, args.warmup, min(args.concurrency, args.warmup), 0, deadline
                )
                if warm_failed:
                    raise BenchError(f"{warm_failed} warm-up write(s) failed")
                await wait_received(receiver, set(warm), args.drain_timeout)
            warm_receipts = len(receiver.snapshot())
            log(f"({args.writes} writes, {args.concurrency} at a time)")
            load_before = loadavg()
            cpu0 = {p.name: p.cpu_s() for p in processes}
            runq0 = {p.name: p.runqueue_wait_s() for p in processes}
            commits, first_sent, last_done, failed = await write_patients(
                client, args.writes, args.concurrency, args.warmup, deadline, args.rate
            )
            write_wall = last_done - first_sent
            log(f"    {len(commits)} written in {write_wall:.2f} s ({failed} failed)")
            drained = await wait_received(receiver, set(commits), args.drain_timeout)
            cpu = {p.name: round(p.cpu_s() - cpu0[p.name], 3) for p in processes}
            runq = {p.name: round(p.runqueue_wait_s() - runq0[p.name], 3) for p in processes}
            load_after = loadavg()
    finally:
        threaded.stop()

    receipts = receiver.snapshot()[warm_receipts:]
    first_receipt: dict[str, Receipt] = {}
    duplicates = 0
    for receipt in receipts:
        if receipt.resource_id is None or receipt.resource_id not in commits:
            continue
        if receipt.resource_id in first_receipt:
            duplicates += 1
            continue
        first_receipt[receipt.resource_id] = receipt
    latencies = [r.at - commits[rid] for rid, r in first_receipt.items()]
    delivered = len(first_receipt)
    missing = len(commits) - delivered
    last_receipt = max((r.at for r in first_receipt.values()), default=first_sent)
    span = last_receipt - first_sent
    stats = summarize(latencies)
    rows = await delivery_rows(args.pg_port, args.database, args.warmup)
    while_writing = sum(1 for r in first_receipt.values() if r.at <= last_done)
    goal_p50 = bool(stats) and stats["p50_ms"] <= GOAL_P50_MS
    goal_p99 = bool(stats) and stats["p99_ms"] <= GOAL_P99_MS
    return {
        "writes": args.writes,
        "written": len(commits),
        "write_failures": failed,
        "concurrency": args.concurrency,
        "rate_limit_per_s": args.rate or None,
        "warmup_writes": args.warmup,
        "delivered": delivered,
        "missing": missing,
        "duplicate_receipts": duplicates,
        "bad_signatures": receiver.bad_signatures,
        "receiver_requests": receiver.requests,
        "latency": stats,
        "negative_latencies": sum(1 for v in latencies if v < 0),
        "write_wall_s": round(write_wall, 3),
        "writes_per_s": round(len(commits) / write_wall, 1) if write_wall > 0 else None,
        "delivery_span_s": round(span, 3),
        "deliveries_per_s": round(delivered / span, 1) if span > 0 else None,
        "deliveries_per_s_while_writing": round(while_writing / write_wall, 1)
        if write_wall > 0
        else None,
        "drain_wait_s": round(drained, 3),
        "worker": args.worker,
        "cpu_s": cpu,
        "cpu_share": {name: round(v / span, 2) for name, v in cpu.items()} if span > 0 else None,
        "runqueue_wait_s": runq,
        "delivery_rows": rows,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "goal_p50_ms": GOAL_P50_MS,
        "goal_p99_ms": GOAL_P99_MS,
        "goal_p50_met": goal_p50,
        "goal_p99_met": goal_p99,
        "goal_all_delivered": missing == 0 and len(commits) == args.writes,
    }


# --------------------------------------------------------------------------- output


def compact(value: Any) -> str:
    return orjson.dumps(value).decode()


def print_table(m: dict[str, Any]) -> None:
    lat = m["latency"]
    split = m["delivery_rows"]["first_attempt"]

    def ms(name: str) -> str:
        return f"{lat[name]:.1f} ms" if lat else "n/a"

    rows = [
        (
            "delivery latency commit→receipt p50",
            f"≤ {GOAL_P50_MS:.0f} ms",
            ms("p50_ms"),
            mark(m["goal_p50_met"]),
        ),
        (
            "delivery latency commit→receipt p99",
            f"≤ {GOAL_P99_MS / 1000:.0f} s",
            ms("p99_ms"),
            mark(m["goal_p99_met"]),
        ),
        ("  p90 / max / mean", "", f"{ms('p90_ms')} / {ms('max_ms')} / {ms('mean_ms')}", ""),
        (
            "delivered / missing",
            f"{m['writes']} / 0",
            f"{m['delivered']} / {m['missing']}",
            mark(m["goal_all_delivered"]),
        ),
        (
            "duplicate receipts / bad signatures",
            "",
            f"{m['duplicate_receipts']} / {m['bad_signatures']}",
            "",
        ),
        (
            "deliveries/s: overall / while writing",
            "",
            f"{m['deliveries_per_s']} / {m['deliveries_per_s_while_writing']}",
            "",
        ),
        (
            f"writes/s ({m['concurrency']} concurrent"
            + (f", paced at {m['rate_limit_per_s']:g}/s)" if m["rate_limit_per_s"] else ")"),
            "",
            f"{m['writes_per_s']}",
            "",
        ),
        (
            "server split, 1st attempt: commit→send p50/p99",
            "",
            f"{split['commit_to_send_p50_ms']} / {split['commit_to_send_p99_ms']} ms",
            "",
        ),
        (
            "server split, 1st attempt: POST p50/p99",
            "",
            f"{split['post_p50_ms']} / {split['post_p99_ms']} ms",
            "",
        ),
        (
            f"CPU share / run-queue wait s (worker {m['worker']})",
            "",
            f"{compact(m['cpu_share'])} / {compact(m['runqueue_wait_s'])}",
            "",
        ),
        ("delivery rows by status", "", compact(m["delivery_rows"]["by_status"]), ""),
    ]
    print_rows(rows)
    print()


def summary_line(m: dict[str, Any] | None, error: str | None) -> str:
    if m is None:
        return f"bench_webhooks: failed — {error}"
    lat = m["latency"]
    figures = f"p50 {figure(lat['p50_ms'])} ms, p99 {figure(lat['p99_ms'])} ms, " if lat else ""
    met = [m["goal_p50_met"], m["goal_p99_met"], m["goal_all_delivered"]]
    return f"bench_webhooks: {figures}{m['missing']} missing — {verdict(met)}"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scratch_parser(
        "Benchmark Understudy's webhook delivery latency and throughput "
        "(see the module docstring).",
        "scripts/bench_webhooks.py --json-out /tmp/bench_webhooks.json",
        "understudy_bench_webhooks",
        0,
    )
    parser.add_argument(
        "--worker",
        choices=("inprocess", "separate"),
        default="inprocess",
        help="the worker in the server's process and loop (serve --dev, default), or a "
        "separate `understudy worker` process (serve --dev --no-worker)",
    )
    parser.add_argument("--writes", type=int, default=1000, help="measured writes (1000)")
    parser.add_argument("--concurrency", type=int, default=8, help="writes in flight (8)")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="pace the writes at this many per second (default 0: as fast as they go)",
    )
    parser.add_argument("--warmup", type=int, default=20, help="warm-up writes, not counted")
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the remaining deliveries after the last write (30)",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=300.0, help="bound on the write phase (300)"
    )
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 1 <= args.writes <= MAX_WRITES:
        parser.error(f"--writes must be 1..{MAX_WRITES}")
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be 1..{MAX_CONCURRENCY}")
    if not 0 <= args.rate <= 10_000:
        parser.error("--rate must be 0..10000 writes/s")
    if not 0 <= args.warmup <= 1000:
        parser.error("--warmup must be 0..1000")
    if not 0 < args.drain_timeout <= 600 or not 0 < args.max_seconds <= 600:
        parser.error("--drain-timeout and --max-seconds must be in (0, 600] seconds")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2

    separate = args.worker == "separate"
    command = [exe, "serve", "--dev", *(["--no-worker"] if separate else []), "--port"]
    command.append(str(args.port))
    worker_command = [exe, "worker"]
    queue = f"understudy:bench-webhooks:{os.getpid()}"
    base = f"http://{HOST}:{args.port}"
    report: dict[str, Any] = {
        "command": command,
        "worker_command": worker_command if separate else None,
        "database": args.database,
        "queue": queue,
        "event": EVENT,
    }

    def serve_and_measure() -> None:
        with scratch(args, queue, "bench_webhooks_") as tmp:
            env = server_env(args, tmp / "data", queue)
            server = Server(command, env, tmp / "server.log")
            worker = Process("worker", worker_command, env, tmp / "worker.log")
            processes: list[Process] = [server, *([worker] if separate else [])]
            log(f"starting: {' '.join(command)}")
            try:
                server.start(args.port, args.start_timeout)
                log(f"    ready in {server.ready_s:.2f} s (pid {server.pid})")
                report["server_ready_s"] = round(server.ready_s, 2)
                if separate:
                    # Started after the server migrated the database; the warm-up
                    # deliveries show it works.
                    log(f"starting: {' '.join(worker_command)}")
                    worker.spawn()
                    time.sleep(1.0)
                    worker.check_alive()
                report["measured"] = asyncio.run(measure(args, base, server.key, processes))
            finally:
                stop_all(processes, args.stop_timeout)

    return run_report(
        report,
        args.json_out,
        serve_and_measure,
        lambda r: print_table(r["measured"]),
        lambda r, e: summary_line(r.get("measured"), e),
    )


if __name__ == "__main__":
    sys.exit(main())
