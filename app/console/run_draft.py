"""A finished run's "Save as scenario" (docs/console.md "The run page"): the draft the
REST route gives (`POST /api/testing/runs/{id}/scenario`, `app.runs.draft`) opened in
the import page's editor, with the lint's findings at their paths. Nothing is saved
here: the author edits the draft and saves it with the import page's own Save."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from app.console import scenario_views as views
from app.console.web import PostedForm, SignedIn, console_router, render
from app.kit import jsontext
from app.request_state import pool_of
from app.runs import draft as draft_service

router = console_router()


@router.post("/runs/{run_id}/scenario")
async def save_as_scenario(
    request: Request, viewer: SignedIn, form: PostedForm, run_id: str
) -> Response:
    recorder = getattr(request.app.state, "recorder", None)
    if recorder is not None:
        await recorder.flush()  # the draft reads the run's trace
    drafted = await draft_service.draft_of_run(pool_of(request), viewer.tenant.id, run_id)
    document = drafted.document
    outcome = views.ImportOutcome(
        ok=not drafted.problems,
        errors=[views.ProblemView(p.path, p.message) for p in drafted.problems],
        warnings=[views.ProblemView(p.path, p.message) for p in drafted.warnings],
        scenario_id=str(document["id"]),
        title=str(document["title"]),
    )
    return render(
        request,
        "scenarios/import.html",
        document=jsontext.dumps(document, indent=True),
        outcome=outcome,
        drafted_from=run_id,
    )
