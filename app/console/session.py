"""Console sessions: a signed cookie naming the tenant and a server-side session row
(never the key itself), and CSRF tokens bound to the session.

Signing is itsdangerous's (`URLSafeTimedSerializer`, HMAC-SHA256, a salt per purpose so a
value signed for one use, a login nonce, is never accepted for another, a session; the
signature carries its time, so an old cookie expires without a stored date). The secret is
`UNDERSTUDY_SECRET_KEY`, else generated once into the data directory, so every process
sharing that directory and a restart keep sessions valid.

A signed cookie alone cannot be taken back, so every sign-in also writes a
`console_session` row and each request reads it with the key it was signed in with
(`app.tenants.service.tenant_of_session`): sign-out deletes the row, so a copied cookie
stops working at once, and a revoked key ends its sessions at their next request. The CSRF
token is a signature of the session's random nonce: a form posted from another site cannot
know it, and it changes with every sign-in.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

import itsdangerous

from app.settings import Settings

SESSION_COOKIE = "understudy_session"
# The sign-in form's own nonce, so a login form posted from another site is refused too.
LOGIN_COOKIE = "understudy_login"
# A working week: long enough not to nag, short enough that a lost laptop's session ends.
SESSION_SECONDS = 7 * 86_400
LOGIN_FORM_SECONDS = 3600
SECRET_FILE = "console-secret"
_MIN_SECRET_BYTES = 16
_SALT = "understudy.console."


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


class Signer:
    """Timed, salted signatures of small JSON payloads and tokens, one salt per purpose."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _serializer(self, purpose: str) -> itsdangerous.URLSafeTimedSerializer:
        return itsdangerous.URLSafeTimedSerializer(
            self._secret,
            salt=_SALT + purpose,
            signer_kwargs={"digest_method": hashlib.sha256},
        )

    def _token_signer(self, purpose: str) -> itsdangerous.Signer:
        return itsdangerous.Signer(
            self._secret, salt=_SALT + purpose + ".token", digest_method=hashlib.sha256
        )

    def sign(self, purpose: str, payload: dict[str, object]) -> str:
        return self._serializer(purpose).dumps(payload)

    def unsign(self, purpose: str, value: str | None, *, max_age: int) -> dict[str, object] | None:
        """The payload while its signature is good and younger than max_age seconds."""
        if not value:
            return None
        try:
            payload = self._serializer(purpose).loads(value, max_age=max_age)
        except itsdangerous.BadData:
            return None
        return payload if isinstance(payload, dict) else None

    def token(self, purpose: str, nonce: str) -> str:
        return self._token_signer(purpose).get_signature(nonce).decode()

    def check_token(self, purpose: str, nonce: str, token: str | None) -> bool:
        return bool(token) and self._token_signer(purpose).verify_signature(nonce, str(token))


@dataclass(frozen=True, slots=True)
class Session:
    """What the cookie names: the tenant, the server-side session row and its nonce."""

    tenant_id: uuid.UUID
    id: uuid.UUID
    nonce: str

    @classmethod
    def new(cls, tenant_id: uuid.UUID) -> Session:
        return cls(tenant_id, uuid.uuid4(), secrets.token_urlsafe(16))


def encode_session(signer: Signer, session: Session) -> str:
    return signer.sign(
        "session", {"t": str(session.tenant_id), "s": str(session.id), "n": session.nonce}
    )


def decode_session(signer: Signer, value: str | None) -> Session | None:
    payload = signer.unsign("session", value, max_age=SESSION_SECONDS)
    if payload is None:
        return None
    try:
        return Session(
            uuid.UUID(str(payload["t"])), uuid.UUID(str(payload["s"])), str(payload["n"])
        )
    except (KeyError, ValueError):
        return None


def csrf_token(signer: Signer, session: Session) -> str:
    return signer.token("csrf", session.nonce)


def check_csrf(signer: Signer, session: Session, token: str | None) -> bool:
    return signer.check_token("csrf", session.nonce, token)


def new_login_nonce(signer: Signer) -> tuple[str, str]:
    """A sign-in form's cookie value and the token its form carries."""
    nonce = secrets.token_urlsafe(16)
    return signer.sign("login", {"n": nonce}), signer.token("login", nonce)


def check_login_token(signer: Signer, cookie: str | None, token: str | None) -> bool:
    payload = signer.unsign("login", cookie, max_age=LOGIN_FORM_SECONDS)
    if payload is None:
        return False
    return signer.check_token("login", str(payload.get("n", "")), token)
