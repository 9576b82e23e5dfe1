from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Float, Index, Integer, Text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class TraceCall(Base):
    """One recorded API call; `refs` are the "Type/id" references it touched."""

    __tablename__ = "trace_call"
    __table_args__ = (
        Index("ix_trace_call_at", "tenant_id", "at"),
        Index("ix_trace_call_run", "tenant_id", "run_id", "at"),
    )

    row_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column()
    run_id: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    method: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    query: Mapped[str] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer)
    duration_ms: Mapped[float] = mapped_column(Float)
    transport: Mapped[str] = mapped_column(Text)
    refs: Mapped[list[str]] = mapped_column(ARRAY(Text))
    # The response body (JSON), its first RESPONSE_CAP bytes,
    # and its full size (larger than the text kept when it was cut).
    response: Mapped[str | None] = mapped_column(Text)
    response_bytes: Mapped[int | None] = mapped_column(Integer)
    # The request body, its first RESPONSE_CAP bytes (what an
    # `api_call` expectation's `where` reads of the call).
    request: Mapped[str | None] = mapped_column(Text)
