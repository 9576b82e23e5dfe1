"""The testing API: a scenario drafted from a run (`POST /api/testing/runs/{id}/scenario`)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import Tenant
from app.kit import jsontext
from app.request_state import pool_of
from app.runs import draft as draft_service
from app.scenarios.validation import Problem
from app.trace.recorder import TraceRecorder
from understudy_client.contract.scenarios import ScenarioDraftOut

log = logging.getLogger("understudy.runs")
router = APIRouter(prefix="/api/testing", tags=["Testing"])


async def _flush_trace(request: Request) -> None:
    """Make this process's buffered calls visible: the draft reads the run's trace."""
    recorder: TraceRecorder = request.app.state.recorder
    try:
        await recorder.flush()
    except Exception:
        # The draft goes on with what is stored; the flusher keeps retrying the rest.
        log.exception("trace_flush_before_draft_failed")


def _problems(problems: list[Problem]) -> list[dict[str, str]]:
    return [{"path": p.path, "message": p.message} for p in problems]


@router.post(
    "/runs/{run_id}/scenario",
    summary="Draft a scenario from an ended run (nothing is saved; import it once edited)",
    response_model=None,
    responses={200: {"model": ScenarioDraftOut, "description": "The draft and what the lint says"}},
)
async def draft_scenario(request: Request, tenant: Tenant, run_id: str) -> Any:
    await _flush_trace(request)
    drafted = await draft_service.draft_of_run(pool_of(request), tenant.id, run_id)
    body = {
        "runId": run_id,
        "draft": drafted.document,
        "problems": _problems(drafted.problems),
        "warnings": _problems(drafted.warnings),
    }
    # Through jsontext, so decimals in the fixture and bodies stay numbers with their scale.
    return Response(jsontext.dumpb(body), media_type="application/json")
