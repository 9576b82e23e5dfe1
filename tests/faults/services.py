"""A PostgreSQL and a Redis of the fault suite's own, and Understudy processes on them,
so a case can stop, restart or kill any of them without touching the shared test
services: Debian's PostgreSQL binaries in a cluster under a temporary directory (run as
the `postgres` user when we are root), `redis-server` without persistence, and
`python -m app.cli serve` / `worker` as child processes."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.threaded_server import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    assert path, f"PostgreSQL's {name} is not installed"
    return path


def _wait_port(port: int, what: str, timeout: float = START_TIMEOUT_S) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not open port {port} in {timeout:.0f} s")


@dataclass
class PrivatePostgres:
    directory: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        command = [_pg_bin("pg_ctl"), "-D", str(self.directory / "data"), *args]
        subprocess.run(_as_postgres(command), check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        initdb = [_pg_bin("initdb"), "-D", str(self.directory / "data"), "-A", "trust"]
        subprocess.run(
            _as_postgres([*initdb, "-U", "postgres", "--no-sync"]),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        log = str(self.directory / "postgres.log")
        self._ctl("-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass
class PrivateRedis:
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--bind", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, "redis-server", 10)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@dataclass
class Process:
    """One Understudy process (`serve` or `worker`), its output in `log`."""

    command: list[str]
    env: dict[str, str]
    log: Path
    port: int | None = None
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "app.cli", *self.command],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        if self.port is None:
            return
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.alive(), self.output()[-3000:]
            assert time.monotonic() < deadline, f"{self.command} did not start"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no cleanup, what a crash does."""
        if self.popen is not None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def stop_all(*processes: Process | None) -> None:
    """Stop each process that was started, in the order given."""
    for process in processes:
        if process is not None:
            process.stop()


def understudy_env(
    database_url: str, redis_url: str, data_dir: Path, **extra: str
) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "UNDERSTUDY_DATABASE_URL": database_url,
        "UNDERSTUDY_REDIS_URL": redis_url,
        "UNDERSTUDY_QUEUE_NAME": f"understudy:faults:{os.getpid()}",
        "UNDERSTUDY_DATA_DIR": str(data_dir),
        "UNDERSTUDY_LOG_LEVEL": "warning",
        # Quick ticks, so a case sees what the sweeps relay within seconds.
        "UNDERSTUDY_GRADE_INTERVAL_SECONDS": "2",
        "UNDERSTUDY_SETTLE_SECONDS": "1",
        "UNDERSTUDY_WEBHOOK_RETRY_SECONDS": "[1, 1, 2, 5]",
        "UNDERSTUDY_WEBHOOK_TIMEOUT_SECONDS": "5",
        **extra,
    }
