"""The eval pages: the list, starting an eval (preview, then start), the eval page (live
while it runs) and the compare page.

Every figure comes from the evals service the REST API calls (`app.api.evals`): the
preview is `preview_eval` (the same checks `create_eval` makes, writing nothing), Start is
`create_eval`, the page is `eval_view`, the compare `compare_evals`, the default baseline
the CI rule (`baseline_choices`). While an eval runs its page polls `/evals/{id}/live`
every second with `If-None-Match`; the ETag is a digest of the eval's view (each item's
status and run), so any API process answers any poll alike, and polling stops once the
eval is completed or cancelled.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response

from app.console import eval_views as ev
from app.console.web import (
    CSRF_FIELD,
    Listed,
    PostedForm,
    SignedIn,
    Viewer,
    console_of,
    console_router,
    page_cursor,
    pager,
    redirect,
    render,
)
from app.errors import AppError
from app.evals import service
from app.request_state import limits_of, pool_of, root_url, scopes_of
from app.scenarios import service as scenarios_service
from app.schedules import service as schedules_service
from understudy_client import ci
from understudy_client.contract.evals import EvalView

router = console_router()

PAGE_SIZE = 50
LIVE_TEMPLATE = "evals/_live.html"


# --- the list -------------------------------------------------------------------------


@router.get("/evals")
async def evals_list(
    request: Request,
    viewer: SignedIn,
    query: Listed,
) -> Response:
    filters = query.filters(service.EVAL_STATUSES)
    rows = await service.list_evals(
        pool_of(request),
        viewer.tenant.id,
        filters["label"],
        PAGE_SIZE + 1,
        revision=filters["revision"],
        status=filters["status"],
        scenario_id=filters["scenario"],
        before=page_cursor(query.before),
    )
    found, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
    kept = {k: v for k, v in filters.items() if v}
    last = (found[-1].created_at, found[-1].id) if more else None
    # The summary's pass rate is C/N over the valid runs: the list's counts say the same.
    rates = {e.id: ev.list_rate(e.counts) for e in found if e.status in ("completed", "cancelled")}
    schedules = await schedules_service.list_schedules(pool_of(request), viewer.tenant.id)
    return render(
        request,
        "evals/list.html",
        evals=found,
        schedules=schedules,
        rates=rates,
        percent=ev.percent,
        eval_state=ev.eval_state,
        filters=filters,
        statuses=service.EVAL_STATUSES,
        pages=pager("/evals", kept, last, paged=bool(query.before)),
        filtered=bool(kept),
    )


# --- starting an eval -----------------------------------------------------------------


async def _categories(request: Request, viewer: Viewer) -> list[ev.Category]:
    loaded = await scenarios_service.list_scenarios(pool_of(request), viewer.tenant.id)
    return ev.categories_of(loaded)


def _new_page(
    request: Request,
    categories: list[ev.Category],
    form: ev.StartForm,
    *,
    status: int = 200,
    preview: service.Preview | None = None,
    problem: str | None = None,
) -> Response:
    return render(
        request,
        "evals/new.html",
        status=status,
        form=form,
        categories=categories,
        persona_names=ev.persona_names(categories),
        repeat_choices=ev.REPEAT_CHOICES,
        modes=ev.MODES,
        preview=preview,
        problem=problem,
        fingerprint=form.fingerprint(categories) if preview else "",
        max_runs=service.MAX_RUNS,
    )


@router.get("/evals/new")
async def new_form(request: Request, viewer: SignedIn) -> Response:
    categories = await _categories(request, viewer)
    return _new_page(request, categories, ev.StartForm())


@router.post("/evals/new")
async def new_post(request: Request, viewer: SignedIn, form: PostedForm) -> Response:
    """Preview (the numbers, nothing written) or Start; Start of a request other than the
    one previewed previews again."""
    categories = await _categories(request, viewer)
    posted = ev.StartForm.of(form)
    problem = ev.form_problem(posted)
    if problem is not None:
        return _new_page(request, categories, posted, status=422, problem=problem)
    eval_request = posted.request(categories)
    previewed = form.get("previewed")
    start = form.get("action") == "start" and previewed == posted.fingerprint(categories)
    try:
        if not start:
            preview = await service.preview_eval(
                pool_of(request), viewer.tenant.id, eval_request, limits=limits_of(request)
            )
            return _new_page(request, categories, posted, preview=preview)
        async with scopes_of(request).transaction() as tx:
            eval_id = await service.create_eval(
                tx, viewer.tenant.id, eval_request, root_url=root_url(request)
            )
    except AppError as exc:  # the API's own reason (over 100 runs, a wrong mode, …)
        return _new_page(request, categories, posted, status=exc.status, problem=exc.message)
    return redirect(f"/evals/{eval_id}")


# --- the eval page --------------------------------------------------------------------


def _etag(view: EvalView, viewer: Viewer) -> str:
    state = "|".join(f"{r.position}:{r.status}:{r.run_id}" for r in view.runs)
    digest = hashlib.sha256(f"{view.status}|{state}|{viewer.csrf}".encode()).hexdigest()[:24]
    return f'W/"{digest}"'


def _eval_context(view: EvalView) -> dict[str, Any]:
    summary = view.summary
    return {
        "eval": view,
        "final": view.status in ("completed", "cancelled"),
        "progress": ev.progress_of(view),
        "grid": ev.grid_of(view.runs),
        "summary": summary,
        "bar": ev.bar_of(summary.pass_rate) if summary else None,
        "mde": ev.mde_sentence(summary.pass_rate) if summary else None,
        "indicative": summary is not None and summary.pass_rate.runs < ev.INDICATIVE_UNDER,
        "excluded_runs": [r for r in view.runs if r.status in ("cancelled", "errored")],
        "briefs": [r for r in view.runs if r.brief] if view.mode == "agent" else [],
        "percent": ev.percent,
        "mark_state": ev.mark_state,
        "eval_state": ev.eval_state,
    }


@router.get("/evals/{eval_id}")
async def eval_page(request: Request, viewer: SignedIn, eval_id: str) -> Response:
    view = await service.eval_view(pool_of(request), viewer.tenant.id, eval_id, root_url(request))
    context = _eval_context(view)
    return render(
        request,
        "evals/page.html",
        etag=_etag(view, viewer),
        live_url=f"/evals/{eval_id}/live",
        **context,
    )


@router.get("/evals/{eval_id}/live")
async def eval_live(request: Request, viewer: SignedIn, eval_id: str) -> Response:
    """The eval page's live section, when the eval changed since `If-None-Match`."""
    view = await service.eval_view(pool_of(request), viewer.tenant.id, eval_id, root_url(request))
    etag = _etag(view, viewer)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    context = _eval_context(view)
    html = (
        console_of(request)
        .templates.get_template(LIVE_TEMPLATE)
        .render(viewer=viewer, csrf=viewer.csrf, csrf_field=CSRF_FIELD, **context)
    )
    body = {"status": view.status, "final": context["final"], "html": html}
    return JSONResponse(body, headers=headers)


@router.post("/evals/{eval_id}/cancel")
async def cancel(request: Request, viewer: SignedIn, form: PostedForm, eval_id: str) -> Response:
    async with scopes_of(request).transaction() as tx:
        await service.cancel_eval(tx, viewer.tenant.id, eval_id)
    return redirect(f"/evals/{eval_id}")


# --- the compare page -----------------------------------------------------------------


@router.get("/evals/{eval_id}/compare")
async def compare_page(
    request: Request,
    viewer: SignedIn,
    eval_id: str,
    baseline: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    pool = pool_of(request)
    view = await service.eval_view(pool, viewer.tenant.id, eval_id, root_url(request))
    # The default: the eval's own baseline (a schedule's previous eval) when it has one,
    # as its eval.regressed event compared it, else the CI rule's.
    choices, default = await service.baseline_choices(pool, viewer.tenant.id, eval_id)
    chosen = (baseline or "").strip() or default
    comparison = None
    pairs: dict[tuple[str, str], str] = {}
    if chosen is not None:
        comparison = await service.compare_evals(
            pool, viewer.tenant.id, eval_id, chosen, alpha=0.05
        )
        other = await service.eval_view(pool, viewer.tenant.id, chosen, root_url(request))
        pairs = ev.run_pairs(other.runs, view.runs)
    return render(
        request,
        "evals/compare.html",
        eval=view,
        choices=choices,
        chosen=chosen,
        default=default,
        prefix=ci.label_prefix(view.label),
        comparison=comparison,
        verdict=ev.verdict_of(comparison) if comparison else None,
        pairs=pairs,
        cell_rate=ev.cell_rate,
        cell_label=ev.cell_label,
        attribution_note=ev.attribution_note,
        percent=ev.percent,
        eval_state=ev.eval_state,
    )
