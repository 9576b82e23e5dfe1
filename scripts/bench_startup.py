#!/usr/bin/env python3
"""Startup time and memory of the Understudy server.

Usage:
    scripts/bench_startup.py [--port P] [--runs 3] [--json-out FILE]

Each run starts `understudy serve --no-worker --port P` (the `understudy` console
script beside the running Python, i.e. the active virtualenv's, else the one on PATH;
`--command PATH` picks another) on a scratch database and Redis queue of its own
(benchkit.server_env: UNDERSTUDY_LOCAL_DATABASE=--database, created afresh and migrated
once by `understudy migrate` before the first run, so every run measures a start on an
up-to-date database; UNDERSTUDY_QUEUE_NAME=understudy:bench-startup:<pid>). It then:

1. polls `GET http://127.0.0.1:P/health` every 10 ms until it answers 200 and
   records the seconds since the process was started ("startup to first answered
   request");
2. makes one unauthenticated request, `GET /api/fhir/r4/metadata`, and times it;
3. reads VmRSS and VmHWM from /proc for the started process and every process
   below it (a supervisor's workers, helper processes);
4. sends SIGTERM to the started process and waits for it to exit (SIGKILL to its
   own process group only if it has not exited after --stop-timeout seconds).

It prints each run, then min/median startup and the memory figures next to the
goals (startup <= 2 s; RSS <= 150 MB per worker, a worker being a Python process in
the tree), and the same figures as JSON (also to --json-out FILE). Afterwards Redis is
cleaned of the queue (benchkit.clean_queue) and the scratch database dropped (unless
--keep); the last line printed is a one-line summary.

Exit status: 0 measured; 1 the server failed to start, answer or stop; 2 usage error
(no `understudy` command, port already in use).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from benchkit import (
    HOST,
    Process,
    add_scratch_arguments,
    all_pids,
    check_scratch_arguments,
    check_services,
    descendants,
    emit,
    figure,
    log,
    log_tail,
    mark,
    port_answers,
    proc_status_kb,
    scratch,
    server_env,
    stat_fields,
    verdict,
)

POLL_INTERVAL_S = 0.010
GOAL_STARTUP_S = 2.0
GOAL_WORKER_MB = 150.0


class StartupError(Exception):
    """A run failed; the message says why (with the server's log tail)."""


def read_proc(pid: int, name: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace")
    except OSError:
        return None


def session_members(session: int) -> list[int]:
    members = []
    for pid in all_pids():
        fields = stat_fields(pid)
        # fields[0] is the state: zombies hold no memory and are reaped by their parent.
        if len(fields) > 3 and int(fields[3]) == session and fields[0] != "Z":
            members.append(pid)
    return members


def describe(pid: int) -> dict[str, Any]:
    cmdline = (read_proc(pid, "cmdline") or "").replace("\0", " ").strip()
    comm = (read_proc(pid, "comm") or "").strip()
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        exe = ""
    mem = proc_status_kb(pid)
    return {
        "pid": pid,
        "command": cmdline[:200] or comm,
        "python": exe.startswith("python") or comm.startswith("python"),
        "rss_mb": round(mem.get("VmRSS", 0) / 1024, 1),
        "peak_mb": round(mem.get("VmHWM", 0) / 1024, 1),
    }


# --------------------------------------------------------------------------- one run


@dataclass
class RunResult:
    run: int
    startup_s: float
    metadata_s: float
    metadata_status: int
    pid: int
    rss_mb: float
    peak_mb: float
    worker_rss_mb: float
    worker_peak_mb: float
    tree_rss_mb: float
    processes: list[dict[str, Any]] = field(default_factory=list)
    stop_s: float = 0.0
    exit_code: int | None = None
    left_running: list[int] = field(default_factory=list)


def one_run(
    number: int,
    command: Sequence[str],
    env: dict[str, str],
    args: argparse.Namespace,
    log_path: Path,
) -> RunResult:
    base = f"http://{HOST}:{args.port}"
    start_timeout: float = args.start_timeout
    server = Process("server", list(command), env, log_path)
    with httpx.Client(timeout=httpx.Timeout(2.0), trust_env=False) as client:
        started = time.perf_counter()
        proc = server.spawn()
        try:
            deadline = started + start_timeout
            startup_s: float | None = None
            attempts = 0
            max_attempts = int(start_timeout / POLL_INTERVAL_S) + 1
            while attempts < max_attempts:
                attempts += 1
                tick = time.perf_counter()
                if proc.poll() is not None:
                    raise StartupError(
                        f"server exited with {proc.returncode} before /health answered; "
                        f"log tail:\n{log_tail(log_path)}"
                    )
                try:
                    resp = client.get(f"{base}/health")
                    if resp.status_code == 200:
                        startup_s = time.perf_counter() - started
                        break
                except httpx.HTTPError:
                    pass
                now = time.perf_counter()
                if now >= deadline:
                    break
                time.sleep(max(0.0, POLL_INTERVAL_S - (now - tick)))
            if startup_s is None:
                raise StartupError(
                    f"/health did not answer 200 within {start_timeout:.0f} s; "
                    f"log tail:\n{log_tail(log_path)}"
                )

            t0 = time.perf_counter()
            try:
                meta = client.get(f"{base}/api/fhir/r4/metadata", timeout=30.0)
            except httpx.HTTPError as exc:
                raise StartupError(f"GET /api/fhir/r4/metadata failed: {exc!r}") from exc
            metadata_s = time.perf_counter() - t0
            if not meta.is_success:
                log(f"warning: /api/fhir/r4/metadata answered HTTP {meta.status_code}")

            processes = [describe(pid) for pid in [proc.pid, *descendants(proc.pid)]]
            processes = [p for p in processes if p["rss_mb"] or p["pid"] == proc.pid]
            main = processes[0]
            workers = [p for p in processes if p["python"]] or [main]
            result = RunResult(
                run=number,
                startup_s=round(startup_s, 3),
                metadata_s=round(metadata_s, 3),
                metadata_status=meta.status_code,
                pid=proc.pid,
                rss_mb=main["rss_mb"],
                peak_mb=main["peak_mb"],
                worker_rss_mb=max(p["rss_mb"] for p in workers),
                worker_peak_mb=max(p["peak_mb"] for p in workers),
                tree_rss_mb=round(sum(p["rss_mb"] for p in processes), 1),
                processes=processes,
            )
        finally:
            stopping = time.perf_counter()
            code = server.stop(args.stop_timeout)
            stop_s = time.perf_counter() - stopping

    result.stop_s = round(stop_s, 3)
    result.exit_code = code
    # Give helpers a moment to follow their parent out, then report any that did not.
    left: list[int] = []
    for _ in range(50):
        left = session_members(proc.pid)
        if not left:
            break
        time.sleep(0.1)
    result.left_running = left
    if left:
        log(f"warning: run {number}: processes still running after the server exited: {left}")
    return result


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Measure Understudy's startup to first answered request, and its memory.",
        epilog="Example: scripts/bench_startup.py --port 8799 --runs 5",
    )
    add_scratch_arguments(parser, "understudy_bench_startup", 8799)
    parser.add_argument("--runs", type=int, default=3, help="number of starts (default 3)")
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 1 <= args.runs <= 100:
        parser.error("--runs must be 1..100")
    return args


def migrate(exe: str, env: dict[str, str], log_path: Path, timeout: float) -> bool:
    """`understudy migrate` on the scratch database, so that no run pays for it."""
    with log_path.open("wb") as out:
        try:
            done = subprocess.run(
                [exe, "migrate"], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            log(f"`understudy migrate` did not finish within {timeout:.0f} s")
            return False
    if done.returncode != 0:
        log(f"`understudy migrate` exited {done.returncode}:\n{log_tail(log_path)}")
    return done.returncode == 0


def measure(
    args: argparse.Namespace, exe: str, command: list[str], queue: str
) -> list[RunResult] | None:
    with scratch(args, queue, "bench_startup_") as tmp:
        env = server_env(args, tmp / "data", queue)
        if not migrate(exe, env, tmp / "migrate.log", args.start_timeout):
            return None
        results: list[RunResult] = []
        for number in range(1, args.runs + 1):
            log(f"run {number}/{args.runs}: {' '.join(command)}")
            try:
                result = one_run(number, command, env, args, tmp / f"run{number}.log")
            except StartupError as exc:
                log(f"error: run {number}: {exc}")
                return None
            log(
                f"  ready in {result.startup_s:.3f} s, metadata {result.metadata_s * 1000:.0f} ms "
                f"(HTTP {result.metadata_status}), RSS {result.rss_mb:.1f} MB, "
                f"stopped in {result.stop_s:.2f} s (exit {result.exit_code})"
            )
            results.append(result)
            # Wait (bounded) until the port is free again before the next start.
            for _ in range(100):
                if not port_answers(args.port):
                    break
                time.sleep(0.1)
        return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--no-worker", "--port", str(args.port)]
    queue = f"understudy:bench-startup:{os.getpid()}"
    results = measure(args, exe, command, queue)
    if results is None:
        print("bench_startup: failed — see the log above", flush=True)
        return 1

    startups = [r.startup_s for r in results]
    median_startup = statistics.median(startups)
    worker_rss = max(r.worker_rss_mb for r in results)
    worker_peak = max(r.worker_peak_mb for r in results)
    workers_per_run = max(sum(1 for p in r.processes if p["python"]) for r in results)

    print(
        f"{'run':>3} {'startup s':>10} {'metadata ms':>12} {'RSS MB':>8} {'peak MB':>8} "
        f"{'tree RSS MB':>12} {'stop s':>7}"
    )
    for r in results:
        print(
            f"{r.run:>3} {r.startup_s:>10.3f} {r.metadata_s * 1000:>12.1f} {r.rss_mb:>8.1f} "
            f"{r.peak_mb:>8.1f} {r.tree_rss_mb:>12.1f} {r.stop_s:>7.2f}"
        )
    print()
    print(
        f"startup: min {min(startups):.3f} s, median {median_startup:.3f} s"
        f"  (goal ≤ {GOAL_STARTUP_S:.0f} s {mark(median_startup <= GOAL_STARTUP_S)})"
    )
    print(
        f"memory per worker ({workers_per_run} Python process(es) in the tree): "
        f"RSS {worker_rss:.1f} MB, peak {worker_peak:.1f} MB"
        f"  (goal ≤ {GOAL_WORKER_MB:.0f} MB {mark(worker_rss <= GOAL_WORKER_MB)})"
    )
    others = {p["command"] for r in results for p in r.processes if not p["python"]}
    if others:
        print(f"other processes in the tree: {'; '.join(sorted(others))[:300]}")
    print()
    report = {
        "command": command,
        "database": args.database,
        "queue": queue,
        "runs": [asdict(r) for r in results],
        "startup_s": {"min": min(startups), "median": median_startup, "max": max(startups)},
        "worker_rss_mb": worker_rss,
        "worker_peak_mb": worker_peak,
        "goals": {
            "startup_s": GOAL_STARTUP_S,
            "startup_ok": median_startup <= GOAL_STARTUP_S,
            "worker_mb": GOAL_WORKER_MB,
            "worker_mb_ok": worker_rss <= GOAL_WORKER_MB,
        },
    }
    startup_ok = median_startup <= GOAL_STARTUP_S
    memory_ok = worker_rss <= GOAL_WORKER_MB
    emit(
        report,
        args.json_out,
        f"bench_startup: startup median {figure(median_startup)} s, worker RSS "
        f"{figure(worker_rss)} MB — {verdict([startup_ok, memory_ok])}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
