"""The testing API: evals (`/api/testing/evals…`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.contract.evals import Comparison, EvalList, EvalView
from app.evals import service
from app.jobs import Jobs
from app.runs.live import LiveRuns
from app.tenants.auth import Tenant, pool_of, root_url

router = APIRouter(prefix="/api/testing/evals", tags=["Evals"])


class EvalBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    mode: str = Field(description="agent or workflow")
    label: str = Field(min_length=1, max_length=200, description="e.g. 'triage-agent v3'")
    scenarios: list[str] | dict[str, str] | None = Field(
        default=None,
        description='Scenario ids, or {"category": "…"}; default: every scenario of the mode',
    )
    repeats: int = Field(default=1, description="1 to 5 runs of each scenario × persona")
    personas: str | list[str] = Field(
        default="baseline", description="'baseline', 'all' (baseline + every variant) or names"
    )
    timeout_seconds: int | None = Field(default=None, description="30 to 1800 per run")


async def promote_now(request: Request, tenant_id: Any) -> None:
    """Start what fits now; deliveries and grading of the new runs are queued as usual."""
    started = await service.promote(
        pool_of(request), tenant_id, max_live=request.app.state.settings.max_live_runs
    )
    if started:
        live: LiveRuns = request.app.state.live_runs
        live.forget(tenant_id)
    jobs: Jobs | None = request.app.state.jobs
    if jobs is not None:
        for run_id, _ in started:
            await jobs.grade_soon(tenant_id, run_id)
        if any(deliveries for _, deliveries in started):
            await jobs.deliver_soon(tenant_id)


@router.post("", status_code=201, summary="Start an eval (runs beyond the live limit queue)")
async def create_eval(request: Request, tenant: Tenant, body: EvalBody) -> EvalView:
    eval_id = await service.create_eval(
        pool_of(request),
        tenant.id,
        service.EvalRequest(
            body.mode,
            body.label,
            body.scenarios,
            body.repeats,
            body.personas,
            body.timeout_seconds,
        ),
        root_url=root_url(request),
    )
    await promote_now(request, tenant.id)
    return await service.eval_view(pool_of(request), tenant.id, eval_id, root_url(request))


@router.get("", summary="Evals, newest first")
async def list_evals(
    request: Request,
    tenant: Tenant,
    label_prefix: Annotated[str | None, Query(alias="labelPrefix")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> EvalList:
    found = await service.list_evals(pool_of(request), tenant.id, label_prefix, limit)
    return EvalList(evals=found)


@router.get("/{eval_id}", summary="Status, runs (with briefs), and the summary once complete")
async def get_eval(request: Request, tenant: Tenant, eval_id: str) -> EvalView:
    return await service.eval_view(pool_of(request), tenant.id, eval_id, root_url(request))


@router.get("/{eval_id}/compare", summary="Compare with a baseline eval, cell by cell")
async def compare(
    request: Request,
    tenant: Tenant,
    eval_id: str,
    baseline: str,
    alpha: Annotated[float, Query(gt=0, lt=1)] = 0.05,
) -> Comparison:
    return await service.compare_evals(pool_of(request), tenant.id, eval_id, baseline, alpha=alpha)


@router.post("/{eval_id}/cancel", summary="Cancel queued and live runs of the eval")
async def cancel(request: Request, tenant: Tenant, eval_id: str) -> EvalView:
    await service.cancel_eval(pool_of(request), tenant.id, eval_id)
    live: LiveRuns = request.app.state.live_runs
    live.forget(tenant.id)
    return await service.eval_view(pool_of(request), tenant.id, eval_id, root_url(request))
