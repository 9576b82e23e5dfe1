"""Model calls (for token accounting and the per-tenant allowance) and simulator state."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Float, Identity, Index, Integer, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class LlmCall(Base):
    __tablename__ = "llm_call"
    # The allowance counts a tenant's calls since a time; usage sums them per day and
    # purpose, from the index alone.
    __table_args__ = (
        Index(
            "ix_llm_call_at",
            "tenant_id",
            "at",
            postgresql_include=["purpose", "prompt_tokens", "completion_tokens"],
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(Text)
    purpose: Mapped[str] = mapped_column(Text)  # patient-sim | judge
    model: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(Text)  # ok | error | timeout | invalid
    error: Mapped[str | None] = mapped_column(Text)


class SimReplyLog(Base):
    """One simulated-patient reply: what it answered, how, and the audit's findings."""

    __tablename__ = "sim_reply"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    message_id: Mapped[str] = mapped_column(Text, primary_key=True)  # the staff message
    reply_id: Mapped[str | None] = mapped_column(Text)
    turn: Mapped[int] = mapped_column(Integer)
    engine: Mapped[str] = mapped_column(Text)  # scripted | llm
    model: Mapped[str | None] = mapped_column(Text)
    prompt_version: Mapped[str | None] = mapped_column(Text)
    temperature: Mapped[float | None] = mapped_column(Float)
    seed: Mapped[int | None] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(Text)  # why a stand-in answered, if it did
    issues: Mapped[str | None] = mapped_column(Text)  # fidelity audit findings, newline-separated
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # What the `asked` expectation grades: the fact topics the staff message asked about
    # (by keyword, or as the model judged), those the reply revealed, and when it was written.
    asked_topics: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    revealed_topics: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    # What the `consent` expectation grades: each action the staff message proposed and
    # whether the reply agreed to it (`[{"action": "cancel", "agreed": true}]`).
    decisions: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    replied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
