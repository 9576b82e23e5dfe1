"""Helpers the service benchmarks share: scratch databases, queues, the server process,
logs, percentiles.

Imported by scripts/bench_grading.py, bench_webhooks.py and bench_evals.py (they run as
scripts, so this folder is on their import path).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import httpx
import redis

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


def clean_queue(redis_port: int, queue: str) -> int:
    """Delete this run's queue and the job keys still waiting in it."""
    client = redis.Redis(host=HOST, port=redis_port, socket_timeout=5)
    try:
        waiting: list[bytes] = client.zrange(queue, 0, 100_000)  # type: ignore[assignment]
        keys = [f"arq:job:{j.decode()}" for j in waiting] + [queue, f"{queue}:health-check"]
        removed: int = client.delete(*keys)  # type: ignore[assignment]
        return removed
    finally:
        client.close()


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
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
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
