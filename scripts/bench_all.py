"""Every benchmark in one sitting, so their figures come from one day and one machine
state: these machines swing by a third from day to day, and a figure means something
only next to a reference measured in the same run (bench_fhir's ceiling, bench_mcp's
REST twin, bench_console's JSON twin).

    python scripts/bench_all.py [--only fhir,bulk,...] [--skip ...] [--out FILE.md]

The benchmarks that need a server already running (fhir, mcp, console) get one here:
`understudy serve --dev` on a scratch database and queue of its own (benchkit.server_env),
trace recording on for the development tenant, as the README's performance section
describes; it is stopped, its queue removed from Redis and its database dropped after
them. Every other benchmark starts and cleans up its own. Each one's output goes to a
log under a temporary folder (named at the end); its one-line summary (the last line it
printed) is collected. At the end: a table of benchmark, exit status, wall time and
summary, with the load average before and after, then bench_fhir's figures against
its ceiling per operation (req/s, p50 and p99 and their shares, measured in the same
run in interleaved rounds; from its JSON report), all also as Markdown to --out, and a
one-line summary last. `--fhir-args` passes options to bench_fhir (sizes, durations).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from benchkit import (
    HOST,
    BenchError,
    add_scratch_arguments,
    check_scratch_arguments,
    check_services,
    loadavg,
    log,
    scratch_server,
)

HERE = Path(__file__).resolve().parent
# Against the shared server, in this order (bench_fhir first: it wants a fresh process
# for its memory reading).
SERVED = ("fhir", "mcp", "console")
# Each starts its own server (or needs none): name -> (script, its arguments). The
# issue's own settings where the default is smaller (100k resources for the memory
# figure; verdicts at 5 tenants × 20 live runs, with the default settle and without; the
# board and home page at 50,000 runs; the cost of a grading pass).
OWN: dict[str, tuple[str, list[str]]] = {
    "bulk": ("bulk", ["--resources", "100000"]),
    "grading": ("grading", []),
    "grading_verdicts": ("grading", ["--verdicts", "--full"]),
    "webhooks": ("webhooks", []),
    "evals": ("evals", []),
    "evals_list": ("evals_list", []),
    "board": ("board", ["--full"]),
    "grading_cost": ("grading_cost", []),
    "startup": ("startup", []),
    "message_checks": ("message_checks", []),
}
ALL = (*SERVED, *OWN)
# Per benchmark, at most this long before it is stopped and reported as timed out.
TIMEOUT_S = 900.0


@dataclass
class Outcome:
    name: str
    status: str  # "ok", "exit N", "timed out", "not run: …"
    seconds: float
    summary: str
    log: Path | None


def last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else "(no output)"


def run_one(name: str, command: list[str], logs: Path, env: dict[str, str] | None) -> Outcome:
    log_path = logs / f"bench_{name}.log"
    log(f"bench_all: {name}: {' '.join(command)}")
    started = time.perf_counter()
    with log_path.open("wb") as out:
        try:
            proc = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=TIMEOUT_S,
                check=False,
            )
            status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = "timed out"
    seconds = time.perf_counter() - started
    outcome = Outcome(name, status, seconds, last_line(log_path), log_path)
    log(f"bench_all: {name}: {status} in {seconds:.0f} s — {outcome.summary}")
    return outcome


def script(name: str) -> list[str]:
    return [sys.executable, str(HERE / f"bench_{name}.py")]


def run_served(
    args: argparse.Namespace, names: Sequence[str], logs: Path, outcomes: list[Outcome]
) -> None:
    """The benchmarks that talk to a running server, against one started here; each
    one's outcome appended to `outcomes` as it ends."""
    exe = check_services(args)
    if exe is None:
        outcomes.extend(
            Outcome(n, "not run: services or port missing", 0.0, "", None) for n in names
        )
        return
    queue = f"understudy:bench-all:{os.getpid()}"
    command = [exe, "serve", "--dev", "--port", str(args.port)]
    with scratch_server(args, queue, "bench_all_", command, log_path=logs / "server.log") as server:
        trace = subprocess.run(
            [exe, "tenants", "trace", "dev", "on"],
            env=server.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if trace.returncode != 0:
            raise BenchError(f"could not turn trace on: {trace.stderr.strip()}")
        base = f"http://{HOST}:{args.port}"
        fhir = [*script("fhir"), f"{base}/api/fhir/r4", server.key, "--pid", str(server.pid)]
        commands = {
            "fhir": [*fhir, "--json-out", str(fhir_json(logs)), *shlex.split(args.fhir_args)],
            "mcp": [*script("mcp"), base, server.key],
            "console": [*script("console"), base, server.key],
        }
        for name in names:
            server.check_alive()
            outcomes.append(run_one(name, commands[name], logs, None))


def fhir_json(logs: Path) -> Path:
    return logs / "bench_fhir.json"


def ceiling_shares(path: Path) -> str:
    """bench_fhir's figures against its ceiling, per operation (from its --json-out), as
    Markdown; "" when it did not run or ran without the ceiling."""
    try:
        report: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return ""
    ceiling = report.get("ceiling")
    if not isinstance(ceiling, dict):
        return ""
    rounds = report.get("config", {}).get("rounds", 1)

    def pct(value: Any) -> str:
        return "-" if not isinstance(value, (int, float)) else f"{value * 100:.0f}%"

    rows = [
        f"FHIR API against its ceiling (scripts/reference_fhir_app.py), measured in the same "
        f"run in {rounds} interleaved round(s) per operation. Share: ours / ceiling for "
        "req/s, ceiling / ours for latency (100% = as fast as the ceiling).",
        "",
        "| operation | ours req/s (p50 / p99) | ceiling req/s (p50 / p99) | req/s share "
        "| p50 share | p99 share | by round | goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, ours in report.get("ops", {}).items():
        theirs = ceiling.get("ops", {}).get(name)
        shares = ceiling.get("shares", {}).get(name)
        if not isinstance(theirs, dict) or not isinstance(shares, dict):
            continue
        by_round = "/".join(f"{x * 100:.0f}" for x in shares.get("round_shares", [])) + "%"
        goal = f"≥ {pct(shares.get('goal'))}"
        if isinstance(shares.get("goal_max_p99_ms"), (int, float)):
            goal += f", p99 ≤ {shares['goal_max_p99_ms']:.0f} ms"
        goal += " met" if shares.get("meets_goal") else " missed"
        rows.append(
            f"| {name} | {ours['requests_per_s']:,.0f} ({ours['p50_ms']:.1f} / "
            f"{ours['p99_ms']:.1f} ms) | {theirs['requests_per_s']:,.0f} "
            f"({theirs['p50_ms']:.1f} / {theirs['p99_ms']:.1f} ms) | {pct(shares.get('share'))} "
            f"| {pct(shares.get('p50_share'))} | {pct(shares.get('p99_share'))} | {by_round} "
            f"| {goal} |"
        )
    for difference in ceiling.get("differences", []):
        rows.append(f"\nThe ceiling answered differently: {difference}")
    return "\n".join(rows) + "\n"


def markdown(outcomes: Sequence[Outcome], before: list[float], after: list[float]) -> str:
    day = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        f"Measured {day}; load average before {before}, after {after}.",
        "",
        "| benchmark | status | wall | summary |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        summary = o.summary.replace("|", "\\|")
        rows.append(f"| {o.name} | {o.status} | {o.seconds:.0f} s | {summary} |")
    return "\n".join(rows) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_scratch_arguments(parser, "understudy_bench_all", 0)
    parser.add_argument("--only", help=f"comma-separated, of: {','.join(ALL)}")
    parser.add_argument("--skip", help="comma-separated benchmarks to leave out")
    parser.add_argument("--out", type=Path, help="also write the table as Markdown here")
    parser.add_argument(
        "--fhir-args",
        default="",
        help='extra arguments for bench_fhir, e.g. "--patients 1000 --duration 3" for a '
        "quick check (the defaults are the README's sitting)",
    )
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    chosen = list(ALL) if not args.only else [n.strip() for n in args.only.split(",")]
    skipped = set() if not args.skip else {n.strip() for n in args.skip.split(",")}
    unknown = sorted((set(chosen) | skipped) - set(ALL))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}: choose from {', '.join(ALL)}")
    args.names = [n for n in ALL if n in chosen and n not in skipped]
    if not args.names:
        parser.error("nothing left to run")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TZ", "UTC")
    before = loadavg()
    outcomes: list[Outcome] = []
    logs = Path(tempfile.mkdtemp(prefix="bench_all_logs_"))
    served = [n for n in args.names if n in SERVED]
    if served:
        try:
            run_served(args, served, logs, outcomes)
        except BenchError as exc:
            log(f"bench_all: the shared server failed: {exc}")
            done = {o.name for o in outcomes}
            outcomes.extend(
                Outcome(n, "not run: the shared server failed", 0.0, "", None)
                for n in served
                if n not in done
            )
    for name in (n for n in args.names if n in OWN):
        bench, extra = OWN[name]
        outcomes.append(run_one(name, [*script(bench), *extra], logs, None))
    after = loadavg()
    table = markdown(outcomes, before, after)
    if "fhir" in served:
        shares = ceiling_shares(fhir_json(logs))
        if shares:
            table += "\n" + shares
    print(table)
    print(f"logs: {logs}")
    if args.out is not None:
        args.out.write_text(table)
    ok = sum(o.status == "ok" for o in outcomes)
    print(
        f"bench_all: {ok} of {len(outcomes)} benchmarks ran to the end "
        f"(load {before[0]:.2f} -> {after[0]:.2f}); each one's own summary is in the table"
    )
    return 0 if ok == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
