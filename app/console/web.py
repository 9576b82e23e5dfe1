"""What every console page shares: the signed-in person (the auth dependency), the
CSRF-checked form, rendering a template, and the route class that turns errors into
pages and adds the security headers.

A page route is `@router.get(...)` on a router made with `console_router()`; it takes
`viewer: SignedIn` (redirects to /login without a session) and, when it changes state,
`form: PostedForm` (403 without the session's CSRF token). Services raise AppError as
for the REST API; the route class renders it as an HTML page with its status (another
tenant's scenario or run is a 404 page, exactly as the API's 404).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData

from app.console import session as sessions
from app.console import views
from app.errors import AppError, BadRequest
from app.kit import jsontext
from app.request_state import pool_of
from app.settings import Settings
from app.tenants import service as tenants_service
from app.tenants.service import TenantInfo

log = logging.getLogger("understudy.console")

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
STATIC_PREFIX = "/static"

# No request leaves the machine, nothing of ours is framed elsewhere, forms post here only.
CSP = "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
# Pages show tenant data: never kept by a shared cache or the browser's back-forward store.
PAGE_CACHE = "no-store"
CSRF_FIELD = "csrf"

# The header's links; the run-page helper adds its pages here as they land.
NAV: list[tuple[str, str]] = [
    ("/", "Home"),
    ("/scenarios", "Scenarios"),
    ("/runs", "Runs"),
    ("/evals", "Evals"),
    ("/board", "Board"),
]


class SignInRequired(Exception):
    """No valid session: the route class redirects to /login."""


class CsrfRefused(Exception):
    """A state-changing form without the session's CSRF token: 403."""


class Console:
    """The console's per-app state (`app.state.console`): the signing secret (read on first
    use, so an app that never serves a page never writes one) and the templates."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
        )
        self.templates.filters.update(views.FILTERS)
        # `tojson` writes what the API stores: decimals (Decimal, their scale kept) as the
        # numbers they are — json.dumps refused them (500 on a fixture with a lab value).
        self.templates.policies["json.dumps_function"] = _console_json
        self.templates.globals.update(nav=NAV, static=STATIC_PREFIX, states=views.STATES)

    @functools.cached_property
    def signer(self) -> sessions.Signer:
        return sessions.Signer(sessions.signing_secret(self.settings))


def _console_json(value: Any, **kwargs: Any) -> str:
    return jsontext.dumps(value, indent=bool(kwargs.get("indent")))


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in person: their tenant, the session, its CSRF token for forms."""

    tenant: TenantInfo
    session: sessions.Session
    csrf: str


async def viewer_of(request: Request) -> Viewer:
    """The auth dependency of every page: the session cookie's tenant, while its session
    is open on the server and the key it was signed in with is unrevoked."""
    console = console_of(request)
    session = sessions.decode_session(console.signer, request.cookies.get(sessions.SESSION_COOKIE))
    if session is None:
        raise SignInRequired
    tenant = await tenants_service.tenant_of_session(
        pool_of(request), session.tenant_id, session.id
    )
    if tenant is None:
        raise SignInRequired
    viewer = Viewer(tenant, session, sessions.csrf_token(console.signer, session))
    request.state.viewer = viewer
    return viewer


SignedIn = Annotated[Viewer, Depends(viewer_of)]


async def posted_form(request: Request, viewer: SignedIn) -> AsyncIterator[FormData]:
    """The posted form, once its CSRF token is the session's (403 otherwise); its uploaded
    files are closed after the route."""
    form = await request.form()
    try:
        token = form.get(CSRF_FIELD)
        if not isinstance(token, str) or not sessions.check_csrf(
            console_of(request).signer, viewer.session, token
        ):
            raise CsrfRefused
        yield form
    finally:
        await form.close()


PostedForm = Annotated[FormData, Depends(posted_form)]


def form_text(form: FormData, name: str) -> str | None:
    """A text field of the form, stripped; None when missing or empty."""
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def is_https(request: Request) -> bool:
    configured: str | None = request.app.state.settings.public_url
    return request.url.scheme == "https" or bool(configured and configured.startswith("https:"))


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template rendered with what every page needs: the viewer (None when signed
    out), their CSRF token and the current path."""
    viewer: Viewer | None = getattr(request.state, "viewer", None)
    html = (
        console_of(request)
        .templates.get_template(template)
        .render(
            viewer=viewer,
            csrf=viewer.csrf if viewer else "",
            csrf_field=CSRF_FIELD,
            path=request.url.path,
            **context,
        )
    )
    return HTMLResponse(html, status_code=status)


def redirect(url: str) -> RedirectResponse:
    """After a POST, the page to show (303: the browser GETs it)."""
    return RedirectResponse(url, status_code=303)


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path of this site only (never `//host` or a URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    return render(request, "error.html", status=status, title=title, message=message)


_TITLES = {
    400: "Bad request",
    401: "Not signed in",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    410: "Gone",
    422: "Not valid",
    429: "Too many",
}


class ConsoleRoute(APIRoute):
    """Console pages: a missing session redirects to /login, a refused CSRF token is a 403
    page, an AppError a page with its status; every answer carries the security headers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInRequired:
                target = "/login"
                if request.method == "GET" and request.url.path != "/":
                    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    target += "?next=" + quote(path, safe="")
                response = redirect(target)
                response.delete_cookie(sessions.SESSION_COOKIE, path="/")
            except CsrfRefused:
                response = _error_page(
                    request,
                    403,
                    "Forbidden",
                    "This form has expired or did not come from this page. Reload the page and "
                    "try again.",
                )
            except AppError as exc:
                response = _error_page(
                    request, exc.status, _TITLES.get(exc.status, "Error"), exc.message
                )
            except RequestValidationError as exc:
                fields = ", ".join(".".join(str(p) for p in e.get("loc", ())) for e in exc.errors())
                response = _error_page(request, 422, "Not valid", f"check: {fields}")
            response.headers.update(SECURITY_HEADERS)
            response.headers.setdefault("Cache-Control", PAGE_CACHE)
            return response

        return page


def console_router() -> APIRouter:
    """A router of console pages: outside the OpenAPI document, errors as pages."""
    return APIRouter(route_class=ConsoleRoute, include_in_schema=False)


# --- paged, filtered lists (/runs, /evals) ------------------------------------------------


def page_cursor(value: str | None) -> tuple[datetime, str] | None:
    """`before=<when>|<id>`: the last row of the previous page (newest first)."""
    if not value:
        return None
    at, _, row_id = value.partition("|")
    try:
        return datetime.fromisoformat(at), row_id
    except ValueError:
        raise BadRequest("'before' is not a page cursor") from None


@dataclass(frozen=True, slots=True)
class Pager:
    """Links to the older page (when there is one) and back to the newest (when paged)."""

    older: str | None
    newest: str | None


def pager(
    path: str, kept: dict[str, str], last: tuple[datetime, str] | None, *, paged: bool
) -> Pager:
    """`last`: the (when, id) of the page's last row when more rows follow."""
    older = None
    if last is not None:
        older = f"{path}?" + urlencode({**kept, "before": f"{last[0].isoformat()}|{last[1]}"})
    return Pager(older, f"{path}?" + urlencode(kept) if paged else None)


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The query of a paged, filtered list: label prefix, revision, status, scenario (each
    stripped, None when empty) and the page cursor."""

    label: str | None
    revision: str | None
    status: str | None
    scenario: str | None
    before: str | None

    def filters(self, statuses: tuple[str, ...] | list[str]) -> dict[str, str | None]:
        """The filters, the status checked against the list's own (a 400 naming it)."""
        return {
            "label": self.label,
            "revision": self.revision,
            "status": choice(self.status, statuses, "status"),
            "scenario": self.scenario,
        }


def list_query(
    label: Annotated[str | None, Query(max_length=200)] = None,
    revision: Annotated[str | None, Query(max_length=200)] = None,
    status: Annotated[str | None, Query(max_length=20)] = None,
    scenario: Annotated[str | None, Query(max_length=200)] = None,
    before: Annotated[str | None, Query(max_length=100)] = None,
) -> ListQuery:
    def text(value: str | None) -> str | None:
        return (value or "").strip() or None

    return ListQuery(text(label), text(revision), text(status), text(scenario), before)


Listed = Annotated[ListQuery, Depends(list_query)]


def choice(value: str | None, allowed: tuple[str, ...] | list[str], field: str) -> str | None:
    """A filter's chosen value: None for "any", a 400 naming the field when unknown."""
    if not value:
        return None
    if value not in allowed:
        raise BadRequest(f"'{field}' must be one of {', '.join(allowed)}, not '{value[:40]}'")
    return value
