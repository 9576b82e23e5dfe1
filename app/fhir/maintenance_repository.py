"""The SQL of planner maintenance: the statistics of our tables, ANALYZE and VACUUM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True, slots=True)
class TableStatistics:
    name: str
    live_rows: int
    dead_rows: int
    modified_since_analyze: int


async def table_statistics(pool: asyncpg.Pool, tables: Sequence[str]) -> list[TableStatistics]:
    rows = await pool.fetch(
        """SELECT relname, n_live_tup, n_dead_tup, n_mod_since_analyze
        FROM pg_stat_user_tables WHERE relname = ANY($1::text[])""",
        list(tables),
    )
    return [
        TableStatistics(r["relname"], r["n_live_tup"], r["n_dead_tup"], r["n_mod_since_analyze"])
        for r in rows
    ]


async def analyze(pool: asyncpg.Pool, table: str, *, vacuum: bool = False) -> None:
    """`table` is one of ours (a fixed name, never input)."""
    await pool.execute(f"VACUUM (ANALYZE) {table}" if vacuum else f"ANALYZE {table}")
