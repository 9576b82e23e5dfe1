"""FHIR resource storage: current versions, append-only history, and the date index.

One table holds every resource type; `(tenant_id, resource_type, id)` is the key, so
ids are per tenant. Search values are extracted at write time into the array columns
(`tokens`, `refs`, `strings`) and the `fhir_date` side table, see `app.fhir.search`.
No foreign key to `tenant` on these tables: they are the hot write path and the
tenant is checked by the auth layer before any statement runs.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Index, Integer, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class FhirResource(Base):
    __tablename__ = "fhir_resource"
    __table_args__ = (
        # GIN over the key arrays alone: every key embeds its tenant and type (see
        # app.fhir.repository.key_prefix), which keeps lookups tenant-scoped without a
        # multi-column GIN. fastupdate off: no pending list for searches to scan.
        Index(
            "ix_fhir_resource_tokens",
            "tokens",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "ix_fhir_resource_refs",
            "refs",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "ix_fhir_resource_strings",
            "strings",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "ix_fhir_resource_all_refs",
            "all_refs",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index("ix_fhir_resource_updated", "tenant_id", "resource_type", "last_updated"),
        Index(
            "ix_fhir_resource_run",
            "tenant_id",
            "run_id",
            postgresql_where=text("run_id IS NOT NULL"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    resource_type: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    version_id: Mapped[int] = mapped_column(Integer)
    last_updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    deleted: Mapped[bool] = mapped_column(Boolean, server_default="false")
    resource: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    run_id: Mapped[str | None] = mapped_column(Text)
    tokens: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    refs: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    strings: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    all_refs: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    sort: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")


class FhirHistory(Base):
    __tablename__ = "fhir_history"
    __table_args__ = (
        Index("ix_fhir_history_type_updated", "tenant_id", "resource_type", "last_updated"),
        Index("ix_fhir_history_updated", "tenant_id", "last_updated"),
        Index(
            "ix_fhir_history_run",
            "tenant_id",
            "run_id",
            postgresql_where=text("run_id IS NOT NULL"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    resource_type: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    version_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    interaction: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    # Who wrote it when not the client: "setup" (a run's fixture), "stimulus", "sim".
    source: Mapped[str | None] = mapped_column(Text)
    resource: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class FhirDate(Base):
    """Date search values as half-open UTC ranges [low, high)."""

    __tablename__ = "fhir_date"
    __table_args__ = (
        Index("ix_fhir_date_low", "tenant_id", "resource_type", "param", "low"),
        Index("ix_fhir_date_high", "tenant_id", "resource_type", "param", "high"),
        Index("ix_fhir_date_resource", "tenant_id", "resource_type", "id"),
    )

    row_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column()
    resource_type: Mapped[str] = mapped_column(Text)
    id: Mapped[str] = mapped_column(Text)
    param: Mapped[str] = mapped_column(Text)
    low: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    high: Mapped[datetime] = mapped_column(DateTime(timezone=True))
