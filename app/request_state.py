"""What a request reads of what the app's lifespan built (app/main.py puts it in
`app.state`): the database pool, the transaction scopes, the run limits, and the root URL
the request was made to. The API's routes and the console's pages both take these from
here, so they are wired once."""

from __future__ import annotations

from typing import Any

import asyncpg
from starlette.requests import Request

from app.db import Scopes
from app.tenants.quota import RunLimits


def pool_of(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.db.pool
    return pool


def scopes_of(request: Request) -> Scopes:
    """The request scope: `async with scopes_of(request).transaction() as tx:` commits
    on leaving, then sends what the services noted in `tx.after`."""
    scopes: Scopes = request.app.state.scopes
    return scopes


def limits_of(request: Request) -> RunLimits:
    limits: RunLimits = request.app.state.run_limits
    return limits


# The root URL by what Starlette builds it from (scheme, Host header, server address,
# root path), so a request does not build a URL object for it (a few per cent of a FHIR
# read). Bounded, as the Host header is the client's to choose: emptied when full.
_ROOTS: dict[tuple[Any, ...], str] = {}
ROOTS_CACHED = 256


def root_url(request: Request) -> str:
    """The configured public URL, else the one the request was made to (no slash at the
    end)."""
    configured: str | None = request.app.state.settings.public_url
    if configured:
        return configured.rstrip("/")
    scope = request.scope
    key = (
        scope.get("scheme"),
        request.headers.get("host"),
        scope.get("server"),
        scope.get("app_root_path"),
        scope.get("root_path"),
    )
    root = _ROOTS.get(key)
    if root is None:
        if len(_ROOTS) >= ROOTS_CACHED:
            _ROOTS.clear()
        root = _ROOTS[key] = str(request.base_url).rstrip("/")
    return root
