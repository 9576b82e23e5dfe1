"""Modes, the brief, patientSim and variant declarations (each variant applied is checked
as a scenario of its own by `app.scenarios.validation`)."""

from __future__ import annotations

from typing import Any

from app.scenarios.expansion import (
    ExpansionError,
    brief_tokens,
    render_brief,
    symbol_of,
)
from app.scenarios.validation_base import BRIEF_TEXT_FIELDS, Definition, field_of, list_of
from app.scenarios.validation_fhir import FhirChecks
from app.scenarios.validation_problems import escape_key, json_pointer
from app.scenarios.validation_symbols import SymbolChecks


class VariantChecks(SymbolChecks, FhirChecks):
    """Modes, the brief, patientSim and variant declarations."""

    def check_modes_and_brief(self) -> None:
        modes = list_of(self.data.get("modes"))
        brief = self.data.get("brief")
        # A brief or stimulus of the wrong type is a shape problem, not a missing one.
        if "agent" in modes and (brief is None or (isinstance(brief, str) and not brief.strip())):
            self.add("/brief", "agent mode needs a brief (the task the agent is given)")
        if "workflow" in modes and self.data.get("stimulus") in (None, []):
            self.add("/stimulus", "workflow mode needs a stimulus (the write that wakes it)")
        if isinstance(brief, str):
            self.check_brief(brief)

    def check_brief(self, brief: str) -> None:
        before = len(self.problems)
        for token in brief_tokens(brief):
            shown = "{{" + token + "}}"
            head, dot, _ = token.partition(".")
            if dot:
                self.used.add(head)
                if self.symbols_readable and head not in self.symbols:
                    self.add("/brief", f"unknown symbol @{head} in brief token {shown}")
            elif head in self.symbols:
                self.used.add(head)
                self.add("/brief", f"brief token {shown} needs a field, e.g. {{{{{head}.id}}}}")
            elif head in BRIEF_TEXT_FIELDS:
                if not isinstance(self.data.get(head), str):
                    self.add("/brief", f"brief token {shown}: the scenario has no {head}")
            else:
                self.add(
                    "/brief",
                    f"unknown brief token {shown}: use a symbol and a field ({{{{patient.name}}}})"
                    f" or one of {', '.join(BRIEF_TEXT_FIELDS)}",
                )
        if len(self.problems) == before and self.scenario is not None and self.symbols_readable:
            # The fields after a symbol are only known once the fixture is expanded; if a
            # resource cannot be, its own problem is reported and the brief not judged.
            resources = self.expanded_latest()
            if resources is not None:
                try:
                    render_brief(brief, self.scenario, resources, self.refs())
                except ExpansionError as exc:
                    self.add("/brief", str(exc))

    def check_patient_sim(self) -> None:
        sim = field_of(self.data, "patientSim")
        if isinstance(sim, dict):
            self.use_symbol_field(
                sim.get("patient"), "/patientSim/patient", resource_type="Patient"
            )

    def check_variant_declarations(self) -> None:
        personas: dict[str, str] = {}
        for index, variant in enumerate(list_of(self.data.get("variants"))):
            if not isinstance(variant, dict):
                continue
            persona = variant.get("persona")
            if isinstance(persona, str):
                path = json_pointer("variants", index, "persona")
                if persona in personas:
                    self.add(path, f"duplicate persona {persona!r} (also {personas[persona]})")
                else:
                    personas[persona] = path
            overrides = variant.get("overrides")
            if not isinstance(overrides, dict):
                continue
            for key, patch in overrides.items():
                path = json_pointer("variants", index, "overrides", key)
                symbol = symbol_of(key)
                if symbol is None:
                    self.add(path, f"override key {key!r} is not a symbol like @patient")
                    continue
                # Naming a resource to patch is not a use of it; what the patch writes is.
                known = self.symbols.get(symbol)
                if self.symbols_readable and known is None:
                    self.add(path, f"unknown symbol @{symbol}")
                if isinstance(patch, dict):
                    self.check_override_identity(patch, path, key, known)
                    # A patch is fields to merge, never a time token itself.
                    for name, value in patch.items():
                        self.walk_body(value, f"{path}/{escape_key(name)}")

    def check_override_identity(
        self, patch: dict[str, Any], path: str, key: str, known: Definition | None
    ) -> None:
        # A persona changes traits of a resource, never which resource it is.
        if known is not None and patch.get("resourceType", known.resource_type) != (
            known.resource_type
        ):
            self.add(f"{path}/resourceType", "an override cannot change resourceType")
        if "id" in patch and patch["id"] != key:
            self.add(f"{path}/id", "an override cannot change id")
