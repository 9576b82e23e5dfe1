"""Scenario validation on import: every problem at once, each as a `{path, message}`.

The shape is checked by the Pydantic model (`app.scenarios.schema`); everything else
(symbols, time tokens, FHIRPath, expectation references, modes, FHIR validity of the
fixture, variants) by the checks here. Those checks read the JSON document itself rather
than the model, so that most of them still run when the shape is broken and an author
sees the whole list in one go; the checks that need a whole `Scenario` (rendering the
brief, applying variants) run only when the shape is valid.

Paths are JSON pointers into the document with the JSON (camelCase) names:
"/expectations/2/where/0", "/fixture/1/birthDate", "/variants/0/overrides/@patient".

The checks are grouped by concept, each group a class of its own module over the shared
state of `validation_base`: symbols and bodies (`validation_symbols`), FHIRPath
(`validation_fhirpath`), expectations, strictness and the lint, the oracle, modes and
variants, FHIR validity, integration stubs (`validation_integrations`); problems and paths
(`validation_problems`) and shape problems (`validation_shape`). This module composes
them.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import orjson
from pydantic import ValidationError

from app.scenarios.expansion import (
    ExpansionError,
    apply_variant,
)
from app.scenarios.schema import Scenario
from app.scenarios.validation_base import VALIDATION_RUN_KEY, VALIDATION_RUN_START, variant_path
from app.scenarios.validation_expectations import ExpectationChecks
from app.scenarios.validation_integrations import IntegrationChecks
from app.scenarios.validation_oracle import OracleChecks
from app.scenarios.validation_problems import Problem, in_path_order, json_pointer
from app.scenarios.validation_shape import shape_problems
from app.scenarios.validation_strict import StrictChecks
from app.scenarios.validation_variants import VariantChecks

__all__ = [
    "VALIDATION_RUN_KEY",
    "VALIDATION_RUN_START",
    "Problem",
    "content_hash",
    "validate_scenario",
]


def validate_scenario(document: Any) -> tuple[Scenario | None, list[Problem], list[Problem]]:
    """Validate a scenario document (parsed JSON, or a `Scenario`).

    Returns the parsed scenario when its shape is valid (even if other problems were
    found: callers must check the list) and None otherwise, every problem found and
    every warning, each sorted by path. No problems means the scenario can be imported;
    warnings (legal, but often a slip: a symbol nothing mentions) never block it."""
    if isinstance(document, Scenario):
        document = document.model_dump(by_alias=True, exclude_none=True)
    problems: list[Problem] = []
    warnings: list[Problem] = []
    scenario: Scenario | None = None
    try:
        scenario = Scenario.model_validate(document)
    except ValidationError as exc:
        problems.extend(shape_problems(exc))
    if isinstance(document, dict):
        checker = _Checker(document, scenario, problems)
        problems.extend(checker.run(with_variants=True))
        warnings = checker.warnings
    return scenario, in_path_order(problems), in_path_order(warnings)


def content_hash(scenario: Scenario) -> str:
    """sha256 (hex) of the scenario's canonical JSON: sorted keys, no whitespace, JSON
    names, no nulls. The same scenario hashes the same however its file is laid out or
    its keys ordered, and whether its decimals were parsed as float or Decimal."""
    data = scenario.model_dump(by_alias=True, exclude_none=True)
    canonical = orjson.dumps(data, default=_decimal_text, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _decimal_text(value: object) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class _Checker(ExpectationChecks, StrictChecks, OracleChecks, VariantChecks, IntegrationChecks):
    """One pass over one scenario document. `shape` holds the shape problems already
    found, which decide what can be checked without drowning the author in echoes."""

    def run(self, *, with_variants: bool) -> list[Problem]:
        self.check_definitions()
        self.check_resources("fixture")
        self.check_resources("stimulus")
        self.check_expectations()
        self.check_oracle()
        self.check_modes_and_brief()
        self.check_patient_sim()
        self.check_strict()
        self.check_integrations()
        self.check_variant_declarations()
        if self.shape_valid:
            # Unused symbols only when nothing is hidden by a broken shape: a use in a
            # malformed part would be missed and its symbol reported unused for nothing.
            self.check_unused()
        if self.symbols_readable:
            self.check_fhir_validity()
        if with_variants and self.scenario is not None and self.shape_valid:
            self.check_variants(self.scenario)
        return self.problems

    def check_variants(self, scenario: Scenario) -> None:
        baseline = set(self.problems)
        baseline_warnings = set(self.warnings)
        seen: set[str] = set()
        for index, variant in enumerate(scenario.variants):
            prefix = json_pointer("variants", index)
            if variant.persona in seen or any(
                p.path.startswith(f"{prefix}/overrides") for p in self.problems
            ):
                continue  # reported already; applying it would only repeat that
            seen.add(variant.persona)
            try:
                applied = apply_variant(scenario, variant.persona)
            except ExpansionError as exc:
                self.add(f"{prefix}/overrides", str(exc))
                continue
            except ValidationError as exc:
                for problem in shape_problems(exc):
                    self.add(prefix + problem.path, f"{variant.persona}: {problem.message}")
                continue
            data = applied.model_dump(by_alias=True, exclude_none=True)
            checker = _Checker(data, applied, [])
            own = len(scenario.expectations)
            for problem in checker.run(with_variants=False):
                # What is wrong with the baseline is reported once, for the baseline.
                if problem not in baseline:
                    path = variant_path(problem.path, prefix, own)
                    self.add(path, f"{variant.persona}: {problem.message}")
            for warning in checker.warnings:
                if warning not in baseline_warnings:
                    path = variant_path(warning.path, prefix, own)
                    self.warn(path, f"{variant.persona}: {warning.message}")
