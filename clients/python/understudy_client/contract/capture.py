"""Captured outbound effects: a run's capture credentials and what was captured on it
(the server's docs/capture.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from understudy_client.contract.base import ApiModel, Instant


class RunSmtp(ApiModel):
    """The run's SMTP server: mail sent to it is captured on the run, never delivered."""

    host: str
    port: int
    username: str = Field(description="The run id")
    password: str = Field(description="The run's auth token (the same as `authToken`)")


class RunCapture(ApiModel):
    """Where a run's system sends what must not leave the sandbox, and how it signs in."""

    sms_base: str = Field(
        description="The base URL of the run's Twilio-compatible Messages API: a Twilio "
        "client's API base (`{smsBase}/2010-04-01/Accounts/{accountSid}/Messages.json`)"
    )
    account_sid: str = Field(description="The run's Twilio-style Account SID (AC + 32 hex)")
    auth_token: str = Field(
        description="The run's auth token: Twilio's Basic password on SMS calls; Bearer or "
        "Basic password on integration calls"
    )
    from_: str = Field(
        alias="from", description="The SMS number assigned to the run (a fictional +1555…)"
    )
    integrations_base: str = Field(
        description="Integration calls go to `{integrationsBase}/{name}/{path}`; the "
        "scenario's `integrations` stubs answer them"
    )
    smtp: RunSmtp | None = Field(
        default=None,
        description="Where the run's system sends e-mail (AUTH PLAIN or LOGIN, no TLS); "
        "null when the server runs no SMTP server (UNDERSTUDY_SMTP_PORT unset)",
    )
    sms_reply_url: str | None = Field(
        default=None,
        description="Where the simulated patient's SMS replies are posted (Twilio's inbound "
        "webhook, signed with X-Twilio-Signature): the start's smsReplyUrl, or the run "
        "number's SmsUrl; null: replies are only captured",
    )


class CapturedEffect(ApiModel):
    id: str = Field(
        description="SM… for an SMS (its Twilio SID), IE… for an integration call, EM… for "
        "an e-mail"
    )
    kind: Literal["sms", "integration", "email"]
    direction: Literal["outbound", "inbound"]
    at: Instant
    to: str | None = Field(
        description="The SMS recipient; an e-mail's recipients joined by ', '; an "
        "integration's name"
    )
    from_: str | None = Field(alias="from")
    subject: str | None
    body: str | None = Field(
        description="The SMS text; an e-mail's text (its text/plain part, else its HTML's "
        "text); an integration call's body as text"
    )
    data: dict[str, Any] = Field(
        description="The call as it came and what it was answered: an SMS's Twilio "
        "parameters; an e-mail's envelope recipients (`to`), headers and attachments "
        "(filename, contentType, dataBase64); an integration call's method, path, query, "
        "headers (no Authorization), body and answer"
    )
    status: str = Field(
        description="queued for an SMS; accepted for an e-mail; stubbed or unstubbed for a call"
    )


class CaptureList(ApiModel):
    id: str = Field(description="The run")
    captures: list[CapturedEffect] = Field(description="Oldest first")
    next: str | None = Field(description="The next page's URL; null on the last page")
