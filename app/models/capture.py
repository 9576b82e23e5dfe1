"""Captured outbound effects: what a run's system sent (an SMS, an integration call) that
the sandbox kept instead of letting it leave (docs/capture.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class CapturedEffect(Base):
    """One effect a run's system caused outside the FHIR store: its kind, who it was
    addressed to, its text, and the call as it came (`data`)."""

    __tablename__ = "captured_effect"
    __table_args__ = (
        # A run's captures in the order they came (its list, newest last).
        Index("ix_captured_effect_run", "tenant_id", "run_id", "seq"),
        ForeignKeyConstraint(
            ["tenant_id", "run_id"],
            ["run.tenant_id", "run.id"],
            name="fk_captured_effect_run",
            ondelete="CASCADE",
        ),
        CheckConstraint("kind IN ('sms', 'integration', 'email')", name="kind"),
        CheckConstraint("direction IN ('outbound', 'inbound')", name="direction"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity())
    run_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    direction: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    to_address: Mapped[str | None] = mapped_column(Text)
    from_address: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str | None] = mapped_column(Text)
    body: Mapped[str | None] = mapped_column(Text)
    # The call as it came and what it was answered: an SMS's Twilio parameters, an
    # integration call's method, path, query, headers (no Authorization), body, answer.
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(Text)
