"""Webhook subscriptions and deliveries.

Events are outbox rows written by the same statement as the resource write (see
`app.fhir.repository`), with one delivery row per matching subscription. After commit the
writer enqueues a job per delivery; a sweeper re-enqueues any pending delivery whose job
was lost (a crash between commit and enqueue). A delivery is claimed with a short lease
(`UPDATE … WHERE status = 'pending' AND lease expired`), sent outside any transaction,
and its attempt recorded. Deliveries of one subscription for one resource go out in
event order: a later one waits while an earlier one is pending.

Events about something other than a resource (an eval's: `eval.completed`,
`eval.regressed`) are written by `write_event` in their writer's transaction, with their
body in the event's `payload`; they are claimed, signed, retried and redelivered by the
same code as the others.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import random
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import orjson
from standardwebhooks import Webhook

from app.db import Conn, Scopes, Tx
from app.errors import BadRequest, Issue, Unprocessable
from app.fhir.validation import RESOURCE_TYPES, is_known_type
from app.kit import jsontext
from app.kit.clock import fhir_instant, utcnow
from app.kit.urls import fhir_base
from app.webhooks import repository
from app.webhooks.errors import DeliveryNotFound, WebhookNotFound

# A claimed delivery is the claimer's for its attempt's timeout plus this margin; a
# worker killed mid-attempt leaves it to be claimed again (same delivery id) after that.
LEASE_MARGIN_SECONDS = 5
EXCERPT_CHARS = 500
# Jitter around each retry wait, so failures of one receiver do not retry in lockstep.
JITTER = 0.2
# Wait before re-checking a delivery queued behind an earlier one for the same resource.
SWEEP_GRACE_SECONDS = 2.0
USER_AGENT = "Understudy-Webhooks/1"

# Static headers: enough for an auth header or two plus routing hints, not a payload.
MAX_HEADERS = 10
MAX_HEADER_NAME_CHARS = 64
MAX_HEADER_VALUE_CHARS = 4096  # room for a signed JWT bearer token
# An HTTP field name (RFC 9110 token) and a value of visible ASCII with inner spaces or
# tabs: no CR, LF, NUL or other control character, nothing an HTTP client would re-encode.
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
HEADER_VALUE_PATTERN = r"^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$"
# Headers the delivery itself sets, or that only the HTTP client may: a static header
# must not replace the signature or break the framing. Any `webhook-*` name is kept for
# Standard Webhooks.
RESERVED_HEADERS = frozenset(
    {
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
    }
)
# Masked views keep the last characters of a value only when it is long enough that
# they give little of it away.
MASK = "••••"
MASK_KEEPS_TAIL_FROM = 16
MASK_TAIL = 4


@dataclass
class Subscription:
    id: str
    url: str
    events: list[str]
    resource_types: list[str] | None
    enabled: bool
    disabled_reason: str | None
    created_at: datetime
    headers: dict[str, str]

    def view(self, *, reveal_headers: bool = False) -> dict[str, Any]:
        """The subscription as the API shows it; header values masked unless revealed
        (only in the answer to the create)."""
        return {
            "id": self.id,
            "url": self.url,
            "events": self.events,
            "resourceTypes": self.resource_types,
            "enabled": self.enabled,
            "disabledReason": self.disabled_reason,
            "createdAt": self.created_at.isoformat(),
            "headers": dict(self.headers)
            if reveal_headers
            else {name: mask_value(value) for name, value in self.headers.items()},
        }


def _headers_of(text: str | None) -> dict[str, str]:
    found: dict[str, str] = jsontext.loads(text) if text else {}
    return found


def _subscription(r: asyncpg.Record) -> Subscription:
    return Subscription(
        r["id"],
        r["url"],
        list(r["events"]),
        r["resource_types"],
        r["enabled"],
        r["disabled_reason"],
        r["created_at"],
        _headers_of(r["headers"]),
    )


def mask_value(value: str) -> str:
    if len(value) >= MASK_KEEPS_TAIL_FROM:
        return MASK + value[-MASK_TAIL:]
    return MASK


def check_headers(headers: dict[str, str] | None) -> dict[str, str]:
    """Static delivery headers, or a 422 naming `headers.<name>` for each bad one."""
    if not headers:
        return {}
    problems: list[Issue] = []
    if len(headers) > MAX_HEADERS:
        problems.append(
            Issue(f"at most {MAX_HEADERS} headers, got {len(headers)}", expression="headers")
        )
    seen: dict[str, str] = {}
    for name, value in headers.items():
        where = f"headers.{name[:MAX_HEADER_NAME_CHARS]}"
        lower = name.lower()
        if not re.fullmatch(HEADER_NAME_PATTERN, name) or len(name) > MAX_HEADER_NAME_CHARS:
            problems.append(
                Issue(
                    f"header name must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~) "
                    f"of at most {MAX_HEADER_NAME_CHARS} characters",
                    expression=where,
                )
            )
        elif lower in RESERVED_HEADERS or lower.startswith("webhook-"):
            problems.append(
                Issue(
                    f"'{name}' is set by the delivery itself and cannot be replaced "
                    "(reserved: webhook-*, " + ", ".join(sorted(RESERVED_HEADERS)) + ")",
                    expression=where,
                )
            )
        elif lower in seen:
            problems.append(
                Issue(f"'{name}' repeats '{seen[lower]}' (names are case-insensitive)", where)
            )
        seen.setdefault(lower, name)
        if not isinstance(value, str) or not re.fullmatch(HEADER_VALUE_PATTERN, value):
            problems.append(
                Issue(
                    "header value must be non-empty visible ASCII, spaces and tabs only "
                    "inside it: no CR, LF, NUL or other control characters",
                    expression=where,
                )
            )
        elif len(value) > MAX_HEADER_VALUE_CHARS:
            problems.append(
                Issue(
                    f"header value is longer than {MAX_HEADER_VALUE_CHARS} characters",
                    expression=where,
                )
            )
    if problems:
        raise Unprocessable("; ".join(i.message for i in problems[:3]), problems)
    return dict(headers)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def check_url(url: str, *, allow_private: bool) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number 0-65535
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise Unprocessable(
            f"url is not a valid URL: {exc}", [Issue(str(exc), expression="url")]
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unprocessable(
            "url must be an http or https URL with a host",
            [Issue("must be http(s) with a host", expression="url")],
        )
    if port == 0:
        raise Unprocessable("url port must be 1-65535", [Issue("bad port", expression="url")])
    if not allow_private:
        try:
            # The loop's resolver runs in a thread: a slow DNS answer never blocks requests.
            infos = await asyncio.get_running_loop().getaddrinfo(parts.hostname, None)
        except OSError:
            raise Unprocessable(f"url host '{parts.hostname}' does not resolve") from None
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if address.is_private or address.is_loopback or address.is_link_local:
                raise Unprocessable(
                    f"url host '{parts.hostname}' is a private address; set "
                    "UNDERSTUDY_WEBHOOK_ALLOW_PRIVATE=true to allow it"
                )
    return url


def check_secret(secret: str) -> str:
    try:
        Webhook(secret)
    except Exception:
        raise Unprocessable(
            "secret must be a base64 key, optionally prefixed 'whsec_' (leave it out to get "
            "one generated)"
        ) from None
    return secret


# Events about an eval, not a FHIR resource (app/evals/events.py writes them): their body
# is the event's `payload`; a subscription's resourceTypes does not filter them.
EVAL_COMPLETED = "eval.completed"
EVAL_REGRESSED = "eval.regressed"
EVAL_EVENTS = frozenset({EVAL_COMPLETED, EVAL_REGRESSED})
NAMED_EVENTS = frozenset({"message.received", "appointment.noshow", "result.final", *EVAL_EVENTS})
_ACTIONS = frozenset({"created", "updated", "deleted"})


def event_names() -> list[str]:
    """Every name `events` accepts (what `_event_problems` lets through), for the OpenAPI."""
    typed = [f"{t}.{a}" for t in sorted(RESOURCE_TYPES) for a in sorted(_ACTIONS)]
    return ["*", *sorted(NAMED_EVENTS), *typed]


def _event_problems(events: list[str]) -> list[Issue]:
    """Names that could never fire would make a subscription that is silently useless."""
    if not events:
        return [Issue("events must name at least one event (or '*')", expression="events")]
    out = []
    for index, name in enumerate(events):
        if name == "*" or name in NAMED_EVENTS:
            continue
        rtype, _, action = name.partition(".")
        if action not in _ACTIONS or not is_known_type(rtype):
            out.append(
                Issue(
                    f"unknown event '{name}': use '*', <ResourceType>.created|updated|deleted, "
                    "or one of " + ", ".join(sorted(NAMED_EVENTS)),
                    expression=f"events[{index}]",
                )
            )
    return out


def _type_problems(resource_types: list[str] | None) -> list[Issue]:
    if resource_types is None:
        return []
    if not resource_types:
        return [
            Issue(
                "resourceTypes, when given, must name at least one type", expression="resourceTypes"
            )
        ]
    return [
        Issue(f"unknown resource type '{t}'", expression=f"resourceTypes[{i}]")
        for i, t in enumerate(resource_types)
        if not is_known_type(t)
    ]


async def create_subscription(
    tx: Tx,
    tenant_id: uuid.UUID,
    *,
    url: str,
    events: list[str],
    resource_types: list[str] | None,
    secret: str | None,
    enabled: bool,
    allow_private: bool,
    headers: dict[str, str] | None = None,
) -> tuple[Subscription, str]:
    problems = [*_event_problems(events), *_type_problems(resource_types)]
    if problems:
        raise Unprocessable("; ".join(i.message for i in problems), problems)
    static_headers = check_headers(headers)
    await check_url(url, allow_private=allow_private)
    secret = check_secret(secret) if secret else new_secret()
    row = await repository.insert_subscription(
        tx.conn,
        tenant_id=tenant_id,
        subscription_id="wh_" + secrets.token_hex(8),
        url=url,
        events=events,
        resource_types=resource_types,
        secret=secret,
        enabled=enabled,
        headers_json=jsontext.dumps(static_headers),
    )
    return _subscription(row), secret


async def list_subscriptions(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[Subscription]:
    rows = await repository.subscriptions(pool, tenant_id=tenant_id)
    return [_subscription(r) for r in rows]


async def get_subscription(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, subscription_id: str
) -> Subscription:
    row = await repository.subscription(pool, tenant_id=tenant_id, subscription_id=subscription_id)
    if row is None:
        raise WebhookNotFound(f"no webhook '{subscription_id}'")
    return _subscription(row)


async def delete_subscription(tx: Tx, tenant_id: uuid.UUID, subscription_id: str) -> None:
    deleted = await repository.delete_subscription(
        tx.conn, tenant_id=tenant_id, subscription_id=subscription_id
    )
    if not deleted:
        raise WebhookNotFound(f"no webhook '{subscription_id}'")


async def list_deliveries(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, subscription_id: str, limit: int
) -> list[dict[str, Any]]:
    await get_subscription(pool, tenant_id, subscription_id)
    rows = await repository.deliveries_of(
        pool, tenant_id=tenant_id, subscription_id=subscription_id, limit=limit
    )
    ids = [r["id"] for r in rows]
    attempts = await repository.attempts_of(pool, tenant_id=tenant_id, delivery_ids=ids)
    by_delivery: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        by_delivery.setdefault(a["delivery_id"], []).append(
            {
                "attempt": a["attempt"],
                "at": a["at"].isoformat(),
                "statusCode": a["status_code"],
                "latencyMs": round(a["latency_ms"], 1),
                "error": a["error"],
                "responseExcerpt": a["response_excerpt"],
            }
        )
    return [
        {
            "id": r["id"],
            "event": r["type"],
            "eventId": r["event_id"],
            "resource": r["resource_ref"],
            "runId": r["run_id"],
            "status": r["status"],
            "attempts": by_delivery.get(r["id"], []),
            "nextAttemptAt": r["next_attempt_at"].isoformat() if r["status"] == "pending" else None,
            "deliveredAt": r["delivered_at"].isoformat() if r["delivered_at"] else None,
            "createdAt": r["created_at"].isoformat(),
        }
        for r in rows
    ]


async def redeliver(tx: Tx, tenant_id: uuid.UUID, subscription_id: str, delivery_id: str) -> int:
    """Send a delivery again with the same id (receivers deduplicate on it), once the
    caller commits. Returns the attempt number the new job is keyed by."""
    attempts = await repository.reset_delivery(
        tx.conn,
        tenant_id=tenant_id,
        subscription_id=subscription_id,
        delivery_id=delivery_id,
        at=utcnow(),
    )
    if attempts is None:
        raise DeliveryNotFound(f"no delivery '{delivery_id}' for webhook '{subscription_id}'")
    tx.after.deliver(tenant_id)
    return attempts


async def write_event(
    tx: Tx,
    tenant_id: uuid.UUID,
    event_type: str,
    *,
    about: tuple[str, str],
    root: str,
    body: dict[str, Any],
    at: datetime,
) -> int:
    """An event about something other than a FHIR resource (`about`: its type and id,
    which keep its events in order), in the caller's transaction, with one delivery per
    enabled subscription to `event_type` or '*'; sent once the caller commits, signed and
    retried like every event. `body` is merged into the common fields (id, eventId, type,
    occurredAt, tenant). Returns the deliveries written (0: nobody subscribed)."""
    if event_type not in EVAL_EVENTS:
        raise ValueError(f"'{event_type}' is not an event with a payload of its own")
    count = await repository.insert_payload_event(
        tx.conn,
        tenant_id=tenant_id,
        event_type=event_type,
        resource_type=about[0],
        resource_id=about[1],
        occurred_at=at,
        root=root,
        payload_json=jsontext.dumps(body),
    )
    if count:
        tx.after.deliver(tenant_id)
    return count


# --- sending ----------------------------------------------------------------------------


@dataclass
class SendResult:
    status: str  # delivered | retry | failed | waiting | skipped
    retry_in: float = 0.0
    attempt: int = 0
    run_id: str | None = None  # the run the event belongs to, to regrade


def _payload(tenant_id: uuid.UUID, row: asyncpg.Record) -> bytes:
    common = {
        "id": row["id"],
        "eventId": row["event_id"],
        "type": row["type"],
        "occurredAt": fhir_instant(row["occurred_at"]),
        "tenant": str(tenant_id),
    }
    if row["payload"] is not None:
        # An event about something other than a resource: the body it was written with.
        return orjson.dumps({**common, **orjson.loads(row["payload"])})
    payload = {
        **common,
        "runId": row["run_id"],
        "fhirBase": fhir_base(row["fhir_root"], row["run_id"]),
        "resource": orjson.Fragment(row["resource"]) if row["resource"] is not None else None,
    }
    return orjson.dumps(payload)


# Its own generator, not the `random` module's shared one (see tenants.repository).
_jitter_rng = random.Random()


def _backoff(retry_seconds: list[float], attempt: int) -> float | None:
    """Wait before the next attempt after `attempt` failed ones; None when exhausted."""
    if attempt > len(retry_seconds):
        return None
    base = retry_seconds[attempt - 1]
    return base * _jitter_rng.uniform(1 - JITTER, 1 + JITTER)


# Deliveries one drain claims at a time, and sends concurrently.
BATCH_SIZE = 50
# A drain hands over to a fresh job after this long, so one tenant cannot hold a worker.
DRAIN_SECONDS = 5.0


@dataclass
class DrainResult:
    sent: list[SendResult]
    next_due_in: float | None  # seconds until the next pending delivery is due, if any


async def drain_deliveries(
    scopes: Scopes,
    client: httpx.AsyncClient,
    tenant_id: uuid.UUID,
    *,
    retry_seconds: list[float],
    attempt_timeout: float,
) -> DrainResult:
    """Send every due delivery of a tenant, a batch at a time. Each batch is claimed in
    one statement; a delivery queued behind an earlier one for the same resource is
    claimed by a later batch, once the earlier one is no longer pending. Each delivery's
    outcome is a unit of work of its own, written after its HTTP call returns."""
    pool = scopes.pool
    sent: list[SendResult] = []
    started = time.monotonic()
    while True:
        if time.monotonic() - started > DRAIN_SECONDS:
            return DrainResult(sent, 0.0)  # more may be due: hand over to a fresh job
        now = utcnow()
        rows = await repository.claim_due_batch(
            pool,
            tenant_id=tenant_id,
            lease_until=now + timedelta(seconds=attempt_timeout + LEASE_MARGIN_SECONDS),
            now=now,
            limit=BATCH_SIZE,
        )
        if not rows:
            break
        sent.extend(
            await asyncio.gather(
                *(
                    _send_claimed(scopes, client, tenant_id, row, retry_seconds, attempt_timeout)
                    for row in rows
                )
            )
        )
    # The next retry to wait for. Deliveries due now but queued behind a retrying one for
    # the same resource go out in the drain that sends that retry.
    due = await repository.next_retry_at(pool, tenant_id=tenant_id, after=utcnow())
    next_due_in = None if due is None else max((due - utcnow()).total_seconds(), 0.0)
    return DrainResult(sent, next_due_in)


async def _send_claimed(
    scopes: Scopes,
    client: httpx.AsyncClient,
    tenant_id: uuid.UUID,
    delivery: asyncpg.Record,
    retry_seconds: list[float],
    attempt_timeout: float,
) -> SendResult:
    delivery_id: str = delivery["id"]
    body = _payload(tenant_id, delivery)
    attempt: int = delivery["attempts"]
    run_id: str | None = delivery["run_id"]

    async def finish(
        status: str,
        code: int | None,
        latency: float,
        error: str | None,
        excerpt: str | None,
        next_at: datetime | None = None,
        *,
        gone: bool = False,
    ) -> None:
        # One statement, or two when the receiver is gone (the subscription disabled with
        # the attempt recorded): a transaction only for the two.
        async with scopes.transaction(autocommit=not gone) as tx:
            if gone:
                await repository.disable_gone_subscription(
                    tx.conn, tenant_id=tenant_id, subscription_id=delivery["subscription_id"]
                )
            await repository.finish_delivery(
                tx.conn,
                tenant_id=tenant_id,
                delivery_id=delivery_id,
                status=status,
                attempt=attempt,
                at=sent_at,
                status_code=code,
                latency_ms=latency,
                error=error,
                excerpt=excerpt,
                next_at=next_at,
            )

    sent_at = utcnow()
    if delivery["url"] is None or not delivery["enabled"]:
        await finish("failed", None, 0.0, "the subscription is disabled or deleted", None)
        return SendResult("failed", attempt=attempt, run_id=run_id)
    headers = _request_headers(delivery["headers"], delivery["secret"], delivery_id, sent_at, body)
    started = time.perf_counter()
    status_code: int | None = None
    error: str | None = None
    excerpt: str | None = None
    try:
        response = await client.post(
            delivery["url"], content=body, headers=headers, timeout=attempt_timeout
        )
        status_code = response.status_code
        excerpt = response.text[:EXCERPT_CHARS]
    except httpx.TimeoutException:
        error = f"timed out after {attempt_timeout:g} s"
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        # Anything the client raises is this attempt's error, never a crashed job that
        # would leave the delivery pending forever.
        error = f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS]
    latency = (time.perf_counter() - started) * 1000.0
    if status_code is not None and 200 <= status_code < 300:
        await finish("delivered", status_code, latency, None, excerpt)
        return SendResult("delivered", attempt=attempt, run_id=run_id)
    if status_code == 410:
        await finish(
            "failed", status_code, latency, "410 Gone: subscription disabled", excerpt, gone=True
        )
        return SendResult("failed", attempt=attempt, run_id=run_id)
    wait = _backoff(retry_seconds, attempt)
    if wait is None:
        await finish("failed", status_code, latency, error, excerpt)
        return SendResult("failed", attempt=attempt, run_id=run_id)
    await finish(
        "pending", status_code, latency, error, excerpt, next_at=utcnow() + timedelta(seconds=wait)
    )
    return SendResult("retry", retry_in=wait, attempt=attempt, run_id=run_id)


def _request_headers(
    static: str | None, secret: str, message_id: str, at: datetime, body: bytes
) -> dict[str, str]:
    """The subscription's static headers, then the ones a delivery sets (which win, even
    over a row that predates a reserved name)."""
    headers = _headers_of(static)
    for name in [
        n for n in headers if n.lower() in RESERVED_HEADERS or n.lower().startswith("webhook-")
    ]:
        del headers[name]
    headers.update(
        {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(message_id, at, body.decode()),
        }
    )
    return headers


async def due_deliveries(pool: asyncpg.Pool, limit: int = 1000) -> list[tuple[uuid.UUID, str, int]]:
    """Pending deliveries whose job may have been lost: due a while ago and not leased."""
    now = utcnow()
    rows = await repository.stale_pending(
        pool, due_before=now - timedelta(seconds=SWEEP_GRACE_SECONDS), now=now, limit=limit
    )
    return [(r["tenant_id"], r["id"], r["attempts"]) for r in rows]


async def run_deliveries(
    conn: Conn, tenant_id: uuid.UUID, run_id: str
) -> list[tuple[datetime, str, str]]:
    """Successful deliveries of events about a run's resources: (time, event, "Type/id")."""
    rows = await repository.delivered_for_run(conn, tenant_id=tenant_id, run_id=run_id)
    return [(r["delivered_at"], r["type"], r["ref"]) for r in rows]


async def run_delivered_versions(
    conn: Conn, tenant_id: uuid.UUID, run_id: str
) -> list[tuple[str, str, int]]:
    """(type, id, version) of each resource version the run's delivered events carried:
    what a workflow was sent."""
    rows = await repository.delivered_versions_for_run(conn, tenant_id=tenant_id, run_id=run_id)
    return [(r["resource_type"], r["resource_id"], r["version_id"]) for r in rows]


async def run_fhir_root(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> str | None:
    """The server root the run's latest webhook event was written under (None: none yet)."""
    return await repository.latest_fhir_root(pool, tenant_id=tenant_id, run_id=run_id)


async def purge_deliveries(tx: Tx, before: datetime) -> int:
    """Finished deliveries created before `before` (every tenant's), their attempts and
    the events left without one, in the caller's transaction; returns the deliveries."""
    return await repository.purge_finished(tx.conn, before=before)


async def ping(
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    tenant_id: uuid.UUID,
    subscription_id: str,
    attempt_timeout: float,
) -> dict[str, Any]:
    """Send a signed `ping` to the subscription's URL now; report what came back."""
    row = await repository.subscription_target(
        pool, tenant_id=tenant_id, subscription_id=subscription_id
    )
    if row is None:
        raise WebhookNotFound(f"no webhook '{subscription_id}'")
    message_id = "msg_ping_" + secrets.token_hex(8)
    now = utcnow()
    body = orjson.dumps(
        {
            "id": message_id,
            "type": "ping",
            "occurredAt": fhir_instant(now),
            "tenant": str(tenant_id),
            "runId": None,
            "fhirBase": None,
            "resource": None,
        }
    )
    headers = _request_headers(row["headers"], row["secret"], message_id, now, body)
    started = time.perf_counter()
    try:
        response = await client.post(
            row["url"], content=body, headers=headers, timeout=attempt_timeout
        )
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise BadRequest(f"the ping could not be delivered: {type(exc).__name__}: {exc}") from None
    return {
        "id": message_id,
        "statusCode": response.status_code,
        "latencyMs": round((time.perf_counter() - started) * 1000.0, 1),
        "responseExcerpt": response.text[:EXCERPT_CHARS],
    }
