"""The FastAPI application: lifespan, middleware, routers and error handlers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from app.api.board import router as board_router
from app.api.capture import install_capture
from app.api.evals import router as evals_router
from app.api.fhir import eligibility_router
from app.api.fhir import router as fhir_router
from app.api.run_drafts import router as run_drafts_router
from app.api.runs import router as runs_router
from app.api.scenarios import router as scenarios_router
from app.api.schedules import router as schedules_router
from app.api.usage import router as usage_router
from app.api.webhooks import router as webhooks_router
from app.capture.credentials import use_smtp
from app.console.install import install_console
from app.console.session import signing_secret
from app.db import Database, open_database
from app.edge import EdgeTextCheck
from app.errors import AppError, Issue
from app.fhir.maintenance import AutoAnalyze
from app.fhir.negotiation import FhirFormatMiddleware, response_media_type
from app.fhir.outcomes import operation_outcome
from app.jobs import connect_jobs
from app.kit import jsontext
from app.kit.urls import FHIR_PREFIX, run_view_base
from app.lane import LeanApp, include_flat
from app.llm.client import LlmClient
from app.mcp.endpoint import MCP_PATH, McpEndpoint
from app.openapi import install_openapi
from app.outage import OUTAGE_ERRORS, RETRY_AFTER_SECONDS, OutageLog, is_outage
from app.runs import service as runs_service
from app.runs.live import LiveRuns
from app.settings import Settings
from app.smtp import SmtpServer
from app.trace.recorder import TraceMiddleware, TraceRecorder, TraceRow
from app.wiring import wire_units_of_work

log = logging.getLogger("understudy.api")

VERSION = "0.1.0"


def _is_fhir_path(path: str) -> bool:
    return "/fhir/r4" in path


def _error_response(
    request: Request,
    status: int,
    issues: list[Issue],
    title: str,
    headers: dict[str, str] | None = None,
) -> Response:
    if _is_fhir_path(request.url.path):
        return Response(
            jsontext.dumpb(operation_outcome(issues)),
            status_code=status,
            media_type=response_media_type(request.scope),
            headers=headers,
        )
    body: dict[str, Any] = {"title": title, "status": status, "detail": title}
    if issues and (len(issues) > 1 or issues[0].expression):
        body["errors"] = [{"path": i.expression or "", "message": i.message} for i in issues]
    return JSONResponse(
        body, status_code=status, media_type="application/problem+json", headers=headers
    )


async def _watch_database(db: Database, outage: OutageLog) -> None:
    """While requests meet an outage, ask the database every second; log its return."""
    while True:
        await asyncio.sleep(1.0)
        if outage.down:
            with contextlib.suppress(Exception):
                await db.ping()
                outage.ok()


def create_app(settings: Settings) -> FastAPI:
    if settings.database_url is None:
        raise ValueError("create_app needs settings.database_url (resolve endpoints first)")
    recorder_ref: dict[str, Any] = {}
    mcp_ref: dict[str, McpEndpoint] = {}
    # PostgreSQL away: requests answer 503 (backend_away); logged once, and once back.
    outage = OutageLog(log, "database")
    app = LeanApp(
        title="Understudy",
        version=VERSION,
        description="A FHIR R4 sandbox with a testing API for clinical agents and automations.",
        lifespan=_lifespan(settings, settings.database_url, outage, recorder_ref, mcp_ref),
    )
    app.state.settings = settings
    # FHIR answers labelled with the JSON type the client asked for (or 406 for XML).
    app.add_middleware(FhirFormatMiddleware)
    # Inside the trace, so a refused request is still recorded.
    app.add_middleware(
        EdgeTextCheck, render=_error_response, max_body_bytes=settings.max_body_bytes
    )
    app.add_middleware(TraceMiddleware, recorder_ref=recorder_ref)
    _install_error_handlers(app, outage)
    mcp_ref["endpoint"] = _install_routes(app, settings)
    return app


def _lifespan(
    settings: Settings,
    database_url: str,
    outage: OutageLog,
    recorder_ref: dict[str, Any],
    mcp_ref: dict[str, McpEndpoint],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What the app opens at start-up (the pool, the job queue, the caches, the trace
    recorder, the HTTP and LLM clients) into `app.state`, and closes at shutdown."""
    redis_url = settings.redis_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await open_database(database_url, settings.db_pool_size)
        jobs = await connect_jobs(redis_url, settings.queue_name) if redis_url else None

        live_runs = LiveRuns(db.pool)
        autoanalyze = AutoAnalyze(db.pool)
        # What every unit of work of this process sends after it commits.
        wired = wire_units_of_work(
            db.pool,
            jobs,
            settings,
            live_changed=live_runs.forget,
            also_wrote=autoanalyze.note_writes,
        )
        scopes, quota, limits = wired.scopes, wired.quota, wired.limits

        async def calls_recorded(rows: list[TraceRow]) -> None:
            # Traced calls can satisfy api_call expectations: regrade their runs soon.
            attributed = {(row[0], row[1]) for row in rows if row[1] is not None}
            shared = {row[0] for row in rows if row[1] is None}
            async with scopes.transaction(autocommit=True) as tx:
                await runs_service.mark_changed(tx, attributed, shared)

        recorder = TraceRecorder(db.pool, on_flush=calls_recorded)
        recorder.start()
        watcher = asyncio.create_task(_watch_database(db, outage), name="watch-database")
        recorder_ref["recorder"] = recorder
        app.state.db = db
        app.state.scopes = scopes
        app.state.recorder = recorder
        app.state.jobs = jobs
        app.state.live_runs = live_runs
        app.state.quota = quota
        app.state.run_limits = limits
        app.state.autoanalyze = autoanalyze
        app.state.http = httpx.AsyncClient(follow_redirects=False)
        app.state.llm = LlmClient(app.state.http, settings, db.pool)
        # The runs' SMTP server, on this loop, when a port is set; run views show its address.
        smtp = app.state.smtp = SmtpServer(db.pool, scopes, recorder)
        if settings.smtp_port is not None:
            use_smtp(await smtp.start(settings.smtp_host, settings.smtp_port))
        try:
            yield
        finally:
            if smtp.address is not None:
                use_smtp(None)
                await smtp.stop()
            watcher.cancel()
            await mcp_ref["endpoint"].close()
            await app.state.http.aclose()
            await app.state.autoanalyze.stop()
            await recorder.stop()
            if jobs is not None:
                await jobs.close()
            await db.close()

    return lifespan


def _install_error_handlers(app: FastAPI, outage: OutageLog) -> None:
    """Every error rendered as an OperationOutcome (FHIR paths) or problem+json: the
    app's own, a request that does not validate, an unknown route, the backend away
    (503), and anything else (500, logged)."""

    @app.exception_handler(AppError)
    async def app_error(request: Request, exc: AppError) -> Response:
        return _error_response(request, exc.status, exc.issues, exc.message, exc.headers or None)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        issues = [
            Issue(
                str(e.get("msg", "invalid")),
                expression=".".join(str(p) for p in e.get("loc", ()) if p != "body") or None,
            )
            for e in exc.errors()
        ]
        return _error_response(request, 422, issues, "the request is not valid")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        code = {404: "not-found", 405: "not-supported"}.get(exc.status_code, "processing")
        return _error_response(request, exc.status_code, [Issue(message, code=code)], message)

    async def backend_away(request: Request, exc: Exception) -> Response:
        """PostgreSQL (or Redis) away: 503 with Retry-After, the outage logged once."""
        if not is_outage(exc):
            return await unexpected(request, exc)
        outage.failed(exc, "requests answer 503 until it is back")
        message = "the service's database is not reachable right now; try again shortly"
        return _error_response(
            request,
            503,
            [Issue(message, code="transient")],
            message,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    for error in (*OUTAGE_ERRORS, asyncpg.InterfaceError, asyncpg.InternalClientError):
        app.add_exception_handler(error, backend_away)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled_error path=%s", request.url.path)
        return _error_response(
            request,
            500,
            [Issue("internal error; it has been logged", code="exception")],
            "internal error",
        )


def _install_routes(app: FastAPI, settings: Settings) -> McpEndpoint:
    """The health check, the FHIR API (at its base and each run's), the testing API's
    routers, the console, the OpenAPI document and MCP at /mcp (returned)."""

    @app.get("/health", tags=["Service"], summary="Liveness (no key needed)")
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": VERSION}

    include_flat(app, fhir_router, FHIR_PREFIX)
    # Each run's own FHIR base: the same API, hiding other runs' resources.
    include_flat(app, fhir_router, run_view_base("", "{run_id}"), include_in_schema=False)
    app.include_router(eligibility_router)
    app.include_router(scenarios_router)
    app.include_router(runs_router)
    app.include_router(run_drafts_router)
    app.include_router(usage_router)
    app.include_router(webhooks_router)
    app.include_router(evals_router)
    app.include_router(schedules_router)
    app.include_router(board_router)
    install_capture(app, lambda: signing_secret(settings))
    # The console's pages for people, under / (not in the OpenAPI document).
    install_console(app, settings)
    # MCP (streamable HTTP) at /mcp, with or without the trailing slash clients differ on.
    install_openapi(app)
    mcp_endpoint = McpEndpoint(app, settings)
    for path in (MCP_PATH, MCP_PATH + "/"):
        app.router.routes.append(Route(path, mcp_endpoint, include_in_schema=False))
    return mcp_endpoint
