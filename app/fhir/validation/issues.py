"""A validation problem (`ValidationIssue`), and how a message shows a JSON value."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    expression: str  # FHIRPath-style location: "Appointment.participant[0].status"
    message: str  # names the element and the problem
    code: str = "invalid"  # OperationOutcome issue.code: invalid, code-invalid, required,


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def show(value: Any) -> str:
    if isinstance(value, dict | list) or value is None:
        return json_type(value)
    text = repr(value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"{json_type(value)} {shown}"
