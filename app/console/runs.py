"""The runs list, the run page (live and final) and the chart page.

Every action calls the service the REST API calls (`app.api.runs`): finish grades with
`grade_run(final=True)` after flushing this process's trace buffer, cancel is
`cancel_run`, delete is `delete_run_data`. A human driver's reply goes through the
simulator's own write path (`runs.simulated_patient.human_reply`).

Live updates poll `GET /runs/{id}/live` every half second with `If-None-Match`, rather than
Server-Sent Events: the ETag is made from the run's change marker (`run_marker`: status,
changed_at, graded_at, progress, finished_at), a row every write, traced call, simulated
reply and grading pass of the run moves in the same transaction, whichever API process or
worker did it. So any process answers any poll correctly with one indexed read (a 304
when nothing changed), with no long-held connection per open tab and no cross-process
notification to wire up (SSE would need LISTEN/NOTIFY or a loop per stream doing the same
read). When the marker changed, the answer is the page's live sections rendered again by
the same templates as the first render; the page stops polling once the run is final.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
from fastapi import Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from app.capture import service as capture_service
from app.console import run_diff, views
from app.console import run_views as rv
from app.console.web import (
    CSRF_FIELD,
    Listed,
    PostedForm,
    SignedIn,
    Viewer,
    console_of,
    console_router,
    form_text,
    page_cursor,
    pager,
    redirect,
    render,
)
from app.errors import BadRequest, NotFound
from app.fhir import service as fhir_service
from app.kit.clock import utcnow
from app.kit.urls import run_view_base
from app.patient_sim import report as sim_report
from app.request_state import pool_of, root_url, scopes_of
from app.runs import service as runs_service
from app.runs import simulated_patient as sim_service
from app.runs.service import FINAL, RunRow
from app.scenarios import service as scenarios_service
from app.scenarios.schema import PatientSim, symbol_name
from app.trace.recorder import TraceRecorder
from understudy_client.contract.runs import (
    ExpectationResult,
    FinalRunView,
    SimulatedReply,
    TraceCall,
)

log = logging.getLogger("understudy.console")
router = console_router()

PAGE_SIZE = 50
REPLY_MAX = 4000
STATUSES = ["live", *sorted(str(s) for s in FINAL)]
# The sections of the run page the live poll renders again (each a template).
LIVE_SECTIONS = {
    "header": "_run_header.html",
    "checks": "_run_checks.html",
    "thread": "_run_thread.html",
    "trace": "_run_trace.html",
}


async def _flush_trace(request: Request) -> None:
    """This process's buffered calls, made visible (as the REST trace and finish do)."""
    recorder: TraceRecorder = request.app.state.recorder
    try:
        await recorder.flush()
    except Exception:
        log.exception("trace_flush_before_console_read_failed")


# --- the runs list ------------------------------------------------------------------------


@router.get("/runs")
async def runs_list(
    request: Request,
    viewer: SignedIn,
    query: Listed,
) -> Response:
    filters = query.filters(STATUSES)
    rows = await runs_service.list_runs(
        pool_of(request),
        viewer.tenant.id,
        label=None,
        label_prefix=filters["label"],
        status=filters["status"],
        scenario_id=filters["scenario"],
        revision=filters["revision"],
        limit=PAGE_SIZE + 1,
        before=page_cursor(query.before),
    )
    page, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
    kept = {k: v for k, v in filters.items() if v}
    last = (page[-1].started_at, page[-1].id) if more else None
    return render(
        request,
        "runs.html",
        runs=[views.run_line(r) for r in page],
        filters=filters,
        statuses=STATUSES,
        pages=pager("/runs", kept, last, paged=bool(query.before)),
        filtered=bool(kept),
    )


# --- the run page -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scenario:
    title: str
    sim: PatientSim | None
    workflow: str | None


async def _scenario(pool: asyncpg.Pool, run: RunRow) -> _Scenario:
    try:
        loaded = await scenarios_service.get_scenario(pool, run.tenant_id, run.scenario_id)
    except NotFound:  # a custom scenario deleted since: the run still shows
        return _Scenario(run.scenario_id, None, None)
    s = loaded.scenario
    return _Scenario(s.title, s.patient_sim, s.workflow)


async def _checks(pool: asyncpg.Pool, run: RunRow) -> list[ExpectationResult]:
    if run.status == "live":
        return await runs_service.live_checks(pool, run)
    return run.final_verdict().expectations


async def _setup(pool: asyncpg.Pool, run: RunRow) -> list[rv.SetupResource]:
    pairs = [(ref.split("/", 1)[0], ref.split("/", 1)[1]) for ref in run.fixture.values()]
    rows = {
        f"{r.resource_type}/{r.id}": r
        for r in await fhir_service.origins_of(pool, run.tenant_id, pairs)
    }
    out = []
    for symbol, ref in run.fixture.items():
        row = rows.get(ref)
        resource = None if row is None or row.deleted else rv.loads(row.resource)
        origin = rv.ORIGINS.get(row.source, "client") if row and row.source else "fixture"
        out.append(
            rv.SetupResource(
                symbol,
                ref,
                origin,
                rv.summary_of(resource),
                resource is None,
                rv.chart_url(ref, run.id),
            )
        )
    return out


def _patient_ref(run: RunRow, scenario: _Scenario) -> str | None:
    if scenario.sim is not None:
        return run.fixture.get(symbol_name(scenario.sim.patient))
    return next((r for r in run.fixture.values() if r.startswith("Patient/")), None)


async def _thread(
    pool: asyncpg.Pool, run: RunRow, patient: str | None
) -> tuple[list[rv.Message], list[SimulatedReply]]:
    if patient is None:
        return [], []
    rows, (replies, issues) = await asyncio.gather(
        fhir_service.communications_of(pool, run.tenant_id, run.id, patient),
        sim_report.simulator_report(pool, run.tenant_id, run.id),
    )
    return rv.thread_of(list(rows), patient, replies, issues), replies


# Captures shown in the conversation: every one of a test run (a page of the captures list
# holds 500), the rest said to be in GET /api/testing/runs/{id}/captures.
CAPTURES_SHOWN = 500


async def _captures(pool: asyncpg.Pool, run: RunRow) -> list[rv.CaptureLine]:
    effects = await capture_service.list_effects(
        pool, run.tenant_id, run.id, after=0, limit=CAPTURES_SHOWN
    )
    return [rv.capture_line(e.view()) for e in effects]


async def _trace(pool: asyncpg.Pool, run: RunRow) -> list[TraceCall]:
    return await runs_service.run_trace(pool, run)


def _snippets(root: str, run: RunRow, patient: str | None) -> dict[str, str]:
    base = run_view_base(root, run.id)
    read = f"{base}/{patient}" if patient else f"{base}/metadata"
    curl = (
        "# The tenant's API key in UNDERSTUDY_API_KEY (the console never shows it again)\n"
        f'curl -s -H "Authorization: Bearer $UNDERSTUDY_API_KEY" {read}\n'
        f'curl -s -H "Authorization: Bearer $UNDERSTUDY_API_KEY" {root}/api/testing/runs/{run.id}'
    )
    mcp = rv.pretty(
        {
            "mcpServers": {
                "understudy": {
                    "type": "http",
                    "url": f"{root}/mcp",
                    "headers": {"Authorization": "Bearer ${UNDERSTUDY_API_KEY}"},
                }
            }
        }
    )
    prompt = (
        f"You are testing against Understudy run {run.id}. Use the FHIR base {base} "
        f"(or pass run_id {run.id} to the Understudy MCP tools)."
    )
    return {"curl": curl, "mcp": mcp, "prompt": prompt}


async def _run_context(request: Request, viewer: Viewer, run_id: str) -> dict[str, Any]:
    pool = pool_of(request)
    async with pool.acquire() as conn:
        run = await runs_service.get_run(conn, viewer.tenant.id, run_id)
    scenario = await _scenario(pool, run)
    patient = _patient_ref(run, scenario)
    results, setup, (thread, replies), trace, captures = await asyncio.gather(
        _checks(pool, run),
        _setup(pool, run),
        _thread(pool, run, patient),
        _trace(pool, run),
        _captures(pool, run),
    )
    live = run.status == "live"
    view = run.view(root_url(request))
    human = live and run.patient_driver == runs_service.PatientDriver.HUMAN
    return {
        "run": run,
        "view": view,
        "final": view if isinstance(view, FinalRunView) else None,
        "live": live,
        "scenario": scenario,
        "patient": patient,
        "checks": [rv.check_of(r, live=live) for r in results],
        "diff": run_diff.diff_entries(results),
        "highlighted": run_diff.highlighted,
        "required_total": sum(1 for r in results if r.required),
        "required_holding": sum(1 for r in results if r.required and r.passed),
        "setup": setup,
        "thread": thread,
        "conversation": rv.conversation(thread, captures),
        "captures_capped": len(captures) >= CAPTURES_SHOWN,
        "reply_box": rv.reply_box(thread, replies, patient, scenario.sim.max_turns)
        if human and scenario.sim
        else None,
        "trace": rv.trace_rows(trace, run.id),
        "snippets": _snippets(root_url(request), run, patient),
        "now": utcnow(),
        "ref_links": rv.ref_links,
        "is_ref": rv.is_ref,
        "chart_url": rv.chart_url,
    }


def _etag(marker: str, viewer: Viewer) -> str:
    # The session's CSRF token is rendered into the sections' forms: part of the tag.
    digest = hashlib.sha256(f"{marker}|{viewer.csrf}".encode()).hexdigest()[:24]
    return f'W/"{digest}"'


def _fragment(request: Request, viewer: Viewer, template: str, context: dict[str, Any]) -> str:
    return (
        console_of(request)
        .templates.get_template(template)
        .render(viewer=viewer, csrf=viewer.csrf, csrf_field=CSRF_FIELD, **context)
    )


@router.get("/runs/{run_id}")
async def run_page(
    request: Request,
    viewer: SignedIn,
    run_id: str,
    removed: Annotated[int | None, Query(ge=0)] = None,
    replied: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    await _flush_trace(request)
    marker = await runs_service.run_marker(pool_of(request), viewer.tenant.id, run_id)
    context = await _run_context(request, viewer, run_id)
    return render(
        request,
        "run.html",
        etag=_etag(marker, viewer),
        live_url=f"/runs/{run_id}/live",
        removed=removed,
        replied=replied,
        **context,
    )


@router.get("/runs/{run_id}/live")
async def run_live(request: Request, viewer: SignedIn, run_id: str) -> Response:
    """The live sections of the run page, when the run changed since `If-None-Match`."""
    marker = await runs_service.run_marker(pool_of(request), viewer.tenant.id, run_id)
    etag = _etag(marker, viewer)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    context = await _run_context(request, viewer, run_id)
    sections = {
        name: _fragment(request, viewer, template, context)
        for name, template in LIVE_SECTIONS.items()
    }
    body = {"status": context["run"].status, "final": not context["live"], "sections": sections}
    return JSONResponse(body, headers=headers)


@router.post("/runs/{run_id}/finish")
async def finish(request: Request, viewer: SignedIn, form: PostedForm, run_id: str) -> Response:
    await _flush_trace(request)
    await runs_service.grade_run(
        scopes_of(request), viewer.tenant.id, run_id, final=True, llm=request.app.state.llm
    )
    return redirect(f"/runs/{run_id}")


@router.post("/runs/{run_id}/cancel")
async def cancel(request: Request, viewer: SignedIn, form: PostedForm, run_id: str) -> Response:
    async with scopes_of(request).transaction() as tx:
        await runs_service.cancel_run(tx, viewer.tenant.id, run_id)
    return redirect(f"/runs/{run_id}")


@router.post("/runs/{run_id}/delete-data")
async def delete_data(
    request: Request, viewer: SignedIn, form: PostedForm, run_id: str
) -> Response:
    async with scopes_of(request).transaction() as tx:
        removed = await runs_service.delete_run_data(tx, viewer.tenant.id, run_id)
    return redirect(f"/runs/{run_id}?removed={removed}")


@router.post("/runs/{run_id}/reply")
async def reply(request: Request, viewer: SignedIn, form: PostedForm, run_id: str) -> Response:
    """A person driving the patient answers the latest staff message."""
    text = form_text(form, "text")
    if text is None:
        raise BadRequest("type a reply first")
    if len(text) > REPLY_MAX:
        raise BadRequest(f"a reply is at most {REPLY_MAX} characters")
    written = await sim_service.human_reply(scopes_of(request), viewer.tenant.id, run_id, text)
    return redirect(f"/runs/{run_id}?replied={written.turn}#conversation")


# --- the chart page -----------------------------------------------------------------------


@router.get("/chart/{resource_type}/{resource_id}")
async def chart(
    request: Request,
    viewer: SignedIn,
    resource_type: str,
    resource_id: str,
    run: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """A patient's chart; for another resource, its patient's chart at that resource (or
    the resource alone when it names no patient)."""
    pool = pool_of(request)
    tenant = viewer.tenant.id
    if run is not None:
        async with pool.acquire() as conn:
            await runs_service.get_run(conn, tenant, run)  # another tenant's run: 404
    ref = f"{resource_type}/{resource_id}"
    if resource_type != "Patient":
        rows = await fhir_service.origins_of(pool, tenant, [(resource_type, resource_id)])
        if not rows or not fhir_service.is_valid_id(resource_id):
            raise NotFound(f"no resource {ref}")
        resource = None if rows[0].deleted else rv.loads(rows[0].resource)
        patient = rv.patient_of(resource) if resource else None
        if patient is not None:
            target = rv.chart_url(patient, run) + "#" + rv.anchor_of(resource_type, resource_id)
            return RedirectResponse(target, status_code=302)
        chart_rows = [] if resource is None else await _single(pool, tenant, ref)
        title = ref
    else:
        chart_rows = list(await fhir_service.patient_chart(pool, tenant, resource_id))
        if not any(r.resource_type == "Patient" for r in chart_rows):
            raise NotFound(f"no patient {ref}")
        patient_row = next(r for r in chart_rows if r.resource_type == "Patient")
        title = rv.summary_of(rv.loads(patient_row.resource)) or ref
    pairs = [(r.resource_type, r.id) for r in chart_rows]
    versions = await fhir_service.versions_of(pool, tenant, pairs)
    groups = rv.chart_groups(chart_rows, list(versions), run)
    return render(
        request,
        "chart.html",
        ref=ref,
        title=title,
        groups=groups,
        run_id=run,
        count=len(chart_rows),
        marked=sum(1 for g in groups for e in g.entries if e.mark),
        pretty=rv.pretty,
        ref_links=rv.ref_links,
    )


async def _single(pool: asyncpg.Pool, tenant: Any, ref: str) -> list[fhir_service.ChartResource]:
    resource_type, resource_id = ref.split("/", 1)
    async with pool.acquire() as conn:
        current = await fhir_service.current_version(conn, tenant, resource_type, resource_id)
    if current is None or current.deleted or current.json is None:
        return []
    return [
        fhir_service.ChartResource(
            resource_type,
            resource_id,
            current.version_id,
            current.last_updated,
            current.json,
            current.run_id,
        )
    ]
