#!/usr/bin/env python3
"""Startup time and memory of the Understudy server.

Usage:
    scripts/bench_startup.py [--port P] [--runs 3] [--json-out FILE]

Each run starts `understudy serve --no-worker --port P` (the `understudy` console
script beside the running Python, i.e. the active virtualenv's, else the one on PATH;
`--command PATH` picks another) with the environment as it is, so the server takes
its configuration from the usual `UNDERSTUDY_*` variables. It then:

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
the tree), and the same figures as JSON (also to --json-out FILE).

Exit status: 0 measured; 1 the server failed to start, answer or stop; 2 usage error
(no `understudy` command, port already in use).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchkit import find_understudy

try:
    import httpx
    import orjson
except ImportError as _missing:  # pragma: no cover - environment hint
    sys.exit(
        f"bench_startup.py needs httpx and orjson ({_missing}): run it from the project's "
        "virtualenv (. .venv/bin/activate)"
    )

POLL_INTERVAL_S = 0.010
GOAL_STARTUP_S = 2.0
GOAL_WORKER_MB = 150.0
HOST = "127.0.0.1"


class StartupError(Exception):
    """A run failed; the message says why (with the server's log tail)."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- /proc


def read_proc(pid: int, name: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace")
    except OSError:
        return None


def status_kb(pid: int) -> dict[str, int]:
    values: dict[str, int] = {}
    text = read_proc(pid, "status") or ""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def stat_fields(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    text = read_proc(pid, "stat")
    return text.rsplit(")", 1)[-1].split() if text else []


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        fields = stat_fields(pid)
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    tree = [root]
    queue = list(children.get(root, []))
    while queue and len(tree) < 10_000:
        pid = queue.pop(0)
        tree.append(pid)
        queue.extend(children.get(pid, []))
    return tree


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
    mem = status_kb(pid)
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


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def stop(proc: subprocess.Popen[bytes], timeout: float) -> tuple[float, int | None]:
    started = time.perf_counter()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"pid {proc.pid} ignored SIGTERM for {timeout:.0f} s; killing its process group")
            # Our own process group: the child was started with start_new_session=True.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return time.perf_counter() - started, proc.returncode


def one_run(
    number: int,
    command: Sequence[str],
    port: int,
    start_timeout: float,
    stop_timeout: float,
    log_path: Path,
) -> RunResult:
    base = f"http://{HOST}:{port}"
    with log_path.open("wb") as out, httpx.Client(timeout=httpx.Timeout(2.0)) as client:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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

            processes = [describe(pid) for pid in process_tree(proc.pid)]
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
            stop_s, code = stop(proc, stop_timeout)

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


def mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Measure Understudy's startup to first answered request, and its memory.",
        epilog="Example: scripts/bench_startup.py --port 8799 --runs 5",
    )
    parser.add_argument("--port", type=int, default=8799, help="port to serve on (default 8799)")
    parser.add_argument("--runs", type=int, default=3, help="number of starts (default 3)")
    parser.add_argument(
        "--start-timeout", type=float, default=60.0, help="seconds to wait for /health"
    )
    parser.add_argument(
        "--stop-timeout", type=float, default=20.0, help="seconds to wait after SIGTERM"
    )
    parser.add_argument(
        "--command",
        help="the understudy executable (default: the active virtualenv's console script)",
    )
    parser.add_argument("--json-out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error("--port must be 1..65535")
    if not 1 <= args.runs <= 100:
        parser.error("--runs must be 1..100")
    if not 0 < args.start_timeout <= 600 or not 0 < args.stop_timeout <= 600:
        parser.error("timeouts must be in (0, 600] seconds")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    exe = args.command or find_understudy()
    if not exe:
        log("no `understudy` command: install the project (pip install -e .) in the venv")
        return 2
    command = [exe, "serve", "--no-worker", "--port", str(args.port)]
    if port_answers(args.port):
        log(f"port {args.port} is already in use on {HOST}; pick another with --port")
        return 2

    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        for number in range(1, args.runs + 1):
            log(f"run {number}/{args.runs}: {' '.join(command)}")
            log_path = Path(tmp) / f"run{number}.log"
            try:
                result = one_run(
                    number, command, args.port, args.start_timeout, args.stop_timeout, log_path
                )
            except StartupError as exc:
                log(f"error: run {number}: {exc}")
                return 1
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
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
