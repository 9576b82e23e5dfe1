"""Time helpers: everything is UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def fhir_instant(moment: datetime) -> str:
    """An instant as FHIR writes it: UTC, millisecond precision, numeric offset."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")
