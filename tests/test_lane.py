"""The lean path (app/lane.py): `RouteIndex` picks the route the router itself would
pick, on the app's real routes and on paths that trip the shortcuts (slash counts, a
`:path` parameter, methods no route names, mounts); `LeanApp` serves a direct route on
its lean stack, with the app's middlewares and exception handlers, and leaves every
other request (404, 405, a slash redirect, a route that needs FastAPI) to FastAPI."""

from __future__ import annotations

import itertools

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import AppError, BadRequest
from app.lane import LeanApp, RouteIndex, include_flat
from app.main import create_app
from app.settings import Settings


def _router_choice(routes: list[BaseRoute], scope: Scope) -> BaseRoute | None:
    """What Starlette's router loop picks: the first route matching fully."""
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def _scope(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


PATHS = [
    "/",
    "/health",
    "/docs",
    "/openapi.json",
    "/api/fhir/r4",
    "/api/fhir/r4/",
    "/api/fhir/r4/metadata",
    "/api/fhir/r4/_history",
    "/api/fhir/r4/Patient",
    "/api/fhir/r4/Patient/",
    "/api/fhir/r4/Patient/p1",
    "/api/fhir/r4/Patient/_search",
    "/api/fhir/r4/Patient/_history",
    "/api/fhir/r4/Patient/p1/_history",
    "/api/fhir/r4/Patient/p1/_history/2",
    "/api/fhir/r4/Patient/p1/_history/2/extra",
    "/api/fhir/r4/Appointment/$find",
    "/api/testing/runs/r1/fhir/r4/Patient/p1",
    "/api/testing/runs/r1/fhir/r4/metadata",
    "/api/testing/runs/r1",
    "/api/testing/scenarios",
    "/runs/r1",
    "/static/console.css",
    "/mcp",
    "/a" + "/b" * 40,
]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW"]


def test_the_index_picks_what_the_router_picks_on_the_apps_routes() -> None:
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
    routes = list(app.router.routes)
    index = RouteIndex(routes)
    for method, path in itertools.product(METHODS, PATHS):
        scope = _scope(method, path)
        picked = index.first_full(scope, path)
        assert (picked[0] if picked else None) is _router_choice(routes, scope), (method, path)


def test_the_index_keeps_routes_it_cannot_judge_and_the_routes_order() -> None:
    async def endpoint(request: Request) -> Response:
        return Response("")

    async def mounted(scope: Scope, receive: Receive, send: Send) -> None:
        return None

    router = APIRouter()
    router.add_api_route("/files/{rest:path}", endpoint, methods=["GET"])
    router.add_api_route("/files/{name}", endpoint, methods=["GET"])
    router.add_api_route("/x/{a}", endpoint, methods=["POST"])
    router.add_api_route("/x/{a}", endpoint, methods=["GET"])
    routes: list[BaseRoute] = [Mount("/x", app=mounted), *router.routes]
    index = RouteIndex(routes)
    for method, path in itertools.product(
        ["GET", "POST", "TRACE"], ["/files/a", "/files/a/b/c", "/x/1", "/x/1/2", "/y"]
    ):
        scope = _scope(method, path)
        picked = index.first_full(scope, path)
        assert (picked[0] if picked else None) is _router_choice(routes, scope), (method, path)
    # A `:path` parameter takes any number of slashes: tried whatever the path's count.
    assert routes[1] in index.candidates("GET", "/files/a/b/c/d")
    # A method no route names still tries the routes that name none (the mount).
    assert index.candidates("TRACE", "/x/1") == [routes[0]]


class Stamp:
    """A pure ASGI middleware, as the app's are: marks the answers it saw."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stamped(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                message["headers"] = [*headers, (b"x-stamp", b"1")]
            await send(message)

        await self.app(scope, receive, stamped)  # type: ignore[arg-type]


def _app() -> LeanApp:
    app = LeanApp()
    app.add_middleware(Stamp)
    router = APIRouter()

    @router.get("/things/{kind}/{thing_id}")
    async def thing(request: Request, kind: str, thing_id: str) -> Response:
        if thing_id == "bad":
            raise BadRequest("bad thing")
        if thing_id == "boom":
            raise RuntimeError("boom")
        lane = "lean" if "fastapi_middleware_astack" not in request.scope else "fastapi"
        return Response(f"{kind} {thing_id} {lane} {request.app is app}")

    @router.get("/typed/{n}")
    async def typed(n: int) -> Response:  # FastAPI's: a typed parameter
        return Response(str(n))

    include_flat(app, router, "/api")

    @app.exception_handler(AppError)
    async def app_error(request: Request, exc: AppError) -> Response:
        return Response(exc.message, status_code=exc.status)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        return Response("logged", status_code=500)

    return app


@pytest.fixture
async def client() -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


async def test_a_direct_route_is_served_on_the_lean_stack(client: httpx.AsyncClient) -> None:
    answer = await client.get("/api/things/Patient/p1")
    assert answer.text == "Patient p1 lean True"
    assert answer.headers["x-stamp"] == "1"  # the app's middlewares run
    bad = await client.get("/api/things/Patient/bad")
    assert (bad.status_code, bad.text, bad.headers["x-stamp"]) == (400, "bad thing", "1")
    boom = await client.get("/api/things/Patient/boom")
    assert (boom.status_code, boom.text) == (500, "logged")


async def test_everything_else_goes_through_fastapi(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/typed/7")).text == "7"
    assert (await client.get("/api/typed/x")).status_code == 422
    assert (await client.post("/api/things/Patient/p1")).status_code == 405
    assert (await client.get("/api/nothing")).status_code == 404
    redirect = await client.get("/api/things/Patient/p1/")
    assert redirect.status_code == 307
    assert redirect.headers["location"] == "http://t/api/things/Patient/p1"


async def test_routes_added_after_the_first_request_are_indexed() -> None:
    app = _app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.get("/api/later/x/y")).status_code == 404
        router = APIRouter()

        @router.get("/later/{a}/{b}")
        async def later(request: Request, a: str, b: str) -> Response:
            return Response(a + b)

        include_flat(app, router, "/api")
        assert (await client.get("/api/later/x/y")).text == "xy"


def test_the_app_is_a_lean_app_with_its_fhir_routes_direct() -> None:
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
    assert isinstance(app, LeanApp) and isinstance(app, FastAPI)
    paths = {getattr(r, "path", "") for r in app.direct_routes.values()}
    assert "/api/fhir/r4/{resource_type}/{resource_id}" in paths
    assert "/api/testing/runs/{run_id}/fhir/r4/{resource_type}" in paths
