"""What every group of scenario checks shares: the checker's state over one document
(the symbols defined and used, the problems and warnings found), the constants the
checks read and the small helpers over the JSON document (see
`app.scenarios.validation`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic.alias_generators import to_snake

from app.fhir.validation import is_known_type
from app.scenarios.expansion import (
    symbol_of,
)
from app.scenarios.schema import TIMEOUT_MAX, TIMEOUT_MIN, Scenario
from app.scenarios.validation_problems import Problem, escape_key

# Time tokens are checked for form, not for the day they land on, so any fixed start
# does; a fixed one keeps the problem list (and FHIR checks of expanded values) stable.
VALIDATION_RUN_START: Final = datetime(2025, 3, 7, 8, 0, tzinfo=UTC)
# Dummy ids for expanding the fixture: "validate-patient" is a valid FHIR id.
VALIDATION_RUN_KEY: Final = "validate"

TIME_KEYS: Final = ("$time", "$date")
# What a brief may quote besides symbol fields; mirrors `expansion.render_brief`.
BRIEF_TEXT_FIELDS: Final = ("id", "title", "category", "summary", "workflow")
# FHIRPath variables the grader defines besides %fixture.<symbol> and %current.<symbol>.
RUN_VARIABLES: Final = frozenset({"runStart", "now"})
# An api_call's `where` also has %before: the first resource of its `before`'s evidence.
API_CALL_VARIABLES: Final = frozenset({"before"})
EXPECTATION_TYPES: Final = (
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
MESSAGE_CLAUSES: Final = ("says", "saysAny", "not", "mentions", "register", "grounded", "claims")
PHRASE_FIELDS: Final = ("says", "saysAny", "not")
# What a `changes` expectation may name in `allow` (and a message's `mentions` in `of`):
# the types whose evidence is resources.
ALLOWABLE_TYPES: Final = frozenset({"resource", "field", "any_of"})
OnSymbol = Callable[[str, str], None]  # (symbol, path of its use)
TIMEOUT_MESSAGE: Final = (
    f"timeoutSeconds must be a whole number of seconds in the range {TIMEOUT_MIN}–{TIMEOUT_MAX}"
)


def field_of(obj: dict[str, Any], name: str) -> Any:
    """A field by its JSON name, or by its Python name (the model accepts both)."""
    if name in obj:
        return obj[name]
    return obj.get(to_snake(name))


def list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def article_for(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass
class Definition:
    resource_type: str
    path: str  # where it is first defined: "/fixture/0/id"
    in_fixture: bool


class CheckerBase:
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
        self.symbols: dict[str, Definition] = {}
        self.used: set[str] = set()
        self.patient_scope = False  # a resource expectation scoped to the fixture patients

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(Problem(path, message))


_EXPECTATION_INDEX_RE = re.compile(r"^/expectations/(\d+)(?=/|$)")


_ALL_RE = re.compile(r"\.all\(")
_EXPLICIT_EMPTY_RE = re.compile(r"(empty\(\)|exists\(\))")


def vacuous(expression: str) -> bool:
    """FHIRPath whose `all(…)` is true over nothing, with no `exists()`/`empty()` in the
    expression saying what an absent element should mean: `coding.all(code = 'x')`
    holds for a resource with no coding at all. An explicit `x.empty() or …` is the
    author's choice and is not reported."""
    return bool(_ALL_RE.search(expression)) and not _EXPLICIT_EMPTY_RE.search(expression)


def variant_path(path: str, prefix: str, own: int) -> str:
    """Where a problem of a variant applied is: the variant's own expectations come after
    the scenario's `own` ones, and are reported at `/variants/<i>/expectations/<k>`."""
    match = _EXPECTATION_INDEX_RE.match(path)
    if match is not None and int(match.group(1)) >= own:
        return f"{prefix}/expectations/{int(match.group(1)) - own}{path[match.end() :]}"
    return prefix + path


def element_path(expression: str) -> str:
    """The validator's FHIRPath-style location as a pointer below the resource:
    "Patient.name[0].family" -> "/name/0/family"."""
    _, _, rest = expression.partition(".")
    if not rest:
        return ""
    return "".join(f"/{escape_key(step)}" for step in re.split(r"\.|\[(\d+)\]", rest) if step)


def path_symbols(call_path: str) -> list[str]:
    """Symbols in an oracle path: segments ("/Appointment/@appt/$cancel") and query values
    ("?patient=@patient")."""
    path, _, query = call_path.partition("?")
    parts = path.split("/") + [pair.partition("=")[2] for pair in query.split("&") if pair]
    return [symbol for part in parts if (symbol := symbol_of(part)) is not None]


def saved_type(call: dict[str, Any]) -> str:
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


def find_path(graph: dict[str, list[str]], start: str, goal: str) -> list[str] | None:
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
