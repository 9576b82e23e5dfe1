"""OperationOutcome bodies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.errors import Issue


def operation_outcome(issues: Iterable[Issue]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for issue in issues:
        entry: dict[str, Any] = {
            "severity": issue.severity,
            "code": issue.code,
            "diagnostics": issue.message,
        }
        if issue.expression:
            entry["expression"] = [issue.expression]
        out.append(entry)
    if not out:
        out.append({"severity": "information", "code": "informational", "diagnostics": "ok"})
    return {"resourceType": "OperationOutcome", "issue": out}
