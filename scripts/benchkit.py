"""Helpers the service benchmarks share: scratch databases, queues, logs, percentiles.

Imported by scripts/bench_grading.py, bench_webhooks.py and bench_evals.py (they run as
scripts, so this folder is on their import path).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import redis

HOST = "127.0.0.1"


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


def find_understudy() -> str | None:
    beside = Path(sys.executable).parent / "understudy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("understudy")


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def mark(ok: bool) -> str:
    return "✓" if ok else "✗"
