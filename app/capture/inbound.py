"""Inbound SMS: the simulated patient's replies, kept on the run and posted to the URL the
run names as Twilio posts an incoming message (docs/capture.md "Inbound SMS").

A reply is a captured effect (kind `sms`, direction `inbound`, status `received`) whose
`data.delivery` holds its delivery to the run's reply URL: `{url, status, attempts,
nextAttemptAt, leaseUntil}`, status `pending` until an attempt gets a 2xx (`delivered`)
or the retries run out (`failed`); every attempt is appended to `data.deliveries`. The
row is the outbox: it commits with the reply, a job per attempt is enqueued after commit
(`tx.after.deliver_sms_reply`), and the worker's sweeper re-enqueues a pending delivery
whose job was lost. An attempt is claimed with a lease (`UPDATE … WHERE status =
'pending' AND lease expired`), sent outside any transaction, and recorded only while the
lease is still the claimer's, so a job run twice posts once per attempt.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx

from app.capture import credentials, repository, twilio
from app.capture.credentials import MESSAGE_PREFIX, SID_HEX
from app.capture.service import Effect, trace_row
from app.db import Conn, Scopes, Tx
from app.kit import jsontext
from app.kit.clock import utcnow
from app.trace.recorder import TraceRow

log = logging.getLogger("understudy.capture")

RECEIVED = twilio.INBOUND_STATUS
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
# A claimed attempt is the claimer's for its timeout plus this margin; a worker killed
# mid-attempt leaves it to be claimed again after that.
LEASE_MARGIN_SECONDS = 5
# Jitter around each retry wait, so failures of one receiver do not retry in lockstep.
JITTER = 0.2
# What an attempt keeps of the receiver's answer (a TwiML document, usually short).
RESPONSE_CHARS = 2000
# Twilio's own user agent on its webhook requests.
USER_AGENT = "TwilioProxy/1.1"
# The trace's status for an attempt that got no answer: the receiver was not reached (502)
# or did not answer in time (504), as a gateway would report it.
NOT_REACHED, TIMED_OUT = 502, 504
# Sweeper: due this long ago and still pending means its job was lost.
SWEEP_GRACE_SECONDS = 2.0

_jitter_rng = random.Random()


def _new_sid() -> str:
    return MESSAGE_PREFIX + secrets.token_hex(SID_HEX // 2)


async def record_inbound_sms(
    tx: Tx,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    to: str,
    from_: str,
    body: str,
    in_reply_to: str,
    messaging_service_sid: str | None,
    reply_url: str | None,
) -> Effect:
    """A text from the patient to the run's number, received; when the run names a reply
    URL its first delivery attempt is queued for after the caller commits."""
    at = utcnow()
    delivery = (
        None
        if reply_url is None
        else {
            "url": reply_url,
            "status": PENDING,
            "attempts": 0,
            "nextAttemptAt": at.isoformat(),
            "leaseUntil": None,
        }
    )
    row = await repository.insert_effect(
        tx.conn,
        tenant_id=tenant_id,
        run_id=run_id,
        effect_id=_new_sid(),
        kind="sms",
        direction="inbound",
        at=at,
        to_address=to,
        from_address=from_,
        subject=None,
        body=body,
        data=jsontext.dumps(
            {
                "inReplyTo": in_reply_to,
                "messagingServiceSid": messaging_service_sid,
                "delivery": delivery,
                "deliveries": [],
            }
        ),
        status=RECEIVED,
    )
    effect = Effect.of(row)
    if reply_url is not None:
        tx.after.deliver_sms_reply(tenant_id, run_id, effect.id)
    return effect


async def sms_in_order(
    conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str
) -> list[Effect]:
    """The run's SMS, sent and received, oldest first."""
    rows = await repository.sms_in_order(conn, tenant_id=tenant_id, run_id=run_id)
    return [Effect.of(r) for r in rows]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One delivery attempt's outcome: `delivered`, `retry` (in `retry_in` seconds),
    `failed` (retries exhausted), or `skipped` (not due, or another worker has it)."""

    status: str
    attempt: int = 0
    retry_in: float = 0.0
    trace: TraceRow | None = None


def _backoff(retry_seconds: list[float], attempt: int) -> float | None:
    """Wait before the next attempt after `attempt` failed ones; None when exhausted."""
    if attempt > len(retry_seconds):
        return None
    return retry_seconds[attempt - 1] * _jitter_rng.uniform(1 - JITTER, 1 + JITTER)


async def deliver_inbound_sms(
    scopes: Scopes,
    client: httpx.AsyncClient,
    key: bytes | None,
    tenant_id: uuid.UUID,
    run_id: str,
    effect_id: str,
    *,
    retry_seconds: list[float],
    attempt_timeout: float,
) -> Attempt:
    """Post the reply to its URL once, signed with the run's auth token (`key`: the
    server's secret, None when this process has none yet: the attempt fails and is
    retried), and record the attempt; a retry is queued for after it commits."""
    now = utcnow()
    lease = now + timedelta(seconds=attempt_timeout + LEASE_MARGIN_SECONDS)
    async with scopes.transaction(autocommit=True) as tx:
        row = await repository.claim_delivery(
            tx.conn,
            tenant_id=tenant_id,
            run_id=run_id,
            effect_id=effect_id,
            now=now,
            lease_until=lease,
        )
    if row is None:
        return Attempt("skipped")
    effect = Effect.of(row)
    delivery: dict[str, Any] = dict(effect.data["delivery"])
    url: str = delivery["url"]
    attempt = int(delivery["attempts"]) + 1
    posted = await _post(client, key, tenant_id, run_id, effect, url, attempt_timeout)
    if posted.code is not None and 200 <= posted.code < 300:
        status, wait = DELIVERED, None
    else:
        wait = _backoff(retry_seconds, attempt)
        status = FAILED if wait is None else PENDING
    next_at = utcnow() + timedelta(seconds=wait) if wait is not None else None
    delivery.update(
        status=status,
        attempts=attempt,
        nextAttemptAt=next_at.isoformat() if next_at is not None else None,
        leaseUntil=None,
    )
    async with scopes.transaction() as tx:
        kept = await repository.finish_delivery(
            tx.conn,
            tenant_id=tenant_id,
            run_id=run_id,
            effect_id=effect_id,
            lease=lease.isoformat(),
            delivery=jsontext.dumps(delivery),
            attempt=jsontext.dumps(posted.record(attempt, url)),
        )
        if kept and wait is not None:
            tx.after.deliver_sms_reply(tenant_id, run_id, effect_id, attempt, wait)
    if not kept:
        return Attempt("skipped", attempt)
    log.info(
        "sms_reply_attempt run=%s capture=%s attempt=%d status=%s code=%s",
        run_id,
        effect_id,
        attempt,
        status,
        posted.code,
    )
    traced = trace_row(
        tenant_id,
        run_id,
        transport="sms",
        method="POST",
        path=url,
        query="",
        at=posted.at,
        started=time.perf_counter() - posted.latency_ms / 1000.0,
        status=posted.traced_status(),
        answer=(posted.answer or posted.error or "").encode() or None,
        asked=posted.asked,
    )
    return Attempt("retry" if wait is not None else status, attempt, wait or 0.0, traced)


@dataclass(frozen=True, slots=True)
class _Posted:
    """What one POST to the receiver got."""

    at: datetime
    latency_ms: float
    code: int | None  # None: no answer (`error` says why)
    answer: str
    error: str | None
    timed_out: bool
    asked: str | None  # the form as sent

    def record(self, attempt: int, url: str) -> dict[str, Any]:
        """The attempt as `data.deliveries` keeps it."""
        return {
            "attempt": attempt,
            "at": self.at.isoformat(),
            "url": url,
            "statusCode": self.code,
            "latencyMs": round(self.latency_ms, 1),
            "error": self.error,
            # The receiver's answer as it came: TwiML's <Message> replies are not sent on.
            "response": self.answer or None,
        }

    def traced_status(self) -> int:
        if self.code is not None:
            return self.code
        return TIMED_OUT if self.timed_out else NOT_REACHED


async def _post(
    client: httpx.AsyncClient,
    key: bytes | None,
    tenant_id: uuid.UUID,
    run_id: str,
    effect: Effect,
    url: str,
    attempt_timeout: float,
) -> _Posted:
    """The reply in Twilio's inbound form, signed with the run's auth token, posted once."""
    at, started = utcnow(), time.perf_counter()

    def posted(
        code: int | None, answer: str, error: str | None, *, timed_out: bool = False
    ) -> _Posted:
        latency = (time.perf_counter() - started) * 1000.0
        return _Posted(at, latency, code, answer, error, timed_out, asked)

    asked: str | None = None
    if key is None:
        return posted(None, "", "the server's secret is not readable by this worker yet")
    creds = credentials.credentials(key, tenant_id, run_id)
    params = twilio.inbound_params(
        effect, creds.account_sid, effect.data.get("messagingServiceSid")
    )
    headers = {
        "X-Twilio-Signature": twilio.signature(creds.auth_token, url, params),
        "I-Twilio-Idempotency-Token": effect.id,
        "User-Agent": USER_AGENT,
        "Accept": "*/*",
    }
    asked = urlencode(params)
    try:
        response = await client.post(url, data=params, headers=headers, timeout=attempt_timeout)
    except httpx.TimeoutException:
        return posted(None, "", f"timed out after {attempt_timeout:g} s", timed_out=True)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        return posted(None, "", f"{type(exc).__name__}: {exc}"[:RESPONSE_CHARS])
    return posted(response.status_code, response.text[:RESPONSE_CHARS], None)


async def due_inbound_deliveries(
    pool: asyncpg.Pool, limit: int = 1000
) -> list[tuple[uuid.UUID, str, str, int]]:
    """Every tenant's pending reply deliveries whose job may have been lost: due a while
    ago and not held. (tenant, run, capture, attempts made)."""
    due_before: datetime = utcnow() - timedelta(seconds=SWEEP_GRACE_SECONDS)
    rows = await repository.due_deliveries(pool, due_before=due_before, limit=limit)
    return [(r["tenant_id"], r["run_id"], r["id"], int(r["attempts"])) for r in rows]
