"""Scenarios imported per tenant, runs, and the run ownership of fixture references."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import BigInteger, Date, DateTime, Index, Integer, SmallInteger, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class CustomScenario(Base):
    """A tenant's imported scenario; re-importing an id adds a version."""

    __tablename__ = "scenario"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSONB)
    hash: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Run(Base):
    __tablename__ = "run"
    __table_args__ = (
        Index("ix_run_started", "tenant_id", "started_at"),
        Index("ix_run_live", "tenant_id", "id", postgresql_where=text("status = 'live'")),
        Index("ix_run_label", "tenant_id", "label"),
        Index("ix_run_revision", "tenant_id", "revision", "started_at"),
        # The board: a mode's latest runs (default revision, picker) and the per-revision
        # chart of a scenario at its hash, read from the index alone.
        Index("ix_run_mode", "tenant_id", "mode", "started_at", postgresql_include=["revision"]),
        Index(
            "ix_run_board",
            "tenant_id",
            "mode",
            "scenario_id",
            "scenario_hash",
            "revision",
            postgresql_include=["status", "started_at"],
        ),
        # The board's headline (the home page): one revision's runs of a mode, by scenario
        # and hash in start order, read from the index alone (migration 0025).
        Index(
            "ix_run_board_revision",
            "tenant_id",
            "mode",
            "revision",
            "scenario_id",
            "scenario_hash",
            "started_at",
            "id",
            postgresql_include=["status"],
        ),
        # Usage: the runs decided (the billable unit) per UTC day they ended.
        Index(
            "ix_run_decided",
            "tenant_id",
            "finished_at",
            postgresql_include=["status"],
            postgresql_where=text("status IN ('passed', 'failed', 'timed_out')"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    scenario_id: Mapped[str] = mapped_column(Text)
    scenario_version: Mapped[int] = mapped_column(Integer)  # 0 for a built-in scenario
    scenario_hash: Mapped[str] = mapped_column(Text)
    builtin: Mapped[bool] = mapped_column()
    mode: Mapped[str] = mapped_column(Text)
    variant: Mapped[str | None] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    brief: Mapped[str | None] = mapped_column(Text)
    fixture: Mapped[dict[str, Any]] = mapped_column(JSONB)  # symbol -> "Type/id"
    expectations: Mapped[list[Any]] = mapped_column(JSONB)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    deadline: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Last write or call attributed to the run, and the value of it the last grading saw.
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    graded_change_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # A pass found every required expectation holding but waits for the quiet: when that
    # wait ends. The grading tick picks the run up then, so the deferred job that ends it
    # is never its only record (a lost job would leave it live until its deadline).
    settle_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    graded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The scenario's scheduling setting ("strict" or "lenient"), read by its view's writes.
    scheduling: Mapped[str] = mapped_column(Text, server_default="strict")
    # Where the simulated patient's SMS replies are posted (Twilio's inbound format,
    # signed): set by the start request's `smsReplyUrl` (docs/capture.md).
    sms_reply_url: Mapped[str | None] = mapped_column(Text)
    # Who answers the staff's messages in a patientSim run: "sim" (the simulated patient)
    # or "human" (a person on the run page).
    patient_driver: Mapped[str] = mapped_column(Text, server_default="sim")
    # The version of the system under test the caller named (a git sha, "triage-agent v3").
    revision: Mapped[str | None] = mapped_column(Text)
    # What the run was made of (contract Provenance): written as it starts, completed by the
    # grading that ends it, never changed after.
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class RunRef(Base):
    """A fixture or stimulus resource of a run: writes referencing it belong to the run."""

    __tablename__ = "run_ref"
    __table_args__ = (Index("ix_run_ref_run", "tenant_id", "run_id"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    ref: Mapped[str] = mapped_column(Text, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text)


class UsageCounter(Base):
    """FHIR writes per tenant and UTC day, spread over shards so concurrent writers of
    one tenant do not queue on one row lock."""

    __tablename__ = "usage_counter"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    writes: Mapped[int] = mapped_column(BigInteger)
