"""The testing API: runs (`/api/testing/runs…`) and the tenant's usage."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.contract.runs import (
    FinalRunView,
    LiveRunView,
    RunDataRemoved,
    RunList,
    RunTrace,
    RunView,
    Usage,
)
from app.jobs import Jobs
from app.kit.clock import utcnow
from app.runs import oracle, service
from app.runs.live import LiveRuns
from app.scenarios import service as scenarios_service
from app.tenants.auth import Tenant, pool_of, root_url
from app.tenants.quota import QuotaGuard, resets_at, used_today
from app.trace.recorder import TraceRecorder

log = logging.getLogger("understudy.runs")
router = APIRouter(prefix="/api/testing", tags=["Testing"])
usage_router = APIRouter(tags=["Usage"])

MAX_LIST = 500


class StartRunBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    scenario_id: str = Field(description="Scenario id, e.g. scheduling.book-named-practitioner")
    mode: str | None = Field(default=None, description="agent or workflow (default: the first)")
    variant: str | None = Field(default=None, description="A persona variant of the scenario")
    label: str | None = Field(default=None, max_length=200)
    timeout_seconds: int | None = Field(default=None, description="30 to 1800")


def _forget_live(request: Request, tenant_id: Any) -> None:
    live: LiveRuns = request.app.state.live_runs
    live.forget(tenant_id)


async def _promote_evals(request: Request, tenant_id: Any) -> None:
    """A slot freed: start queued eval runs now rather than at the worker's next sweep."""
    from app.evals.router import promote_now

    await promote_now(request, tenant_id)


async def _flush_trace(request: Request) -> None:
    """Make this process's buffered calls visible before grading on demand."""
    recorder: TraceRecorder = request.app.state.recorder
    try:
        await recorder.flush()
    except Exception:
        # Grading goes on with what is stored; the flusher keeps retrying the rest.
        log.exception("trace_flush_before_grading_failed")


def _final(view: RunView) -> FinalRunView:
    """The view of a run that has ended (finish, cancel and reference runs end it)."""
    assert isinstance(view, FinalRunView)
    return view


async def _start(request: Request, tenant: Tenant, body: StartRunBody) -> service.RunRow:
    quota: QuotaGuard = request.app.state.quota
    settings = request.app.state.settings
    loaded = await scenarios_service.get_scenario(pool_of(request), tenant.id, body.scenario_id)
    extra = len(loaded.scenario.stimulus) + (0 if loaded.builtin else len(loaded.scenario.fixture))
    await quota.check(tenant.id, extra)
    async with pool_of(request).acquire() as conn, conn.transaction():
        run, counted, deliveries = await service.start_run(
            conn,
            tenant.id,
            service.StartRequest(
                body.scenario_id, body.mode, body.variant, body.label, body.timeout_seconds
            ),
            max_live=settings.max_live_runs,
            root_url=root_url(request),
        )
    quota.note(tenant.id, counted)
    _forget_live(request, tenant.id)
    jobs: Jobs | None = request.app.state.jobs
    if jobs is not None:
        await jobs.grade_soon(tenant.id, run.id)
        if deliveries:
            await jobs.deliver_soon(tenant.id)
    return run


@router.post("/runs", status_code=201, summary="Start a run of a scenario")
async def start_run(request: Request, tenant: Tenant, body: StartRunBody) -> LiveRunView:
    run = await _start(request, tenant, body)
    view = run.view(root_url(request))
    assert isinstance(view, LiveRunView)  # a run starts live
    return view


@router.get("/runs", summary="List runs, newest first")
async def list_runs(
    request: Request,
    tenant: Tenant,
    label: str | None = None,
    status: str | None = None,
    scenario_id: Annotated[str | None, Query(alias="scenarioId")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
) -> RunList:
    runs = await service.list_runs(
        pool_of(request),
        tenant.id,
        label=label,
        status=status,
        scenario_id=scenario_id,
        limit=limit,
    )
    root = root_url(request)
    return RunList(runs=[r.view(root) for r in runs])


@router.get("/runs/{run_id}", summary="A run: progress while live, the verdict once final")
async def get_run(request: Request, tenant: Tenant, run_id: str) -> RunView:
    async with pool_of(request).acquire() as conn:
        run = await service.get_run(conn, tenant.id, run_id)
    return run.view(root_url(request))


@router.post("/runs/{run_id}/finish", summary="Grade now and end the run")
async def finish_run(request: Request, tenant: Tenant, run_id: str) -> FinalRunView:
    await _flush_trace(request)
    run = await service.grade_run(
        pool_of(request), tenant.id, run_id, final=True, llm=request.app.state.llm
    )
    _forget_live(request, tenant.id)
    await _promote_evals(request, tenant.id)
    return _final(run.view(root_url(request)))


@router.post("/runs/{run_id}/cancel", summary="End the run without a verdict")
async def cancel_run(request: Request, tenant: Tenant, run_id: str) -> FinalRunView:
    async with pool_of(request).acquire() as conn:
        run = await service.cancel_run(conn, tenant.id, run_id)
    _forget_live(request, tenant.id)
    await _promote_evals(request, tenant.id)
    return _final(run.view(root_url(request)))


@router.delete("/runs/{run_id}/data", summary="Remove the run's patients and resources")
async def delete_run_data(request: Request, tenant: Tenant, run_id: str) -> RunDataRemoved:
    removed = await service.delete_run_data(pool_of(request), tenant.id, run_id)
    return RunDataRemoved(id=run_id, resources_removed=removed)


@router.get("/runs/{run_id}/trace", summary="The calls attributed to the run")
async def run_trace(request: Request, tenant: Tenant, run_id: str) -> RunTrace:
    await _flush_trace(request)
    async with pool_of(request).acquire() as conn:
        run = await service.get_run(conn, tenant.id, run_id)
    return RunTrace(id=run_id, calls=await service.run_trace(pool_of(request), run))


@router.post(
    "/scenarios/{scenario_id}/reference-run",
    summary="Run the scenario's oracle and return the verdict",
)
async def reference_run(
    request: Request,
    tenant: Tenant,
    scenario_id: str,
    mode: str | None = None,
    variant: str | None = None,
) -> FinalRunView:
    loaded = await scenarios_service.get_scenario(pool_of(request), tenant.id, scenario_id)
    run = await _start(
        request,
        tenant,
        StartRunBody(scenario_id=scenario_id, mode=mode, variant=variant, label="reference-run"),
    )
    try:
        await oracle.replay(
            request.app,
            root_url(request),
            request.headers.get("authorization", ""),
            run,
            loaded.scenario.oracle,
        )
    except Exception:
        async with pool_of(request).acquire() as conn:
            await service.cancel_run(conn, tenant.id, run.id)
        _forget_live(request, tenant.id)
        raise
    await _flush_trace(request)
    final = await service.grade_run(
        pool_of(request), tenant.id, run.id, final=True, llm=request.app.state.llm
    )
    _forget_live(request, tenant.id)
    return _final(final.view(root_url(request)))


@usage_router.get("/api/usage", summary="Today's FHIR writes against the daily quota")
async def usage(request: Request, tenant: Tenant) -> Usage:
    quota: QuotaGuard = request.app.state.quota
    day = utcnow().date()
    used = await used_today(pool_of(request), tenant.id, day)
    return Usage(
        day=day,
        writes=used,
        limit=quota.limit,
        remaining=max(0, quota.limit - used),
        resets_at=resets_at(day),
    )
