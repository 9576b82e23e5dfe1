"""The runs' SMTP server (docs/capture.md "E-mail (SMTP)"): mail a run's system sends is
captured on the run, never delivered.

aiosmtpd's SMTP protocol, served on the API process's event loop (`loop.create_server`)
by the API's lifespan when UNDERSTUDY_SMTP_PORT is set. A client signs in with AUTH
PLAIN or LOGIN, the run id as username and the run's auth token as password (the SMS
API's token), without TLS: this is a local sandbox, and nothing leaves it. MAIL FROM
and RCPT TO take any address. The message (DATA) is read with the standard library's
`email` package (`app.capture.mail`), recorded with `capture.record_email` in a unit of
work that marks the run changed, and traced with transport `email`, as the SMS routes
do (`app/api/capture.py`).

Answers: 530 before AUTH, 535 for credentials that are not a run's, 550 when the run
has ended, 250 with the capture's id when it was kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from app.capture import service as capture_service
from app.capture.mail import parse_email
from app.db import Scopes
from app.kit.clock import utcnow
from app.runs import service as runs_service
from app.runs.errors import RunNotFound
from app.trace.recorder import TraceRecorder

log = logging.getLogger("understudy.smtp")

TRANSPORT = "email"
# What the trace row says of the call: the SMTP command that carried the message.
TRACE_METHOD = "DATA"
TRACE_PATH = "/smtp"
# Largest message accepted (SIZE in EHLO's answer; 552 beyond it): attachments included.
MAX_MESSAGE_BYTES = 10 * 1024 * 1024
IDENT = "Understudy SMTP (mail is captured on the run, never delivered)"
# aiosmtpd's logger: a few info lines per connection (its peer, its AUTH mechanisms).
AIOSMTPD_LOG = "mail.log"

AUTH_REQUIRED = (
    "530 5.7.0 Authentication required: AUTH PLAIN or LOGIN with the run id as username "
    "and the run's auth token as password"
)
BAD_CREDENTIALS = "535 5.7.8 Authentication credentials invalid: not a run's id and auth token"


@dataclass(frozen=True, slots=True)
class _Login:
    """Who signed in: the tenant the token names for the run (checked against the run)."""

    tenant_id: uuid.UUID
    run_id: str


def _authenticator(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
) -> AuthResult:
    """The credentials' shape and HMAC (no I/O: aiosmtpd calls this synchronously);
    `_Smtp` then reads the run under the tenant they name."""
    refused = AuthResult(success=False, handled=False, message=BAD_CREDENTIALS)
    if not isinstance(auth_data, LoginPassword):
        return refused
    try:
        run_id, token = auth_data.login.decode(), auth_data.password.decode()
    except UnicodeDecodeError:
        return refused
    tenant_id = capture_service.tenant_of_token(run_id, token)
    if tenant_id is None:
        return refused
    return AuthResult(success=True, auth_data=_Login(tenant_id, run_id))


class _Smtp(SMTP):
    """aiosmtpd's SMTP, with AUTH required before MAIL and a login good only for a run
    that exists under the tenant its token names."""

    def __init__(self, handler: _CaptureHandler, open_: set[_Smtp], **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._capture, self._open = handler, open_
        open_.add(self)

    def connection_lost(self, error: Exception | None) -> None:
        self._open.discard(self)
        super().connection_lost(error)

    async def check_auth_needed(self, caller_method: str) -> bool:
        # What aiosmtpd's `auth_required` does, without its warning about AUTH over a
        # connection without TLS (allowed on purpose: a local sandbox).
        assert self.session is not None
        if not self.session.authenticated:
            await self.push(AUTH_REQUIRED)
            return True
        return False

    async def auth_PLAIN(self, _: Any, args: list[str]) -> AuthResult:
        return await self._run_checked(await super().auth_PLAIN(_, args))

    async def auth_LOGIN(self, _: Any, args: list[str]) -> AuthResult:
        return await self._run_checked(await super().auth_LOGIN(_, args))

    async def _run_checked(self, result: AuthResult) -> AuthResult:
        login = result.auth_data
        if not result.success or not isinstance(login, _Login):
            return result
        if await self._capture.run_of(login) is None:
            return AuthResult(success=False, handled=False, message=BAD_CREDENTIALS)
        return result


class _CaptureHandler:
    """aiosmtpd's handler hooks: the run checked at MAIL and DATA, the message captured."""

    def __init__(self, pool: asyncpg.Pool, scopes: Scopes, recorder: TraceRecorder) -> None:
        self.pool, self.scopes, self.recorder = pool, scopes, recorder

    async def run_of(self, login: _Login) -> runs_service.RunRow | None:
        async with self.pool.acquire() as conn:
            try:
                return await runs_service.get_run(conn, login.tenant_id, login.run_id)
            except RunNotFound:
                return None

    async def _live_run(self, session: Session) -> tuple[_Login, runs_service.RunRow | str]:
        """The signed-in run while live, else the 550 to answer."""
        login = session.auth_data
        assert isinstance(login, _Login)  # MAIL and DATA come after AUTH (check_auth_needed)
        run = await self.run_of(login)
        if run is None:
            return login, f"550 5.7.1 run '{login.run_id}' is gone"
        if run.status != runs_service.RunStatus.LIVE:
            return login, "550 5.7.1 " + capture_service.run_ended(run.id, run.status)
        return login, run

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        _, run = await self._live_run(session)
        if isinstance(run, str):
            return run
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        started, at = time.perf_counter(), utcnow()
        login, run = await self._live_run(session)
        if isinstance(run, str):
            return run  # ended since MAIL: outside its window, so not traced
        raw = envelope.original_content or b""
        mail = parse_email(raw)
        async with self.scopes.transaction() as tx:
            effect = await capture_service.record_email(
                tx,
                login.tenant_id,
                run.id,
                to=list(envelope.rcpt_tos),
                from_=envelope.mail_from or mail.from_ or "",
                subject=mail.subject,
                body=mail.body,
                attachments=mail.attachments,
                headers=mail.headers,
            )
            await runs_service.mark_runs_changed(tx, login.tenant_id, {run.id})
        answer = f"250 2.0.0 OK: captured as {effect.id}, not delivered"
        self.recorder.add(
            capture_service.trace_row(
                login.tenant_id,
                run.id,
                transport=TRANSPORT,
                method=TRACE_METHOD,
                path=TRACE_PATH,
                query="",
                at=at,
                started=started,
                status=250,
                answer=answer.encode(),
                asked=raw.decode("utf-8", "replace"),
            )
        )
        return answer


class SmtpServer:
    """The SMTP server on this process's event loop; `address` once started."""

    def __init__(self, pool: asyncpg.Pool, scopes: Scopes, recorder: TraceRecorder) -> None:
        self._handler = _CaptureHandler(pool, scopes, recorder)
        self._server: asyncio.Server | None = None
        self._sessions: set[_Smtp] = set()
        self.address: tuple[str, int] | None = None

    def _session(self) -> _Smtp:
        return _Smtp(
            self._handler,
            self._sessions,
            hostname="understudy",
            ident=IDENT,
            data_size_limit=MAX_MESSAGE_BYTES,
            enable_SMTPUTF8=True,
            auth_require_tls=False,
            authenticator=_authenticator,
            loop=asyncio.get_running_loop(),
        )

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on `host:port` (0: any free port); the address it listens on."""
        # Quiet as app/logs.py keeps the other libraries: warnings and errors only.
        library = logging.getLogger(AIOSMTPD_LOG)
        library.setLevel(max(logging.getLogger().getEffectiveLevel(), logging.WARNING))
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._session, host, port)
        bound = self._server.sockets[0].getsockname()
        self.address = (host, int(bound[1]))
        log.info("smtp_listening host=%s port=%d", host, self.address[1])
        return self.address

    async def stop(self) -> None:
        """Stop listening and close the connections still open."""
        if self._server is None:
            return
        self._server.close()
        for smtp in list(self._sessions):
            if smtp.transport is not None:
                smtp.transport.close()
        await self._server.wait_closed()
        self._server, self.address = None, None
