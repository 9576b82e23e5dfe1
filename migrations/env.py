"""Alembic environment, async (asyncpg).

The URL is, in order: `config.attributes["database_url"]` (set by `understudy migrate`
and `serve`), `UNDERSTUDY_DATABASE_URL`, then the local server on 127.0.0.1 that
`serve` would use.
"""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import sqlalchemy_url
from app.models import Base
from app.settings import Settings

config = context.config
if config.config_file_name is not None and not config.attributes.get("skip_logging"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return str(url)
    settings = Settings()
    if settings.database_url:
        return settings.database_url
    return (
        f"postgresql://postgres@127.0.0.1:{settings.local_postgres_port}/{settings.local_database}"
    )


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(sqlalchemy_url(_url()))
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=sqlalchemy_url(_url()), target_metadata=target_metadata, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(_run_async())
