"""FHIRPath in a scenario: each expression parses and names only variables the grader
defines, and `before` references between expectations make no cycle."""

from __future__ import annotations

from app.scenarios.fhirpath_syntax import (
    NAMESPACED_VARIABLES,
    is_standard_variable,
    syntax_error,
    variables_used,
)
from app.scenarios.validation_base import RUN_VARIABLES, find_path
from app.scenarios.validation_symbols import SymbolChecks


class FhirPathChecks(SymbolChecks):
    """FHIRPath expressions and `before` references."""

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
            elif name not in RUN_VARIABLES | extra and not is_standard_variable(name):
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
                cycle = find_path(depends, named, own)
                if cycle is not None:
                    field = path.rsplit("/", 1)[-1]
                    self.add(path, f"{field} makes a cycle: " + " → ".join([own, *cycle]))
