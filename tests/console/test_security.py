"""The console's security rules over plain HTTP: sessions, CSRF, cookie flags, headers,
tenancy and escaping."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from app.console import session as sessions
from app.console.install import ROUTERS
from app.db import Database, Scopes
from app.settings import Settings
from app.tenants import service as tenants
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import csrf_of, sign_in

# Answered without a session: signing in itself.
PUBLIC = {"/login", "/login/link/{token}"}


def _console_routes() -> list[tuple[str, str]]:
    out = []
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            for method in sorted(route.methods or ()):
                out.append((method, route.path))
    return out


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x-1", path)


def test_the_console_has_routes_to_check() -> None:
    paths = {path for _, path in _console_routes()}
    assert {"/", "/login", "/logout"} <= paths


@pytest.mark.parametrize(("method", "path"), [r for r in _console_routes() if r[1] not in PUBLIC])
async def test_every_page_without_a_session_redirects_to_login(
    server_url: str, method: str, path: str
) -> None:
    async with httpx.AsyncClient(base_url=server_url) as client:
        answer = await client.request(method, _concrete(path))
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].startswith("/login")


async def test_the_redirect_remembers_where_the_person_was_going(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url) as client:
        answer = await client.get("/logout")
    assert answer.headers["location"] == "/login?next=%2Flogout"


async def test_sign_in_sets_a_signed_httponly_lax_cookie_without_the_key(
    tenant: TenantHandle,
) -> None:
    async with httpx.AsyncClient(base_url=tenant.server) as client:
        form = await client.get("/login")
        token = re.search(r'name="token" value="([^"]+)"', form.text)
        assert token
        answer = await client.post("/login", data={"key": tenant.key, "token": token.group(1)})
    assert answer.status_code == 303
    cookies = [v for k, v in answer.headers.multi_items() if k == "set-cookie"]
    session = next(c for c in cookies if c.startswith(sessions.SESSION_COOKIE + "="))
    flags = {part.strip().lower() for part in session.split(";")[1:]}
    assert "httponly" in flags
    assert "samesite=lax" in flags
    assert "secure" not in flags  # plain http here; https sets it (test below)
    value = session.split(";")[0].split("=", 1)[1]
    assert tenant.key not in value
    assert tenant.key[4:20] not in value
    assert tenant.key not in answer.text


async def test_the_cookie_is_secure_behind_https(tenant: TenantHandle) -> None:
    # uvicorn honours X-Forwarded-Proto only from trusted proxies; the request's scheme
    # is what decides, so ask over a client that says it is https through the header
    # the test server trusts (127.0.0.1 is uvicorn's default trusted proxy).
    headers = {"X-Forwarded-Proto": "https"}
    async with httpx.AsyncClient(base_url=tenant.server, headers=headers) as client:
        form = await client.get("/login")
        token = re.search(r'name="token" value="([^"]+)"', form.text)
        assert token
        login_cookie = form.headers["set-cookie"]
        assert "secure" in login_cookie.lower()
        # httpx withholds a Secure cookie from a plain-http URL: send it as https would.
        answer = await client.post(
            "/login",
            data={"key": tenant.key, "token": token.group(1)},
            headers={"Cookie": login_cookie.split(";")[0]},
        )
    session = next(
        v
        for k, v in answer.headers.multi_items()
        if k == "set-cookie" and v.startswith(sessions.SESSION_COOKIE + "=")
    )
    assert "secure" in session.lower()


async def test_a_wrong_key_is_refused_and_not_shown_back(server_url: str) -> None:
    wrong = "usk_" + "x" * 43
    async with httpx.AsyncClient(base_url=server_url) as client:
        form = await client.get("/login")
        token = re.search(r'name="token" value="([^"]+)"', form.text)
        assert token
        answer = await client.post("/login", data={"key": wrong, "token": token.group(1)})
    assert answer.status_code == 401
    assert "not valid" in answer.text
    assert wrong not in answer.text
    assert sessions.SESSION_COOKIE not in answer.headers.get("set-cookie", "")


async def test_a_sign_in_form_from_elsewhere_is_refused(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server) as client:
        answer = await client.post("/login", data={"key": tenant.key, "token": "forged"})
    assert answer.status_code == 403
    assert sessions.SESSION_COOKIE not in answer.headers.get("set-cookie", "")


async def test_pages_carry_the_csp_and_are_not_cached(console: httpx.AsyncClient) -> None:
    for path in ("/", "/login"):
        answer = await console.get(path, follow_redirects=True)
        assert answer.status_code == 200
        assert "default-src 'self'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"


async def test_nothing_on_a_page_leaves_the_machine(console: httpx.AsyncClient) -> None:
    html = (await console.get("/")).text
    assert not re.search(r'(src|href)="(https?:)?//', html)


async def test_post_without_or_with_a_wrong_csrf_token_is_403(
    console: httpx.AsyncClient,
) -> None:
    assert (await console.post("/logout")).status_code == 403
    assert (await console.post("/logout", data={"csrf": "nope"})).status_code == 403
    # Still signed in: the refused forms changed nothing.
    assert (await console.get("/")).status_code == 200


@pytest.mark.parametrize(
    "path", [p for m, p in _console_routes() if m == "POST" and p not in PUBLIC]
)
async def test_every_form_post_needs_the_csrf_token(console: httpx.AsyncClient, path: str) -> None:
    concrete = path.replace("{scenario_id}", "scheduling.book-named-practitioner")
    concrete = _concrete(concrete)
    assert (await console.post(concrete, data={})).status_code == 403
    assert (await console.post(concrete, data={"csrf": "wrong"})).status_code == 403
    # Refused before anything ran: no run was started.
    assert "● live" not in (await console.get("/")).text


async def test_a_csrf_token_of_another_session_is_refused(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    other = await sign_in(tenant.server, tenant.key)
    try:
        foreign = csrf_of((await other.get("/")).text)
    finally:
        await other.aclose()
    assert (await console.post("/logout", data={"csrf": foreign})).status_code == 403


async def test_sign_out_ends_the_session(console: httpx.AsyncClient) -> None:
    token = csrf_of((await console.get("/")).text)
    answer = await console.post("/logout", data={"csrf": token})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    assert (await console.get("/")).status_code == 303


async def test_sign_out_ends_a_copied_cookie_on_the_server(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    copied = console.cookies[sessions.SESSION_COOKIE]
    async with httpx.AsyncClient(
        base_url=tenant.server, cookies={sessions.SESSION_COOKIE: copied}
    ) as thief:
        assert (await thief.get("/")).status_code == 200
        token = csrf_of((await console.get("/")).text)
        assert (await console.post("/logout", data={"csrf": token})).status_code == 303
        # The browser that signed out dropped its cookie; the copy is still signed and
        # unexpired, yet names a session the server has ended.
        assert (await thief.get("/")).status_code == 303
    assert (
        await db.pool.fetchval(
            "SELECT count(*) FROM console_session WHERE tenant_id = $1", tenant.id
        )
    ) == 0


async def test_a_tampered_cookie_is_no_session(console: httpx.AsyncClient) -> None:
    value = console.cookies[sessions.SESSION_COOKIE]
    other = str(uuid.uuid4())
    forged = sessions.Signer(b"not-the-secret-of-this-server").sign(
        "session", {"t": other, "s": other, "n": "n"}
    )
    # A login nonce is signed by the same secret for another purpose (salt): no session.
    login_cookie, _ = sessions.new_login_nonce(sessions.Signer(b"x" * 32))
    tampered = value[:5] + ("A" if value[5] != "A" else "B") + value[6:]
    for bad in (tampered, forged, login_cookie, "", "a.b.c"):
        console.cookies.set(sessions.SESSION_COOKIE, bad)
        assert (await console.get("/")).status_code == 303


async def test_a_revoked_key_ends_its_sessions(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    assert (await console.get("/")).status_code == 200
    await db.pool.execute("UPDATE api_key SET revoked_at = now() WHERE tenant_id = $1", tenant.id)
    assert (await console.get("/")).status_code == 303


async def test_a_sign_in_link_works_once(db: Database, tenant: TenantHandle) -> None:
    async with Scopes(db.pool).transaction() as tx:
        token = await tenants.create_signin_token(tx, tenant.key)
    async with httpx.AsyncClient(base_url=tenant.server) as first:
        answer = await first.get(f"/login/link/{token}")
        assert answer.status_code == 303
        assert (await first.get("/")).status_code == 200
    async with httpx.AsyncClient(base_url=tenant.server) as second:
        again = await second.get(f"/login/link/{token}")
        assert again.status_code == 410
        assert (await second.get("/")).status_code == 303


async def test_an_expired_sign_in_link_is_refused(db: Database, tenant: TenantHandle) -> None:
    async with Scopes(db.pool).transaction() as tx:
        token = await tenants.create_signin_token(tx, tenant.key)
    await db.pool.execute(
        "UPDATE signin_token SET expires_at = now() - interval '1 second' WHERE tenant_id = $1",
        tenant.id,
    )
    async with httpx.AsyncClient(base_url=tenant.server) as client:
        assert (await client.get(f"/login/link/{token}")).status_code == 410


async def test_sign_in_only_goes_on_to_this_site(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server) as client:
        form = await client.get("/login")
        token = re.search(r'name="token" value="([^"]+)"', form.text)
        assert token
        answer = await client.post(
            "/login",
            data={"key": tenant.key, "token": token.group(1), "next": "//evil.example/x"},
        )
    assert answer.headers["location"] == "/"


async def test_the_home_page_names_only_the_signed_in_tenant(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    other = await make_tenant(db, tenant.server, prefix="other")
    html = (await console.get("/")).text
    assert tenant.name in html
    assert other.name not in html


def test_the_secret_is_generated_once_into_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", secret_key=None)
    first = sessions.signing_secret(settings)
    assert len(first) >= 32
    assert sessions.signing_secret(settings) == first
    path = tmp_path / "data" / sessions.SECRET_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert sessions.signing_secret(settings.clone(secret_key="x" * 20)) == b"x" * 20


def test_a_session_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    signer = sessions.Signer(b"s" * 32)
    session = sessions.Session(uuid.uuid4(), uuid.uuid4(), "nonce")
    monkeypatch.setattr(time, "time", lambda: 1_000_000.0)
    value = sessions.encode_session(signer, session)
    monkeypatch.setattr(time, "time", lambda: 1_000_000.0 + 60)
    assert sessions.decode_session(signer, value) == session
    monkeypatch.setattr(time, "time", lambda: 1_000_000.0 + sessions.SESSION_SECONDS + 1)
    assert sessions.decode_session(signer, value) is None


def test_a_value_signed_for_one_purpose_is_refused_for_another() -> None:
    signer = sessions.Signer(b"s" * 32)
    value = signer.sign("login", {"n": "x"})
    assert signer.unsign("login", value, max_age=60) == {"n": "x"}
    assert signer.unsign("session", value, max_age=60) is None
    assert signer.check_token("csrf", "nonce", signer.token("csrf", "nonce"))
    assert not signer.check_token("csrf", "nonce", signer.token("login", "nonce"))
