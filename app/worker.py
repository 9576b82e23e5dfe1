"""The arq worker: background and periodic jobs.

Jobs now: roll every tenant's canonical Slots forward (daily, and at start-up) and
delete trace rows past their retention (daily). Later features add their jobs here.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from arq import cron
from arq.connections import RedisSettings
from arq.worker import Worker

from app.db import Database, open_database
from app.fhir import maintenance
from app.kit.clock import utcnow
from app.settings import Settings
from app.tenants import service as tenants_service
from app.tenants.directory import ensure_directory

log = logging.getLogger("understudy.worker")

TRACE_RETENTION = timedelta(days=7)
QUEUE_NAME = "understudy:queue"


def redis_settings(url: str) -> RedisSettings:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return RedisSettings(unix_socket_path=parts.path)
    return RedisSettings(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 6379,
        database=int(parts.path.lstrip("/") or 0),
        password=parts.password,
        username=parts.username,
    )


async def roll_directory(ctx: dict[str, Any]) -> int:
    """Keep every tenant's canonical Slots filled for the coming weeks."""
    db: Database = ctx["db"]
    settings: Settings = ctx["settings"]
    written = 0
    for tenant_id in await tenants_service.all_tenant_ids(db.pool):
        async with db.pool.acquire() as conn:
            written += await ensure_directory(conn, tenant_id, weeks=settings.slot_weeks)
    log.info("directory_rolled written=%d", written)
    return written


async def purge_trace(ctx: dict[str, Any]) -> int:
    db: Database = ctx["db"]
    status = await db.pool.execute(
        "DELETE FROM trace_call WHERE at < $1", utcnow() - TRACE_RETENTION
    )
    deleted = int(status.split()[-1])
    log.info("trace_purged deleted=%d", deleted)
    return deleted


async def refresh_statistics(ctx: dict[str, Any]) -> int:
    """Autovacuum may be off: keep planner statistics fresh and dead rows in check."""
    db: Database = ctx["db"]
    return len(await maintenance.refresh_statistics(db.pool, vacuum=True))


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx["settings"]
    assert settings.database_url is not None
    ctx["db"] = await open_database(settings.database_url, pool_size=4)


async def shutdown(ctx: dict[str, Any]) -> None:
    db: Database | None = ctx.get("db")
    if db is not None:
        await db.close()


def build_worker(settings: Settings, *, handle_signals: bool = True, burst: bool = False) -> Worker:
    assert settings.redis_url is not None
    return Worker(
        functions=[roll_directory, purge_trace, refresh_statistics],
        cron_jobs=[
            cron(roll_directory, hour={0}, minute={5}, run_at_startup=True, unique=True),
            cron(purge_trace, hour={3}, minute={17}, unique=True),
            cron(refresh_statistics, minute=set(range(0, 60, 5)), unique=True),
        ],
        redis_settings=redis_settings(settings.redis_url),
        queue_name=QUEUE_NAME,
        on_startup=startup,
        on_shutdown=shutdown,
        ctx={"settings": settings},
        handle_signals=handle_signals,
        burst=burst,
        keep_result=0,
    )
