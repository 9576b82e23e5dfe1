"""Symbol checks (each defined once, used where it may be, not left unused) and the
resources and JSON bodies that define and use them, time tokens included."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from app.fhir.validation import is_known_type
from app.scenarios.expansion import (
    ExpansionError,
    is_time_token,
    resolve_time_token,
    symbol_of,
    used_symbols,
)
from app.scenarios.validation_base import (
    TIME_KEYS,
    VALIDATION_RUN_START,
    CheckerBase,
    Definition,
    OnSymbol,
    article_for,
    list_of,
)
from app.scenarios.validation_problems import escape_key, json_pointer


class SymbolChecks(CheckerBase):
    """Symbols, resources and the JSON bodies that use them."""

    def check_definitions(self) -> None:
        for section in ("fixture", "stimulus"):
            for index, resource in enumerate(list_of(self.data.get(section))):
                if not isinstance(resource, dict):
                    continue  # a shape problem already
                rtype = resource.get("resourceType")
                type_path = json_pointer(section, index, "resourceType")
                if rtype is None:
                    self.add(type_path, "resourceType is missing")
                elif not isinstance(rtype, str) or not is_known_type(rtype):
                    self.add(type_path, f"unknown FHIR resource type {rtype!r}")
                    rtype = None
                rid = resource.get("id")
                if not (isinstance(rid, str) and rid.startswith("@")):
                    continue
                id_path = json_pointer(section, index, "id")
                symbol = symbol_of(rid)
                if symbol is None:
                    self.add(id_path, f"bad symbol {rid!r}: expected @ and a name like @appt")
                    continue
                if rtype is None:
                    continue
                self.define(symbol, rtype, id_path, in_fixture=section == "fixture")

    def define(self, symbol: str, rtype: str, path: str, *, in_fixture: bool) -> None:
        known = self.symbols.get(symbol)
        if known is None:
            self.symbols[symbol] = Definition(rtype, path, in_fixture)
        elif in_fixture:
            self.add(path, f"symbol @{symbol} is already defined at {known.path}")
        elif known.resource_type != rtype:
            self.add(
                path,
                f"symbol @{symbol} is {article_for(known.resource_type)} {known.resource_type}"
                f" ({known.path}), not {article_for(rtype)} {rtype}",
            )
        else:
            # A stimulus that updates a fixture resource: that resource is in play.
            self.used.add(symbol)

    def use(
        self, symbol: str, path: str, allowed: Collection[str] | None = None, where: str = ""
    ) -> None:
        """A use of `symbol` at `path`; `allowed` defaults to the scenario's symbols,
        `where` says where in the value it is (" in %fixture.x")."""
        self.used.add(symbol)
        if not self.symbols_readable:
            return
        if symbol not in (self.symbols if allowed is None else allowed):
            self.add(path, f"unknown symbol @{symbol}{where}")

    def use_symbol_field(self, value: Any, path: str, *, resource_type: str | None = None) -> None:
        """A field that must hold a symbol, like `"target": "@appt"`."""
        if not isinstance(value, str):
            return  # a shape problem already
        symbol = symbol_of(value)
        if symbol is None:
            self.add(path, f"expected a symbol like @appt, got {value!r}")
            return
        self.use(symbol, path)
        known = self.symbols.get(symbol)
        if resource_type and known is not None and known.resource_type != resource_type:
            self.add(
                path,
                f"@{symbol} is {article_for(known.resource_type)} {known.resource_type},"
                f" not {article_for(resource_type)} {resource_type}",
            )

    def check_unused(self) -> None:
        for symbol, definition in self.symbols.items():
            if not definition.in_fixture or symbol in self.used:
                continue
            if definition.resource_type == "Patient" and self.patient_scope:
                continue  # the fixture patients scope the resource expectations
            # Legal: every fixture resource needs a symbol for its run-unique id, and one
            # the agent must find (a Coverage, a portal message) is referenced by nothing.
            self.warn(
                definition.path,
                f"symbol @{symbol} is defined but never used (by an expectation, the oracle,"
                f" the brief, another resource or patientSim): fine for a resource the agent"
                f" must find, else a slip",
            )

    # --- resources and JSON bodies ---------------------------------------------------------

    def check_resources(self, section: str) -> None:
        for index, resource in enumerate(list_of(self.data.get(section))):
            if not isinstance(resource, dict):
                continue
            if any(key in resource for key in TIME_KEYS):
                # A time token in place of a resource, or merged into one by a variant.
                self.check_time_token(resource, json_pointer(section, index))
                continue
            # The resource's own "id" defines its symbol; it is not a use.
            for key, value in resource.items():
                if key != "id":
                    self.walk_body(value, json_pointer(section, index, key))

    def walk_body(self, value: Any, path: str, on_symbol: OnSymbol | None = None) -> None:
        """Symbols and time tokens anywhere in a JSON value; each symbol use goes to
        `on_symbol` (default: `use`, against the scenario's symbols)."""
        if isinstance(value, dict):
            if any(key in value for key in TIME_KEYS):
                self.check_time_token(value, path)
                return
            for key, item in value.items():
                self.walk_body(item, f"{path}/{escape_key(key)}", on_symbol)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.walk_body(item, f"{path}/{index}", on_symbol)
        else:
            for symbol in used_symbols(value):
                (on_symbol or self.use)(symbol, path)

    def check_time_token(self, value: dict[str, Any], path: str) -> None:
        if not is_time_token(value):
            self.add(
                path,
                'malformed time token: expected {"$time": "<token>"} or {"$date": "<token>"}'
                " and no other keys",
            )
            return
        ((key, token),) = value.items()
        try:
            resolve_time_token(token, VALIDATION_RUN_START, as_date=key == "$date")
        except ExpansionError as exc:
            self.add(path, str(exc))
