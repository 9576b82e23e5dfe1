"""Log set-up for the API and the worker.

By default (`info`) a person running `serve` sees the start-up lines, warnings, errors and
one line per job that failed or took longer than `SLOW_JOB_SECONDS`; arq's own two lines
per job (cron ticks included, several a second) appear only at `debug`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from app.outage import OutageLog, is_outage

LEVELS = ("critical", "error", "warning", "info", "debug")
# A job slower than this gets a line of its own: grading and deliveries take milliseconds.
SLOW_JOB_SECONDS = 1.0
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

log = logging.getLogger("understudy.jobs")

R = TypeVar("R")


class _ArqJobLines(logging.Filter):
    """Drops arq's per-job failure lines below debug: `timed_job` writes one line instead
    (arq's comes with a traceback of many lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and "! %s failed" in record.msg)


_ARQ_FILTER = _ArqJobLines()
# Whether a failed job's line carries its traceback: only when configured for debug.
_tracebacks = {"on": False}


def configure_logging(level: str) -> None:
    """Root handler at `level`; arq's job log only at debug."""
    name = level.strip().lower()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    numeric = logging.getLevelName(name.upper())
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format=FORMAT)
    root.setLevel(numeric)
    for quiet in ("alembic", "pgserver", "httpx", "mcp"):
        logging.getLogger(quiet).setLevel(max(numeric, logging.WARNING))
    # While PostgreSQL is away asyncpg's pool warns with a traceback at every reconnect;
    # the outage is logged once by app/outage.py instead.
    logging.getLogger("asyncpg.pool").setLevel(max(numeric, logging.ERROR))
    arq_worker = logging.getLogger("arq.worker")
    _tracebacks["on"] = numeric <= logging.DEBUG
    if numeric <= logging.DEBUG:
        arq_worker.setLevel(logging.DEBUG)
        arq_worker.removeFilter(_ARQ_FILTER)
    else:
        arq_worker.setLevel(max(numeric, logging.WARNING))
        arq_worker.addFilter(_ARQ_FILTER)


Job = Callable[..., Coroutine[Any, Any, R]]


_JOB_OUTAGE = OutageLog(logging.getLogger("understudy.worker"), "job_backend")


def timed_job(job: Job[R]) -> Job[R]:
    """One line for a job that fails (with its traceback only at debug) or runs slow."""

    @functools.wraps(job)
    async def run(*args: Any, **kwargs: Any) -> R:
        started = time.perf_counter()
        try:
            result = await job(*args, **kwargs)
        except Exception as exc:
            if is_outage(exc):
                # PostgreSQL or Redis away: said once, not per job; the sweeps redo it.
                _JOB_OUTAGE.failed(exc, "jobs are skipped until it is back")
                return None  # type: ignore[return-value]
            log.error(
                "job_failed job=%s seconds=%.2f error=%s: %s",
                job.__name__,
                time.perf_counter() - started,
                type(exc).__name__,
                exc,
                exc_info=_tracebacks["on"],
            )
            raise
        _JOB_OUTAGE.ok()
        elapsed = time.perf_counter() - started
        if elapsed > SLOW_JOB_SECONDS:
            log.warning("job_slow job=%s seconds=%.2f", job.__name__, elapsed)
        return result

    return run


def timed_jobs(jobs: list[Job[Any]]) -> list[Job[Any]]:
    return [timed_job(job) for job in jobs]
