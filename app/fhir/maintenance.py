"""Planner statistics and vacuuming for the FHIR tables.

Search plans depend on fresh statistics: right after a bulk load, stale ones make
PostgreSQL filter a whole tenant through a btree instead of using the GIN keys (60 ms
instead of 1 ms). Autovacuum may be off (it is on this project's machines), so the API
analyzes after bulk writes and the worker sweeps periodically.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg

from app.fhir import maintenance_repository

log = logging.getLogger("understudy.maintenance")

TABLES = ("fhir_resource", "fhir_date", "fhir_history", "trace_call")
# Re-analyze a table once this share of its rows (plus a floor) changed since the last.
ANALYZE_SHARE = 0.1
ANALYZE_FLOOR = 500
VACUUM_SHARE = 0.2
VACUUM_FLOOR = 5_000
# The API checks after this many writes, at most this often.
WRITES_BETWEEN_CHECKS = 1_000
MIN_SECONDS_BETWEEN_CHECKS = 5.0


async def refresh_statistics(pool: asyncpg.Pool, *, vacuum: bool = False) -> list[str]:
    """ANALYZE (and optionally VACUUM) our tables whose statistics drifted."""
    done: list[str] = []
    for table in await maintenance_repository.table_statistics(pool, TABLES):
        if vacuum and table.dead_rows > VACUUM_FLOOR + VACUUM_SHARE * table.live_rows:
            await maintenance_repository.analyze(pool, table.name, vacuum=True)
            done.append(f"vacuum {table.name}")
        elif table.modified_since_analyze > ANALYZE_FLOOR + ANALYZE_SHARE * table.live_rows:
            await maintenance_repository.analyze(pool, table.name)
            done.append(f"analyze {table.name}")
    if done:
        log.info("statistics_refreshed %s", ", ".join(done))
    return done


class AutoAnalyze:
    """Counts writes in this process and refreshes statistics in the background."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._pending = 0
        self._last = 0.0
        self._task: asyncio.Task[list[str]] | None = None

    def note_writes(self, count: int) -> None:
        self._pending += count
        if self._pending >= WRITES_BETWEEN_CHECKS and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name="auto-analyze")

    async def _run(self) -> list[str]:
        # Loops so that writes arriving while we wait or work get a trailing check.
        done: list[str] = []
        while self._pending >= WRITES_BETWEEN_CHECKS:
            wait = self._last + MIN_SECONDS_BETWEEN_CHECKS - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._pending = 0
            self._last = time.monotonic()
            try:
                done += await refresh_statistics(self._pool)
            except Exception:
                log.exception("auto_analyze_failed")
        return done

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
