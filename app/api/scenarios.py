"""The testing API: scenarios (`/api/testing/scenarios…`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from app.api.deps import Tenant
from app.fhir.service import parse_body
from app.kit import jsontext
from app.orchestration import check
from app.request_state import limits_of, pool_of, root_url, scopes_of
from app.scenarios import service
from understudy_client.contract.scenarios import (
    CheckReportOut,
    ImportedOut,
    ScenarioInvalidOut,
    ScenarioList,
)

router = APIRouter(prefix="/api/testing/scenarios", tags=["Testing"])


def _problems(problems: list[Any]) -> list[dict[str, str]]:
    return [{"path": p.path, "message": p.message} for p in problems]


_IMPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": ImportedOut, "description": "Dry run: the scenario is valid"},
    201: {"model": ImportedOut, "description": "Imported as a new version"},
    422: {
        "model": ScenarioInvalidOut,
        "description": "The scenario is invalid: every problem, with its warnings",
        "content": {
            "application/problem+json": {
                "schema": {"$ref": "#/components/schemas/ScenarioInvalidOut"}
            }
        },
    },
}


@router.get("", summary="List built-in and imported scenarios")
async def list_scenarios(request: Request, tenant: Tenant) -> ScenarioList:
    found = await service.list_scenarios(pool_of(request), tenant.id)
    return ScenarioList(scenarios=[s.summary() for s in found])


@router.get("/{scenario_id}", summary="The whole scenario")
async def get_scenario(request: Request, tenant: Tenant, scenario_id: str) -> Response:
    loaded = await service.get_scenario(pool_of(request), tenant.id, scenario_id)
    document = loaded.scenario.model_dump(by_alias=True, exclude_none=True)
    # Through jsontext so fixture decimals stay numbers with their scale.
    return Response(
        jsontext.dumpb({**loaded.summary().wire(), "scenario": document}),
        media_type="application/json",
    )


@router.post(
    "",
    status_code=201,
    summary="Import a custom scenario (a new version when the id exists); ?dryRun=true validates",
    response_model=None,
    responses=_IMPORT_RESPONSES,
)
async def import_scenario(
    request: Request,
    tenant: Tenant,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> Any:
    document = parse_body(await request.body())
    try:
        # A dry run writes nothing: no transaction for it.
        async with scopes_of(request).transaction(autocommit=dry_run) as tx:
            imported = await service.import_scenario(tx, tenant.id, document, dry_run=dry_run)
    except service.ScenarioInvalid as exc:
        return JSONResponse(
            {
                "title": exc.message,
                "status": 422,
                "detail": exc.message,
                "errors": _problems(exc.problems),
                "warnings": _problems(exc.warnings),
            },
            status_code=422,
            media_type="application/problem+json",
        )
    body = {
        **imported.loaded.summary().wire(),
        "dryRun": dry_run,
        "valid": True,
        "warnings": _problems(imported.warnings),
    }
    return JSONResponse(body, status_code=200 if dry_run else 201)


@router.post(
    "/{scenario_id}/check",
    summary="Check the scenario is a fair test: oracle passes, nothing fails, near misses fail",
    response_model=CheckReportOut,
)
async def check_scenario(request: Request, tenant: Tenant, scenario_id: str) -> dict[str, Any]:
    loaded = await service.get_scenario(pool_of(request), tenant.id, scenario_id)
    target = check.Target(
        app=request.app,
        scopes=scopes_of(request),
        tenant_id=tenant.id,
        authorization=request.headers.get("authorization", ""),
        root=root_url(request),
        limits=limits_of(request),
    )
    report = await check.check_scenario(target, loaded)
    return report.as_json()
