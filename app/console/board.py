"""The scenario health board (`/board?mode=&revision=`): the cards of
`GET /api/testing/board` (the same `load_board`), each with its pass-rate chart drawn
here as inline SVG, and the Run buttons: once / 3 / 5 times on a card, and Run all
scenarios after a confirmation that says how many runs it starts and which it skips.

Every start is `runs_service.start_run`, the REST API's, each in its own transaction so
one refusal (the live-run limit, the daily writes) does not undo the others; the result
page lists each refusal with the service's own reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import Response
from markupsafe import Markup
from starlette.datastructures import FormData

from app.console.web import PostedForm, SignedIn, Viewer, console_router, form_text, render
from app.errors import AppError, BadRequest
from app.request_state import limits_of, pool_of, root_url, scopes_of
from app.runs import service as runs_service
from understudy_client.contract.board import Board, BoardCard, RevisionRate

router = console_router()

MODES = ("agent", "workflow")
TIMES = (1, 3, 5)  # the Run buttons of a card
REVISION_MAX = 100  # as the API's revision field

# A card's state: an icon and a word as well as a colour (never colour alone).
BOARD_STATES = {
    "failing": ("✗", "failing", "bad"),
    "flaky": ("≈", "flaky", "warn"),
    "no_results": ("○", "no results", "idle"),
    "passing": ("✓", "passing", "ok"),
}
AGENT_NOTE = (
    "Agent-mode runs need an agent to act on them: each run starts, hands out its brief "
    "and waits for your agent until its deadline. Nothing acts on them by itself."
)

# The chart: one bar per revision.
BAR_W, BAR_GAP, CHART_H = 12, 4, 36


def _mode(value: str | None) -> str:
    mode = (value or "agent").strip()
    if mode not in MODES:
        raise BadRequest(f"mode must be agent or workflow, not '{mode[:40]}'")
    return mode


def _revision(value: str | None) -> str | None:
    revision = (value or "").strip() or None
    if revision is not None and len(revision) > REVISION_MAX:
        raise BadRequest(f"revision is at most {REVISION_MAX} characters")
    return revision


def board_url(mode: str, revision: str | None) -> str:
    params = {"mode": mode} | ({"revision": revision} if revision is not None else {})
    return "/board?" + urlencode(params)


def chart_svg(points: list[RevisionRate], shown: str | None) -> Markup:
    """Pass rate per revision, oldest first: a bar per revision (full height: all passed;
    a dash: no verdict), the revision on show outlined. Server-drawn, no script."""
    if not points:
        return Markup('<p class="muted small">No verdicts at this hash yet.</p>')
    width = len(points) * (BAR_W + BAR_GAP)
    words = []
    parts = []
    for i, p in enumerate(points):
        x = i * (BAR_W + BAR_GAP)
        name = p.revision if p.revision is not None else "no revision"
        if p.rate is None:
            label = f"{name}: no verdict"
            parts.append(
                Markup(
                    '<rect x="{x}" y="{y}" width="{w}" height="2" fill="#8c959f">'
                    "<title>{t}</title></rect>"
                ).format(x=x, y=CHART_H - 2, w=BAR_W, t=label)
            )
        else:
            label = f"{name}: {p.passed}/{p.verdicts} passed ({round(p.rate * 100)}%)"
            h = round(p.rate * CHART_H) if p.rate else 0  # 0%: the red ground alone
            parts.append(
                Markup(
                    '<rect x="{x}" y="0" width="{w}" height="{H}" fill="#f6d5d8">'
                    "<title>{t}</title></rect>"
                    '<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#1a7f37">'
                    "<title>{t}</title></rect>"
                ).format(x=x, w=BAR_W, H=CHART_H, y=CHART_H - h, h=h, t=label)
            )
        if p.revision == shown:
            parts.append(
                Markup(
                    '<rect x="{x}" y="0.5" width="{w}" height="{H}" fill="none" '
                    'stroke="#1f5fbf" stroke-width="1.5"/>'
                ).format(x=x - 1, w=BAR_W + 2, H=CHART_H - 1)
            )
        words.append(label)
    return Markup(
        '<svg class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{a}">{body}</svg>'
    ).format(
        w=width,
        h=CHART_H,
        a="Pass rate per revision, oldest first: " + "; ".join(words),
        body=Markup("").join(parts),
    )


def revision_name(revision: str | None) -> str:
    """A revision as the pages print it; runs without one have their own name."""
    return revision if revision is not None else "(no revision)"


def state_word(state: str) -> Markup:
    icon, word, css = BOARD_STATES[state]
    return Markup(
        '<span class="state {css}"><span aria-hidden="true">{icon}</span> {word}</span>'
    ).format(css=css, icon=icon, word=word)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What Run all would do: the scenarios it starts and those it skips, with why."""

    start: list[str]
    skip: list[tuple[str, str]]
    live: int
    max_live: int

    @property
    def over_limit(self) -> int:
        return max(0, len(self.start) - max(0, self.max_live - self.live))


async def _plan(request: Request, viewer: Viewer, board: Board) -> _Plan:
    start, skip = [], []
    for card in sorted(board.cards, key=lambda c: c.scenario_id):
        if card.live or card.waiting:
            skip.append((card.scenario_id, "a run of it is still live on this revision"))
        else:
            start.append(card.scenario_id)
    async with pool_of(request).acquire() as conn:
        live = await runs_service.count_live(conn, viewer.tenant.id)
    return _Plan(start, skip, live, limits_of(request).max_live)


@dataclass(frozen=True, slots=True)
class _Started:
    scenario_id: str
    run_id: str


async def _start(
    request: Request, viewer: Viewer, scenario_ids: list[str], mode: str, revision: str | None
) -> tuple[list[_Started], list[tuple[str, str]]]:
    started: list[_Started] = []
    refused: list[tuple[str, str]] = []
    for scenario_id in scenario_ids:
        try:
            async with scopes_of(request).transaction() as tx:
                run = await runs_service.start_run(
                    tx,
                    viewer.tenant.id,
                    runs_service.StartRequest(
                        scenario_id, mode, None, "board", None, revision=revision
                    ),
                    limits=limits_of(request),
                    root_url=root_url(request),
                )
            started.append(_Started(scenario_id, run.id))
        except AppError as exc:
            refused.append((scenario_id, exc.message))
    return started, refused


async def _board(request: Request, viewer: Viewer, mode: str | None, revision: str | None) -> Board:
    """The board the page or form names (mode and revision as given, checked here)."""
    return await runs_service.load_board(
        pool_of(request), viewer.tenant.id, mode=_mode(mode), revision=_revision(revision)
    )


async def _form_board(request: Request, viewer: Viewer, form: FormData) -> Board:
    return await _board(request, viewer, form_text(form, "mode"), form_text(form, "revision"))


@router.get("/board")
async def board_page(
    request: Request,
    viewer: SignedIn,
    mode: Annotated[str | None, Query(max_length=20)] = None,
    revision: Annotated[str | None, Query(max_length=REVISION_MAX)] = None,
) -> Response:
    board = await _board(request, viewer, mode, revision)
    return render(
        request,
        "board.html",
        board=board,
        modes=MODES,
        times=TIMES,
        chart=lambda card: chart_svg(card.chart, board.revision),
        state_word=state_word,
        url=board_url,
        revision_name=revision_name,
        agent_note=AGENT_NOTE,
    )


def _card(board: Board, scenario_id: str) -> BoardCard:
    for card in board.cards:
        if card.scenario_id == scenario_id:
            return card
    raise BadRequest(f"no scenario '{scenario_id[:200]}' on the {board.mode} board")


@router.post("/board/runs")
async def run_card(request: Request, viewer: SignedIn, form: PostedForm) -> Response:
    times_text = form_text(form, "times") or ""
    if not times_text.isdigit() or int(times_text) not in TIMES:
        raise BadRequest("times must be 1, 3 or 5")
    board = await _form_board(request, viewer, form)
    mode = board.mode
    card = _card(board, form_text(form, "scenario") or "")
    started, refused = await _start(
        request, viewer, [card.scenario_id] * int(times_text), mode, board.revision
    )
    return render(
        request,
        "board_started.html",
        mode=mode,
        revision=board.revision,
        back=board_url(mode, board.revision),
        started=started,
        refused=refused,
        revision_name=revision_name,
    )


@router.get("/board/run-all")
async def run_all_confirm(
    request: Request,
    viewer: SignedIn,
    mode: Annotated[str | None, Query(max_length=20)] = None,
    revision: Annotated[str | None, Query(max_length=REVISION_MAX)] = None,
) -> Response:
    board = await _board(request, viewer, mode, revision)
    return render(
        request,
        "board_run_all.html",
        mode=board.mode,
        revision=board.revision,
        plan=await _plan(request, viewer, board),
        back=board_url(board.mode, board.revision),
        agent_note=AGENT_NOTE,
        revision_name=revision_name,
    )


@router.post("/board/run-all")
async def run_all(request: Request, viewer: SignedIn, form: PostedForm) -> Response:
    board = await _form_board(request, viewer, form)
    mode = board.mode
    plan = await _plan(request, viewer, board)
    started, refused = await _start(request, viewer, plan.start, mode, board.revision)
    return render(
        request,
        "board_started.html",
        mode=mode,
        revision=board.revision,
        back=board_url(mode, board.revision),
        started=started,
        refused=refused,
        skipped=plan.skip,
        revision_name=revision_name,
    )
