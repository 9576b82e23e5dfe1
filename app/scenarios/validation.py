"""Scenario validation on import: every problem at once, each as a `{path, message}`.

The shape is checked by the Pydantic model (`app.scenarios.schema`); everything else
(symbols, time tokens, FHIRPath, expectation references, modes, FHIR validity of the
fixture, variants) by the checks here. Those checks read the JSON document itself rather
than the model, so that most of them still run when the shape is broken and an author
sees the whole list in one go; the checks that need a whole `Scenario` (rendering the
brief, applying variants) run only when the shape is valid.

Paths are JSON pointers into the document with the JSON (camelCase) names:
"/expectations/2/where/0", "/fixture/1/birthDate", "/variants/0/overrides/@patient".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

import orjson
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_snake

from app.fhir.validation import is_known_type, validate_resource
from app.kit.phrases import fold_phrase
from app.scenarios import schema
from app.scenarios.consequential import element_paths
from app.scenarios.expansion import (
    ExpansionError,
    apply_variant,
    brief_tokens,
    expand_value,
    is_time_token,
    render_brief,
    resolve_time_token,
    run_ids,
    symbol_of,
    used_symbols,
)
from app.scenarios.fhirpath_syntax import (
    NAMESPACED_VARIABLES,
    is_standard_variable,
    syntax_error,
    variables_used,
)
from app.scenarios.schema import TIMEOUT_MAX, TIMEOUT_MIN, Scenario

__all__ = [
    "VALIDATION_RUN_KEY",
    "VALIDATION_RUN_START",
    "Problem",
    "content_hash",
    "validate_scenario",
]

# Time tokens are checked for form, not for the day they land on, so any fixed start
# does; a fixed one keeps the problem list (and FHIR checks of expanded values) stable.
VALIDATION_RUN_START: Final = datetime(2025, 3, 7, 8, 0, tzinfo=UTC)
# Dummy ids for expanding the fixture: "validate-patient" is a valid FHIR id.
VALIDATION_RUN_KEY: Final = "validate"

_TIME_KEYS: Final = ("$time", "$date")
# What a brief may quote besides symbol fields; mirrors `expansion.render_brief`.
_BRIEF_TEXT_FIELDS: Final = ("id", "title", "category", "summary", "workflow")
# FHIRPath variables the grader defines besides %fixture.<symbol> and %current.<symbol>.
_RUN_VARIABLES: Final = frozenset({"runStart", "now"})
# An api_call's `where` also has %before: the first resource of its `before`'s evidence.
_API_CALL_VARIABLES: Final = frozenset({"before"})
_EXPECTATION_TYPES: Final = (
    "resource",
    "field",
    "webhook",
    "api_call",
    "rubric",
    "changes",
    "any_of",
    "asked",
    "message",
)
_MESSAGE_CLAUSES: Final = ("says", "saysAny", "not", "mentions", "register", "grounded", "claims")
_PHRASE_FIELDS: Final = ("says", "saysAny", "not")
# What a `changes` expectation may name in `allow` (and a message's `mentions` in `of`):
# the types whose evidence is resources.
_ALLOWABLE_TYPES: Final = frozenset({"resource", "field", "any_of"})
_OnSymbol = Callable[[str, str], None]  # (symbol, path of its use)
_TIMEOUT_MESSAGE: Final = (
    f"timeoutSeconds must be a whole number of seconds in the range {TIMEOUT_MIN}–{TIMEOUT_MAX}"
)


@dataclass(frozen=True)
class Problem:
    path: str  # JSON pointer into the scenario document; "" is the document itself
    message: str


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
        problems.extend(_shape_problems(exc))
    if isinstance(document, dict):
        checker = _Checker(document, scenario, problems)
        problems.extend(checker.run(with_variants=True))
        warnings = checker.warnings
    return scenario, _in_path_order(problems), _in_path_order(warnings)


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


# --- paths ---------------------------------------------------------------------------------


def _escape(key: str | int) -> str:
    # RFC 6901: "~" and "/" in a key are written "~0" and "~1".
    return str(key).replace("~", "~0").replace("/", "~1")


def _pointer(*parts: str | int) -> str:
    return "".join(f"/{_escape(part)}" for part in parts)


def _path_key(path: str) -> tuple[tuple[int, int, str], ...]:
    # Numeric steps sort as numbers: /expectations/2 before /expectations/10.
    return tuple(
        # ASCII digits only: str.isdigit() holds for "¹" too, which int() refuses.
        (0, int(step), "") if step.isascii() and step.isdigit() else (1, 0, step)
        for step in path.split("/")[1:]
    )


def _in_path_order(problems: list[Problem]) -> list[Problem]:
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: _path_key(p.path))  # stable: keeps check order


# --- shape ---------------------------------------------------------------------------------


def _aliases() -> dict[str, str]:
    """Python field name -> JSON name, for the fields where they differ: Pydantic
    reports a location by the name the input used, which may be either."""
    models: list[type[BaseModel]] = [
        schema.Scenario,
        schema.Count,
        schema.ResourceExpectation,
        schema.FieldExpectation,
        schema.WebhookExpectation,
        schema.ApiCallExpectation,
        schema.RubricExpectation,
        schema.AnyOfExpectation,
        schema.OracleCall,
        schema.Variant,
        schema.Fact,
        schema.PatientSim,
    ]
    return {
        name: info.alias
        for model in models
        for name, info in model.model_fields.items()
        if info.alias and info.alias != name
    }


_ALIASES: Final = _aliases()


def _loc_path(loc: tuple[str | int, ...], *, keep_last: bool) -> str:
    parts: list[str | int] = []
    index = 0
    while index < len(loc):
        step = loc[index]
        last = index == len(loc) - 1
        if isinstance(step, str) and not (keep_last and last):
            step = _ALIASES.get(step, step)
        parts.append(step)
        # Members of the discriminated union report their tag after the list index
        # ("expectations", 2, "field", "target"); the tag is not in the document.
        if index >= 1 and loc[index - 1] == "expectations" and isinstance(step, int):
            index += 1
        index += 1
    return _pointer(*parts)


def _shape_problems(exc: ValidationError) -> Iterator[Problem]:
    tags = ", ".join(_EXPECTATION_TYPES)
    for error in exc.errors():
        kind = error["type"]
        loc = tuple(error["loc"])
        # An unknown key is reported by the name the author wrote; model fields by their
        # JSON name, whichever name the author used.
        path = _loc_path(loc, keep_last=kind == "extra_forbidden")
        if kind == "union_tag_invalid":
            tag = (error.get("ctx") or {}).get("tag")
            message = f"unknown expectation type {tag!r} (expected one of: {tags})"
            path += "/type"
        elif kind == "union_tag_not_found":
            message = f"missing expectation type (one of: {tags})"
            path += "/type"
        elif loc and loc[0] in ("timeoutSeconds", "timeout_seconds") and len(loc) == 1:
            message = _TIMEOUT_MESSAGE
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "extra_forbidden":
            message = "unknown field"
        else:
            message = error["msg"]
        yield Problem(path, message)


# --- the checks ----------------------------------------------------------------------------


def _get(obj: dict[str, Any], name: str) -> Any:
    """A field by its JSON name, or by its Python name (the model accepts both)."""
    if name in obj:
        return obj[name]
    return obj.get(to_snake(name))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass
class _Definition:
    resource_type: str
    path: str  # where it is first defined: "/fixture/0/id"
    in_fixture: bool


class _Checker:
    """One pass over one scenario document. `shape` holds the shape problems already
    found, which decide what can be checked without drowning the author in echoes."""

    def __init__(
        self, data: dict[str, Any], scenario: Scenario | None, shape: list[Problem]
    ) -> None:
        self.data = data
        self.scenario = scenario
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        shape_roots = {p.path.split("/")[1] if p.path else "" for p in shape}
        # Symbols can be resolved only when every definition could be read.
        self.symbols_readable = not shape_roots & {"", "fixture", "stimulus"}
        self.shape_valid = not shape
        self.symbols: dict[str, _Definition] = {}
        self.used: set[str] = set()
        self.patient_scope = False  # a resource expectation scoped to the fixture patients

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(Problem(path, message))

    def run(self, *, with_variants: bool) -> list[Problem]:
        self.check_definitions()
        self.check_resources("fixture")
        self.check_resources("stimulus")
        self.check_expectations()
        self.check_oracle()
        self.check_modes_and_brief()
        self.check_patient_sim()
        self.check_strict()
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

    # --- symbols ---------------------------------------------------------------------------

    def check_definitions(self) -> None:
        for section in ("fixture", "stimulus"):
            for index, resource in enumerate(_list(self.data.get(section))):
                if not isinstance(resource, dict):
                    continue  # a shape problem already
                rtype = resource.get("resourceType")
                type_path = _pointer(section, index, "resourceType")
                if rtype is None:
                    self.add(type_path, "resourceType is missing")
                elif not isinstance(rtype, str) or not is_known_type(rtype):
                    self.add(type_path, f"unknown FHIR resource type {rtype!r}")
                    rtype = None
                rid = resource.get("id")
                if not (isinstance(rid, str) and rid.startswith("@")):
                    continue
                id_path = _pointer(section, index, "id")
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
            self.symbols[symbol] = _Definition(rtype, path, in_fixture)
        elif in_fixture:
            self.add(path, f"symbol @{symbol} is already defined at {known.path}")
        elif known.resource_type != rtype:
            self.add(
                path,
                f"symbol @{symbol} is {_article(known.resource_type)} {known.resource_type}"
                f" ({known.path}), not {_article(rtype)} {rtype}",
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
                f"@{symbol} is {_article(known.resource_type)} {known.resource_type},"
                f" not {_article(resource_type)} {resource_type}",
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
        for index, resource in enumerate(_list(self.data.get(section))):
            if not isinstance(resource, dict):
                continue
            if any(key in resource for key in _TIME_KEYS):
                # A time token in place of a resource, or merged into one by a variant.
                self.check_time_token(resource, _pointer(section, index))
                continue
            # The resource's own "id" defines its symbol; it is not a use.
            for key, value in resource.items():
                if key != "id":
                    self.walk_body(value, _pointer(section, index, key))

    def walk_body(self, value: Any, path: str, on_symbol: _OnSymbol | None = None) -> None:
        """Symbols and time tokens anywhere in a JSON value; each symbol use goes to
        `on_symbol` (default: `use`, against the scenario's symbols)."""
        if isinstance(value, dict):
            if any(key in value for key in _TIME_KEYS):
                self.check_time_token(value, path)
                return
            for key, item in value.items():
                self.walk_body(item, f"{path}/{_escape(key)}", on_symbol)
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

    # --- expectations ----------------------------------------------------------------------

    def check_expectations(self) -> None:
        found: dict[str, str] = {}  # id -> path of its first expectation
        befores: list[tuple[str, str, str]] = []  # (own id, named id, path of "before")
        children: dict[str, list[str]] = {}  # any_of id -> its children's ids
        kinds: dict[str, Any] = {}  # id -> type, of the first expectation with that id
        # (named id, path of the entry, its field: a changes' `allow`, a mention's `of`)
        allows: list[tuple[str, str, str]] = []
        for path, expectation in self.expectations(self.data, ""):
            eid = expectation.get("id")
            if isinstance(eid, str):
                if eid in found:
                    self.add(f"{path}/id", f"duplicate expectation id {eid!r} (also {found[eid]})")
                else:
                    found[eid] = path
                    kinds[eid] = expectation.get("type")
            self.check_expectation(expectation, path)
            kind = expectation.get("type")
            if kind in ("api_call", "asked") and isinstance(eid, str):
                before = expectation.get("before")
                if isinstance(before, str):
                    befores.append((eid, before, f"{path}/before"))
            if kind == "message" and isinstance(eid, str):
                after = expectation.get("after")
                if isinstance(after, str):
                    befores.append((eid, after, f"{path}/after"))
                for index, mention in enumerate(_list(expectation.get("mentions"))):
                    if isinstance(mention, dict) and isinstance(mention.get("of"), str):
                        allows.append((mention["of"], f"{path}/mentions/{index}/of", "of"))
            if kind == "changes" and isinstance(eid, str):
                for index, named in enumerate(_list(expectation.get("allow"))):
                    if isinstance(named, str):
                        allows.append((named, f"{path}/allow/{index}", "allow"))
                    elif isinstance(named, dict) and isinstance(named.get("of"), str):
                        allows.append((named["of"], f"{path}/allow/{index}/of", "allow"))
            if kind == "any_of" and isinstance(eid, str):
                children[eid] = [
                    child["id"]
                    for child in _list(expectation.get("expectations"))
                    if isinstance(child, dict) and isinstance(child.get("id"), str)
                ]
        self.check_befores(found, befores, children)
        for named, path, field in allows:
            if named not in kinds:
                self.add(path, f"{field} names no expectation: {named!r}")
            elif kinds[named] not in _ALLOWABLE_TYPES:
                kind = str(kinds[named])
                self.add(
                    path,
                    f"{field} names {named!r}, {_article(kind)} {kind} expectation: only "
                    "resource, field and any_of expectations have resources as evidence",
                )

    def expectations(
        self, parent: dict[str, Any], path: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every expectation, any_of children included, with its path."""
        for index, expectation in enumerate(_list(parent.get("expectations"))):
            if isinstance(expectation, dict):
                child_path = f"{path}/expectations/{index}"
                yield child_path, expectation
                if expectation.get("type") == "any_of":
                    yield from self.expectations(expectation, child_path)

    def check_expectation(self, expectation: dict[str, Any], path: str) -> None:
        kind = expectation.get("type")
        extra = _API_CALL_VARIABLES if kind == "api_call" else frozenset()
        for index, where in enumerate(_list(expectation.get("where"))):
            if isinstance(where, str):
                self.check_fhirpath(where, f"{path}/where/{index}", extra)
        for index, where in enumerate(_list(expectation.get("allowWhere"))):
            if isinstance(where, str):
                self.check_fhirpath(where, f"{path}/allowWhere/{index}")
        count = expectation.get("count")
        if isinstance(count, dict):
            low, high = count.get("min"), count.get("max")
            if isinstance(low, int) and isinstance(high, int) and low > high:
                self.add(f"{path}/count", f"count.min ({low}) is greater than count.max ({high})")
        if kind == "resource":
            rtype = _get(expectation, "resourceType")
            if isinstance(rtype, str) and not is_known_type(rtype):
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            if expectation.get("scope", "patient") == "patient":
                self.patient_scope = True
        elif kind == "changes":
            if expectation.get("scope", "patient") == "patient":
                self.patient_scope = True
        elif kind == "message":
            self.check_message(expectation, path)
        elif kind == "field":
            self.use_symbol_field(expectation.get("target"), f"{path}/target")
        elif kind == "webhook":
            self.use_symbol_field(expectation.get("resource"), f"{path}/resource")
        elif kind == "api_call":
            call_path = expectation.get("path")
            if isinstance(call_path, str) and not call_path.startswith("/"):
                self.add(
                    f"{path}/path",
                    "path must start with '/' (relative to the FHIR base, or /api/...)",
                )
        elif kind == "asked":
            self.check_asked(expectation, path)
        elif kind == "rubric" and expectation.get("required") is True:
            self.add(
                f"{path}/required",
                "rubric checks are always bonus: remove required, or set it to false",
            )

    def check_asked(self, expectation: dict[str, Any], path: str) -> None:
        sim = _get(self.data, "patientSim")
        if not isinstance(sim, dict):
            self.add(
                f"{path}/type",
                "an asked expectation needs a simulated patient: the scenario has no patientSim",
            )
            return
        fact = expectation.get("fact")
        topics = [
            f["topic"]
            for f in _list(sim.get("facts"))
            if isinstance(f, dict) and isinstance(f.get("topic"), str)
        ]
        if isinstance(fact, str) and fact not in topics:
            known = ", ".join(repr(t) for t in topics) or "none"
            self.add(
                f"{path}/fact",
                f"fact {fact!r} is not a topic of patientSim.facts (topics: {known})",
            )

    def check_message(self, expectation: dict[str, Any], path: str) -> None:
        clauses = [f for f in _MESSAGE_CLAUSES if expectation.get(f) not in (None, False, [])]
        if not clauses:
            self.add(path, "a message expectation needs a clause: " + ", ".join(_MESSAGE_CLAUSES))
        for field in _PHRASE_FIELDS:
            phrases = expectation.get(field)
            if isinstance(phrases, list) and not phrases:
                self.add(f"{path}/{field}", f"{field} is empty: give at least one phrase")
            for index, phrase in enumerate(_list(phrases)):
                if isinstance(phrase, str) and not any(c.isalnum() for c in fold_phrase(phrase)):
                    self.add(f"{path}/{field}/{index}", "a phrase needs a letter or a digit")
        said = {fold_phrase(p) for p in _list(expectation.get("says")) if isinstance(p, str)}
        said |= {fold_phrase(p) for p in _list(expectation.get("saysAny")) if isinstance(p, str)}
        for index, phrase in enumerate(_list(expectation.get("not"))):
            if isinstance(phrase, str) and fold_phrase(phrase) in said:
                self.add(
                    f"{path}/not/{index}",
                    f"{phrase!r} is both required (says/saysAny) and forbidden (not)",
                )
        for index, mention in enumerate(_list(expectation.get("mentions"))):
            if isinstance(mention, dict) and isinstance(mention.get("path"), str):
                self.check_fhirpath(mention["path"], f"{path}/mentions/{index}/path")

    # --- strict by default (matches-reference, free, asked) and the lint ---------------

    def check_strict(self) -> None:
        """Errors where the end-state comparison cannot work; warnings (the lint) where
        a scenario is weaker than it looks."""
        data = self.data
        for index, expectation in enumerate(_list(data.get("expectations"))):
            if not isinstance(expectation, dict):
                continue
            path = f"/expectations/{index}"
            kind = expectation.get("type")
            if kind == "reference":
                self.add(
                    f"{path}/type",
                    "matches-reference is added to every run by default: configure it with "
                    "`strict` and `free`, not as an expectation",
                )
            if kind == "asked" and (expectation.get("before") is None) == (
                expectation.get("beforeWrite") is None
            ):
                self.add(
                    f"{path}/before",
                    "an asked expectation needs exactly one of before or beforeWrite",
                )
            before_write = expectation.get("beforeWrite")
            if (
                kind == "asked"
                and isinstance(before_write, str)
                and not is_known_type(before_write)
            ):
                self.add(f"{path}/beforeWrite", f"unknown FHIR resource type {before_write!r}")
            for w_index, where in enumerate(_list(expectation.get("where"))):
                if isinstance(where, str) and _vacuous(where):
                    self.warn(
                        f"{path}/where/{w_index}",
                        "all() is true over an empty collection: this holds when the element "
                        "is absent (say what absence means with exists() or empty())",
                    )
        messages = [
            (index, e)
            for index, e in enumerate(_list(data.get("expectations")))
            if isinstance(e, dict) and e.get("type") == "message"
        ]
        content = ("says", "saysAny", "mentions", "not")
        if any(any(e.get(k) for k in content) for _, e in messages) and not any(
            e.get("grounded") or e.get("claims") for _, e in messages
        ):
            first = next(i for i, e in messages if any(e.get(k) for k in content))
            self.warn(
                f"/expectations/{first}",
                "a message check with neither grounded nor claims, and no other message check "
                "with them: a wrong date, dose or claim in the messages passes",
            )
        raw_strict = data.get("strict")
        strict: dict[str, Any] = raw_strict if isinstance(raw_strict, dict) else {}
        oracle = _list(data.get("oracle"))
        writes = [
            c
            for c in oracle
            if isinstance(c, dict) and c.get("method") in ("POST", "PUT", "PATCH", "DELETE")
        ]
        if not writes:
            self.warn(
                "/oracle",
                "no oracle writes: the run's end state is not compared with a reference "
                "solution (matches-reference), so only the hand-written expectations judge it",
            )
        if isinstance(strict.get("off"), str):
            self.warn(
                "/strict/off",
                f"strict is off ({strict['off']}): the end state is not compared with the "
                "reference solution's",
            )
        sim = data.get("patientSim")
        if isinstance(sim, dict) and _list(sim.get("facts")):
            asked = [
                e
                for e in _list(data.get("expectations"))
                if isinstance(e, dict) and e.get("type") == "asked"
            ]
            if not asked:
                self.warn(
                    "/patientSim",
                    "no asked expectation: runs get a default asked only for the facts the "
                    "oracle asks about before it writes",
                )
        for index, choice in enumerate(_list(data.get("free"))):
            if not isinstance(choice, dict):
                continue
            path = f"/free/{index}"
            rtype = _get(choice, "resourceType")
            element = str(choice.get("path", ""))
            if isinstance(rtype, str) and not is_known_type(rtype):
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            elif isinstance(rtype, str):
                allowed = element_paths(rtype)
                if allowed and element not in allowed and element != "participant.actor":
                    self.add(
                        f"{path}/path",
                        f"{element!r} is not a consequential element of {rtype}; one of: "
                        + ", ".join(allowed),
                    )
                elif element == "participant.actor" and rtype != "Appointment":
                    self.add(f"{path}/path", "participant.actor is an Appointment's")
            for w_index, where in enumerate(_list(choice.get("where"))):
                if isinstance(where, str):
                    self.check_fhirpath(where, f"{path}/where/{w_index}")

    def check_fhirpath(
        self, expression: str, path: str, extra: frozenset[str] = frozenset()
    ) -> None:
        """`extra`: variables this place has besides the run's (an api_call's %before)."""
        error = syntax_error(expression)
        if error is not None:
            self.add(path, f"invalid FHIRPath: {error}")
            return
        for name in sorted(variables_used(expression)):
            namespace, _, symbol = name.partition(".")
            if namespace in NAMESPACED_VARIABLES:
                if not symbol:
                    self.add(path, f"%{namespace} needs a symbol: %{namespace}.<symbol>")
                else:
                    self.use(symbol, path, where=f" in %{name}")
            elif name not in _RUN_VARIABLES | extra and not is_standard_variable(name):
                self.add(
                    path,
                    f"unknown FHIRPath variable %{name} (use %fixture.<symbol>,"
                    " %current.<symbol>, %runStart or %now)",
                )

    def check_befores(
        self,
        found: dict[str, str],
        befores: list[tuple[str, str, str]],
        children: dict[str, list[str]],
    ) -> None:
        # An expectation depends on the one its `before` names, and an any_of on its
        # children; grading needs that graph to be acyclic.
        depends: dict[str, list[str]] = {eid: list(kids) for eid, kids in children.items()}
        for own, named, path in befores:
            field = path.rsplit("/", 1)[-1]  # before, or a message's after
            if named == own:
                self.add(path, f"{field} cannot name its own expectation")
            elif named not in found:
                self.add(path, f"{field} names no expectation: {named!r}")
            else:
                depends.setdefault(own, []).append(named)
        for own, named, path in befores:
            if named != own and named in found:
                cycle = _find_path(depends, named, own)
                if cycle is not None:
                    field = path.rsplit("/", 1)[-1]
                    self.add(path, f"{field} makes a cycle: " + " → ".join([own, *cycle]))

    # --- oracle ----------------------------------------------------------------------------

    def check_oracle(self) -> None:
        calls = _list(self.data.get("oracle"))
        names = [_get(c, "saveAs") if isinstance(c, dict) else None for c in calls]
        saved: dict[str, str] = {}  # saveAs name -> path of the call that saves it
        for index, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            path = _pointer("oracle", index)
            # A call may use the scenario's symbols and what earlier calls saved.
            allowed = {*self.symbols, *saved}
            later = {n for n in names[index:] if isinstance(n, str)}

            on_symbol = self.oracle_symbol_handler(allowed, later)

            call_path = call.get("path")
            if isinstance(call_path, str):
                if not call_path.startswith("/"):
                    self.add(
                        f"{path}/path",
                        "path must start with '/' (relative to the FHIR base, or /api/...)",
                    )
                for symbol in _path_symbols(call_path):
                    on_symbol(symbol, f"{path}/path")
            if "body" in call:
                self.walk_body(call["body"], f"{path}/body", on_symbol)
            name = names[index]
            if not isinstance(name, str):
                continue
            if name in self.symbols:
                self.add(
                    f"{path}/saveAs",
                    f"saveAs {name!r} is already a symbol ({self.symbols[name].path})",
                )
            elif name in saved:
                self.add(f"{path}/saveAs", f"saveAs {name!r} is already used by {saved[name]}")
            else:
                saved[name] = path

    def oracle_symbol_handler(self, allowed: set[str], later: set[str]) -> _OnSymbol:
        def on_symbol(symbol: str, where: str) -> None:
            if self.symbols_readable and symbol not in allowed and symbol in later:
                self.used.add(symbol)
                self.add(where, f"@{symbol} is used before the oracle call that saves it")
            else:
                self.use(symbol, where, allowed)

        return on_symbol

    # --- modes, brief, patientSim, variants ------------------------------------------------

    def check_modes_and_brief(self) -> None:
        modes = _list(self.data.get("modes"))
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
            elif head in _BRIEF_TEXT_FIELDS:
                if not isinstance(self.data.get(head), str):
                    self.add("/brief", f"brief token {shown}: the scenario has no {head}")
            else:
                self.add(
                    "/brief",
                    f"unknown brief token {shown}: use a symbol and a field ({{{{patient.name}}}})"
                    f" or one of {', '.join(_BRIEF_TEXT_FIELDS)}",
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
        sim = _get(self.data, "patientSim")
        if isinstance(sim, dict):
            self.use_symbol_field(
                sim.get("patient"), "/patientSim/patient", resource_type="Patient"
            )

    def check_variant_declarations(self) -> None:
        personas: dict[str, str] = {}
        for index, variant in enumerate(_list(self.data.get("variants"))):
            if not isinstance(variant, dict):
                continue
            persona = variant.get("persona")
            if isinstance(persona, str):
                path = _pointer("variants", index, "persona")
                if persona in personas:
                    self.add(path, f"duplicate persona {persona!r} (also {personas[persona]})")
                else:
                    personas[persona] = path
            overrides = variant.get("overrides")
            if not isinstance(overrides, dict):
                continue
            for key, patch in overrides.items():
                path = _pointer("variants", index, "overrides", key)
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
                        self.walk_body(value, f"{path}/{_escape(name)}")

    def check_override_identity(
        self, patch: dict[str, Any], path: str, key: str, known: _Definition | None
    ) -> None:
        # A persona changes traits of a resource, never which resource it is.
        if known is not None and patch.get("resourceType", known.resource_type) != (
            known.resource_type
        ):
            self.add(f"{path}/resourceType", "an override cannot change resourceType")
        if "id" in patch and patch["id"] != key:
            self.add(f"{path}/id", "an override cannot change id")

    def check_variants(self, scenario: Scenario) -> None:
        baseline = set(self.problems)
        baseline_warnings = set(self.warnings)
        seen: set[str] = set()
        for index, variant in enumerate(scenario.variants):
            prefix = _pointer("variants", index)
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
                for problem in _shape_problems(exc):
                    self.add(prefix + problem.path, f"{variant.persona}: {problem.message}")
                continue
            data = applied.model_dump(by_alias=True, exclude_none=True)
            checker = _Checker(data, applied, [])
            own = len(scenario.expectations)
            for problem in checker.run(with_variants=False):
                # What is wrong with the baseline is reported once, for the baseline.
                if problem not in baseline:
                    path = _variant_path(problem.path, prefix, own)
                    self.add(path, f"{variant.persona}: {problem.message}")
            for warning in checker.warnings:
                if warning not in baseline_warnings:
                    path = _variant_path(warning.path, prefix, own)
                    self.warn(path, f"{variant.persona}: {warning.message}")

    # --- FHIR validity ---------------------------------------------------------------------

    def refs(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        types = {symbol: d.resource_type for symbol, d in self.symbols.items()}
        types.update(extra or {})
        ids = run_ids(types, VALIDATION_RUN_KEY)
        return {symbol: f"{rtype}/{ids[symbol]}" for symbol, rtype in types.items()}

    def expanded(self, section: str) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """Each resource of a section as a run would write it (None if it cannot be
        expanded: its bad token or unknown symbol is reported where it is written)."""
        refs = self.refs()
        for index, resource in enumerate(_list(self.data.get(section))):
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
            originals = _list(self.data.get(section))
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
                    self.check_resource(resource, _pointer(section, index))
        self.check_oracle_resources()

    def check_oracle_resources(self) -> None:
        saved: dict[str, str] = {}  # saveAs name -> its resource type, for dummy refs
        for index, call in enumerate(_list(self.data.get("oracle"))):
            if not isinstance(call, dict):
                continue
            body = call.get("body")
            if isinstance(body, dict) and "resourceType" in body:
                try:
                    expanded = expand_value(body, self.refs(saved), VALIDATION_RUN_START)
                except ExpansionError:
                    expanded = None  # reported where the token or symbol is written
                if isinstance(expanded, dict):
                    self.check_resource(expanded, _pointer("oracle", index, "body"))
            name = _get(call, "saveAs")
            if isinstance(name, str) and name not in self.symbols:
                saved.setdefault(name, _saved_type(call))

    def check_resource(self, resource: dict[str, Any], path: str) -> None:
        rtype = resource.get("resourceType")
        if not isinstance(rtype, str) or not is_known_type(rtype):
            if not path.startswith(("/fixture", "/stimulus")):  # reported by check_definitions
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            return
        for issue in validate_resource(rtype, resource):
            message = issue.message.removeprefix(f"{issue.expression}: ")
            self.add(path + _element_path(issue.expression), message)


# --- helpers -------------------------------------------------------------------------------


_EXPECTATION_INDEX_RE = re.compile(r"^/expectations/(\d+)(?=/|$)")


_ALL_RE = re.compile(r"\.all\(")
_EXPLICIT_EMPTY_RE = re.compile(r"(empty\(\)|exists\(\))")


def _vacuous(expression: str) -> bool:
    """FHIRPath whose `all(…)` is true over nothing, with no `exists()`/`empty()` in the
    expression saying what an absent element should mean: `coding.all(code = 'x')`
    holds for a resource with no coding at all. An explicit `x.empty() or …` is the
    author's choice and is not reported."""
    return bool(_ALL_RE.search(expression)) and not _EXPLICIT_EMPTY_RE.search(expression)


def _variant_path(path: str, prefix: str, own: int) -> str:
    """Where a problem of a variant applied is: the variant's own expectations come after
    the scenario's `own` ones, and are reported at `/variants/<i>/expectations/<k>`."""
    match = _EXPECTATION_INDEX_RE.match(path)
    if match is not None and int(match.group(1)) >= own:
        return f"{prefix}/expectations/{int(match.group(1)) - own}{path[match.end() :]}"
    return prefix + path


def _element_path(expression: str) -> str:
    """The validator's FHIRPath-style location as a pointer below the resource:
    "Patient.name[0].family" -> "/name/0/family"."""
    _, _, rest = expression.partition(".")
    if not rest:
        return ""
    return "".join(f"/{_escape(step)}" for step in re.split(r"\.|\[(\d+)\]", rest) if step)


def _path_symbols(call_path: str) -> list[str]:
    """Symbols in an oracle path: segments ("/Appointment/@appt/$cancel") and query values
    ("?patient=@patient")."""
    path, _, query = call_path.partition("?")
    parts = path.split("/") + [pair.partition("=")[2] for pair in query.split("&") if pair]
    return [symbol for part in parts if (symbol := symbol_of(part)) is not None]


def _saved_type(call: dict[str, Any]) -> str:
    # What an oracle call creates: its body's type, else the type its path names
    # ("/Appointment/$book"). Only used to make a dummy reference for later calls.
    body = call.get("body")
    if isinstance(body, dict) and isinstance(body.get("resourceType"), str):
        rtype: str = body["resourceType"]
        if rtype != "Parameters":
            return rtype
    path = call.get("path")
    first = path.strip("/").split("/")[0] if isinstance(path, str) else ""
    return first if is_known_type(first) else "Basic"


def _find_path(graph: dict[str, list[str]], start: str, goal: str) -> list[str] | None:
    """A path start -> ... -> goal in `graph` (depth first), or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, trail = stack.pop()
        if node == goal:
            return trail
        if node in seen:
            continue
        seen.add(node)
        stack.extend((nxt, [*trail, nxt]) for nxt in graph.get(node, ()))
    return None
