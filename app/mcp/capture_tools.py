"""The capture tools: text the patient (`send_sms`) and e-mail them (`send_email`).

Nothing leaves the sandbox: each goes to the run's capture (docs/capture.md), the same
store as the run's Twilio-compatible Messages API and its SMTP server, read by text truth
like a portal message. The run is the caller's, resolved as every tool resolves it
(`ToolCall.required_run`: its current run, else `run_id`; read under the caller's
tenant, so another tenant's run is not found); the capture and the run's change mark
are one unit of work, and the call is in the run's trace with the capture's own
transport (`sms`, `email`), as the SMS route traces a call to it, at path `/mcp` with
query `tool=<name>`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from app.capture import service as capture_service
from app.db import Scopes
from app.kit import jsontext
from app.kit.clock import utcnow
from app.mcp.tool_call import RunIdArg, ToolCall
from app.runs import service as runs_service
from app.runs.errors import RunNotFound
from app.trace.recorder import TraceRecorder

__all__ = ["CaptureSent", "send_email", "send_sms"]

# Twilio refuses a longer SMS body (its error 21617); the Messages API here does too.
MAX_SMS_BODY = 1600
MAX_EMAIL_BODY = 100_000
MAX_SUBJECT = 998  # an RFC 5322 line
MAX_RECIPIENTS = 50
# A phone number as people write it: an optional +, 7 to 15 digits, spaces, dots,
# dashes and parentheses between them.
PHONE = re.compile(r"^\+?[0-9][0-9 ().\-]{5,30}$")
PHONE_DIGITS = (7, 15)
# An address with one @, a local part and a dotted domain; no spaces, brackets or commas.
EMAIL = re.compile(r"^[^@\s<>,;\"]{1,64}@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)+$")
NOT_DELIVERED = "kept on the run, not delivered: nothing leaves the sandbox"


class CaptureSent(BaseModel):
    """What send_sms and send_email answer: the capture kept on the run."""

    capture_id: str = Field(
        description="The capture's id (SM… for an SMS, EM… for an e-mail), as listed in "
        "the run's captures."
    )
    kind: str = Field(description="'sms' or 'email'.")
    status: str = Field(description="'queued' for an SMS, 'accepted' for an e-mail.")
    run_id: str = Field(description="The run it was captured on.")
    to: list[str] = Field(description="The recipients, as given.")
    sender: str = Field(
        description="The sender: the run's own SMS number, or its e-mail address.",
    )
    note: str = Field(description="What happened to it.")


async def _live_run(call: ToolCall, run_id: str | None) -> runs_service.RunRow:
    """The caller's run (current, or named), this tenant's and live."""
    run_id = await call.required_run(run_id)
    try:
        async with call.caller.app.state.db.pool.acquire() as conn:
            run = await runs_service.get_run(conn, call.tenant_id, run_id)
    except RunNotFound:
        raise ToolError(f"404 not found: no run '{run_id}' in this tenant") from None
    if run.status != runs_service.RunStatus.LIVE:
        ended = capture_service.run_ended(run.id, run.status)
        raise ToolError(f"{ended} with start_test_run")
    return run


def _phone(to: str) -> str:
    to = to.strip()
    digits = sum(ch.isdigit() for ch in to)
    if not PHONE.match(to) or not PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1]:
        raise ToolError(
            f"to: '{to[:80]}' is not a phone number (E.164 such as +15555550123, or 7 to 15 digits)"
        )
    return to


def _addresses(to: list[str]) -> list[str]:
    found = [a.strip() for a in to if a.strip()]
    if not found:
        raise ToolError("to: give at least one e-mail address")
    if len(found) > MAX_RECIPIENTS:
        raise ToolError(f"to: at most {MAX_RECIPIENTS} recipients")
    for address in found:
        if not EMAIL.match(address):
            raise ToolError(f"to: '{address[:80]}' is not an e-mail address (name@example.org)")
    return found


def _text(value: str, name: str, limit: int) -> str:
    if not value.strip():
        raise ToolError(f"{name}: the {'message' if name == 'body' else name} is empty")
    if len(value) > limit:
        raise ToolError(f"{name}: longer than {limit} characters ({len(value)})")
    return value


class _Traced:
    """The tool call as a row of the run's trace, as the capture routes add theirs."""

    def __init__(self, call: ToolCall, run: runs_service.RunRow, tool: str, kind: str) -> None:
        self.call, self.run, self.tool, self.kind = call, run, tool, kind
        self.at: datetime = utcnow()
        self.started = time.perf_counter()

    def add(self, status: int, asked: dict[str, Any], answer: dict[str, Any]) -> None:
        recorder: TraceRecorder = self.call.caller.app.state.recorder
        row = capture_service.trace_row(
            self.call.tenant_id,
            self.run.id,
            transport=self.kind,
            method="POST",
            path="/mcp",
            query=f"tool={self.tool}",
            at=self.at,
            started=self.started,
            status=status,
            answer=jsontext.dumpb(answer),
            asked=jsontext.dumps(asked),
        )
        recorder.add(row)

    def refuse(self, asked: dict[str, Any], error: ToolError) -> ToolError:
        self.add(400, asked, {"error": str(error)})
        return error


async def _captured(
    call: ToolCall,
    run: runs_service.RunRow,
    record: Callable[..., Awaitable[capture_service.Effect]],
    **fields: Any,
) -> capture_service.Effect:
    """`record(tx, tenant, run, **fields)` and the run's change mark, in one unit of work."""
    scopes: Scopes = call.caller.app.state.scopes
    async with scopes.transaction() as tx:
        effect = await record(tx, call.tenant_id, run.id, **fields)
        await runs_service.mark_runs_changed(tx, call.tenant_id, {run.id})
    return effect


def _sent(effect: capture_service.Effect, to: list[str], sender: str) -> CaptureSent:
    return CaptureSent(
        capture_id=effect.id,
        kind=effect.kind,
        status=effect.status,
        run_id=effect.run_id,
        to=to,
        sender=sender,
        note=NOT_DELIVERED,
    )


def run_email_address(run_id: str) -> str:
    """The run's own sender address for what send_email sends."""
    return f"{run_id}@understudy.invalid"


async def send_sms(
    ctx: Context,
    to: Annotated[
        str,
        Field(
            description="The phone number to text, e.g. the patient's from their "
            "Patient.telecom (E.164 like +15555550123 preferred)."
        ),
    ],
    body: Annotated[
        str, Field(description="The text message, as the recipient will read it (≤ 1600).")
    ],
    run_id: RunIdArg = None,
) -> CaptureSent:
    """Text someone (usually the run's patient) by SMS from the run's own number. The
    message is captured on the run instead of being delivered, and it is graded like a
    portal message: a wrong date or time in it fails the run. Use it when the task says
    to text or SMS the patient; use message_patient for the patient portal."""
    call = ToolCall(ctx)
    run = await _live_run(call, run_id)
    traced = _Traced(call, run, "send_sms", "sms")
    asked = {"to": to, "body": body}
    try:
        number = _phone(to)
        text = _text(body, "body", MAX_SMS_BODY)
    except ToolError as exc:
        raise traced.refuse(asked, exc) from None
    creds = capture_service.run_credentials(call.tenant_id, run.id)
    if creds is None:
        raise ToolError("this server has no capture secret, so runs cannot send SMS")
    effect = await _captured(
        call,
        run,
        capture_service.record_sms,
        to=number,
        from_=creds.from_number,
        body=text,
        params={"via": "mcp"},
    )
    sent = _sent(effect, [number], creds.from_number)
    traced.add(201, asked, sent.model_dump(mode="json"))
    return sent


async def send_email(
    ctx: Context,
    to: Annotated[
        list[str],
        Field(
            description="The recipients' e-mail addresses, e.g. the patient's from their "
            "Patient.telecom (system 'email')."
        ),
    ],
    subject: Annotated[str, Field(description="The subject line.")],
    body: Annotated[str, Field(description="The message, plain text, as the recipients read it.")],
    run_id: RunIdArg = None,
) -> CaptureSent:
    """E-mail someone (usually the run's patient) from the run's own address. The e-mail
    is captured on the run instead of being delivered, and it is graded like a portal
    message: a wrong date or time in it fails the run. Use it when the task says to
    e-mail the patient; use message_patient for the patient portal."""
    call = ToolCall(ctx)
    run = await _live_run(call, run_id)
    traced = _Traced(call, run, "send_email", "email")
    asked = {"to": to, "subject": subject, "body": body}
    try:
        recipients = _addresses(to)
        title = _text(subject, "subject", MAX_SUBJECT).strip()
        if "\n" in title or "\r" in title:
            raise ToolError("subject: one line, without line breaks")
        text = _text(body, "body", MAX_EMAIL_BODY)
    except ToolError as exc:
        raise traced.refuse(asked, exc) from None
    sender = run_email_address(run.id)
    message_id = f"<{uuid.uuid4().hex}@understudy.invalid>"
    effect = await _captured(
        call,
        run,
        capture_service.record_email,
        to=recipients,
        from_=sender,
        subject=title,
        body=text,
        attachments=[],
        headers={"Message-ID": message_id, "X-Understudy-Via": "mcp"},
    )
    sent = _sent(effect, recipients, sender)
    traced.add(201, asked, sent.model_dump(mode="json"))
    return sent
