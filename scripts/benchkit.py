"""Helpers the benchmarks share: scratch databases and queues (and removing what a run
left in Redis), the server process, a webhook receiver, /proc readings, percentiles and
summaries, the report's table, JSON and one-line summary.

Imported by scripts/bench_*.py (they run as scripts, so this folder is on their import
path).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

try:
    import asyncpg
    import httpx
    import orjson
    import redis
except ImportError as _missing:  # pragma: no cover - environment hint
    sys.exit(
        f"the benchmarks need the project installed ({_missing}): run them from the "
        "project's virtualenv (. .venv/bin/activate)"
    )

HOST = "127.0.0.1"
TENANT = "dev"  # the development tenant `serve --dev` prints a key for


class BenchError(Exception):
    """A step failed; the message says which and why."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(values_s: Sequence[float], unit: str = "ms") -> dict[str, float]:
    """n, p50/p90/p99, mean, min and max of durations given in seconds, in `unit` (ms
    or s) under keys such as `p50_ms`; {} without samples."""
    if not values_s:
        return {}
    scale, digits = (1000.0, 2) if unit == "ms" else (1.0, 3)
    xs = [v * scale for v in values_s]
    figures = {f"p{q}": percentile(xs, q) for q in (50, 90, 99)}
    figures |= {"mean": statistics.fmean(xs), "min": min(xs), "max": max(xs)}
    return {"n": len(xs), **{f"{k}_{unit}": round(v, digits) for k, v in figures.items()}}


def figure(value: float) -> str:
    """A measurement for the summary line: 6.1, 70, 1234."""
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def verdict(met: Sequence[bool]) -> str:
    if len(met) == 1:
        return "goal met" if met[0] else "goal missed"
    return f"all {len(met)} goals met" if all(met) else f"{sum(met)} of {len(met)} goals met"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def admin_dsn(pg_port: int) -> str:
    return f"postgresql://postgres@{HOST}:{pg_port}/postgres"


def database_url(pg_port: int, name: str) -> str:
    return f"postgresql://postgres@{HOST}:{pg_port}/{name}"


async def _recreate(pg_port: int, name: str, create: bool) -> None:
    conn = await asyncpg.connect(admin_dsn(pg_port), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def recreate_database(pg_port: int, name: str) -> None:
    asyncio.run(_recreate(pg_port, name, create=True))


def drop_database(pg_port: int, name: str) -> None:
    asyncio.run(_recreate(pg_port, name, create=False))


# The arq keys of one job: its payload, the in-progress mark, the retry count, the result.
ARQ_JOB_PREFIXES = ("arq:job:", "arq:in-progress:", "arq:retry:", "arq:result:")


def clean_queue(
    redis_port: int,
    queue: str,
    *,
    tenant_ids: Iterable[str] = (),
    run_ids: Iterable[str] = (),
) -> int:
    """Delete what a benchmark's server left in Redis and nothing else: its queue, the
    queue's health-check key and the arq keys (job, in-progress, retry, result) of the
    jobs it enqueued: those still waiting in the queue, the cron ticks named after the
    queue (`cron:<function>:<queue>:<ms>`), the webhook drains of its tenants
    (`deliver:<tenant id>:<window>`) and the gradings of its runs (`grade:<run id>:
    <window>`), the tenants and runs being those of its scratch database."""
    tenants = set(tenant_ids)
    runs = set(run_ids)
    client = redis.Redis(host=HOST, port=redis_port, socket_timeout=5)
    try:
        waiting_ids: list[bytes] = client.zrange(queue, 0, -1)  # type: ignore[assignment]
        waiting = {j.decode() for j in waiting_ids}

        def ours(job_id: str) -> bool:
            if job_id in waiting:
                return True
            kind, _, rest = job_id.partition(":")
            owner = rest.rsplit(":", 1)[0]  # without the window / the tick's time
            if kind == "cron":
                return owner.partition(":")[2] == queue  # function names have no colon
            if kind == "deliver":
                return owner in tenants
            if kind == "grade":
                return owner in runs
            return False

        keys = [queue, f"{queue}:health-check"]
        for raw in client.scan_iter(match="arq:*", count=1000):
            key = raw.decode()
            for prefix in ARQ_JOB_PREFIXES:
                if key.startswith(prefix) and ours(key[len(prefix) :]):
                    keys.append(key)
                    break
        removed = 0
        for start in range(0, len(keys), 500):
            count: int = client.delete(*keys[start : start + 500])  # type: ignore[assignment]
            removed += count
        kinds = Counter(k.split(":")[1] for k in keys[2:])
        log(f"Redis: removed {removed} key(s) of queue {queue} ({dict(kinds)} of its jobs)")
        return removed
    finally:
        client.close()


async def _scratch_ids(pg_port: int, name: str) -> tuple[list[str], list[str]]:
    """The tenant and run ids of a scratch database (none when it is gone or empty)."""
    try:
        conn = await asyncpg.connect(database_url(pg_port, name), timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        log(f"warning: cannot read the scratch database {name}: {exc}")
        return [], []
    try:
        tenants = [str(r["id"]) for r in await conn.fetch("SELECT id FROM tenant")]
        runs = [str(r["id"]) for r in await conn.fetch("SELECT id FROM run")]
    except asyncpg.UndefinedTableError:  # never migrated: nothing ran
        return [], []
    finally:
        await conn.close()
    return tenants, runs


def clean_up(args: argparse.Namespace, queue: str) -> None:
    """After the server stopped: remove this run's keys from Redis (its scratch database
    names its tenants and runs), then drop the scratch database unless --keep."""
    tenants, runs = asyncio.run(_scratch_ids(args.pg_port, args.database))
    try:
        clean_queue(args.redis_port, queue, tenant_ids=tenants, run_ids=runs)
    except redis.RedisError as exc:
        log(f"warning: could not clean Redis queue {queue}: {exc}")
    if args.keep:
        log(f"kept the scratch database: {database_url(args.pg_port, args.database)}")
    else:
        drop_database(args.pg_port, args.database)
        log(f"dropped the scratch database {args.database}")


@contextlib.contextmanager
def scratch(args: argparse.Namespace, queue: str, prefix: str) -> Iterator[Path]:
    """The scratch database created afresh and a temporary directory for the run; on the
    way out (the server stopped by then) Redis cleaned and the database dropped."""
    log(f"scratch database {args.database}: dropping and creating it")
    recreate_database(args.pg_port, args.database)
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
    finally:
        clean_up(args, queue)


@contextlib.contextmanager
def scratch_server(
    args: argparse.Namespace,
    queue: str,
    prefix: str,
    command: list[str],
    *,
    log_path: Path | None = None,
    **overrides: str,
) -> Iterator[Server]:
    """`command` (an `understudy serve …`) on the scratch database and `queue`
    (`scratch`, `server_env` with `overrides`), started and answering; stopped on the way
    out, before Redis is cleaned and the database dropped. Its log goes to `log_path`, or
    the scratch folder."""
    with scratch(args, queue, prefix) as tmp:
        env = server_env(args, tmp / "data", queue, **overrides)
        server = Server(command, env, log_path or tmp / "server.log")
        try:
            server.start(args.port, args.start_timeout)
            yield server
        finally:
            stop_all([server], args.stop_timeout)


def find_executable(name: str) -> str | None:
    """A command installed beside this Python (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def find_understudy() -> str | None:
    return find_executable("understudy")


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def print_rows(rows: Sequence[tuple[str, str, str, str]]) -> None:
    """The report's table: measure, goal, measured, ✓/✗."""
    header = ("measure", "goal", "measured", "ok")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in (0, 1, 2)]
    for row in [header, *rows]:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")


def emit(report: dict[str, Any], json_out: Path | None, summary: str) -> None:
    """The report as JSON (also to `json_out`), then the one-line summary, last."""
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if json_out:
        json_out.write_text(text + "\n")
    print(summary, flush=True)


def run_report(
    report: dict[str, Any],
    json_out: Path | None,
    measure: Callable[[], None],
    table: Callable[[dict[str, Any]], None],
    summary: Callable[[dict[str, Any], str | None], str],
) -> int:
    """`measure()` fills `report`; a BenchError it raises is logged and makes the exit
    status 1. Then the table (when measured), the JSON and the one-line summary, last
    (`summary(report, error)`). The load average and CPUs are recorded around it."""
    report |= {"cpus": os.cpu_count(), "loadavg_start": loadavg()}
    error: str | None = None
    try:
        measure()
    except BenchError as exc:
        log(f"error: {exc}")
        error = str(exc).splitlines()[0]
    report["loadavg_end"] = loadavg()
    if error is None:
        table(report)
    emit(report, json_out, summary(report, error))
    return 0 if error is None else 1


def run_fast(main: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run on uvloop when it is installed (as the server runs)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


# --------------------------------------------------------------------------- HTTP


def expect(response: httpx.Response, status: int, what: str) -> Any:
    """The JSON body of `response`, which must have `status`."""
    if response.status_code != status:
        raise BenchError(
            f"{what}: HTTP {response.status_code} (expected {status}): {response.text[:2000]}"
        )
    return response.json()


def local_url(url: str, base: str) -> str:
    """Only 127.0.0.1: every URL the server hands back must be under our base."""
    if not url.startswith(base + "/"):
        raise BenchError(f"the server answered a URL outside {base}: {url!r}")
    return url


# --------------------------------------------------------------------------- /proc


def proc_status_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in KiB ({} when it is gone)."""
    values: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return values
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


def stat_fields(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return []
    return text.rsplit(")", 1)[-1].split()


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def descendants(pid: int) -> list[int]:
    """The processes below `pid`, nearest first."""
    children: dict[int, list[int]] = {}
    for child in all_pids():
        fields = stat_fields(child)
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(child)
    found: list[int] = []
    queue = list(children.get(pid, []))
    while queue and len(found) < 10_000:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


# --------------------------------------------------------------------------- server


def server_env(
    args: argparse.Namespace, data_dir: Path, queue: str, **overrides: str
) -> dict[str, str]:
    """The environment of a benchmark's `understudy serve`: the local servers named by
    --pg-port/--redis-port/--database, a scratch data dir and queue, limits raised;
    `overrides` are further UNDERSTUDY_* settings (e.g. UNDERSTUDY_MAX_LIVE_RUNS="200")."""
    env = dict(os.environ)
    for name in ("UNDERSTUDY_DATABASE_URL", "UNDERSTUDY_REDIS_URL", "UNDERSTUDY_PUBLIC_URL"):
        env.pop(name, None)
    env.update(
        {
            "TZ": "UTC",
            "UNDERSTUDY_LOCAL_POSTGRES_PORT": str(args.pg_port),
            "UNDERSTUDY_LOCAL_REDIS_PORT": str(args.redis_port),
            "UNDERSTUDY_LOCAL_DATABASE": args.database,
            "UNDERSTUDY_DATA_DIR": str(data_dir),
            "UNDERSTUDY_QUEUE_NAME": queue,
            "UNDERSTUDY_DAILY_WRITE_QUOTA": "10000000",
            "UNDERSTUDY_WEBHOOK_ALLOW_PRIVATE": "true",
            "UNDERSTUDY_DEV_TENANT": TENANT,
            "UNDERSTUDY_HOST": HOST,
            "UNDERSTUDY_LOG_LEVEL": "warning",
            **overrides,
        }
    )
    return env


class Process:
    """A child process in its own session; stopped by SIGTERM (SIGKILL to its own
    process group after --stop-timeout)."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_path: Path):
        self.name = name
        self.command = command
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        return self.proc

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise BenchError(
                f"the {self.name} exited with {self.proc.returncode}; log tail:\n"
                + log_tail(self.log_path)
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the process so far (all its threads)."""
        fields = stat_fields(self.pid)
        if len(fields) < 13:
            return (float("nan"), float("nan"))
        ticks = os.sysconf("SC_CLK_TCK")
        # After the command name: state is field 3, utime 14 and stime 15 (1-based).
        return (int(fields[11]) / ticks, int(fields[12]) / ticks)

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process so far."""
        return sum(self.cpu())

    def runqueue_wait_s(self) -> float:
        """Seconds the process's threads were runnable but waiting for a CPU (from
        /proc/PID/task/*/schedstat): other work on the machine shows up here."""
        total = 0
        try:
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += int((task / "schedstat").read_text().split()[1])
        except OSError:
            return float("nan")
        return total / 1e9

    def stop(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(f"{self.name} pid {self.proc.pid} ignored SIGTERM; killing its process group")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return self.proc.returncode


class Server(Process):
    """`understudy serve --dev …`; ready when it printed the dev key and /health answers."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path) -> None:
        super().__init__("server", command, env, log_path)
        self.key = ""
        self.ready_s = 0.0

    def start(self, port: int, timeout: float) -> None:
        started = time.perf_counter()
        self.spawn()
        deadline = started + timeout
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.perf_counter() < deadline:
                self.check_alive()
                if not self.key:
                    for line in self.log_path.read_text(errors="replace").splitlines():
                        if "API key: " in line:
                            self.key = line.split("API key: ", 1)[1].strip()
                if self.key:
                    try:
                        if client.get(f"http://{HOST}:{port}/health").status_code == 200:
                            self.ready_s = time.perf_counter() - started
                            return
                    except httpx.HTTPError:
                        pass
                time.sleep(0.05)
        raise BenchError(
            f"the server did not answer /health with a key within {timeout:.0f} s; log tail:\n"
            + log_tail(self.log_path)
        )


def stop_all(processes: Sequence[Process], timeout: float) -> None:
    """Stop the processes, last started first; a log tail for any that did not exit 0."""
    for process in reversed(processes):
        code = process.stop(timeout)
        log(f"{process.name} stopped (exit {code})")
        if code not in (0, None):
            log(f"{process.name} log tail:\n" + log_tail(process.log_path))


# --------------------------------------------------------------------------- command line


def scratch_parser(
    description: str, example: str, database: str, port: int
) -> argparse.ArgumentParser:
    """A parser with the options of a benchmark that serves on a scratch database and
    queue (add_scratch_arguments); `example` is the command line of the epilog."""
    parser = argparse.ArgumentParser(description=description, epilog=f"Example: {example}")
    add_scratch_arguments(parser, database, port)
    return parser


def add_scratch_arguments(parser: argparse.ArgumentParser, database: str, port: int) -> None:
    """The options of a benchmark that serves on a scratch database and queue."""
    parser.add_argument(
        "--port", type=int, default=port, help=f"port to serve on ({port}; 0: a free one)"
    )
    parser.add_argument("--pg-port", type=int, default=5432, help="local PostgreSQL port")
    parser.add_argument("--redis-port", type=int, default=6379, help="local Redis port")
    parser.add_argument(
        "--database",
        default=database,
        help=f"scratch database (dropped and created at start; default {database})",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument(
        "--start-timeout", type=float, default=90.0, help="seconds to wait for the server (90)"
    )
    parser.add_argument(
        "--stop-timeout", type=float, default=30.0, help="seconds to wait after SIGTERM (30)"
    )
    parser.add_argument("--command", help="the understudy executable (default: the venv's)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON report here")


def check_scratch_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not all(1 <= p <= 65535 for p in (args.pg_port, args.redis_port)):
        parser.error("--pg-port and --redis-port must be 1..65535")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be 0..65535 (0: a free one)")
    if not args.database.replace("_", "").isalnum() or not args.database[0].isalpha():
        parser.error("--database must be letters, digits and underscores")
    if args.database in ("postgres", "understudy", "template0", "template1"):
        parser.error(f"--database {args.database!r} is not a scratch database")
    if not 0 < args.start_timeout <= 600 or not 0 < args.stop_timeout <= 600:
        parser.error("--start-timeout and --stop-timeout must be in (0, 600] seconds")


def check_services(args: argparse.Namespace) -> str | None:
    """The understudy command, once PostgreSQL and Redis answer and --port is free (a
    free one picked for 0); None after saying what is missing (exit status 2)."""
    exe = args.command or find_understudy()
    if not exe:
        log("no `understudy` command: install the project (pip install -e .) in the venv")
        return None
    for name, port in (("PostgreSQL", args.pg_port), ("Redis", args.redis_port)):
        if not port_answers(port):
            log(f"{name} does not answer on {HOST}:{port} (scripts/ensure-services starts it)")
            return None
    if args.port == 0:
        args.port = free_port()
    elif port_answers(args.port):
        log(f"port {args.port} is already in use on {HOST}; pick another with --port")
        return None
    return exe


# --------------------------------------------------------------------------- receiver


# A webhook receiver's handler: (body, headers with lower-case names) -> HTTP status.
Handler = Callable[[bytes, dict[str, str]], int]

RECEIVER_MAX_HEADER_BYTES = 64 * 1024
RECEIVER_MAX_BODY_BYTES = 4 * 1024 * 1024
RECEIVER_MAX_REQUESTS_PER_CONNECTION = 1_000_000


class Receiver:
    """A minimal HTTP/1.1 server on 127.0.0.1 for webhook deliveries, in the caller's
    event loop: keep-alive, Content-Length bodies (what httpx sends; chunked answers
    400), the request head and body bounded (431 and 413), `handler(body, headers)`
    called as soon as the body is read (its status answered, 405 for other methods
    than POST), and a close that stops listening, closes kept-alive connections and
    waits for their handlers."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_header_bytes: int = RECEIVER_MAX_HEADER_BYTES,
        max_body_bytes: int = RECEIVER_MAX_BODY_BYTES,
    ) -> None:
        self.handler = handler
        self.max_header_bytes = max_header_bytes
        self.max_body_bytes = max_body_bytes
        self.server: asyncio.Server | None = None
        self.port = 0
        self.requests = 0  # handed to the handler
        self.errors = 0  # refused or unreadable
        self._writers: set[asyncio.StreamWriter] = set()
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(
            self._connection, HOST, port, limit=self.max_header_bytes
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self._writers):
            writer.close()  # a handler waiting for the next request sees EOF and returns
        if self._connections:
            await asyncio.wait(set(self._connections), timeout=5)
        if self.server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        self._writers.add(writer)
        try:
            for _ in range(RECEIVER_MAX_REQUESTS_PER_CONNECTION):
                if not await self._one_request(reader, writer):
                    return
        except ConnectionError:
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 5)

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read and answer one request; False when the connection is to be closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self.errors += 1
            return False  # closed between requests (or mid-head)
        except asyncio.LimitOverrunError:
            self.errors += 1
            await self._answer(writer, 431, close=True)
            return False
        lines = head.decode("latin-1").split("\r\n")
        request = lines[0].split(" ")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        close = headers.get("connection", "").lower() == "close"
        length_text = headers.get("content-length", "0")
        if len(request) != 3 or "transfer-encoding" in headers or not length_text.isdigit():
            self.errors += 1
            await self._answer(writer, 400, close=True)
            return False
        length = int(length_text)
        if length > self.max_body_bytes:
            self.errors += 1
            await self._answer(writer, 413, close=True)
            return False
        try:
            body = await reader.readexactly(length) if length else b""
        except asyncio.IncompleteReadError:
            self.errors += 1
            return False
        if request[0] == "POST":
            self.requests += 1
            status = self.handler(body, headers)
        else:
            status = 405
        await self._answer(writer, status, close=close)
        return not close

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, *, close: bool) -> None:
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        length = "" if status == 204 else "Content-Length: 0\r\n"
        extra = "Connection: close\r\n" if close else ""
        writer.write(f"HTTP/1.1 {status} {reason}\r\n{length}{extra}\r\n".encode("latin-1"))
        await writer.drain()


class ThreadedReceiver:
    """A Receiver in a thread of its own with its own event loop, so that a busy caller's
    loop does not delay receipts; `handler` runs in that thread."""

    def __init__(self, handler: Handler, port: int = 0) -> None:
        self.handler = handler
        self.port = port
        self.receiver: Receiver | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="receiver", daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise BenchError("the receiver did not start")
        if self._failed is not None:
            raise BenchError(f"the receiver did not start: {self._failed}")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start(), or lost at exit
            self._failed = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.receiver = Receiver(self.handler)
        await self.receiver.start(self.port)
        self.port = self.receiver.port
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.receiver.close()
