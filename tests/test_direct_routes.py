"""FHIR routes are called directly once matched (`app.main._direct_app`): only routes
whose endpoint takes the request, string path parameters and request-only async
dependencies qualify; any other keeps FastAPI's own handling (which validates queries,
bodies and typed parameters)."""

from __future__ import annotations

from typing import Annotated

import httpx
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from app.api.fhir import router as fhir_router
from app.lane import _direct_app, include_flat


async def _who(request: Request) -> str:
    return request.headers.get("x-who", "nobody")


async def _needs_query(who: Annotated[str, Query()]) -> str:
    return who


def test_every_fhir_route_is_called_directly() -> None:
    routes = [r for r in fhir_router.routes if isinstance(r, APIRoute)]
    assert routes and all(_direct_app(r) is not None for r in routes)


def test_routes_that_need_fastapi_keep_it() -> None:
    router = APIRouter()

    @router.get("/typed/{n}")
    async def typed(n: int) -> Response:
        return Response(str(n))

    @router.get("/query")
    async def query(q: str) -> Response:
        return Response(q)

    @router.get("/deep")
    async def deep(who: Annotated[str, Depends(_needs_query)]) -> Response:
        return Response(who)

    @router.get("/sync/{x}")
    def sync(x: str) -> Response:
        return Response(x)

    routes = [r for r in router.routes if isinstance(r, APIRoute)]
    assert [_direct_app(r) for r in routes] == [None] * 4


async def test_a_direct_route_gets_its_path_parameters_request_and_dependencies() -> None:
    router = APIRouter()

    @router.get("/things/{kind}/{thing_id}")
    async def thing(
        request: Request, kind: str, thing_id: str, who: Annotated[str, Depends(_who)]
    ) -> Response:
        return Response(f"{request.method} {kind} {thing_id} {who}")

    app = FastAPI()
    include_flat(app, router, "/api")
    route = next(r for r in app.router.routes if isinstance(r, APIRoute))
    assert _direct_app(route) is not None
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answer = await client.get("/api/things/Patient/p%201", headers={"x-who": "ana"})
        assert answer.text == "GET Patient p 1 ana"
        assert (await client.post("/api/things/Patient/p1")).status_code == 405
        assert (await client.head("/api/things/Patient/p1")).status_code == 405
