"""Scenario pages: the list with filters, a scenario's details with its Run buttons,
reference run and check, and the JSON import (dry run first, then save)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.datastructures import FormData, UploadFile

from app.console import scenario_views as views
from app.console.web import (
    PostedForm,
    SignedIn,
    Viewer,
    console_router,
    form_text,
    redirect,
    render,
)
from app.errors import AppError
from app.fhir.service import parse_body
from app.orchestration import check, reference
from app.request_state import limits_of, pool_of, root_url, scopes_of
from app.runs import service as runs_service
from app.scenarios import service as scenarios_service
from app.tenants import service as tenants_service
from app.trace.recorder import TraceRecorder

log = logging.getLogger("understudy.console")
router = console_router()

# A pasted or uploaded scenario larger than this is not one a person wrote by hand.
MAX_DOCUMENT_BYTES = 512 * 1024


@router.get("/scenarios")
async def list_page(
    request: Request,
    viewer: SignedIn,
    mode: str | None = None,
    category: str | None = None,
    q: str | None = None,
) -> Response:
    found = await scenarios_service.list_scenarios(pool_of(request), viewer.tenant.id)
    lines = [views.scenario_line(s) for s in found]
    shown = views.filter_scenarios(lines, mode=mode, category=category, query=q)
    return render(
        request,
        "scenarios/list.html",
        scenarios=shown,
        total=len(lines),
        modes=sorted({m for line in lines for m in line.modes}),
        categories=sorted({line.category for line in lines}),
        mode=mode or "",
        category=category or "",
        q=q or "",
    )


@router.get("/scenarios/import")
async def import_page(request: Request, viewer: SignedIn) -> Response:
    return render(request, "scenarios/import.html", **views.empty_import())


async def _document_text(form: FormData) -> str:
    upload = form.get("file")
    if isinstance(upload, UploadFile) and upload.filename:
        data = await upload.read(MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise views.DocumentTooLarge
        return data.decode("utf-8", errors="replace")
    pasted = form.get("document")
    return pasted if isinstance(pasted, str) else ""


@router.post("/scenarios/import")
async def import_post(request: Request, viewer: SignedIn, form: PostedForm) -> Response:
    save = form.get("action") == "save"
    try:
        text = await _document_text(form)
    except views.DocumentTooLarge:
        outcome = views.ImportOutcome.refused(f"the file is larger than {MAX_DOCUMENT_BYTES} bytes")
        return render(request, "scenarios/import.html", status=413, document="", outcome=outcome)
    try:
        document: Any = parse_body(text.encode())
    except AppError as exc:
        outcome = views.ImportOutcome.refused(exc.message)
        return render(request, "scenarios/import.html", status=422, document=text, outcome=outcome)
    try:
        # A dry run writes nothing: no transaction for it (as the REST import).
        async with scopes_of(request).transaction(autocommit=not save) as tx:
            imported = await scenarios_service.import_scenario(
                tx, viewer.tenant.id, document, dry_run=not save
            )
    except scenarios_service.ScenarioInvalid as exc:
        outcome = views.ImportOutcome.invalid(exc.problems, exc.warnings)
        return render(request, "scenarios/import.html", status=422, document=text, outcome=outcome)
    except AppError as exc:  # a built-in id
        outcome = views.ImportOutcome.refused(exc.message, path="/id")
        return render(
            request, "scenarios/import.html", status=exc.status, document=text, outcome=outcome
        )
    if save:
        loaded = imported.loaded
        return redirect(f"/scenarios/{loaded.scenario.id}?imported={loaded.version}")
    outcome = views.ImportOutcome.valid(imported.loaded, imported.warnings)
    return render(request, "scenarios/import.html", document=text, outcome=outcome)


@router.get("/scenarios/{scenario_id}")
async def details_page(
    request: Request, viewer: SignedIn, scenario_id: str, imported: int | None = None
) -> Response:
    loaded = await scenarios_service.get_scenario(pool_of(request), viewer.tenant.id, scenario_id)
    return render(
        request, "scenarios/details.html", s=views.scenario_details(loaded), imported=imported
    )


def _choice(form: FormData, name: str) -> str | None:
    return form_text(form, name)


@router.post("/scenarios/{scenario_id}/runs")
async def start_run(
    request: Request, viewer: SignedIn, form: PostedForm, scenario_id: str
) -> Response:
    async with scopes_of(request).transaction() as tx:
        run = await runs_service.start_run(
            tx,
            viewer.tenant.id,
            runs_service.StartRequest(
                scenario_id,
                _choice(form, "mode"),
                _choice(form, "variant"),
                _label(form),
                None,
                _choice(form, "patient_driver") or runs_service.PatientDriver.SIM,
            ),
            limits=limits_of(request),
            root_url=root_url(request),
        )
    return redirect(f"/runs/{run.id}")


def _label(form: FormData) -> str | None:
    label = form_text(form, "label")
    return label[:200] if label else None


async def _flush_trace(request: Request) -> None:
    recorder: TraceRecorder = request.app.state.recorder
    try:
        await recorder.flush()
    except Exception:
        # Grading goes on with what is stored; the flusher keeps retrying the rest.
        log.exception("trace_flush_before_grading_failed")


async def _target(request: Request, viewer: Viewer, key: str) -> check.Target:
    return check.Target(
        app=request.app,
        scopes=scopes_of(request),
        tenant_id=viewer.tenant.id,
        authorization=f"Bearer {key}",
        root=root_url(request),
        limits=limits_of(request),
    )


@router.post("/scenarios/{scenario_id}/reference-run")
async def reference_run(
    request: Request, viewer: SignedIn, form: PostedForm, scenario_id: str
) -> Response:
    loaded = await scenarios_service.get_scenario(pool_of(request), viewer.tenant.id, scenario_id)
    # The replay goes through the HTTP stack as the REST route's does; the session holds
    # no key, so it gets one that lives only for the replay.
    async with tenants_service.transient_key(scopes_of(request), viewer.tenant.id) as key:
        run = await reference.reference_run(
            await _target(request, viewer, key),
            loaded,
            mode=_choice(form, "mode"),
            variant=_choice(form, "variant"),
            llm=request.app.state.llm,
            flush_trace=lambda: _flush_trace(request),
        )
    return redirect(f"/runs/{run.id}")


@router.post("/scenarios/{scenario_id}/check")
async def check_page(
    request: Request, viewer: SignedIn, form: PostedForm, scenario_id: str
) -> Response:
    loaded = await scenarios_service.get_scenario(pool_of(request), viewer.tenant.id, scenario_id)
    async with tenants_service.transient_key(scopes_of(request), viewer.tenant.id) as key:
        report = await check.check_scenario(await _target(request, viewer, key), loaded)
    return render(
        request,
        "scenarios/check.html",
        s=views.scenario_details(loaded),
        report=views.check_report(report),
    )
