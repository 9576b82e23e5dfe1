"""Strict syntax checking of scenario FHIRPath, and the %variables an expression uses.

fhirpathpy's own parser swallows many syntax errors, so scenario validation parses with
app/kit/fhirpath.py (the grammar inside fhirpathpy, raising on the first error,
anchored at EOF), checking calls against fhirpathpy's functions and ours.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from app.kit.fhirpath import (
    FHIRPathListener,
    FHIRPathParser,
    FhirPathSyntaxError,
    parse,
)
from app.scenarios.fhirpath_helpers import USER_FUNCTIONS

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "NAMESPACED_VARIABLES",
    "STANDARD_VARIABLES",
    "is_standard_variable",
    "syntax_error",
    "variables_used",
]

# Scenario expressions are one-liners; a cap keeps a hostile import from parking a
# worker in the (recursive, backtracking) ANTLR parser or filling the cache.
MAX_EXPRESSION_LENGTH: Final = 4000

# Variables whose value is a map keyed by symbol: `%fixture.patient` is reported as
# "fixture.patient", not as "fixture".
NAMESPACED_VARIABLES: Final = frozenset({"fixture", "current"})

# Environment variables defined by FHIRPath itself (%context, %ucum) and by FHIR's use
# of it (%resource, %rootResource, %sct, %loinc; %`vs-<name>` and %`ext-<name>` below).
STANDARD_VARIABLES: Final = frozenset(
    {"context", "resource", "rootResource", "ucum", "sct", "loinc"}
)
_STANDARD_PREFIXES: Final = ("vs-", "ext-")


def is_standard_variable(name: str) -> bool:
    """Whether `name` (without the %) is one of FHIRPath's/FHIR's own variables."""
    return name in STANDARD_VARIABLES or name.startswith(_STANDARD_PREFIXES)


def _unquote(text: str) -> str:
    # `%'name'` and `%`name`` are the quoted forms of `%name`.
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'`":
        return text[1:-1]
    return text


class _VariableCollector(FHIRPathListener):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def enterExternalConstant(self, ctx: Any) -> None:  # ANTLR's name
        ident = ctx.identifier()
        name = _unquote(ident.getText() if ident is not None else ctx.STRING().getText())
        if name in NAMESPACED_VARIABLES:
            member = _member_after(ctx)
            if member is not None:
                name = f"{name}.{member}"
        self.names.add(name)


def _member_after(constant: Any) -> str | None:
    """The member name in `%fixture.<member>`. The grammar parses that as the external
    constant `%fixture` (a term, wrapped in a term expression) followed by a member
    invocation on it, so walk up to that invocation expression."""
    term = constant.parentCtx  # ExternalConstantTermContext
    term_expression = term.parentCtx if term is not None else None
    parent = term_expression.parentCtx if term_expression is not None else None
    if not isinstance(parent, FHIRPathParser.InvocationExpressionContext):
        return None
    # The generated parser is untyped; read the node through Any.
    node: Any = parent
    if node.expression() is not term_expression:
        return None
    invocation: Any = node.invocation()
    if not isinstance(invocation, FHIRPathParser.MemberInvocationContext):
        return None
    member: Any = invocation
    return _unquote(member.identifier().getText())


@lru_cache(maxsize=4096)
def _analyse(expression: str) -> tuple[str | None, frozenset[str]]:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return f"longer than {MAX_EXPRESSION_LENGTH} characters", frozenset()
    if not expression.strip():
        return "empty expression", frozenset()
    collector = _VariableCollector()
    try:
        parsed = parse(expression, functions=USER_FUNCTIONS, listeners=[collector])
    except FhirPathSyntaxError as problem:
        return str(problem), frozenset()
    except RecursionError:
        return "too deeply nested", frozenset()
    if parsed.problems:
        return parsed.problems[0], frozenset()
    return None, frozenset(collector.names)


def syntax_error(expression: str) -> str | None:
    """None when `expression` parses completely as FHIRPath; otherwise a readable
    message naming the (1-based) column, e.g. "column 10: extraneous input ..."."""
    return _analyse(expression)[0]


def variables_used(expression: str) -> set[str]:
    """The %variables `expression` references, without the %: "runStart",
    "fixture.patient", "current.appt", "resource", "vs-foo". A bare `%fixture` is
    reported as "fixture". Raises ValueError when the expression does not parse."""
    error, names = _analyse(expression)
    if error is not None:
        raise ValueError(f"invalid FHIRPath: {error}")
    return set(names)
