"""A run's capture credentials, derived and never stored (docs/capture.md "Credentials").

Every value is an HMAC-SHA256 of the run (and its tenant) under the server's secret
(`UNDERSTUDY_SECRET_KEY`, else DATA_DIR/console-secret: the console's `signing_secret`,
handed in once by `app/main.py`), so every API process of a deployment derives the same
ones and a restart keeps them.

The auth token also tells which tenant the run is of: it is the tenant id masked by an
HMAC of the run id. A call that carries only the token (a Bearer on an integration URL)
finds its tenant without a lookup across tenants: unmasking gives a tenant id, and the
run is then read with that tenant's filter like any other; a made-up token unmasks to a
tenant that has no such run, a 1 in 2^128 guess otherwise.

The secret is the process's: `use_secret` is called by `app.api.capture.install_capture`
(from `create_app`) before the first request; run views built before that (or in a
process that never installs the routes, the worker) carry no capture object. Likewise the
SMTP server's address (`use_smtp`, from the API's lifespan when UNDERSTUDY_SMTP_PORT is
set): its username is the run id and its password the auth token.
"""

from __future__ import annotations

import functools
import hmac
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from app.settings import Settings

ACCOUNT_PREFIX = "AC"
MESSAGE_PREFIX = "SM"
NUMBER_PREFIX = "PN"  # an IncomingPhoneNumber: the run's number
# Twilio's SIDs: two letters, then 32 hex digits (16 bytes).
SID_HEX = 32
_SALT = b"understudy.capture."
# The fictional 555 exchange of the North American plan: a number no one answers.
FROM_PREFIX = "+1555"
FROM_DIGITS = 7

_secret_source: Callable[[], bytes] | None = None
_smtp_address: tuple[str, int] | None = None


def use_secret(source: Callable[[], bytes]) -> None:
    """Where this process's capture credentials get the server's secret (read once, on
    the first use: `signing_secret` may create the data directory's file)."""
    global _secret_source
    _secret_source = functools.cache(source)


def secret() -> bytes | None:
    """The server's secret, None until `use_secret` was called in this process."""
    return None if _secret_source is None else _secret_source()


# The console's generated secret in DATA_DIR (app/console/session.py `SECRET_FILE`, which
# this layer may not import; tests/capture/test_sms_inbound.py holds the two equal).
SECRET_FILE = "console-secret"


def secret_for(settings: Settings) -> bytes | None:
    """The server's secret in a process that may not have installed the capture routes
    (the worker signs the patient's SMS replies): this process's, else
    `UNDERSTUDY_SECRET_KEY`, else the data directory's file once the API has made it.
    Read-only: None when there is none yet."""
    installed = secret()
    if installed is not None:
        return installed
    if settings.secret_key:
        return settings.secret_key.encode()
    path = settings.data_dir / SECRET_FILE
    try:
        return path.read_text().strip().encode() or None
    except FileNotFoundError:
        return None


def use_smtp(address: tuple[str, int] | None) -> None:
    """Where this process's SMTP server listens (`app/smtp.py`, started by the API's
    lifespan), or None once it stopped: run views then carry no `smtp`."""
    global _smtp_address
    _smtp_address = address


def smtp_address() -> tuple[str, int] | None:
    """The host and port of this process's SMTP server, None when it runs none."""
    return _smtp_address


def _mac(key: bytes, purpose: str, *parts: bytes) -> bytes:
    return hmac.new(
        key, _SALT + purpose.encode() + b"\x00" + b"\x00".join(parts), "sha256"
    ).digest()


@dataclass(frozen=True, slots=True)
class RunCredentials:
    account_sid: str
    auth_token: str
    from_number: str
    number_sid: str  # the run's number as a Twilio IncomingPhoneNumber (PN…)


def credentials(key: bytes, tenant_id: uuid.UUID, run_id: str) -> RunCredentials:
    run = run_id.encode()
    account = _mac(key, "account", tenant_id.bytes, run)[: SID_HEX // 2]
    mask = _mac(key, "token", run)[:16]
    token = bytes(a ^ b for a, b in zip(tenant_id.bytes, mask, strict=True))
    digits = int.from_bytes(_mac(key, "from", tenant_id.bytes, run)[:8]) % 10**FROM_DIGITS
    number = _mac(key, "number", tenant_id.bytes, run)[: SID_HEX // 2]
    return RunCredentials(
        account_sid=ACCOUNT_PREFIX + account.hex(),
        auth_token=token.hex(),
        from_number=f"{FROM_PREFIX}{digits:0{FROM_DIGITS}d}",
        number_sid=NUMBER_PREFIX + number.hex(),
    )


def tenant_of_token(key: bytes, run_id: str, token: str) -> uuid.UUID | None:
    """The tenant a token names for this run, None when it is not a token's shape. The
    caller still reads the run under that tenant: only a real run makes the token good."""
    if len(token) != SID_HEX:
        return None
    try:
        raw = bytes.fromhex(token)
    except ValueError:
        return None
    mask = _mac(key, "token", run_id.encode())[:16]
    return uuid.UUID(bytes=bytes(a ^ b for a, b in zip(raw, mask, strict=True)))


def same(given: str, expected: str) -> bool:
    """Compared in constant time (a credential)."""
    return hmac.compare_digest(given.encode(), expected.encode())
