"""Adding the console to the app: its pages (outside the OpenAPI document) and its
static files."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from app.console import board, evals, pages, run_draft, run_vs, runs, scenarios
from app.console.web import STATIC, STATIC_PREFIX, Console
from app.settings import Settings

# Each page module's router; a new page module adds its router here.
ROUTERS: list[APIRouter] = [
    pages.router,
    scenarios.router,
    runs.router,
    evals.router,
    board.router,
    run_vs.router,
    run_draft.router,
]


def install_console(app: FastAPI, settings: Settings) -> None:
    app.state.console = Console(settings)
    for router in ROUTERS:
        app.include_router(router, include_in_schema=False)
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC), name="console-static")
