"""Integration stub checks beyond their shape: a stub that repeats an earlier one's name,
method and path would never answer (the first match does)."""

from __future__ import annotations

from app.scenarios.validation_base import CheckerBase, field_of, list_of
from app.scenarios.validation_problems import json_pointer


class IntegrationChecks(CheckerBase):
    """The scenario's `integrations` (docs/capture.md "Integration stubs")."""

    def check_integrations(self) -> None:
        seen: dict[tuple[object, object, object], str] = {}
        for index, stub in enumerate(list_of(self.data.get("integrations"))):
            if not isinstance(stub, dict):
                continue
            path = json_pointer("integrations", index)
            key = (
                field_of(stub, "name"),
                field_of(stub, "method") or "*",
                field_of(stub, "path") or "/*",
            )
            if not all(isinstance(part, str) for part in key):
                continue  # the shape check says what is wrong with it
            if key in seen:
                self.add(
                    path,
                    f"the same name, method and path as {seen[key]}: this stub would never "
                    "answer (the first matching stub does)",
                )
            else:
                seen[key] = path
