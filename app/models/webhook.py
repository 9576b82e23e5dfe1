"""Webhook subscriptions, the event outbox, deliveries and their attempts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Float, Identity, Index, Integer, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class WebhookSubscription(Base):
    __tablename__ = "webhook_subscription"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(ARRAY(Text))
    resource_types: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    # The signing secret: needed in clear to sign, shown to the client only once.
    secret: Mapped[str] = mapped_column(Text)
    # Static headers sent with every delivery ({name: value}); like the secret, needed in
    # clear to send and shown to the client only once.
    headers: Mapped[dict[str, str]] = mapped_column(JSONB, server_default="{}")
    enabled: Mapped[bool] = mapped_column(Boolean)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class WebhookEvent(Base):
    """An event, written in the same statement as the resource write that caused it."""

    __tablename__ = "webhook_event"
    __table_args__ = (Index("ix_webhook_event_run", "tenant_id", "run_id"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity())
    type: Mapped[str] = mapped_column(Text)
    resource_type: Mapped[str] = mapped_column(Text)
    resource_id: Mapped[str] = mapped_column(Text)
    version_id: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(Text)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    fhir_root: Mapped[str] = mapped_column(Text)  # the API's root URL as the writer saw it
    # An event about something other than a FHIR resource (eval.completed, eval.regressed)
    # carries its body here; a resource event's body is the resource version it names.
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class WebhookDelivery(Base):
    __tablename__ = "webhook_delivery"
    __table_args__ = (
        Index("ix_webhook_delivery_subscription", "tenant_id", "subscription_id", "created_at"),
        Index("ix_webhook_delivery_order", "tenant_id", "subscription_id", "resource_ref", "seq"),
        Index(
            "ix_webhook_delivery_pending",
            "tenant_id",
            "next_attempt_at",
            postgresql_where=sql_text("status = 'pending'"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(Text)
    event_id: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger)
    resource_ref: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)  # pending | delivered | failed
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WebhookAttempt(Base):
    __tablename__ = "webhook_attempt"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    delivery_id: Mapped[str] = mapped_column(Text, primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    response_excerpt: Mapped[str | None] = mapped_column(Text)
