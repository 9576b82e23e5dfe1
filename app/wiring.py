"""What a process sends after each unit of work commits, wired once for the API
(app/main.py) and the worker (app/worker.py): the tenant's write quota cache, the run
limits a run start is held to, eval promotion when a live slot frees, and whatever the
process keeps of its own (the API's live-run cache and autoanalyze counter, the worker's
settle timers). The bottom layers (app/jobs.py `InProcess`) import nothing of the
features; this module is where the features' callables are plugged in."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from app.db import Scopes
from app.evals import events as eval_events
from app.jobs import InProcess, Jobs
from app.runs import provenance
from app.settings import Settings
from app.tenants.quota import QuotaGuard, RunLimits


@dataclass(frozen=True, slots=True)
class Wired:
    scopes: Scopes
    quota: QuotaGuard
    limits: RunLimits


def _nothing(_: int) -> None:
    return None


def wire_units_of_work(
    pool: asyncpg.Pool,
    jobs: Jobs | None,
    settings: Settings,
    *,
    live_changed: Callable[[uuid.UUID], None] | None = None,
    also_wrote: Callable[[int], None] = _nothing,
    grade_later: Callable[[uuid.UUID, str, float], bool] | None = None,
) -> Wired:
    """The process's `Scopes`, with every after-commit hook in place. Each process keeps
    its own quota cache (a tenant's writes in another process reach it through the
    database within a second) and reads the platform's provenance once, here, not inside
    the first run's start."""
    quota = QuotaGuard(pool, settings.daily_write_quota)
    provenance.platform()
    limits = RunLimits(
        settings.max_live_runs,
        quota,
        settings.llm_model if settings.llm_base_url else None,
    )

    def wrote(tenant_id: uuid.UUID, count: int) -> None:
        quota.note(tenant_id, count)
        also_wrote(count)

    async def promote(tenant_id: uuid.UUID) -> None:
        # A live slot freed or an eval was queued: start what fits now.
        await eval_events.settle(scopes, tenant_id, limits=limits)

    hooks = InProcess(wrote=wrote, promote=promote, grade_later=grade_later)
    if live_changed is not None:
        hooks.live_changed = live_changed
    scopes = Scopes(pool, jobs, hooks)
    return Wired(scopes, quota, limits)
