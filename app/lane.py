"""The FHIR routes' lean path through the app (issue 31; docs/architecture.md, "The
request path").

A FHIR read used to pass eleven layers before its handler: uvicorn's proxy headers,
FastAPI's own entry, Starlette's error middleware, FastAPI's exception telemetry and
app-wide body limit, our three middlewares, Starlette's exception middleware, FastAPI's
exit-stack middleware and the router, which tried fifteen routes' regular expressions
(the OpenAPI pages, /health, the FHIR routes declared before it) before the read's. Then
FastAPI solved the route's dependencies. Together that was about a third of a read's
CPU, none of it work the request needed.

`LeanApp` is FastAPI with one change at its door. For an HTTP request it first asks
`RouteIndex` which route FastAPI's router would choose: the first route, in the app's
own order, that matches fully. It tries only the routes whose fixed path prefix the
request's path starts with. When that route is a direct one, it is served by a lean
stack made of the app's own parts:
- Starlette's error middleware with the app's 500 handler;
- the app's middlewares (trace, edge check, FHIR format), in the app's order;
- Starlette's exception middleware with the app's other handlers;
- the route itself.

A direct route is one whose endpoint `_direct_app` calls without dependency solving.

Every other request goes through FastAPI unchanged: the lifespan, the console, the
testing API, MCP, and a FHIR path no direct route matches fully (a 404, a 405, a
redirect to the path with or without its slash).

The lean stack leaves out three of FastAPI's layers. Understudy uses none of them:
- its exception telemetry (no telemetry is configured);
- its app-wide body limit (`max_body_size` is unset; our edge check limits bodies);
- its exit stack for uploaded files (direct routes take no forms or files).
`LeanApp` serves nothing on the lean path if a body limit is set.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.routing import APIRoute
from starlette.convertors import PathConvertor
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send


class RouteIndex:
    """The route a router tries first among `routes` that matches a scope fully, found
    by trying only the routes that can match it fully:
    - its path must start with the route's fixed prefix (the text before its first `{`);
    - its method must be one of the route's methods, if the route names any;
    - it must have as many slashes as the route's path, unless a `{…:path}` parameter
      lets the route take any number.
    Any other route (a mount, an included router) is always tried. Routes are tried in
    their order, so the answer is the router's own."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._routes = list(routes)
        self._shapes = [_shape(r) for r in self._routes]
        self._prefixes = sorted({shape[0] for shape in self._shapes if shape is not None})
        self._methods = frozenset(
            m for shape in self._shapes if shape and shape[1] for m in shape[1]
        )
        fixed = [shape[2] for shape in self._shapes if shape is not None and shape[2] is not None]
        # Slash counts past every route's are all alike: one key for them.
        self._most_slashes = max(fixed, default=0) + 1
        # One ordered list of candidates per key (the prefixes a path starts with, its
        # method, its slash count): a bounded number, whatever the requests.
        self._candidates: dict[tuple[Any, ...], list[BaseRoute]] = {}

    def candidates(self, method: str, path: str) -> list[BaseRoute]:
        key = (
            tuple(path.startswith(p) for p in self._prefixes),
            method if method in self._methods else None,
            min(path.count("/"), self._most_slashes),
        )
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = self._compute(*key)
        return found

    def _compute(self, hits: tuple[bool, ...], method: str | None, slashes: int) -> list[BaseRoute]:
        starts = {p for p, hit in zip(self._prefixes, hits, strict=True) if hit}
        found: list[BaseRoute] = []
        for route, shape in zip(self._routes, self._shapes, strict=True):
            if shape is not None:
                prefix, methods, count = shape
                if prefix not in starts:
                    continue
                if methods is not None and method not in methods:
                    continue
                if count is not None and count != slashes:
                    continue
            found.append(route)
        return found

    def first_full(self, scope: Scope, path: str) -> tuple[BaseRoute, Scope] | None:
        """The first route matching `scope` fully and its child scope; None when none
        does (the router then answers 405, redirects or answers 404)."""
        for route in self.candidates(scope["method"], path):
            match, child = route.matches(scope)
            if match is Match.FULL:
                return route, child
        return None


def _shape(route: BaseRoute) -> tuple[str, frozenset[str] | None, int | None] | None:
    """What a plain route's path and methods allow: its fixed prefix, its methods (None:
    any) and its path's slash count (None: any, a `:path` parameter); None for any other
    route."""
    if not isinstance(route, Route):
        return None
    path = route.path
    takes_any = any(isinstance(c, PathConvertor) for c in route.param_convertors.values())
    methods = frozenset(route.methods) if route.methods is not None else None
    return path.split("{", 1)[0], methods, None if takes_any else path.count("/")


class LeanApp(FastAPI):
    """FastAPI whose direct routes are served by a lean stack (see the module's doc)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # By identity: FastAPI's routes are not hashable.
        self.direct_routes: dict[int, BaseRoute] = {}
        self._lane: _Lane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.direct_routes:
            lane = self._lane
            if lane is None or lane.routes_changed(self):
                lane = self._lane = _Lane(self)
            if self.root_path:
                scope["root_path"] = self.root_path
            if lane.enabled:
                picked = lane.index.first_full(scope, _route_path(scope))
                if picked is not None and id(picked[0]) in self.direct_routes:
                    scope["app"] = self
                    scope["router"] = self.router
                    scope.update(picked[1])
                    await lane.stack(scope, receive, send)
                    return
        await super().__call__(scope, receive, send)


class _Lane:
    """The route index and the lean stack, built from the app as it is when the first
    request arrives (routes, middlewares and exception handlers are all added by then);
    rebuilt if routes are added later."""

    def __init__(self, app: LeanApp) -> None:
        self.route_count = len(app.router.routes)
        self.index = RouteIndex(app.router.routes)
        self.enabled = getattr(app, "max_body_size", None) is None
        error_handler = None
        handlers: dict[Any, Any] = {}
        for key, value in app.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        stack: ASGIApp = ExceptionMiddleware(_matched, handlers=handlers, debug=app.debug)
        for cls, args, kwargs in reversed(app.user_middleware):
            stack = cls(stack, *args, **kwargs)
        self.stack: ASGIApp = ServerErrorMiddleware(stack, handler=error_handler, debug=app.debug)

    def routes_changed(self, app: LeanApp) -> bool:
        return len(app.router.routes) != self.route_count


async def _matched(scope: Scope, receive: Receive, send: Send) -> None:
    route: BaseRoute = scope["route"]
    await route.handle(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path the router matches: without the root path (Starlette's rule)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


def include_flat(
    app: FastAPI, router: APIRouter, prefix: str, *, include_in_schema: bool = True
) -> None:
    """Add the router's routes to the app itself under `prefix`: what `include_router`
    does, but matched once per request. (FastAPI's included routers match a request
    twice, once to choose the router and again inside it; on the FHIR hot paths that was
    ~6% of a read's CPU.) Routes `_direct_app` can call directly are marked direct: a
    `LeanApp` serves them on its lean stack."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"include_flat takes FastAPI routes only, not {route!r}")
        app.router.add_api_route(
            prefix + route.path,
            route.endpoint,
            response_model=route.response_model,
            status_code=route.status_code,
            tags=route.tags,
            dependencies=route.dependencies,
            summary=route.summary,
            description=route.description,
            response_description=route.response_description,
            responses=route.responses,
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_include=route.response_model_include,
            response_model_exclude=route.response_model_exclude,
            response_model_by_alias=route.response_model_by_alias,
            response_model_exclude_unset=route.response_model_exclude_unset,
            response_model_exclude_defaults=route.response_model_exclude_defaults,
            response_model_exclude_none=route.response_model_exclude_none,
            include_in_schema=route.include_in_schema and include_in_schema,
            response_class=route.response_class,
            name=route.name,
            openapi_extra=route.openapi_extra,
            generate_unique_id_function=route.generate_unique_id_function,
        )
        added = app.router.routes[-1]
        assert isinstance(added, APIRoute) and added.endpoint is route.endpoint
        direct = _direct_app(added)
        if direct is not None:
            added.app = direct
            if isinstance(app, LeanApp):
                app.direct_routes[id(added)] = added


def _direct_app(route: APIRoute) -> ASGIApp | None:
    """The route's endpoint called directly, without FastAPI's dependency solving, when
    all it takes is the request, path parameters as plain strings and async dependencies
    that take the request alone (the FHIR routes: `request`, `resource_type`, `tenant`);
    None for any other route. Solving those dependencies was a quarter of a FHIR read's
    CPU (py-spy, 2026-12-01), for what is three dictionary lookups and one await here.
    Matching, the OpenAPI document and the exception handlers are the route's own as
    before: only what runs once it matched changes."""
    d = route.dependant
    if (
        d.query_params
        or d.header_params
        or d.cookie_params
        or d.body_params
        or d.background_tasks_param_name
        or d.response_param_name
        or d.security_scopes_param_name
        or d.websocket_param_name
        or d.http_connection_param_name
        or route.dependencies
        or not inspect.iscoroutinefunction(route.endpoint)
    ):
        return None
    if any(f.field_info.annotation is not str for f in d.path_params):
        return None
    subs: list[tuple[str, Callable[..., Awaitable[Any]], str]] = []
    for sub in d.dependencies:
        plain = not (
            sub.path_params
            or sub.query_params
            or sub.header_params
            or sub.cookie_params
            or sub.body_params
            or sub.dependencies
        )
        if not (plain and sub.name and sub.request_param_name and sub.call is not None):
            return None
        if not inspect.iscoroutinefunction(sub.call):
            return None
        subs.append((sub.name, sub.call, sub.request_param_name))
    names = [f.name for f in d.path_params]
    request_name = d.request_param_name
    endpoint = route.endpoint

    async def handle(request: Request) -> Response:
        kwargs: dict[str, Any] = {name: request.path_params[name] for name in names}
        if request_name:
            kwargs[request_name] = request
        for name, call, takes in subs:
            kwargs[name] = await call(**{takes: request})
        response: Response = await endpoint(**kwargs)
        return response

    return request_response(handle)
