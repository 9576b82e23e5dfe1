"""The adapter to fhirpathpy, the only module that imports it (pyproject.toml's import
contract): compiling and evaluating with its R4 model, unwrapping its nodes for our own
functions, and FHIRPath parsed strictly with the ANTLR grammar that ships inside it.

fhirpathpy's own parser swallows many syntax errors (`status = = 'x'`, trailing
garbage, an unclosed parenthesis all evaluate to something) and finds an unknown function
or a wrong argument count only while evaluating, never on an empty collection. So where
an expression must be right before it is used (scenario validation, FHIRPath Patch
paths), it is parsed here: the lexer and parser with a listener that raises on the first
error, from the grammar's `entireExpression` rule, which is anchored at EOF (the
`expression` rule fhirpathpy uses is not), and every function call checked against the
functions that will evaluate it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import fhirpathpy
from antlr4 import CommonTokenStream, InputStream  # type: ignore[import-untyped]
from antlr4.error.ErrorListener import ErrorListener  # type: ignore[import-untyped]
from antlr4.tree.Tree import ParseTreeWalker  # type: ignore[import-untyped]
from fhirpathpy.engine.invocations import invocation_registry
from fhirpathpy.engine.util import get_data as _untyped_get_data
from fhirpathpy.models import models as _models
from fhirpathpy.parser.generated.FHIRPathLexer import FHIRPathLexer
from fhirpathpy.parser.generated.FHIRPathListener import FHIRPathListener
from fhirpathpy.parser.generated.FHIRPathParser import FHIRPathParser

__all__ = [
    "R4_MODEL",
    "FHIRPathListener",
    "FHIRPathParser",
    "FhirPathSyntaxError",
    "Parsed",
    "compile_expression",
    "evaluate",
    "function_problem",
    "node_data",
    "parse",
]

# fhirpathpy's R4 model: the choice types and the type hierarchy it resolves paths with.
R4_MODEL: Final[dict[str, Any]] = _models["r4"]

# Arguments of our own functions arrive as fhirpathpy nodes; this unwraps them as
# fhirpathpy does its input.
node_data: Final[Callable[[Any], Any]] = _untyped_get_data


def compile_expression(
    expression: str, options: Mapping[str, Any]
) -> Callable[[Any, Mapping[str, Any]], list[Any]]:
    """The expression compiled against R4 with `options` (e.g. `userInvocationTable`)."""
    compiled: Callable[[Any, Mapping[str, Any]], list[Any]] = fhirpathpy.compile(
        expression, R4_MODEL, dict(options)
    )
    return compiled


def evaluate(
    resource: Any, expression: str | Mapping[str, Any], context: Mapping[str, Any]
) -> list[Any]:
    """Evaluate against R4 (`expression` may be `{"expression", "base"}`). fhirpathpy
    raises bare Exceptions (and worse) on bad input: callers catch Exception."""
    path = expression if isinstance(expression, str) else dict(expression)
    found: list[Any] = fhirpathpy.evaluate(resource, path, dict(context), R4_MODEL)
    return found


# A long "expecting {...}" token set helps nobody.
_MAX_EXPECTING = 80


class FhirPathSyntaxError(Exception):
    """The first lexer or parser error: where (0-based column) and what, readably."""

    def __init__(self, column: int, message: str) -> None:
        super().__init__(f"column {column + 1}: {message}")
        self.column = column
        self.message = message


class _RaisingListener(ErrorListener):  # type: ignore[misc]
    """Turns the first error into an exception: ANTLR would otherwise recover and hand
    back a tree for input that is not FHIRPath."""

    def syntaxError(  # ANTLR's name
        self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise FhirPathSyntaxError(column, _readable(msg))


def _readable(msg: str) -> str:
    head, sep, expecting = msg.partition(" expecting ")
    if sep and len(expecting) > _MAX_EXPECTING:
        msg = head
    msg = msg.replace("mismatched input '<EOF>'", "unexpected end of expression")
    return msg.replace("'<EOF>'", "the end").replace("<EOF>", "the end")


def function_problem(
    name: str, params: int, functions: Mapping[str, Any] | None = None
) -> str | None:
    """What fhirpathpy would raise on reaching this call: an unknown function or a wrong
    number of arguments (`not(x)` instead of `x.not()`). `functions`: user functions
    given to fhirpathpy beside its own (they win, as fhirpathpy merges them over)."""
    invocation: Any = (functions or {}).get(name) or invocation_registry.get(name)
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


class _Functions(FHIRPathListener):
    def __init__(self, functions: Mapping[str, Any] | None) -> None:
        self.functions = functions
        self.problems: list[str] = []

    def enterFunctn(self, ctx: Any) -> None:  # ANTLR's name
        params = ctx.paramList()
        count = len(params.expression()) if params is not None else 0
        problem = function_problem(ctx.identifier().getText(), count, self.functions)
        if problem is not None:
            self.problems.append(problem)


class Parsed:
    """A parse: the tree (`entireExpression`), the input stream (for the text of a
    sub-tree), and the function calls that would fail when evaluated."""

    def __init__(self, tree: Any, source: Any, problems: list[str]) -> None:
        self.tree = tree
        self.source = source
        self.problems = problems

    def text(self, node: Any) -> str:
        """The input text a sub-tree was parsed from, as written."""
        text: str = self.source.getText(node.start.start, node.stop.stop)
        return text


def parse(
    expression: str,
    *,
    functions: Mapping[str, Any] | None = None,
    listeners: Iterable[FHIRPathListener] = (),
) -> Parsed:
    """`expression` parsed completely, its function calls checked, and each of
    `listeners` walked over the tree. Raises FhirPathSyntaxError on the first syntax
    error; a RecursionError (absurd nesting) is the caller's to answer."""
    errors = _RaisingListener()
    source = InputStream(expression)
    lexer = FHIRPathLexer(source)
    lexer.removeErrorListeners()
    lexer.addErrorListener(errors)
    parser: Any = FHIRPathParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(errors)
    tree = parser.entireExpression()
    checked = _Functions(functions)
    walker = ParseTreeWalker()
    for listener in (checked, *listeners):
        walker.walk(listener, tree)
    return Parsed(tree, source, checked.problems)
