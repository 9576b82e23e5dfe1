"""generic_plans: the write statement's generic plans never leak to the searches that
run on the same pooled connection afterwards."""

from __future__ import annotations

from typing import cast

import asyncpg
import pytest

from app.db import Conn, Database, asyncpg_dsn, generic_plans
from app.settings import Settings

CUSTOM = "force_custom_plan"  # the pool's setting (app/db.py open_database)
GENERIC = "force_generic_plan"


async def _mode(conn: Conn) -> str:
    mode: str = await conn.fetchval("SHOW plan_cache_mode")
    return mode


async def test_outside_a_transaction_the_setting_is_reset_after_the_block(db: Database) -> None:
    async with db.pool.acquire() as conn:
        assert await _mode(conn) == CUSTOM
        async with generic_plans(conn):
            assert await _mode(conn) == GENERIC
        assert await _mode(conn) == CUSTOM
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with generic_plans(conn):
                await conn.fetchval("SELECT 1 / 0")
        assert await _mode(conn) == CUSTOM


async def test_inside_a_transaction_the_setting_is_local(db: Database) -> None:
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            async with generic_plans(conn):
                assert await _mode(conn) == GENERIC
            assert await _mode(conn) == CUSTOM  # later statements of the transaction
            with pytest.raises(asyncpg.DivisionByZeroError):
                # A savepoint, rolled back.
                async with conn.transaction(), generic_plans(conn):
                    await conn.fetchval("SELECT 1 / 0")
            assert await _mode(conn) == CUSTOM
            with pytest.raises(KeyError):
                async with generic_plans(conn):
                    raise KeyError("not the database's")
            assert await _mode(conn) == CUSTOM
        assert await _mode(conn) == CUSTOM
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with conn.transaction(), generic_plans(conn):
                await conn.fetchval("SELECT 1 / 0")
        assert await _mode(conn) == CUSTOM


class _ResetFails:
    """A connection whose RESET fails, as a broken one's would."""

    def __init__(self, conn: asyncpg.Connection[asyncpg.Record]) -> None:
        self.conn = conn

    def is_in_transaction(self) -> bool:
        return self.conn.is_in_transaction()

    def terminate(self) -> None:
        self.conn.terminate()

    async def execute(self, query: str) -> str:
        if query.startswith("RESET"):
            raise asyncpg.InterfaceError("the connection is gone")
        return await self.conn.execute(query)


async def test_a_connection_that_cannot_be_reset_is_closed(settings: Settings) -> None:
    assert settings.database_url is not None
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    async with generic_plans(cast(Conn, _ResetFails(conn))):
        assert await _mode(conn) == GENERIC
    assert conn.is_closed()  # terminated: never handed out with generic plans
