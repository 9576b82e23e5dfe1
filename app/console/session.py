"""Console sessions: a signed cookie naming the tenant and the key signed in with (never
the key itself), and CSRF tokens bound to the session.

The cookie is `base64url(json) "." base64url(hmac-sha256)` over the secret
(`UNDERSTUDY_SECRET_KEY`, else generated once into the data directory, so every process
sharing that directory and a restart keep sessions valid). Each request reads the key
row again (`app.tenants.service.tenant_of_key_id`), so a revoked key ends its sessions at
their next request. The CSRF token is an HMAC of the session's random nonce: a form
posted from another site cannot know it, and it changes with every sign-in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from app.settings import Settings

SESSION_COOKIE = "understudy_session"
# The sign-in form's own nonce, so a login form posted from another site is refused too.
LOGIN_COOKIE = "understudy_login"
# A working week: long enough not to nag, short enough that a lost laptop's session ends.
SESSION_SECONDS = 7 * 86_400
LOGIN_FORM_SECONDS = 3600
SECRET_FILE = "console-secret"
_MIN_SECRET_BYTES = 16


def signing_secret(settings: Settings) -> bytes:
    """`UNDERSTUDY_SECRET_KEY`, else the data directory's generated secret (made once)."""
    if settings.secret_key:
        if len(settings.secret_key.encode()) < _MIN_SECRET_BYTES:
            raise ValueError(f"UNDERSTUDY_SECRET_KEY must be at least {_MIN_SECRET_BYTES} bytes")
        return settings.secret_key.encode()
    path = settings.data_dir / SECRET_FILE
    if not path.exists():
        _write_secret(path)
    return path.read_text().strip().encode()


def _write_secret(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    temporary.write_text(secrets.token_urlsafe(48) + "\n")
    temporary.chmod(0o600)
    try:
        # Two processes starting together: the first link wins, both read the same file.
        path.hardlink_to(temporary)
    except FileExistsError:
        pass
    finally:
        temporary.unlink()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """Signs small JSON payloads with a purpose, so a value signed for one use (a login
    nonce) is never accepted for another (a session)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, purpose: str, body: str) -> str:
        digest = hmac.new(self._secret, f"{purpose}|{body}".encode(), hashlib.sha256).digest()
        return _b64(digest)

    def sign(self, purpose: str, payload: dict[str, object]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._mac(purpose, body)}"

    def unsign(self, purpose: str, value: str | None) -> dict[str, object] | None:
        if not value or value.count(".") != 1:
            return None
        body, mac = value.split(".")
        if not hmac.compare_digest(mac, self._mac(purpose, body)):
            return None
        try:
            payload = json.loads(_unb64(body))
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None

    def token(self, purpose: str, nonce: str) -> str:
        return self._mac(purpose, nonce)

    def check_token(self, purpose: str, nonce: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.token(purpose, nonce))


@dataclass(frozen=True, slots=True)
class Session:
    tenant_id: uuid.UUID
    key_id: uuid.UUID
    nonce: str
    issued_at: int

    @classmethod
    def new(cls, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Session:
        return cls(tenant_id, key_id, secrets.token_urlsafe(16), int(time.time()))


def encode_session(signer: Signer, session: Session) -> str:
    return signer.sign(
        "session",
        {
            "t": str(session.tenant_id),
            "k": str(session.key_id),
            "n": session.nonce,
            "i": session.issued_at,
        },
    )


def decode_session(
    signer: Signer, value: str | None, *, now: float | None = None
) -> Session | None:
    payload = signer.unsign("session", value)
    if payload is None:
        return None
    try:
        session = Session(
            uuid.UUID(str(payload["t"])),
            uuid.UUID(str(payload["k"])),
            str(payload["n"]),
            int(str(payload["i"])),
        )
    except (KeyError, ValueError):
        return None
    age = (time.time() if now is None else now) - session.issued_at
    return session if 0 <= age <= SESSION_SECONDS else None


def csrf_token(signer: Signer, session: Session) -> str:
    return signer.token("csrf", session.nonce)


def check_csrf(signer: Signer, session: Session, token: str | None) -> bool:
    return signer.check_token("csrf", session.nonce, token)


def new_login_nonce(signer: Signer) -> tuple[str, str]:
    """A sign-in form's cookie value and the token its form carries."""
    nonce = secrets.token_urlsafe(16)
    return signer.sign("login", {"n": nonce, "i": int(time.time())}), signer.token("login", nonce)


def check_login_token(signer: Signer, cookie: str | None, token: str | None) -> bool:
    payload = signer.unsign("login", cookie)
    if payload is None:
        return False
    issued = payload.get("i")
    if not isinstance(issued, int) or not 0 <= time.time() - issued <= LOGIN_FORM_SECONDS:
        return False
    return signer.check_token("login", str(payload.get("n", "")), token)
