"""Scheduled evals: a cron expression that starts a workflow eval, and each due time's
outcome (started, or skipped with the reason)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Index, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class EvalSchedule(Base):
    __tablename__ = "eval_schedule"
    __table_args__ = (
        # The worker's sweep, across tenants: the schedules due now.
        Index("ix_eval_schedule_due", "next_due_at", postgresql_where=sql_text("NOT paused")),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    cron: Mapped[str] = mapped_column(Text)  # five fields, UTC
    # The eval to start: {mode, scenarios, personas, repeats, timeoutSeconds}.
    request: Mapped[dict[str, Any]] = mapped_column(JSONB)
    label_prefix: Mapped[str] = mapped_column(Text)
    revision: Mapped[str | None] = mapped_column(Text)
    root_url: Mapped[str] = mapped_column(Text)  # the API's root as the creator saw it
    paused: Mapped[bool] = mapped_column(Boolean)
    # The next due time; a starter moves it on in a guarded update (`= the value it read`),
    # so each due time is taken by one worker only.
    next_due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class EvalScheduleFire(Base):
    """One due time of a schedule: the eval it started, or why it was skipped. The key
    holds the due time, so no due time is recorded (or started) twice."""

    __tablename__ = "eval_schedule_fire"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    schedule_id: Mapped[str] = mapped_column(Text, primary_key=True)
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    outcome: Mapped[str] = mapped_column(Text)  # started | skipped
    reason: Mapped[str | None] = mapped_column(Text)
    eval_id: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
