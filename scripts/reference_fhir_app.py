#!/usr/bin/env python3
"""The benchmark's ceiling: Understudy's FHIR store on the leanest ASGI path.

scripts/bench_fhir.py measures each operation on Understudy and on this app in the same
run and gives Understudy's figures as shares of these. For that share to measure what
the product adds, this app does the same FHIR work and leaves out only the product:

Kept, by calling the code Understudy's routes call (so the two cannot drift apart):
- the handlers' work of app/api/fhir.py: the body read with its content-type and size
  checks (`read_body`), the query items, `Prefer`, a conditional create's criteria
  (If-None-Exist), the response headers (ETag, Last-Modified, Location) and bodies
  (`write_response`, `bundles.search_bundle`);
- the store's service (`app.fhir.service`): read (`fetch_current`, the 404 and 410
  rules), search (`parse_search` → `compile_search` → `search_repository.fetch_page`:
  the same SQL, page size and window count), create (the type check, full R4
  validation, stamping, index extraction, the scheduling rules for Appointments), and
  the transaction Bundle the benchmark loads with (`bundles.process_bundle`); the
  little the service itself does for the product (noting the references it touched
  for the trace, naming a write's webhook event types) runs here too, being inside it;
- the write statement's own SQL (`repository.write_statement`: the current row, the
  history row, the date rows, the version guard) with the same plan caching (one
  resource written on a cached generic plan, `generic_plans`: SET, statement, RESET);
- the pool as `app.db.open_database` opens it (size, `plan_cache_mode`, statement
  timeout, the lean connection reset), the tables as `app.models.fhir` declares them;
- the two pure ASGI middlewares every FHIR request passes, which check input and
  format rather than serve the product: `EdgeTextCheck` (NUL, control characters and
  invalid UTF-8 refused; the body limit) and `FhirFormatMiddleware` (content
  negotiation), and AppError answered as an OperationOutcome;
- planner statistics kept as Understudy keeps them: `AutoAnalyze` counts the writes
  (checks after 1,000 writes, at most every 5 s) and the worker's sweep
  (`refresh_statistics(vacuum=True)`) runs on the same five-minute clock;
- `serve`'s GC tuning (collect, freeze, `gc.set_threshold(GC_THRESHOLD, 20, 20)`) and
  its server: uvicorn with uvloop and httptools, no access log (bench_fhir starts it as a
  user would, in a subprocess).

Skipped, the product's overhead:
- FastAPI: plain Starlette routes call the handlers (no dependency solving, no
  OpenAPI, no other routers to match past);
- auth (the API key lookup) and tenancy: one fixed tenant, no run views (no run lookup,
  no visibility filter beyond the tenant's own, no lenient-booking lookup for runs);
- the trace (`TraceMiddleware`, the recorder and its flushes);
- usage: the quota check before a write, the usage counter the write statement adds
  (`COUNT_WRITES`), the quota cache after commit;
- the other parts of Understudy's write statement (`app.runs.fhir_writes`): run
  ownership and the live-run mark, the webhook outbox; with no run and no subscription
  in the benchmark they write nothing but are planned and run on every write;
- the after-commit effects (grading, webhook deliveries, the job queue), the outage
  watcher, the console, MCP and the in-process worker's other jobs.

Started by bench_fhir.py as `uvicorn reference_fhir_app:app` with REFERENCE_DATABASE_URL
naming a scratch database; it creates its three tables when missing. Base URL:
/api/fhir/r4, as Understudy's.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.schema import CreateIndex, CreateTable
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api.fhir import fhir_response, prefers, query_items, read_body, write_response
from app.cli import GC_THRESHOLD
from app.db import open_database
from app.edge import EdgeTextCheck
from app.errors import AppError, Issue
from app.fhir import bundles, service
from app.fhir.maintenance import AutoAnalyze, refresh_statistics
from app.fhir.negotiation import FhirFormatMiddleware, response_media_type
from app.fhir.outcomes import operation_outcome
from app.fhir.repository import write_statement
from app.fhir.search.query import has_criteria
from app.kit import jsontext
from app.kit.urls import FHIR_PREFIX
from app.models import Base
from app.request_state import root_url
from app.settings import Settings

log = logging.getLogger("reference_fhir_app")

TENANT = uuid.UUID("00000000-0000-4000-8000-00000000ce11")
# The store's own statement: no run ownership, usage counter or webhook outbox parts.
STORE_WRITES = write_statement()
FHIR_TABLES = ("fhir_resource", "fhir_history", "fhir_date")
# The worker sweeps statistics at every fifth minute (app/worker.py's cron).
SWEEP_EVERY_S = 300


def _ddl() -> list[str]:
    """CREATE TABLE/INDEX IF NOT EXISTS for the FHIR tables, from the models (which
    `alembic check` keeps equal to the migrations)."""
    dialect = PGDialect()  # type: ignore[no-untyped-call]  # untyped in SQLAlchemy
    statements: list[str] = []
    for name in FHIR_TABLES:
        table = Base.metadata.tables[name]
        statements.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        statements.extend(
            str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect))
            for index in sorted(table.indexes, key=lambda i: str(i.name))
        )
    return statements


async def _sweep(pool: asyncpg.Pool) -> None:
    """The worker's periodic `refresh_statistics(vacuum=True)`, on its clock."""
    while True:
        await asyncio.sleep(SWEEP_EVERY_S - time.time() % SWEEP_EVERY_S)
        try:
            await refresh_statistics(pool, vacuum=True)
        except Exception:
            log.exception("sweep_failed")


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    # As `understudy serve` does once the app is built, before it serves.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 20)
    settings = Settings()
    db = await open_database(os.environ["REFERENCE_DATABASE_URL"], settings.db_pool_size)
    async with db.pool.acquire() as conn:
        for statement in _ddl():
            await conn.execute(statement)
    app.state.settings = settings
    app.state.pool = db.pool
    app.state.autoanalyze = AutoAnalyze(db.pool)
    sweep = asyncio.create_task(_sweep(db.pool), name="sweep-statistics")
    try:
        yield
    finally:
        sweep.cancel()
        await asyncio.gather(sweep, return_exceptions=True)
        await app.state.autoanalyze.stop()
        await db.close()


def _context(request: Request) -> service.FhirContext:
    """The tenant base's context, without the run lookup and trace hook of ours."""
    root = root_url(request)
    return service.FhirContext(
        tenant_id=TENANT, base_url=root + FHIR_PREFIX, root_url=root, write_statement=STORE_WRITES
    )


def _wrote(request: Request, ctx: service.FhirContext) -> None:
    # What Understudy's after-commit hook does for statistics (app/wiring.py: also_wrote).
    autoanalyze: AutoAnalyze = request.app.state.autoanalyze
    autoanalyze.note_writes(ctx.writes)


async def metadata(request: Request) -> Response:
    return fhir_response(
        jsontext.dumpb(
            {
                "resourceType": "CapabilityStatement",
                "status": "active",
                "kind": "instance",
                "fhirVersion": "4.0.1",
                "format": ["json"],
                "software": {"name": "reference app (benchmark ceiling)", "version": "0"},
            }
        )
    )


async def read(request: Request) -> Response:
    ctx = _context(request)
    params = request.path_params
    async with request.app.state.pool.acquire() as conn:
        found = await service.read(ctx, conn, params["resource_type"], params["resource_id"])
    return fhir_response(
        found.json or b"",
        headers={
            "ETag": f'W/"{found.version_id}"',
            "Last-Modified": service.http_date(found.last_updated),
        },
    )


async def search(request: Request) -> Response:
    ctx = _context(request)
    resource_type: str = request.path_params["resource_type"]
    lenient = prefers(request, "handling=lenient")
    async with request.app.state.pool.acquire() as conn:
        page = await service.search(ctx, conn, resource_type, query_items(request), lenient=lenient)
    return fhir_response(bundles.search_bundle(ctx, resource_type, page))


async def create(request: Request) -> Response:
    ctx = _context(request)
    resource = service.parse_body(await read_body(request))
    criteria = request.headers.get("if-none-exist")
    if criteria is None and has_criteria(query_items(request)):
        criteria = request.url.query
    async with request.app.state.pool.acquire() as conn:
        result = await service.create(
            ctx, conn, request.path_params["resource_type"], resource, if_none_exist=criteria
        )
    _wrote(request, ctx)
    return write_response(request, ctx, result)


async def transaction(request: Request) -> Response:
    ctx = _context(request)
    bundle = service.parse_body(await read_body(request))
    minimal = prefers(request, "return=minimal")
    async with request.app.state.pool.acquire() as conn:
        body = await bundles.process_bundle(ctx, conn, bundle, minimal=minimal)
    _wrote(request, ctx)
    return fhir_response(body)


def render_error(
    request: Request,
    status: int,
    issues: list[Issue],
    title: str,
    headers: dict[str, str] | None = None,
) -> Response:
    """An OperationOutcome, as Understudy answers on its FHIR paths."""
    return Response(
        jsontext.dumpb(operation_outcome(issues)),
        status_code=status,
        media_type=response_media_type(request.scope),
        headers=headers,
    )


async def app_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AppError)
    return render_error(request, exc.status, exc.issues, exc.message, exc.headers or None)


app = Starlette(
    routes=[
        Route(f"{FHIR_PREFIX}/metadata", metadata, methods=["GET"]),
        Route(FHIR_PREFIX, transaction, methods=["POST"]),
        Route(FHIR_PREFIX + "/{resource_type}", search, methods=["GET"]),
        Route(FHIR_PREFIX + "/{resource_type}", create, methods=["POST"]),
        Route(FHIR_PREFIX + "/{resource_type}/{resource_id}", read, methods=["GET"]),
    ],
    middleware=[
        # In Understudy's order: the edge check outside content negotiation.
        Middleware(EdgeTextCheck, render=render_error, max_body_bytes=Settings().max_body_bytes),
        Middleware(FhirFormatMiddleware),
    ],
    exception_handlers={AppError: app_error},
    lifespan=lifespan,
)
