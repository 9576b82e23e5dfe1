"""The testing API: scenarios (`/api/testing/scenarios…`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from app.fhir.service import parse_body
from app.kit import jsontext
from app.scenarios import check, service
from app.tenants.auth import Tenant, pool_of, root_url

router = APIRouter(prefix="/api/testing/scenarios", tags=["Testing"])


@router.get("", summary="List built-in and imported scenarios")
async def list_scenarios(request: Request, tenant: Tenant) -> dict[str, Any]:
    found = await service.list_scenarios(pool_of(request), tenant.id)
    return {"scenarios": [s.summary() for s in found]}


@router.get("/{scenario_id}", summary="The whole scenario")
async def get_scenario(request: Request, tenant: Tenant, scenario_id: str) -> Response:
    loaded = await service.get_scenario(pool_of(request), tenant.id, scenario_id)
    document = loaded.scenario.model_dump(by_alias=True, exclude_none=True)
    # Through jsontext so fixture decimals stay numbers with their scale.
    return Response(
        jsontext.dumpb({**loaded.summary(), "scenario": document}),
        media_type="application/json",
    )


@router.post(
    "",
    status_code=201,
    summary="Import a custom scenario (a new version when the id exists); ?dryRun=true validates",
)
async def import_scenario(
    request: Request,
    tenant: Tenant,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> Any:
    document = parse_body(await request.body())
    try:
        loaded = await service.import_scenario(
            pool_of(request), tenant.id, document, dry_run=dry_run
        )
    except service.ScenarioInvalid as exc:
        return JSONResponse(
            {
                "title": exc.message,
                "status": 422,
                "errors": [{"path": p.path, "message": p.message} for p in exc.problems],
            },
            status_code=422,
            media_type="application/problem+json",
        )
    body = {**loaded.summary(), "dryRun": dry_run, "valid": True}
    return JSONResponse(body, status_code=200 if dry_run else 201)


@router.post(
    "/{scenario_id}/check",
    summary="Check the scenario is a fair test: oracle passes, nothing fails, near misses fail",
)
async def check_scenario(request: Request, tenant: Tenant, scenario_id: str) -> dict[str, Any]:
    loaded = await service.get_scenario(pool_of(request), tenant.id, scenario_id)
    target = check.Target(
        app=request.app,
        pool=pool_of(request),
        tenant_id=tenant.id,
        authorization=request.headers.get("authorization", ""),
        root=root_url(request),
        max_live=request.app.state.settings.max_live_runs,
    )
    try:
        report = await check.check_scenario(target, loaded)
    finally:
        request.app.state.live_runs.forget(tenant.id)
    return report.as_json()
