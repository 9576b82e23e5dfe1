"""FHIR validity: the fixture, the stimulus and the oracle's resources, expanded, are
valid R4 resources (`app.fhir.validation`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.fhir.validation import is_known_type, validate_resource
from app.scenarios.expansion import (
    ExpansionError,
    expand_value,
    run_ids,
    symbol_of,
)
from app.scenarios.validation_base import (
    VALIDATION_RUN_KEY,
    VALIDATION_RUN_START,
    CheckerBase,
    element_path,
    field_of,
    list_of,
    saved_type,
)
from app.scenarios.validation_problems import json_pointer


class FhirChecks(CheckerBase):
    """FHIR validity of the resources a scenario holds."""

    def refs(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        types = {symbol: d.resource_type for symbol, d in self.symbols.items()}
        types.update(extra or {})
        ids = run_ids(types, VALIDATION_RUN_KEY)
        return {symbol: f"{rtype}/{ids[symbol]}" for symbol, rtype in types.items()}

    def expanded(self, section: str) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """Each resource of a section as a run would write it (None if it cannot be
        expanded: its bad token or unknown symbol is reported where it is written)."""
        refs = self.refs()
        for index, resource in enumerate(list_of(self.data.get(section))):
            if not isinstance(resource, dict):
                continue
            try:
                expanded = expand_value(resource, refs, VALIDATION_RUN_START)
            except ExpansionError:
                expanded = None
            # Not an object if the "resource" is a bare time token (no resourceType: that
            # is reported already).
            yield index, expanded if isinstance(expanded, dict) else None

    def expanded_latest(self) -> dict[str, dict[str, Any]] | None:
        """Symbol -> its last version (a stimulus update over the fixture), as a brief
        reads it; None if some resource cannot be expanded."""
        latest: dict[str, dict[str, Any]] = {}
        for section in ("fixture", "stimulus"):
            originals = list_of(self.data.get(section))
            for index, resource in self.expanded(section):
                if resource is None:
                    return None
                symbol = symbol_of(originals[index].get("id"))
                if symbol is not None:
                    latest[symbol] = resource
        return latest

    def check_fhir_validity(self) -> None:
        for section in ("fixture", "stimulus"):
            for index, resource in self.expanded(section):
                if resource is not None:
                    self.check_resource(resource, json_pointer(section, index))
        self.check_oracle_resources()

    def check_oracle_resources(self) -> None:
        saved: dict[str, str] = {}  # saveAs name -> its resource type, for dummy refs
        for index, call in enumerate(list_of(self.data.get("oracle"))):
            if not isinstance(call, dict):
                continue
            body = call.get("body")
            if isinstance(body, dict) and "resourceType" in body:
                try:
                    expanded = expand_value(body, self.refs(saved), VALIDATION_RUN_START)
                except ExpansionError:
                    expanded = None  # reported where the token or symbol is written
                if isinstance(expanded, dict):
                    self.check_resource(expanded, json_pointer("oracle", index, "body"))
            name = field_of(call, "saveAs")
            if isinstance(name, str) and name not in self.symbols:
                saved.setdefault(name, saved_type(call))

    def check_resource(self, resource: dict[str, Any], path: str) -> None:
        rtype = resource.get("resourceType")
        if not isinstance(rtype, str) or not is_known_type(rtype):
            if not path.startswith(("/fixture", "/stimulus")):  # reported by check_definitions
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            return
        for issue in validate_resource(rtype, resource):
            message = issue.message.removeprefix(f"{issue.expression}: ")
            self.add(path + element_path(issue.expression), message)
