"""The testing API: evals (`/api/testing/evals…`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import ConfigDict, Field

from app.api.deps import (
    PERSONAS_FIELD,
    REPEATS_FIELD,
    REVISION_FIELD,
    TIMEOUT_FIELD,
    RequestBody,
    Tenant,
)
from app.evals import service
from app.request_state import pool_of, root_url, scopes_of
from understudy_client.contract.evals import Comparison, EvalList, EvalStatus, EvalView

router = APIRouter(prefix="/api/testing/evals", tags=["Evals"])


class EvalBody(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "mode": "workflow",
                    "label": "triage-workflow v3",
                    "revision": "1a2b3c4",
                    "scenarios": ["results.normal-result-notify"],
                },
                {
                    "mode": "agent",
                    "label": "scheduling-agent v2",
                    "scenarios": ["scheduling.book-named-practitioner"],
                    "personas": "all",
                    "repeats": 2,
                },
            ]
        },
    )

    mode: str = Field(
        description="agent or workflow", json_schema_extra={"enum": ["agent", "workflow"]}
    )
    label: str = Field(min_length=1, max_length=200, description="e.g. 'triage-agent v3'")
    scenarios: list[str] | dict[str, str] | None = Field(
        default=None,
        description='Scenario ids, or {"category": "…"}; default: every scenario of the mode',
    )
    repeats: int = Field(**REPEATS_FIELD)
    personas: str | list[str] = Field(**PERSONAS_FIELD)
    timeout_seconds: int | None = Field(default=None, **TIMEOUT_FIELD)
    revision: str | None = Field(**REVISION_FIELD)


@router.post("", status_code=201, summary="Start an eval (runs beyond the live limit queue)")
async def create_eval(request: Request, tenant: Tenant, body: EvalBody) -> EvalView:
    # Leaving the scope commits the plan and starts what fits (before the view is read).
    async with scopes_of(request).transaction() as tx:
        eval_id = await service.create_eval(
            tx,
            tenant.id,
            service.EvalRequest(
                body.mode,
                body.label,
                body.scenarios,
                body.repeats,
                body.personas,
                body.timeout_seconds,
                revision=body.revision,
            ),
            root_url=root_url(request),
        )
    return await service.eval_view(pool_of(request), tenant.id, eval_id, root_url(request))


@router.get("", summary="Evals, newest first")
async def list_evals(
    request: Request,
    tenant: Tenant,
    label_prefix: Annotated[str | None, Query(alias="labelPrefix")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    revision: Annotated[
        str | None, Query(description="Only evals of this revision (exact match)")
    ] = None,
    status: Annotated[
        EvalStatus | None,
        Query(description="Only evals in this status"),
    ] = None,
    scenario_id: Annotated[
        str | None, Query(alias="scenarioId", description="Only evals that run this scenario")
    ] = None,
) -> EvalList:
    found = await service.list_evals(
        pool_of(request),
        tenant.id,
        label_prefix,
        limit,
        revision=revision,
        status=status,
        scenario_id=scenario_id,
    )
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
    async with scopes_of(request).transaction() as tx:
        await service.cancel_eval(tx, tenant.id, eval_id)
    return await service.eval_view(pool_of(request), tenant.id, eval_id, root_url(request))
