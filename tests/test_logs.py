"""What `serve` and `worker` print: failed and slow jobs get one line each by default;
arq's per-job lines appear only at debug."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker

from app.logs import SLOW_JOB_SECONDS, configure_logging, timed_jobs
from app.settings import Settings

REDIS_URL = os.environ.get("UNDERSTUDY_TEST_REDIS", "redis://127.0.0.1:6379/15")


async def quick(ctx: dict[str, Any]) -> str:
    return "ok"


async def slow(ctx: dict[str, Any]) -> str:
    await asyncio.sleep(SLOW_JOB_SECONDS + 0.1)
    return "ok"


async def broken(ctx: dict[str, Any]) -> str:
    raise RuntimeError("the database went away")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root, arq_worker = logging.getLogger(), logging.getLogger("arq.worker")
    saved = (root.level, arq_worker.level, list(arq_worker.filters))
    yield
    root.setLevel(saved[0])
    arq_worker.setLevel(saved[1])
    arq_worker.filters[:] = saved[2]


async def _run_jobs() -> None:
    queue = f"understudy:test-logs:{uuid.uuid4().hex}"
    redis = RedisSettings.from_dsn(REDIS_URL)
    pool = await create_pool(redis, default_queue_name=queue)
    try:
        for name in ("quick", "slow", "broken"):
            await pool.enqueue_job(name, _queue_name=queue)
        worker = Worker(
            functions=timed_jobs([quick, slow, broken]),
            redis_settings=redis,
            queue_name=queue,
            burst=True,
            handle_signals=False,
            max_tries=1,
            keep_result=0,
            poll_delay=0.05,
        )
        try:
            await worker.main()
        finally:
            await worker.close()
    finally:
        await pool.aclose()


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name in ("arq.worker", "understudy.jobs")]


async def test_default_level_prints_failed_and_slow_jobs_only(
    caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    configure_logging("info")
    with caplog.at_level(logging.INFO):
        await _run_jobs()
    jobs = [r for r in _lines(caplog) if r.name == "understudy.jobs"]
    messages = [r.getMessage() for r in jobs]
    assert len(messages) == 2, messages
    failed = next(r for r in jobs if "job_failed" in r.getMessage())
    assert "job=broken" in failed.getMessage()
    assert "RuntimeError: the database went away" in failed.getMessage()
    assert not failed.exc_info  # one line, no traceback below debug
    assert any("job_slow job=slow" in m for m in messages)
    assert not any("quick" in m for m in messages)
    # arq's own per-job lines (→ / ← / its multi-line failure) are not shown.
    assert [r for r in _lines(caplog) if r.name == "arq.worker" and "%6.2fs" in str(r.msg)] == []


async def test_debug_level_adds_a_line_per_job(
    caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    configure_logging("debug")
    with caplog.at_level(logging.INFO):
        await _run_jobs()
    per_job = [r.getMessage() for r in _lines(caplog) if r.name == "arq.worker"]
    assert any("→" in m and "quick" in m for m in per_job), per_job
    assert any("←" in m and "quick" in m for m in per_job), per_job
    failed = next(r for r in _lines(caplog) if "job_failed" in r.getMessage())
    assert failed.exc_info  # the traceback, at debug


def test_log_level_setting_is_checked() -> None:
    assert Settings(log_level="DEBUG").log_level == "debug"
    with pytest.raises(ValueError, match="log_level"):
        Settings(log_level="loud")
    with pytest.raises(ValueError, match="log level"):
        configure_logging("loud")
