"""Captured outbound effects: the feature's public face (docs/capture.md).

What a run's system sends out of the sandbox — a text through an SMS provider, a call to
a pharmacy integration — is kept on the run instead (`captured_effect`), and answered as
the provider would. This module records and reads those captures, matches an integration
call with the scenario's stubs, and gives a run its capture credentials
(`app.capture.credentials`).

It sits below the run lifecycle (whose run view shows the credentials) and so takes the
run as already checked: the routes read the run through `app.runs.service` (live, this
tenant's) before recording, and mark it changed in the same unit of work.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from app.capture import credentials, repository
from app.capture.credentials import MESSAGE_PREFIX, SID_HEX, RunCredentials
from app.db import Conn, Tx
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.urls import RUNS_PREFIX
from app.scenarios.schema import Integration
from app.trace.recorder import TraceRow
from understudy_client.contract.capture import CapturedEffect, RunCapture, RunSmtp

__all__ = [
    "EMAIL_PREFIX",
    "INTEGRATION_PREFIX",
    "MESSAGE_PREFIX",
    "REQUEST_CAP",
    "Attachment",
    "Effect",
    "IntegrationCall",
    "RunCredentials",
    "get_effect",
    "integrations_base",
    "list_effects",
    "list_messages",
    "match_stub",
    "record_email",
    "record_integration_call",
    "record_sms",
    "run_capture",
    "run_credentials",
    "run_ended",
    "sent_texts",
    "sms_base",
    "tenant_of_token",
    "trace_row",
]

INTEGRATION_PREFIX = "IE"
# Twilio queues a message it accepted; nothing here sends it further.
SMS_STATUS = "queued"
STUBBED = "stubbed"
UNSTUBBED = "unstubbed"
# A call's request and response bodies as kept in its trace row (and an integration
# call's capture), as the trace recorder keeps a response.
REQUEST_CAP = 262_144


def sms_base(root: str, run_id: str) -> str:
    """A Twilio client's API base for the run (its `api.base_url`)."""
    return f"{root}{RUNS_PREFIX}/{run_id}/sms"


def integrations_base(root: str, run_id: str) -> str:
    return f"{root}{RUNS_PREFIX}/{run_id}/integrations"


def run_credentials(tenant_id: uuid.UUID, run_id: str) -> RunCredentials | None:
    """The run's account SID, auth token and SMS number; None before the process has
    its secret (`credentials.use_secret`)."""
    key = credentials.secret()
    return None if key is None else credentials.credentials(key, tenant_id, run_id)


def run_capture(
    root: str, tenant_id: uuid.UUID, run_id: str, *, sms_reply_url: str | None = None
) -> RunCapture | None:
    """What the run view shows of capture: where to send, the run's credentials, and
    where the patient's SMS replies go."""
    found = run_credentials(tenant_id, run_id)
    if found is None:
        return None
    return RunCapture(
        sms_base=sms_base(root, run_id),
        account_sid=found.account_sid,
        auth_token=found.auth_token,
        from_=found.from_number,
        integrations_base=integrations_base(root, run_id),
        smtp=_smtp(root, run_id, found.auth_token),
        sms_reply_url=sms_reply_url,
    )


# Bind addresses that are no address to connect to: the root URL's host stands in.
_ANY_HOST = ("", "0.0.0.0", "::")


def _smtp(root: str, run_id: str, token: str) -> RunSmtp | None:
    """The process's SMTP server with the run's login, None when it runs none."""
    address = credentials.smtp_address()
    if address is None:
        return None
    host, port = address
    if host in _ANY_HOST:
        host = urlsplit(root).hostname or "127.0.0.1"
    return RunSmtp(host=host, port=port, username=run_id, password=token)


def run_ended(run_id: str, status: str) -> str:
    """What a call on a run that has ended is told."""
    return f"run '{run_id}' has ended ({status}); nothing more is captured on it: start a new run"


def trace_row(
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    transport: str,
    method: str,
    path: str,
    query: str,
    at: datetime,
    started: float,
    status: int,
    answer: bytes | None,
    asked: str | None,
) -> TraceRow:
    """A captured call's row in the run's trace, as the trace middleware records a REST
    call (`started` is the call's `time.perf_counter()`); the caller adds it to the
    recorder while the run is live (outside its window the middleware records nothing)."""
    response = None if answer is None else answer[:REQUEST_CAP].decode("utf-8", "replace")
    return (
        tenant_id,
        run_id,
        at,
        method,
        path,
        query,
        status,
        (time.perf_counter() - started) * 1000.0,
        transport,
        [],
        response,
        None if answer is None else len(answer),
        asked[:REQUEST_CAP] if asked else None,
    )


def tenant_of_token(run_id: str, token: str) -> uuid.UUID | None:
    """The tenant whose run this token is for, if it is one of ours at all; the caller
    reads the run under it (a token for no real run finds none)."""
    key = credentials.secret()
    if key is None:
        return None
    tenant_id = credentials.tenant_of_token(key, run_id, token)
    if tenant_id is None:
        return None
    # Exactly the token we would give (lower-case hex), not another spelling of it.
    expected = credentials.credentials(key, tenant_id, run_id).auth_token
    return tenant_id if credentials.same(token, expected) else None


@dataclass(frozen=True, slots=True)
class Effect:
    """One captured effect, as stored."""

    id: str
    seq: int
    run_id: str
    kind: str
    direction: str
    at: datetime
    to_address: str | None
    from_address: str | None
    subject: str | None
    body: str | None
    data: dict[str, Any]
    status: str

    @classmethod
    def of(cls, r: asyncpg.Record) -> Effect:
        data = r["data"]
        return cls(
            id=r["id"],
            seq=r["seq"],
            run_id=r["run_id"],
            kind=r["kind"],
            direction=r["direction"],
            at=r["at"],
            to_address=r["to_address"],
            from_address=r["from_address"],
            subject=r["subject"],
            body=r["body"],
            data=jsontext.loads(data) if isinstance(data, str) else data,
            status=r["status"],
        )

    def view(self) -> CapturedEffect:
        return CapturedEffect(
            id=self.id,
            kind=self.kind,  # the table's CHECK holds it to these
            direction=self.direction,
            at=self.at,
            to=self.to_address,
            from_=self.from_address,
            subject=self.subject,
            body=self.body,
            data=self.data,
            status=self.status,
        )


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(SID_HEX // 2)


async def record_sms(
    tx: Tx,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    to: str,
    from_: str,
    body: str,
    params: dict[str, str],
) -> Effect:
    """An SMS the run's system sent, kept as Twilio would queue it."""
    row = await repository.insert_effect(
        tx.conn,
        tenant_id=tenant_id,
        run_id=run_id,
        effect_id=_new_id(MESSAGE_PREFIX),
        kind="sms",
        at=utcnow(),
        to_address=to,
        from_address=from_,
        subject=None,
        body=body,
        data=jsontext.dumps({"params": params}),
        status=SMS_STATUS,
    )
    return Effect.of(row)


EMAIL_PREFIX = "EM"
EMAIL_STATUS = "accepted"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file attached to a captured e-mail: its name, media type and content (base64)."""

    filename: str | None
    content_type: str
    data_base64: str


async def record_email(
    tx: Tx,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    to: list[str],
    from_: str,
    subject: str | None,
    body: str,
    attachments: list[Attachment],
    headers: dict[str, str] | None = None,
) -> Effect:
    """An e-mail the run's system sent (by SMTP or MCP), kept with its attachments.
    `to_address` is the recipients joined by ", "; `data` keeps them as a list."""
    row = await repository.insert_effect(
        tx.conn,
        tenant_id=tenant_id,
        run_id=run_id,
        effect_id=_new_id(EMAIL_PREFIX),
        kind="email",
        at=utcnow(),
        to_address=", ".join(to),
        from_address=from_,
        subject=subject,
        body=body,
        data=jsontext.dumps(
            {
                "to": to,
                "headers": headers or {},
                "attachments": [
                    {
                        "filename": a.filename,
                        "contentType": a.content_type,
                        "dataBase64": a.data_base64,
                    }
                    for a in attachments
                ],
            }
        ),
        status=EMAIL_STATUS,
    )
    return Effect.of(row)


def match_stub(stubs: list[Integration], name: str, method: str, path: str) -> Integration | None:
    """The first stub of the scenario for this call: its name, its method (or `*`), its
    path (a trailing `*` matches any rest, `/orders/*` matches `/orders` too)."""
    for stub in stubs:
        if stub.name != name or stub.method not in ("*", method):
            continue
        if stub.path.endswith("*"):
            stem = stub.path[:-1]
            if path.startswith(stem) or path == stem.rstrip("/"):
                return stub
        elif path == stub.path:
            return stub
    return None


@dataclass(frozen=True, slots=True)
class IntegrationCall:
    name: str
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: str | None
    json: Any  # the body parsed, when it is JSON


async def record_integration_call(
    tx: Tx,
    tenant_id: uuid.UUID,
    run_id: str,
    call: IntegrationCall,
    stubs: list[Integration],
) -> tuple[Effect, int, Any]:
    """A call to an integration, kept with the answer it gets: the matching stub's, else
    202 with a note that it was captured. Returns the effect, the status and the answer."""
    effect_id = _new_id(INTEGRATION_PREFIX)
    stub = match_stub(stubs, call.name, call.method, call.path)
    if stub is not None:
        status, answer, outcome = stub.status, stub.answer, STUBBED
    else:
        status, outcome = 202, UNSTUBBED
        answer = {
            "captured": True,
            "id": effect_id,
            "note": f"no stub declared for {call.method} {call.path} of integration "
            f"'{call.name}'; the call was captured",
        }
    data = {
        "method": call.method,
        "path": call.path,
        "query": call.query,
        "headers": call.headers,
        "body": call.json if call.json is not None else call.body,
        "answer": {"status": status, "body": answer},
    }
    row = await repository.insert_effect(
        tx.conn,
        tenant_id=tenant_id,
        run_id=run_id,
        effect_id=effect_id,
        kind="integration",
        at=utcnow(),
        to_address=call.name,
        from_address=None,
        subject=f"{call.method} {call.path}",
        body=call.body,
        data=jsontext.dumps(data),
        status=outcome,
    )
    return Effect.of(row), status, answer


async def get_effect(
    conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str, effect_id: str
) -> Effect | None:
    row = await repository.effect(conn, tenant_id=tenant_id, run_id=run_id, effect_id=effect_id)
    return None if row is None else Effect.of(row)


async def list_effects(
    conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str, *, after: int, limit: int
) -> list[Effect]:
    """The run's captures, oldest first, after the one whose `seq` is `after`."""
    rows = await repository.effects_in_order(
        conn, tenant_id=tenant_id, run_id=run_id, after=after, limit=limit
    )
    return [Effect.of(r) for r in rows]


async def list_messages(
    conn: Conn | asyncpg.Pool,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    to: str | None,
    from_: str | None,
    page: int,
    page_size: int,
) -> list[Effect]:
    """A page of the run's SMS, newest first (Twilio's order); one more than `page_size`
    is asked for so the caller knows whether another page follows."""
    rows = await repository.messages_newest_first(
        conn,
        tenant_id=tenant_id,
        run_id=run_id,
        to_address=to,
        from_address=from_,
        offset=page * page_size,
        limit=page_size + 1,
    )
    return [Effect.of(r) for r in rows]


async def sent_texts(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> list[Effect]:
    """Every SMS and e-mail the run's system sent (outbound, with a body), oldest first:
    what text truth reads beside its FHIR writes."""
    rows = await repository.sent_texts(conn, tenant_id=tenant_id, run_id=run_id)
    return [Effect.of(r) for r in rows]
