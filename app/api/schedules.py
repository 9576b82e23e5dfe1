"""The testing API: scheduled evals (`/api/testing/schedules…`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ConfigDict, Field

from app.api.deps import (
    PERSONAS_FIELD,
    REPEATS_FIELD,
    REVISION_FIELD,
    TIMEOUT_FIELD,
    RequestBody,
    Tenant,
)
from app.request_state import pool_of, root_url, scopes_of
from app.schedules import service
from app.schedules.cron import MIN_GAP_MINUTES
from understudy_client.contract.schedules import ScheduleList, ScheduleView

router = APIRouter(prefix="/api/testing/schedules", tags=["Schedules"])


class ScheduledEvalBody(RequestBody):
    mode: str = Field(
        description="workflow (agent mode needs an agent to hand each brief to)",
        json_schema_extra={"enum": ["workflow"]},
    )
    label_prefix: str = Field(
        min_length=1,
        max_length=150,
        description="Each eval is labelled '{labelPrefix} {UTC due time}', e.g. "
        "'nightly 2026-12-01T03:00Z'",
    )
    scenarios: list[str] | dict[str, str] | None = Field(
        default=None,
        description='Scenario ids, or {"category": "…"}; default: every workflow scenario',
    )
    repeats: int = Field(**REPEATS_FIELD)
    personas: str | list[str] = Field(**PERSONAS_FIELD)
    timeout_seconds: int | None = Field(default=None, **TIMEOUT_FIELD)
    revision: str | None = Field(**REVISION_FIELD)


class ScheduleBody(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "nightly triage",
                    "cron": "0 3 * * *",
                    "eval": {
                        "mode": "workflow",
                        "labelPrefix": "nightly",
                        "scenarios": ["results.critical-lab"],
                        "repeats": 2,
                    },
                }
            ]
        },
    )

    name: str = Field(min_length=1, max_length=200)
    cron: str = Field(
        min_length=1,
        max_length=200,
        description="Five fields (minute hour day-of-month month day-of-week), in UTC; "
        f"due times at least {MIN_GAP_MINUTES} minutes apart",
        examples=["0 3 * * *", "*/30 9-17 * * 1-5"],
    )
    eval: ScheduledEvalBody


@router.post(
    "",
    status_code=201,
    summary=f"Schedule a workflow eval on a cron (UTC; at most {service.MAX_SCHEDULES} a tenant)",
)
async def create_schedule(request: Request, tenant: Tenant, body: ScheduleBody) -> ScheduleView:
    async with scopes_of(request).transaction() as tx:
        schedule_id = await service.create_schedule(
            tx,
            tenant.id,
            service.ScheduleRequest(
                name=body.name,
                cron=body.cron,
                mode=body.eval.mode,
                label_prefix=body.eval.label_prefix,
                scenarios=body.eval.scenarios,
                personas=body.eval.personas,
                repeats=body.eval.repeats,
                timeout_seconds=body.eval.timeout_seconds,
                revision=body.eval.revision,
            ),
            root_url=root_url(request),
        )
    return await service.schedule_view(pool_of(request), tenant.id, schedule_id)


@router.get("", summary="Schedules, oldest first")
async def list_schedules(request: Request, tenant: Tenant) -> ScheduleList:
    return ScheduleList(schedules=await service.list_schedules(pool_of(request), tenant.id))


@router.get(
    "/{schedule_id}",
    summary="A schedule, its last five evals, the latest compare and its due times",
)
async def get_schedule(request: Request, tenant: Tenant, schedule_id: str) -> ScheduleView:
    return await service.schedule_view(pool_of(request), tenant.id, schedule_id)


@router.post("/{schedule_id}/pause", summary="Pause: no eval starts until resumed")
async def pause(request: Request, tenant: Tenant, schedule_id: str) -> ScheduleView:
    async with scopes_of(request).transaction() as tx:
        await service.set_paused(tx, tenant.id, schedule_id, True)
    return await service.schedule_view(pool_of(request), tenant.id, schedule_id)


@router.post(
    "/{schedule_id}/resume",
    summary="Resume from the next due time (those passed while paused are not made up)",
)
async def resume(request: Request, tenant: Tenant, schedule_id: str) -> ScheduleView:
    async with scopes_of(request).transaction() as tx:
        await service.set_paused(tx, tenant.id, schedule_id, False)
    return await service.schedule_view(pool_of(request), tenant.id, schedule_id)


@router.delete("/{schedule_id}", status_code=204, summary="Delete a schedule (its evals are kept)")
async def delete_schedule(request: Request, tenant: Tenant, schedule_id: str) -> None:
    async with scopes_of(request).transaction() as tx:
        await service.delete_schedule(tx, tenant.id, schedule_id)
