"""The testing API: runs (`/api/testing/runs…`)."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import ConfigDict, Field, JsonValue

from app.api.deps import REVISION_FIELD, TIMEOUT_FIELD, RequestBody, Tenant
from app.errors import Issue, Unprocessable
from app.orchestration import reference
from app.orchestration.check import Target
from app.request_state import limits_of, pool_of, root_url, scopes_of
from app.runs import service
from app.scenarios import service as scenarios_service
from app.trace.recorder import TraceRecorder
from app.webhooks import service as webhooks_service
from understudy_client.contract.runs import (
    FinalRunView,
    LiveRunView,
    RunDataRemoved,
    RunList,
    RunTrace,
    RunView,
)

log = logging.getLogger("understudy.runs")
router = APIRouter(prefix="/api/testing", tags=["Testing"])

MAX_LIST = 500


# The modes a scenario can have (a scenario's own `modes` are a subset).
MODES: list[JsonValue] = ["agent", "workflow"]


class StartRunBody(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"scenarioId": "scheduling.book-named-practitioner"},
                {"scenarioId": "results.normal-result-notify", "label": "nightly"},
                {
                    "scenarioId": "scheduling.book-named-practitioner",
                    "mode": "agent",
                    "variant": "terse",
                    "label": "triage-agent v3",
                    "revision": "1a2b3c4",
                    "timeoutSeconds": 300,
                },
            ]
        },
    )

    scenario_id: str = Field(
        description="Scenario id (built-in or imported), e.g. scheduling.book-named-practitioner",
        examples=["scheduling.book-named-practitioner", "results.normal-result-notify"],
    )
    mode: str | None = Field(
        default=None,
        description="agent or workflow, one of the scenario's modes (default: its first)",
        json_schema_extra={"anyOf": [{"type": "string", "enum": MODES}, {"type": "null"}]},
    )
    variant: str | None = Field(default=None, description="A persona variant of the scenario")
    label: str | None = Field(default=None, max_length=200)
    timeout_seconds: int | None = Field(default=None, **TIMEOUT_FIELD)
    patient_driver: Literal["sim", "human"] = Field(
        default="sim",
        description="For a patientSim scenario: sim (the simulated patient answers) or human "
        "(no simulated replies; a person answers from the console's run page)",
    )
    revision: str | None = Field(**REVISION_FIELD)
    sms_reply_url: str | None = Field(
        default=None,
        description="Where the simulated patient's SMS replies are posted, as Twilio posts "
        "an inbound message: form fields in Twilio's inbound format, signed with "
        "X-Twilio-Signature under the run's auth token (an absolute http or https URL)",
        examples=["https://agent.example/twilio/inbound"],
    )


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


async def _reply_url(request: Request, url: str | None) -> str | None:
    """The start's `smsReplyUrl`, held to the webhooks' rule on private addresses."""
    if url is None:
        return None
    service.check_sms_reply_url(url)
    try:
        return await webhooks_service.check_url(
            url, allow_private=request.app.state.settings.webhook_allow_private
        )
    except Unprocessable as exc:
        raise Unprocessable(
            exc.message.replace("url ", "smsReplyUrl ", 1),
            [Issue(exc.message, expression="smsReplyUrl")],
        ) from None


async def _start(request: Request, tenant: Tenant, body: StartRunBody) -> service.RunRow:
    async with scopes_of(request).transaction() as tx:
        return await service.start_run(
            tx,
            tenant.id,
            service.StartRequest(
                body.scenario_id,
                body.mode,
                body.variant,
                body.label,
                body.timeout_seconds,
                body.patient_driver,
                revision=body.revision,
                sms_reply_url=await _reply_url(request, body.sms_reply_url),
            ),
            limits=limits_of(request),
            root_url=root_url(request),
        )


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
    revision: Annotated[
        str | None, Query(description="Only runs of this revision (exact match)")
    ] = None,
) -> RunList:
    runs = await service.list_runs(
        pool_of(request),
        tenant.id,
        label=label,
        status=status,
        scenario_id=scenario_id,
        limit=limit,
        revision=revision,
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
        scopes_of(request), tenant.id, run_id, final=True, llm=request.app.state.llm
    )
    return _final(run.view(root_url(request)))


@router.post("/runs/{run_id}/cancel", summary="End the run without a verdict")
async def cancel_run(request: Request, tenant: Tenant, run_id: str) -> FinalRunView:
    async with scopes_of(request).transaction() as tx:
        run = await service.cancel_run(tx, tenant.id, run_id)
    return _final(run.view(root_url(request)))


@router.delete("/runs/{run_id}/data", summary="Remove the run's patients and resources")
async def delete_run_data(request: Request, tenant: Tenant, run_id: str) -> RunDataRemoved:
    async with scopes_of(request).transaction() as tx:
        removed = await service.delete_run_data(tx, tenant.id, run_id)
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
    target = Target(
        app=request.app,
        scopes=scopes_of(request),
        tenant_id=tenant.id,
        authorization=request.headers.get("authorization", ""),
        root=root_url(request),
        limits=limits_of(request),
    )
    final = await reference.reference_run(
        target,
        loaded,
        mode=mode,
        variant=variant,
        llm=request.app.state.llm,
        flush_trace=lambda: _flush_trace(request),
    )
    return _final(final.view(root_url(request)))
