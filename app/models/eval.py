"""Evals: many runs under one label, queued while the tenant's live slots are full."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Index, Integer, Text, func
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class Eval(Base):
    __tablename__ = "eval"
    __table_args__ = (
        Index("ix_eval_label", "tenant_id", "label", "created_at"),
        Index("ix_eval_revision", "tenant_id", "revision", "created_at"),
        Index(
            "ix_eval_unfinished",
            "tenant_id",
            "created_at",
            postgresql_where=sql_text("completed_at IS NULL AND cancelled_at IS NULL"),
        ),
        Index("ix_eval_schedule", "tenant_id", "schedule_id", "created_at"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    label: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(Text)
    repeats: Mapped[int] = mapped_column(Integer)
    request: Mapped[dict[str, Any]] = mapped_column(JSONB)  # what was asked, for display
    timeout_seconds: Mapped[int | None] = mapped_column(Integer)
    root_url: Mapped[str] = mapped_column(Text)  # for the runs' fhirBase in webhooks
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    cancelled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The system under test's version; every run the eval starts carries it.
    revision: Mapped[str | None] = mapped_column(Text)
    # Set once, when no run of the eval is queued or live any more, in the transaction
    # that writes its eval.completed / eval.regressed events.
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The eval it is compared with for eval.regressed when set (a schedule's previous
    # completed eval); else the CI rule's default baseline.
    baseline_id: Mapped[str | None] = mapped_column(Text)
    schedule_id: Mapped[str | None] = mapped_column(Text)  # the schedule that started it


class EvalItem(Base):
    """One planned run of an eval: queued until a live slot frees, then started."""

    __tablename__ = "eval_item"
    __table_args__ = (
        Index("ix_eval_item_state", "tenant_id", "state", "queued_at"),
        Index("ix_eval_item_run", "tenant_id", "run_id"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    eval_id: Mapped[str] = mapped_column(Text, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    scenario_id: Mapped[str] = mapped_column(Text)
    persona: Mapped[str | None] = mapped_column(Text)
    repeat_index: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(Text)  # queued | starting | started | cancelled
    run_id: Mapped[str | None] = mapped_column(Text)
    # The run's status, copied by triggers (migration 0017) as the run is inserted or
    # changes status, and as the item is given its run: the evals list counts a page
    # without reading the runs.
    run_status: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
