#!/usr/bin/env python3
"""Benchmark of a 100-run workflow eval played by an automation that reacts instantly.

Usage:
    scripts/bench_evals.py [--port 8798] [--json-out FILE] [--keep]
        [--scenarios 20] [--repeats 5] [--max-live 20] [--poll-grace 1.0]
        [--events result.final,message.received,appointment.noshow] [--py-spy FILE]

Run it from the project's virtualenv (`. .venv/bin/activate`): it imports
`app.scenarios.expansion.expand_value` to expand oracle bodies. It needs PostgreSQL (user
postgres, trust auth) and Redis answering on 127.0.0.1 (`--pg-port`, `--redis-port`); it
talks to nothing else, and the webhook receiver listens on 127.0.0.1 only.

Set-up (as scripts/bench_grading.py does): the scratch database `--database` (default
understudy_bench_evals) is dropped and created afresh, then `understudy serve --dev
--port P` is started as a subprocess — API and worker in ONE process, so its CPU time is
both — with UNDERSTUDY_LOCAL_DATABASE=<scratch database>,
UNDERSTUDY_QUEUE_NAME=understudy:bench-evals:<pid>, UNDERSTUDY_DATA_DIR=<a temporary
directory>, UNDERSTUDY_DAILY_WRITE_QUOTA=10000000 (raised) and
UNDERSTUDY_MAX_LIVE_RUNS=--max-live (default 20, the product default: queueing beyond the
live limit is part of what is measured). The dev key is read from the server's output.

The eval: the built-in workflow scenarios (GET /api/testing/scenarios: builtin, mode
workflow — results.critical-lab, messaging.portal-triage, scheduling.noshow-outreach)
are copied under other ids, `bench.<nn>.<original id>`, round-robin, and imported through
POST /api/testing/scenarios until there are --scenarios of them (default 20). Then
POST /api/testing/evals {"mode": "workflow", "scenarios": [those ids], "repeats": 5,
"personas": "baseline"} plans --scenarios × --repeats runs (default 100, the maximum).

The automation, in this process: benchkit's HTTP/1.1 receiver on 127.0.0.1 (an ephemeral
port) is subscribed (POST /api/webhooks) to the stimulus events of the three scenarios
(--events; `*` also works) and checked with POST /api/webhooks/{id}/test. Every delivery's
signature is verified (standardwebhooks) and answered 204 at once; the first delivery that
names a run claims it ("webhook"), and the run's work starts in a task: GET
/api/testing/runs/{runId} (fixture, start time, scenario), replay of the scenario's oracle
through the delivery's fhirBase (`expand_value` for bodies, `@symbol` in paths), then
POST /api/testing/runs/{runId}/finish. As a safety net the eval is polled every 200 ms
(GET /api/testing/evals/{id}); a live run not yet claimed, seen live by the poller for at
least --poll-grace seconds, is claimed by the poll ("poll") and worked through the eval
item's fhirBase. (With --poll-grace 0 the poll races the webhook.)

Measured: the wall time from sending POST /evals to the first poll that reads
`completed` (goal <= 60 s), and the same span on the server's clock (eval createdAt to the
last run's finishedAt); runs passed / failed and the pass rate (the eval's summary); how
many runs were claimed by a webhook and how many by the poll; the server process's CPU
time (user + sys from /proc/<pid>/stat before POST /evals and after completion: API and
worker together; PostgreSQL's own CPU is not included) and this process's; per run, the
wait in the queue (eval createdAt to run startedAt), the delivery lag (run startedAt to the
first delivery received), the automation's handling time (claim to the finish answered)
and the run's life (startedAt to finishedAt); the eval polls and their latency.
With --py-spy FILE the server is sampled by `py-spy record` (beside the running Python)
while the eval runs, the raw (collapsed) stacks are written to FILE and the hottest
functions are printed.

Afterwards, with the server stopped, Redis is cleaned of this run (benchkit.clean_queue:
its queue and the arq keys of its jobs, in-progress marks included, and nothing else) and
the scratch database is dropped (unless --keep). Output: a table with the goal met (✓)
or not (✗), the same figures as JSON (also written to --json-out FILE), and a one-line
summary last. The load average is recorded around the eval: other work on the machine
shows up in these figures.

Exit status: 0 measured (whether or not the goal was met); 1 the server or a step
failed (including the eval not completing within --eval-timeout); 2 usage error or a
service missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis.asyncio as redis_async
from benchkit import (
    HOST,
    BenchError,
    Receiver,
    Server,
    check_scratch_arguments,
    check_services,
    expect,
    figure,
    find_executable,
    loadavg,
    local_url,
    log,
    log_tail,
    mark,
    print_rows,
    run_fast,
    run_report,
    scratch,
    scratch_parser,
    server_env,
    stop_all,
    summarize,
)
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.scenarios.expansion import ExpansionError, expand_path, expand_value

COPY_PREFIX = "bench"
DEFAULT_EVENTS = ("result.final", "message.received", "appointment.noshow")
MAX_EVAL_RUNS = 100
MAX_REPEATS = 5

GOAL_WALL_S = 60.0

POLL_INTERVAL_S = 0.200
HTTP_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 30.0

JSON_HEADERS = {"Content-Type": "application/json"}
FHIR_JSON = "application/fhir+json"


def summary_s(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/mean/min/max of durations in seconds ({} without samples)."""
    return summarize(values, "s")


def parse_instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise BenchError(f"the server answered a time without a zone: {text!r}")
    return moment


class PySpy:
    """`py-spy record` of the server while the eval runs (raw collapsed stacks)."""

    def __init__(self, exe: str, pid: int, out: Path, log_path: Path) -> None:
        self.exe = exe
        self.pid = pid
        self.out = out
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("wb") as sink:
            self.proc = subprocess.Popen(
                [
                    self.exe,
                    "record",
                    "--pid",
                    str(self.pid),
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "--output",
                    str(self.out),
                ],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> bool:
        """SIGINT makes py-spy write its file; True when the file is there."""
        if self.proc is None:
            return False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if not self.out.is_file():
            log("py-spy wrote nothing; its output:\n" + log_tail(self.log_path))
            return False
        return True


def _frame_name(frame: str) -> str:
    """`handle (app/x.py:12)` -> `handle (app/x.py)`: functions, not lines."""
    return re.sub(r":\d+\)$", ")", frame.strip())


def summarize_collapsed(path: Path, top: int = 20) -> dict[str, Any]:
    """Self sample counts per function, and inclusive counts per project function
    (frames in app/ other than the `understudy serve` entry point), from py-spy's raw
    output."""
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")]
        # py-spy puts "process …" and "thread (…)" first when asked; keep code frames.
        frames = [f for f in frames if not f.startswith(("process ", "thread ("))]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for name in set(frames):
            if "(app/" in name and "(app/cli.py)" not in name:
                inclusive[name] += count

    def share(items: list[tuple[str, int]]) -> list[dict[str, Any]]:
        return [
            {"function": n, "samples": c, "share": round(c / total, 4) if total else 0.0}
            for n, c in items
        ]

    return {
        "samples": total,
        "self": share(self_counts.most_common(top)),
        "inclusive_app": share(inclusive.most_common(top)),
    }


# --------------------------------------------------------------------------- automation


@dataclass
class Work:
    """One run as the automation handled it. Times: perf_counter, except *_wall (epoch)."""

    run_id: str
    source: str  # "webhook" or "poll"
    claimed: float
    claimed_wall: float
    event: str | None = None
    calls: int = 0
    done: float | None = None
    finish_s: float | None = None
    finish_status: str | None = None
    error: str | None = None


@dataclass
class Automation:
    client: httpx.AsyncClient
    base: str
    oracles: dict[str, list[dict[str, Any]]]  # scenario id -> oracle calls
    webhook: Webhook | None = None
    work: dict[str, Work] = field(default_factory=dict)
    first_delivery_wall: dict[str, float] = field(default_factory=dict)
    deliveries: Counter[str] = field(default_factory=Counter)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    # ---- webhook side (called by the receiver for every POST)

    def on_delivery(self, body: bytes, headers: dict[str, str]) -> int:
        arrived = time.time()
        if self.webhook is None:
            self.deliveries["before_subscription"] += 1
            return 401
        try:
            self.webhook.verify(body, headers)
        except WebhookVerificationError:
            self.deliveries["bad_signature"] += 1
            return 401
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.deliveries["bad_json"] += 1
            return 400
        self.deliveries["received"] += 1
        self.deliveries[f"type:{event.get('type')}"] += 1
        run_id = event.get("runId")
        if not run_id:
            self.deliveries["no_run"] += 1
            return 204
        self.first_delivery_wall.setdefault(run_id, arrived)
        if run_id in self.work:
            self.deliveries["run_already_claimed"] += 1
            return 204
        fhir_base = event.get("fhirBase")
        if not isinstance(fhir_base, str) or not fhir_base.startswith(self.base + "/"):
            self.deliveries["foreign_base"] += 1
            return 204
        self.claim(run_id, "webhook", fhir_base, str(event.get("type")))
        return 204

    # ---- both sides

    def claim(self, run_id: str, source: str, fhir_base: str, event: str | None) -> None:
        work = Work(run_id, source, time.perf_counter(), time.time(), event)
        self.work[run_id] = work
        task = asyncio.get_running_loop().create_task(self._do(work, fhir_base))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _do(self, work: Work, fhir_base: str) -> None:
        run_path = f"/api/testing/runs/{work.run_id}"
        try:
            run = expect(await self.client.get(run_path), 200, f"GET run {work.run_id}")
            if run["status"] == "live":
                await self._replay(work, run, local_url(fhir_base, self.base))
        except (BenchError, httpx.HTTPError, KeyError, ValueError) as exc:
            work.error = f"{type(exc).__name__}: {exc}"[:500]
        try:
            t0 = time.perf_counter()
            ended = expect(await self.client.post(f"{run_path}/finish"), 200, "finish")
            work.finish_s = time.perf_counter() - t0
            work.finish_status = ended["status"]
        except (BenchError, httpx.HTTPError, KeyError, ValueError) as exc:
            work.error = (work.error or "") + f" finish: {type(exc).__name__}: {exc}"[:500]
        work.done = time.perf_counter()

    async def _replay(self, work: Work, run: dict[str, Any], fhir_base: str) -> None:
        oracle = self.oracles.get(run["scenarioId"])
        if oracle is None:
            raise BenchError(f"run {work.run_id} is of an unknown scenario {run['scenarioId']!r}")
        refs: dict[str, str] = dict(run["fixture"])
        started = parse_instant(run["startedAt"])
        for index, call in enumerate(oracle):
            try:
                body = expand_value(call["body"], refs, started) if call.get("body") else None
                path = expand_path(call["path"], refs)
            except ExpansionError as exc:
                raise BenchError(f"oracle call {index} of {run['scenarioId']}: {exc}") from None
            url = self.base + path if path.startswith("/api/") else fhir_base + path
            content_type = (
                "application/json-patch+json"
                if call["method"] == "PATCH" and isinstance(body, list)
                else FHIR_JSON
            )
            response = await self.client.request(
                call["method"],
                url,
                content=orjson.dumps(body) if body is not None else None,
                headers={"Content-Type": content_type} if body is not None else None,
            )
            work.calls += 1
            if response.status_code >= 400:
                raise BenchError(
                    f"oracle call {index} ({call['method']} {path}) answered "
                    f"{response.status_code}: {response.text[:300]}"
                )
            if call.get("saveAs") and response.content:
                created = response.json()
                refs[call["saveAs"]] = f"{created['resourceType']}/{created['id']}"

    async def drain(self, wait_s: float) -> int:
        """Wait for handlers still running; cancel what is left after wait_s."""
        pending = set(self.tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=wait_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        return len(pending)


# --------------------------------------------------------------------------- the eval


async def workflow_builtins(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed = expect(await client.get("/api/testing/scenarios"), 200, "list scenarios")
    ids = sorted(s["id"] for s in listed["scenarios"] if s["builtin"] and "workflow" in s["modes"])
    if not ids:
        raise BenchError("the server has no built-in workflow scenario")
    documents = []
    for scenario_id in ids:
        whole = expect(
            await client.get(f"/api/testing/scenarios/{scenario_id}"), 200, f"GET {scenario_id}"
        )
        documents.append(whole["scenario"])
    return documents


async def import_copies(
    client: httpx.AsyncClient, builtins: list[dict[str, Any]], count: int
) -> dict[str, list[dict[str, Any]]]:
    """`bench.<nn>.<original id>`, round-robin over the built-ins; id -> oracle."""
    oracles: dict[str, list[dict[str, Any]]] = {}
    for number in range(count):
        original = builtins[number % len(builtins)]
        copy_id = f"{COPY_PREFIX}.{number // len(builtins) + 1:02d}.{original['id']}"
        document = {**original, "id": copy_id}
        response = await client.post(
            "/api/testing/scenarios", content=orjson.dumps(document), headers=JSON_HEADERS
        )
        if response.status_code != 201:
            raise BenchError(
                f"importing {copy_id}: HTTP {response.status_code}: {response.text[:2000]}"
            )
        oracle = original.get("oracle") or []
        if not oracle:
            raise BenchError(f"{original['id']} has no oracle to replay")
        oracles[copy_id] = oracle
    return oracles


async def subscribe(client: httpx.AsyncClient, url: str, events: list[str]) -> tuple[str, str]:
    created = expect(
        await client.post(
            "/api/webhooks",
            content=orjson.dumps({"url": url, "events": events}),
            headers=JSON_HEADERS,
        ),
        201,
        "subscribe the receiver",
    )
    return created["id"], created["secret"]


async def ping(client: httpx.AsyncClient, sub_id: str) -> dict[str, Any]:
    """POST /api/webhooks/{id}/test: a signed ping to the receiver, answered 2xx?"""
    answer = expect(await client.post(f"/api/webhooks/{sub_id}/test"), 200, "webhook test")
    code = answer.get("statusCode")
    if not isinstance(code, int) or not 200 <= code < 300:
        raise BenchError(f"the receiver did not accept the signed test ping: {answer}")
    return {"statusCode": code, "latencyMs": answer.get("latencyMs")}


async def delivery_timings(
    client: httpx.AsyncClient, sub_id: str, runs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Server-side view of each run's first delivery (read after the timing): run start →
    event written (the stimulus) → first attempt sent; retries and failures."""
    listed = expect(
        await client.get(f"/api/webhooks/{sub_id}/deliveries", params={"limit": 500}),
        200,
        "list deliveries",
    )["deliveries"]
    first: dict[str, dict[str, Any]] = {}
    for d in listed:
        run_id = d.get("runId")
        if run_id in runs and d["attempts"]:
            seen = first.get(run_id)
            if seen is None or d["attempts"][0]["at"] < seen["attempts"][0]["at"]:
                first[run_id] = d
    to_event: list[float] = []
    to_attempt: list[float] = []
    for run_id, d in first.items():
        started = parse_instant(runs[run_id]["startedAt"])
        created = parse_instant(d["createdAt"])
        sent = parse_instant(d["attempts"][0]["at"])
        to_event.append((created - started).total_seconds())
        to_attempt.append((sent - created).total_seconds())
    return {
        "listed": len(listed),
        "statuses": dict(Counter(str(d["status"]) for d in listed)),
        "with_retries": sum(1 for d in listed if len(d["attempts"]) > 1),
        "run_start_to_event": summary_s(to_event),
        "event_to_first_attempt": summary_s(to_attempt),
    }


async def jobs_due(rds: redis_async.Redis, queue: str) -> int:
    """Jobs waiting in the worker's queue that are due now (arq scores are epoch ms)."""
    due: int = await rds.zcount(queue, "-inf", int(time.time() * 1000))
    return due


async def run_times(client: httpx.AsyncClient, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """startedAt / finishedAt / status of each run (read after the timing)."""
    out: dict[str, dict[str, Any]] = {}
    for run_id in run_ids:
        run = expect(await client.get(f"/api/testing/runs/{run_id}"), 200, f"GET run {run_id}")
        out[run_id] = run
    return out


async def play_eval(
    args: argparse.Namespace, server: Server, base: str, queue: str
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {server.key}"}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False, limits=limits
    ) as client:
        builtins = await workflow_builtins(client)
        log(f"built-in workflow scenarios: {', '.join(b['id'] for b in builtins)}")
        oracles = await import_copies(client, builtins, args.scenarios)
        log(f"imported {len(oracles)} copies ({next(iter(oracles))} …)")

        automation = Automation(client, base, oracles)
        receiver = Receiver(automation.on_delivery)
        await receiver.start(args.receiver_port)
        hook_url = f"http://{HOST}:{receiver.port}/hook"
        rds = redis_async.Redis(host=HOST, port=args.redis_port, socket_timeout=5)
        try:
            sub_id, secret = await subscribe(client, hook_url, args.events)
            automation.webhook = Webhook(secret)
            test = await ping(client, sub_id)
            log(f"receiver {hook_url} subscribed ({sub_id}) to {args.events}; ping: {test}")
            result, runs = await _timed_eval(
                args, server, client, automation, receiver, base, test, (rds, queue)
            )
            result["delivery_timings"] = await delivery_timings(client, sub_id, runs)
            return result
        finally:
            await automation.drain(DRAIN_TIMEOUT_S)
            await receiver.close()
            await rds.aclose()


async def _timed_eval(
    args: argparse.Namespace,
    server: Server,
    client: httpx.AsyncClient,
    automation: Automation,
    receiver: Receiver,
    base: str,
    webhook_test: dict[str, Any],
    worker_queue: tuple[redis_async.Redis, str],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Create the eval, poll it to completion (claiming what webhooks missed), and
    report; also returns each run as GET /runs/{id} reads afterwards."""
    scenario_ids = list(automation.oracles)
    body = {
        "mode": "workflow",
        "label": "bench-evals",
        "scenarios": scenario_ids,
        "repeats": args.repeats,
        "personas": "baseline",
    }
    spy = (
        PySpy(args.py_spy_exe, server.pid, args.py_spy, args.py_spy.with_suffix(".log"))
        if args.py_spy
        else None
    )
    if spy is not None:
        spy.start()
        await asyncio.sleep(1.0)  # let py-spy attach before the clock starts
    load_before = loadavg()
    user0, sys0 = server.cpu()
    bench_cpu0 = time.process_time()
    t0 = time.perf_counter()
    created = await client.post(
        "/api/testing/evals", content=orjson.dumps(body), headers=JSON_HEADERS
    )
    create_s = time.perf_counter() - t0
    view = expect(created, 201, "create the eval")
    eval_id: str = view["id"]
    log(
        f"eval {eval_id}: {view['total']} runs planned, counts {view['counts']} "
        f"(POST answered in {create_s:.2f} s)"
    )
    if view["total"] != args.scenarios * args.repeats:
        raise BenchError(
            f"the eval planned {view['total']} runs, not {args.scenarios * args.repeats}"
        )

    first_seen: dict[str, float] = {}
    poll_latencies: list[float] = []
    polls = 0
    status = view["status"]
    t_done: float | None = None
    deadline = t0 + args.eval_timeout
    max_polls = int(args.eval_timeout / POLL_INTERVAL_S) + 2
    last_report = t0
    due_jobs: list[int] = []
    for _ in range(max_polls):
        tick = time.perf_counter()
        due_jobs.append(await jobs_due(*worker_queue))
        if view["status"] in ("completed", "cancelled"):
            status = view["status"]
            t_done = tick
            break
        for item in view["runs"]:
            run_id = item.get("runId")
            if item["status"] != "live" or not run_id:
                continue
            seen = first_seen.setdefault(run_id, tick)
            if run_id not in automation.work and tick - seen >= args.poll_grace:
                automation.claim(run_id, "poll", local_url(item["fhirBase"], base), None)
        if tick >= deadline:
            break
        if tick - last_report >= 5.0:
            last_report = tick
            log(f"    {tick - t0:5.1f} s: {dict(view['counts'])}")
        await asyncio.sleep(max(0.0, POLL_INTERVAL_S - (time.perf_counter() - tick)))
        p0 = time.perf_counter()
        view = expect(await client.get(f"/api/testing/evals/{eval_id}"), 200, "GET eval")
        poll_latencies.append(time.perf_counter() - p0)
        polls += 1
    wall = (t_done - t0) if t_done is not None else float("nan")
    user1, sys1 = server.cpu()
    bench_cpu = time.process_time() - bench_cpu0
    load_after = loadavg()
    spy_summary: dict[str, Any] | None = None
    if spy is not None and spy.stop():
        spy_summary = summarize_collapsed(args.py_spy)

    if t_done is None:
        log(f"eval {eval_id} did not complete within {args.eval_timeout:.0f} s; cancelling it")
        await automation.drain(DRAIN_TIMEOUT_S)
        with contextlib.suppress(httpx.HTTPError):
            await client.post(f"/api/testing/evals/{eval_id}/cancel")
        raise BenchError(
            f"eval {eval_id} not completed after {args.eval_timeout:.0f} s: {dict(view['counts'])}"
        )
    log(f"eval {eval_id} {status} after {wall:.2f} s")
    leftover = await automation.drain(DRAIN_TIMEOUT_S)

    final = expect(await client.get(f"/api/testing/evals/{eval_id}"), 200, "GET eval")
    run_ids = [r["runId"] for r in final["runs"] if r.get("runId")]
    runs = await run_times(client, run_ids)
    report = _report(
        args,
        final,
        runs,
        automation,
        receiver,
        wall=wall,
        create_s=create_s,
        polls=polls,
        poll_latencies=poll_latencies,
        server_cpu=(user1 - user0, sys1 - sys0),
        bench_cpu=bench_cpu,
        load=(load_before, load_after),
        webhook_test=webhook_test,
        leftover=leftover,
        spy_summary=spy_summary,
    )
    report["worker_queue_due_jobs"] = {
        "samples": len(due_jobs),
        "mean": round(statistics.fmean(due_jobs), 1) if due_jobs else None,
        "max": max(due_jobs, default=None),
        "note": "jobs in the arq queue due now (not deferred; includes the <= 10 running), "
        "sampled at each eval poll",
    }
    return report, runs


def _report(
    args: argparse.Namespace,
    final: dict[str, Any],
    runs: dict[str, dict[str, Any]],
    automation: Automation,
    receiver: Receiver,
    *,
    wall: float,
    create_s: float,
    polls: int,
    poll_latencies: list[float],
    server_cpu: tuple[float, float],
    bench_cpu: float,
    load: tuple[list[float], list[float]],
    webhook_test: dict[str, Any],
    leftover: int,
    spy_summary: dict[str, Any] | None,
) -> dict[str, Any]:
    created_at = parse_instant(final["createdAt"])
    queue_wait: list[float] = []
    life: list[float] = []
    delivery_lag: list[float] = []
    finished: list[datetime] = []
    for run_id, run in runs.items():
        started = parse_instant(run["startedAt"])
        queue_wait.append((started - created_at).total_seconds())
        if run.get("finishedAt"):
            end = parse_instant(run["finishedAt"])
            finished.append(end)
            life.append((end - started).total_seconds())
        arrived = automation.first_delivery_wall.get(run_id)
        if arrived is not None:
            delivery_lag.append(arrived - started.timestamp())
    works = list(automation.work.values())
    handling = [w.done - w.claimed for w in works if w.done is not None]
    finish = [w.finish_s for w in works if w.finish_s is not None]
    errors = [{"run": w.run_id, "source": w.source, "error": w.error} for w in works if w.error]
    sources = Counter(w.source for w in works)
    summary = final.get("summary") or {}
    rate = summary.get("passRate") or {}
    counts = Counter(str(r["status"]) for r in final["runs"])
    user, system = server_cpu
    server_span = (max(finished) - created_at).total_seconds() if finished else float("nan")
    return {
        "eval_id": final["id"],
        "status": final["status"],
        "runs_planned": final["total"],
        "scenarios": args.scenarios,
        "repeats": args.repeats,
        "personas": "baseline",
        "max_live": args.max_live,
        "events": args.events,
        "poll_interval_s": POLL_INTERVAL_S,
        "poll_grace_s": args.poll_grace,
        "wall_s": round(wall, 3),
        "server_span_s": round(server_span, 3),
        "create_request_s": round(create_s, 3),
        "outcomes": dict(counts),
        "passed": counts["passed"],
        "failed": counts["failed"] + counts["timed_out"],
        "pass_rate": rate.get("rate"),
        "pass_rate_text": rate.get("text"),
        "claimed_by": {"webhook": sources["webhook"], "poll": sources["poll"]},
        "unclaimed_runs": len([r for r in runs if r not in automation.work]),
        "finish_statuses": dict(Counter(str(w.finish_status) for w in works)),
        "errors": errors,
        "handlers_cancelled_at_drain": leftover,
        "deliveries": dict(automation.deliveries),
        "receiver": {"requests": receiver.requests, "errors": receiver.errors},
        "webhook_test": webhook_test,
        "server_cpu_s": {
            "user": round(user, 3),
            "sys": round(system, 3),
            "total": round(user + system, 3),
            "share_of_one_core": round((user + system) / wall, 3) if wall > 0 else None,
            "note": "`understudy serve` runs the API and the worker in this one process; "
            "PostgreSQL's and Redis's CPU are not included",
        },
        "bench_cpu_s": round(bench_cpu, 3),
        "queue_wait": summary_s(queue_wait),
        "delivery_lag": summary_s(delivery_lag),
        "handling": summary_s(handling),
        "finish_request": summary_s(finish),
        "run_life": summary_s(life),
        "eval_polls": polls,
        "eval_poll_latency": summary_s(poll_latencies),
        "loadavg_before": load[0],
        "loadavg_after": load[1],
        "py_spy": spy_summary,
        "goal_s": GOAL_WALL_S,
        "goal_met": wall <= GOAL_WALL_S and final["status"] == "completed",
    }


# --------------------------------------------------------------------------- report


def _p(summary: dict[str, float] | None) -> str:
    if not summary:
        return "-"
    return (
        f"p50 {summary['p50_s']:.3f} s, p90 {summary['p90_s']:.3f} s, max {summary['max_s']:.3f} s"
    )


def print_table(e: dict[str, Any]) -> None:
    cpu = e["server_cpu_s"]
    timings = e.get("delivery_timings") or {}
    due = e["worker_queue_due_jobs"]
    rows: list[tuple[str, str, str, str]] = [
        (
            f"{e['runs_planned']}-run workflow eval, create → completed",
            f"≤ {GOAL_WALL_S:.0f} s",
            f"{e['wall_s']:.2f} s wall (server clock {e['server_span_s']:.2f} s)",
            mark(e["goal_met"]),
        ),
        ("runs passed / failed", "", f"{e['passed']} / {e['failed']} {e['outcomes']}", ""),
        ("pass rate", "", str(e["pass_rate_text"]), ""),
        (
            "runs claimed by webhook / by poll",
            "",
            f"{e['claimed_by']['webhook']} / {e['claimed_by']['poll']} "
            f"(poll grace {e['poll_grace_s']} s)",
            "",
        ),
        (
            "server CPU (API + worker, one process)",
            "",
            f"{cpu['total']:.2f} s (user {cpu['user']:.2f}, sys {cpu['sys']:.2f}; "
            f"{cpu['share_of_one_core']} of a core)",
            "",
        ),
        ("this process's CPU (automation)", "", f"{e['bench_cpu_s']:.2f} s", ""),
        ("queue wait (createdAt → startedAt)", "", _p(e["queue_wait"]), ""),
        ("delivery lag (startedAt → 1st delivery)", "", _p(e["delivery_lag"]), ""),
        ("  of which startedAt → event written", "", _p(timings.get("run_start_to_event")), ""),
        ("  of which event → 1st attempt sent", "", _p(timings.get("event_to_first_attempt")), ""),
        ("handling (claim → finish answered)", "", _p(e["handling"]), ""),
        ("run life (startedAt → finishedAt)", "", _p(e["run_life"]), ""),
        (f"eval polls ({e['eval_polls']})", "", _p(e["eval_poll_latency"]), ""),
        (
            "worker queue: jobs due, at each poll",
            "",
            f"mean {due['mean']}, max {due['max']} ({due['samples']} samples)",
            "",
        ),
    ]
    print_rows(rows)
    if e["errors"]:
        print(f"\n{len(e['errors'])} handler error(s), first: {e['errors'][0]}")
    spy = e.get("py_spy")
    if spy:
        print(f"\npy-spy of the server during the eval ({spy['samples']} samples), self time:")
        for row in spy["self"][:15]:
            print(f"  {row['share']:6.1%}  {row['function']}")
        print("inclusive, project functions:")
        for row in spy["inclusive_app"][:25]:
            print(f"  {row['share']:6.1%}  {row['function']}")
    print()


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scratch_parser(
        "Benchmark a 100-run workflow eval played by an in-process automation "
        "that reacts to webhooks (see the module docstring).",
        "scripts/bench_evals.py --json-out /tmp/bench_evals.json",
        "understudy_bench_evals",
        8798,
    )
    parser.add_argument(
        "--receiver-port", type=int, default=0, help="webhook receiver port (default: any free)"
    )
    parser.add_argument(
        "--scenarios", type=int, default=20, help="custom scenario copies in the eval (20)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="repeats per scenario (1-5; 5)")
    parser.add_argument(
        "--max-live", type=int, default=20, help="UNDERSTUDY_MAX_LIVE_RUNS (default 20)"
    )
    parser.add_argument(
        "--poll-grace",
        type=float,
        default=1.0,
        help="seconds a run must be seen live by the poll before the poll claims it (1.0)",
    )
    parser.add_argument(
        "--events",
        default=",".join(DEFAULT_EVENTS),
        help="events to subscribe to, comma-separated, or '*' (default: the stimulus events)",
    )
    parser.add_argument(
        "--eval-timeout", type=float, default=300.0, help="give up on the eval after (300 s)"
    )
    parser.add_argument(
        "--py-spy", type=Path, help="sample the server with py-spy during the eval (raw file)"
    )
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 0 <= args.receiver_port <= 65535:
        parser.error("--receiver-port must be 0..65535 (0: any free port)")
    if args.receiver_port and args.receiver_port in (args.port, args.pg_port, args.redis_port):
        parser.error("--receiver-port must differ from the other ports")
    if not 1 <= args.repeats <= MAX_REPEATS:
        parser.error(f"--repeats must be 1..{MAX_REPEATS}")
    if args.scenarios < 1 or args.scenarios * args.repeats > MAX_EVAL_RUNS:
        parser.error(f"--scenarios × --repeats must be 1..{MAX_EVAL_RUNS}")
    if not 1 <= args.max_live <= 1000:
        parser.error("--max-live must be 1..1000")
    if not 0 <= args.poll_grace <= 60:
        parser.error("--poll-grace must be 0..60 seconds")
    args.events = [e.strip() for e in args.events.split(",") if e.strip()]
    if not args.events:
        parser.error("--events names no event")
    if not 0 < args.eval_timeout <= 3600:
        parser.error("--eval-timeout must be in (0, 3600] seconds")
    args.py_spy_exe = None
    if args.py_spy:
        args.py_spy = args.py_spy.resolve()
        args.py_spy_exe = find_executable("py-spy")
        if args.py_spy_exe is None:
            parser.error("--py-spy needs py-spy (pip install py-spy) beside the Python")
    return args


def summary_line(e: dict[str, Any] | None, error: str | None) -> str:
    if e is None:
        return f"bench_evals: failed — {error}"
    return (
        f"bench_evals: {e['runs_planned']}-run eval in {figure(e['wall_s'])} s, "
        f"{e['passed']} passed, {e['failed']} failed — "
        + ("goal met" if e["goal_met"] else "goal missed")
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2

    command = [exe, "serve", "--dev", "--port", str(args.port)]
    queue = f"understudy:bench-evals:{os.getpid()}"
    base = f"http://{HOST}:{args.port}"
    report: dict[str, Any] = {
        "command": command,
        "bench_command": [sys.executable, *sys.argv],
        "database": args.database,
        "queue": queue,
        "settings": {
            "UNDERSTUDY_MAX_LIVE_RUNS": args.max_live,
            "UNDERSTUDY_DAILY_WRITE_QUOTA": 10_000_000,
        },
    }

    def serve_and_measure() -> None:
        with scratch(args, queue, "bench_evals_") as tmp:
            env = server_env(args, tmp / "data", queue, UNDERSTUDY_MAX_LIVE_RUNS=str(args.max_live))
            server = Server(command, env, tmp / "server.log")
            log(f"starting: {' '.join(command)}")
            try:
                server.start(args.port, args.start_timeout)
                log(f"    ready in {server.ready_s:.2f} s (pid {server.pid})")
                report["server_ready_s"] = round(server.ready_s, 2)
                report["server_pid"] = server.pid
                report["eval"] = run_fast(play_eval(args, server, base, queue))
            finally:
                stop_all([server], args.stop_timeout)

    return run_report(
        report,
        args.json_out,
        serve_and_measure,
        lambda r: print_table(r["eval"]),
        lambda r, e: summary_line(r.get("eval"), e),
    )


if __name__ == "__main__":
    sys.exit(main())
