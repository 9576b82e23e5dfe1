"""`serve`'s worker runs on a thread and event loop of its own (app/worker.py
`WorkerThread`, app/cli.py `serve_beside`), as the tests' server runs it too: its jobs
never run on the API's loop, grading still ends runs, an outage restarts it on its
thread, and stopping leaves no thread behind."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from app.cli import loop_factory, serve_beside
from app.main import create_app
from app.settings import Settings
from app.worker import WORKER_THREAD_NAME, WorkerThread
from tests.conftest import TenantHandle, _ServerThread
from tests.faults.services import PrivateRedis
from tests.runs.test_run_flow import CHEN, book, start, wait_for
from tests.threaded_server import free_port

ROOT = Path(__file__).resolve().parent.parent
STOP_WITHIN_S = 15


class _Where(logging.Handler):
    """Where each record was emitted from: its thread and running loop, and its text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[int, asyncio.AbstractEventLoop | None, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.seen.append((threading.get_ident(), loop, record.getMessage()))


@contextmanager
def _watching(name: str, level: int) -> Iterator[_Where]:
    logger = logging.getLogger(name)
    where, before = _Where(), logger.level
    logger.addHandler(where)
    logger.setLevel(level)
    try:
        yield where
    finally:
        logger.removeHandler(where)
        logger.setLevel(before)


async def test_a_runs_grading_jobs_run_on_the_worker_thread_not_the_apis(
    tenant: TenantHandle, server_thread: _ServerThread
) -> None:
    worker = server_thread.worker
    assert server_thread.loop is not None and worker.loop is not None
    assert worker.loop is not server_thread.loop
    assert worker.thread.ident != server_thread.ident
    # arq logs each job it starts at INFO, from the loop that runs the job.
    with _watching("arq.worker", logging.INFO) as where:
        run = await start(tenant)
        await book(run, tenant, CHEN)
        final = await wait_for(tenant, run["id"], {"passed", "failed", "timed_out"})
    assert final["status"] == "passed", final
    jobs = [(ident, loop) for ident, loop, text in where.seen if run["id"] in text]
    assert jobs, "no job of the run was seen"
    assert {ident for ident, _ in jobs} == {worker.thread.ident}
    assert all(loop is worker.loop for _, loop in jobs)


def _own_queue(settings: Settings, redis_url: str | None = None) -> Settings:
    # A queue (and cron names) of the test's own: the session's worker takes none of it.
    return settings.clone(
        queue_name=f"{settings.queue_name}:own:{time.monotonic_ns()}",
        **({"redis_url": redis_url} if redis_url else {}),
    )


def test_stopping_the_api_stops_the_worker_and_leaves_no_thread(settings: Settings) -> None:
    before = set(threading.enumerate())
    own = _own_queue(settings)
    server = uvicorn.Server(
        uvicorn.Config(create_app(own), host="127.0.0.1", port=free_port(), log_level="warning")
    )
    worker = WorkerThread(own, loop_factory=loop_factory())
    loops: list[asyncio.AbstractEventLoop] = []
    stopping: list[asyncio.Event] = []

    async def serve() -> None:
        loops.append(asyncio.get_running_loop())
        stopping.append(asyncio.Event())
        await serve_beside(server, worker, stopping[0])

    api = threading.Thread(target=lambda: asyncio.run(serve()), name="api-under-test")
    api.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and api.is_alive(), "the server did not start"
        time.sleep(0.02)
    health = httpx.get(f"http://127.0.0.1:{server.config.port}/health", timeout=5)
    assert health.status_code == 200
    assert worker.thread.is_alive() and worker.thread.name == WORKER_THREAD_NAME
    assert worker.loop is not None and worker.loop is not loops[0]

    # What SIGTERM does in `serve`: set the API loop's stopping event.
    loops[0].call_soon_threadsafe(stopping[0].set)
    api.join(timeout=STOP_WITHIN_S)
    assert not api.is_alive() and not worker.thread.is_alive()
    assert worker.ended.result(timeout=0) is None
    assert worker.loop is None
    assert set(threading.enumerate()) - before == set()


def test_an_outage_restarts_the_worker_on_its_thread_and_is_logged(settings: Settings) -> None:
    redis = PrivateRedis()  # not started yet: the worker's Redis is away
    worker = WorkerThread(_own_queue(settings, redis.url), loop_factory=loop_factory())
    with _watching("understudy.worker", logging.WARNING) as where:
        worker.start()
        try:
            _wait_for_line(where, "worker_backend_unavailable")
            assert worker.thread.is_alive() and not worker.ended.done()
            redis.start()
            _wait_for_line(where, "worker_backend_back")
            assert worker.thread.is_alive() and not worker.ended.done()
        finally:
            # Stopped as it reconnects: where a lost cancellation once left it polling on
            # (app/job_queue.py `stop_worker` cancels again).
            worker.stop()
            worker.thread.join(timeout=STOP_WITHIN_S)
            redis.stop()
    assert not worker.thread.is_alive()
    assert worker.ended.result(timeout=0) is None
    lines = [text for ident, _, text in where.seen if ident == worker.thread.ident]
    assert sum("worker_backend_unavailable" in t for t in lines) == 1  # once, not per retry
    assert sum("worker_backend_back" in t for t in lines) == 1


def _wait_for_line(where: _Where, text: str, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not any(text in line for _, _, line in where.seen):
        assert time.monotonic() < deadline, f"no {text!r} logged: {where.seen}"
        time.sleep(0.05)


def test_serve_exits_cleanly_on_sigterm(settings: Settings, tmp_path: Path) -> None:
    """The real command: API and worker thread up, then SIGTERM: both stop, status 0."""
    own = _own_queue(settings)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "UNDERSTUDY_DATABASE_URL": str(own.database_url),
        "UNDERSTUDY_REDIS_URL": str(own.redis_url),
        "UNDERSTUDY_QUEUE_NAME": own.queue_name,
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
        "UNDERSTUDY_SECRET_KEY": str(own.secret_key),
        "UNDERSTUDY_SLOT_WEEKS": "1",
        "UNDERSTUDY_LOG_LEVEL": "info",
        "TZ": "UTC",
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "serve did not start"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=STOP_WITHIN_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text()
    assert status == 0, output
    assert "worker running in this process" in output
    assert "Traceback" not in output and "worker_thread_stuck" not in output, output
