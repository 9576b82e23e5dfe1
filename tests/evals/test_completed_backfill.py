"""Migration 0017 marks the evals that had finished before eval events existed as
completed (when their last run finished), and leaves the others for the events: one still
running, one with a run waiting to start, a cancelled one."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
from alembic import command

from app.db import asyncpg_dsn
from tests.conftest import _drop_database, _recreate_database
from tests.test_migrations import _config

CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


async def _seed(url: str, tenant_id: uuid.UUID) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute("INSERT INTO tenant (id, name) VALUES ($1, 'backfill')", tenant_id)

        async def run(run_id: str, status: str, finished: datetime | None) -> None:
            await conn.execute(
                """INSERT INTO run (tenant_id, id, scenario_id, scenario_version, scenario_hash,
                    builtin, mode, status, fixture, expectations, started_at, deadline,
                    finished_at, changed_at)
                VALUES ($1, $2, 's', 0, 'h', true, 'workflow', $3, '{}', '[]', $4, $4, $5, $4)""",
                tenant_id,
                run_id,
                status,
                CREATED,
                finished,
            )

        async def eval_with(eval_id: str, items: list[tuple[str, str | None]]) -> None:
            await conn.execute(
                """INSERT INTO eval (tenant_id, id, label, mode, repeats, request, root_url,
                    created_at, cancelled_at)
                VALUES ($1, $2, $2, 'workflow', 1, '{}', '', $3, $4)""",
                tenant_id,
                eval_id,
                CREATED,
                CREATED if eval_id == "cancelled" else None,
            )
            for position, (state, run_id) in enumerate(items):
                await conn.execute(
                    """INSERT INTO eval_item (tenant_id, eval_id, position, scenario_id,
                        repeat_index, state, run_id, queued_at)
                    VALUES ($1, $2, $3, 's', 0, $4, $5, $6)""",
                    tenant_id,
                    eval_id,
                    position,
                    state,
                    run_id,
                    CREATED,
                )

        await run("r1", "passed", CREATED + timedelta(minutes=1))
        await run("r2", "failed", CREATED + timedelta(minutes=3))
        await run("r3", "passed", CREATED + timedelta(minutes=2))
        await run("r4", "live", None)
        await run("r5", "cancelled", CREATED + timedelta(minutes=4))
        await eval_with("finished", [("started", "r1"), ("started", "r2"), ("cancelled", None)])
        await eval_with("running", [("started", "r3"), ("started", "r4")])
        await eval_with("waiting", [("started", "r3"), ("queued", None)])
        await eval_with("cancelled", [("started", "r5")])
        await eval_with("never-started", [("cancelled", None)])
    finally:
        await conn.close()


async def _completed(url: str) -> dict[str, datetime | None]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch("SELECT id, completed_at FROM eval")
    finally:
        await conn.close()
    return {r["id"]: r["completed_at"] for r in rows}


def test_0017_marks_only_the_evals_already_finished() -> None:
    name = f"understudy_backfill_{os.getpid()}"
    url = asyncio.run(_recreate_database(name))
    try:
        config = _config(url)
        command.upgrade(config, "0015")
        asyncio.run(_seed(url, uuid.uuid4()))
        command.upgrade(config, "0017")
        assert asyncio.run(_completed(url)) == {
            "finished": CREATED + timedelta(minutes=3),  # its last run's end
            "running": None,
            "waiting": None,
            "cancelled": None,
            "never-started": CREATED,  # no run: when it was created
        }
    finally:
        asyncio.run(_drop_database(name))
