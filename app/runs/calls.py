"""A run's traced calls, as its trace endpoint and page show them."""

from __future__ import annotations

import asyncpg

from app.kit.clock import utcnow
from app.runs.row import RunRow
from app.trace import service as trace_service
from understudy_client.contract.runs import TraceCall


async def run_trace(pool: asyncpg.Pool, run: RunRow) -> list[TraceCall]:
    end = run.finished_at or utcnow()
    return await trace_service.calls_of_run(
        pool, tenant_id=run.tenant_id, run_id=run.id, since=run.started_at, until=end
    )
