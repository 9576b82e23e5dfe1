"""Sign-in, sign-out and the home page."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response

from app.console import session as sessions
from app.console import views
from app.console.web import (
    PostedForm,
    SignedIn,
    SignInRequired,
    console_of,
    console_router,
    is_https,
    redirect,
    render,
    safe_next,
    viewer_of,
)
from app.errors import Unauthorized
from app.evals import service as evals_service
from app.request_state import pool_of
from app.runs import service as runs_service
from app.scenarios import service as scenarios_service
from app.tenants import service as tenants_service

router = console_router()

RECENT_RUNS = 15
RECENT_EVALS = 5


async def _set_session(
    request: Request, response: Response, holder: tenants_service.KeyHolder
) -> None:
    session = sessions.Session.new(holder.tenant.id)
    await tenants_service.open_console_session(
        pool_of(request), holder, session.id, sessions.SESSION_SECONDS
    )
    response.set_cookie(
        sessions.SESSION_COOKIE,
        sessions.encode_session(console_of(request).signer, session),
        max_age=sessions.SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="lax",
        secure=is_https(request),
    )
    response.delete_cookie(sessions.LOGIN_COOKIE, path="/login")


def _login_page(
    request: Request, next_path: str, *, error: str | None = None, status: int = 200
) -> Response:
    cookie, token = sessions.new_login_nonce(console_of(request).signer)
    response = render(
        request, "login.html", status=status, login_token=token, next=next_path, error=error
    )
    response.set_cookie(
        sessions.LOGIN_COOKIE,
        cookie,
        max_age=sessions.LOGIN_FORM_SECONDS,
        path="/login",
        httponly=True,
        samesite="lax",
        secure=is_https(request),
    )
    return response


@router.get("/login")
async def login_form(request: Request, next: str | None = None) -> Response:
    try:
        await viewer_of(request)
    except SignInRequired:
        return _login_page(request, safe_next(next))
    return redirect(safe_next(next))


@router.post("/login")
async def login(
    request: Request,
    key: Annotated[str, Form(max_length=500)] = "",
    token: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    signer = console_of(request).signer
    if not sessions.check_login_token(signer, request.cookies.get(sessions.LOGIN_COOKIE), token):
        return _login_page(
            request,
            safe_next(next),
            error="The sign-in form had expired. Paste the key again.",
            status=403,
        )
    if not key.strip():
        return _login_page(request, safe_next(next), error="Paste an API key.", status=401)
    try:
        holder = await tenants_service.identify_key(pool_of(request), key)
    except Unauthorized:
        return _login_page(
            request,
            safe_next(next),
            error="That key is not valid: it is unknown or has been revoked.",
            status=401,
        )
    response = redirect(safe_next(next))
    await _set_session(request, response, holder)
    return response


@router.get("/login/link/{token}")
async def login_link(request: Request, token: str) -> Response:
    """A one-time sign-in link (`serve --dev` prints it): valid once, for 10 minutes."""
    holder = await tenants_service.use_signin_token(pool_of(request), token)
    if holder is None:
        return _login_page(
            request,
            "/",
            error="That sign-in link has been used or has expired. Paste the key instead "
            "(serve prints it), or restart serve for a new link.",
            status=410,
        )
    response = redirect("/")
    await _set_session(request, response, holder)
    return response


@router.get("/logout")
async def logout_form(request: Request, viewer: SignedIn) -> Response:
    return render(request, "logout.html")


@router.post("/logout")
async def logout(request: Request, viewer: SignedIn, form: PostedForm) -> Response:
    # Ended on the server: the cookie, wherever it was copied to, names no session now.
    await tenants_service.end_console_session(pool_of(request), viewer.tenant.id, viewer.session.id)
    response = redirect("/login")
    response.delete_cookie(sessions.SESSION_COOKIE, path="/")
    return response


@router.get("/")
async def home(request: Request, viewer: SignedIn) -> Response:
    pool = pool_of(request)
    runs = await runs_service.list_runs(
        pool, viewer.tenant.id, label=None, status=None, scenario_id=None, limit=RECENT_RUNS
    )
    scenarios = await scenarios_service.list_scenarios(pool, viewer.tenant.id)
    lines = [views.run_line(r) for r in runs]
    live = sum(1 for r in lines if r.status == "live")
    # The board's headline for the mode of the latest run (docs/console.md: home shows it),
    # from the cards' states alone (two index-only reads): the whole board, which the page
    # does not show, took 170 ms at 50,000 runs (scripts/bench_board.py).
    board = (
        await runs_service.load_headline(pool, viewer.tenant.id, scenarios, mode=runs[0].mode)
        if runs
        else None
    )
    evals = await evals_service.list_evals(pool, viewer.tenant.id, None, RECENT_EVALS)
    return render(
        request,
        "home.html",
        runs=lines,
        live=live,
        scenario_count=len(scenarios),
        custom_count=sum(1 for s in scenarios if not s.builtin),
        board=board,
        evals=evals,
    )
