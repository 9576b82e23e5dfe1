"""The testing API: the scenario health board (`GET /api/testing/board`), the JSON the
console's /board page is drawn from."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from app.api.deps import Tenant
from app.request_state import pool_of
from app.runs import service
from understudy_client.contract.board import Board

router = APIRouter(prefix="/api/testing", tags=["Testing"])


@router.get(
    "/board",
    summary="The scenario health board: one card per scenario of a mode, worst first",
    description="For one mode and one revision, a run counts for a scenario's card when it "
    "is of that scenario, mode and revision and was started at the scenario's current hash "
    "(editing a scenario starts its count again). States: failing (verdicts, none passed), "
    "flaky (some passed, some failed or timed out), passing (every verdict passed, or the "
    "last 3 did), no_results (no verdict yet, with the reason). Cancelled and errored runs "
    "are never verdicts. Cards sort failing, flaky, no_results, passing, then by the share "
    "of failed runs (largest first), then by scenario id.",
)
async def get_board(
    request: Request,
    tenant: Tenant,
    mode: Annotated[Literal["agent", "workflow"], Query(description="agent or workflow")] = "agent",
    revision: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=100,
            description="The revision to show (default: that of the latest run of the mode)",
        ),
    ] = None,
) -> Board:
    return await service.load_board(pool_of(request), tenant.id, mode=mode, revision=revision)
