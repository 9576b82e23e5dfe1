"""Strict syntax checking of scenario FHIRPath, and the %variables an expression uses.

fhirpathpy's own parser swallows many syntax errors (`status = = 'x'`, trailing
garbage, an unclosed parenthesis all evaluate to something), so scenario validation
runs the ANTLR lexer and parser that ship inside fhirpathpy with an error listener
that raises, starting from the grammar's `entireExpression` rule, which is anchored
at EOF (the `expression` rule that fhirpathpy uses is not).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from antlr4 import CommonTokenStream, InputStream  # type: ignore[import-untyped]
from antlr4.error.ErrorListener import ErrorListener  # type: ignore[import-untyped]
from antlr4.tree.Tree import ParseTreeWalker  # type: ignore[import-untyped]
from fhirpathpy.engine.invocations import invocation_registry
from fhirpathpy.parser.generated.FHIRPathLexer import FHIRPathLexer
from fhirpathpy.parser.generated.FHIRPathListener import FHIRPathListener
from fhirpathpy.parser.generated.FHIRPathParser import FHIRPathParser

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

# A long "expecting {...}" token set helps nobody writing a scenario.
_MAX_EXPECTING = 80


def is_standard_variable(name: str) -> bool:
    """Whether `name` (without the %) is one of FHIRPath's/FHIR's own variables."""
    return name in STANDARD_VARIABLES or name.startswith(_STANDARD_PREFIXES)


class _SyntaxProblem(Exception):
    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message


class _RaisingListener(ErrorListener):  # type: ignore[misc]
    """Turns the first lexer or parser error into an exception: ANTLR would otherwise
    recover and hand back a tree for input that is not FHIRPath."""

    def syntaxError(  # ANTLR's name
        self,
        recognizer: Any,
        offendingSymbol: Any,
        line: int,
        column: int,
        msg: str,
        e: Any,
    ) -> None:
        raise _SyntaxProblem(column, _readable(msg))


def _readable(msg: str) -> str:
    head, sep, expecting = msg.partition(" expecting ")
    if sep and len(expecting) > _MAX_EXPECTING:
        msg = head
    msg = msg.replace("mismatched input '<EOF>'", "unexpected end of expression")
    return msg.replace("'<EOF>'", "the end").replace("<EOF>", "the end")


def _unquote(text: str) -> str:
    # `%'name'` and `%`name`` are the quoted forms of `%name`.
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'`":
        return text[1:-1]
    return text


def _function_problem(name: str, params: int) -> str | None:
    """What fhirpathpy would raise when it reaches this call: an unknown function or a
    wrong number of arguments (`not(x)` instead of `x.not()`). fhirpathpy only finds
    these while evaluating, and the grader then reads the clause as false — a guard that
    could never fire. So they are syntax errors here."""
    # Ours first, as fhirpathpy merges them over its own when evaluating.
    invocation: Any = USER_FUNCTIONS.get(name) or invocation_registry.get(name)
    if invocation is None or "fn" not in invocation:
        return f"unknown function '{name}()'"
    if "variadic" in invocation:
        return None
    allowed = sorted(invocation.get("arity", {0: []}))
    if params in allowed:
        return None
    if allowed == [0]:
        return f"{name}() takes no arguments (write 'x.{name}()', not '{name}(x)')"
    counts = " or ".join(str(n) for n in allowed)
    return f"{name}() takes {counts} argument(s), not {params}"


class _VariableCollector(FHIRPathListener):
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.problems: list[str] = []

    def enterFunctn(self, ctx: Any) -> None:  # ANTLR's name
        params = ctx.paramList()
        count = len(params.expression()) if params is not None else 0
        problem = _function_problem(ctx.identifier().getText(), count)
        if problem is not None:
            self.problems.append(problem)

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
    listener = _RaisingListener()
    lexer = FHIRPathLexer(InputStream(expression))
    lexer.removeErrorListeners()
    lexer.addErrorListener(listener)
    parser: Any = FHIRPathParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(listener)
    try:
        tree = parser.entireExpression()
        collector = _VariableCollector()
        ParseTreeWalker().walk(collector, tree)
    except _SyntaxProblem as problem:
        return f"column {problem.column + 1}: {problem.message}", frozenset()
    except RecursionError:
        return "too deeply nested", frozenset()
    if collector.problems:
        return collector.problems[0], frozenset()
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
