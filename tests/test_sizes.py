"""No module in app/ (or the client distribution) over `MAX_MODULE_LINES` lines and no
function over `MAX_FUNCTION_LINES`, unless `EXEMPT` lists it with the reason it stays:
a long module mixes concepts and a long function hides its steps (issue "Structure,
round 2"). `EXEMPT` should end (nearly) empty; the failure lists every offender with its
size."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOTS = (ROOT / "app", ROOT / "clients" / "python" / "understudy_client")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100

# "path" for a module, "path::qualified.name" for a function: why it is still over.
EXEMPT: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines from `def` to its last line) of every function, nested too."""
    found: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                found.append((name, node.end_lineno - node.lineno + 1))
            found.extend(_functions(node, f"{name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def sizes() -> list[tuple[str, int, int]]:
    """(key, size, limit) of every module and function over its limit."""
    over: list[tuple[str, int, int]] = []
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            lines = len(text.splitlines())
            if lines > MAX_MODULE_LINES:
                over.append((rel, lines, MAX_MODULE_LINES))
            for name, length in _functions(ast.parse(text)):
                if length > MAX_FUNCTION_LINES:
                    over.append((f"{rel}::{name}", length, MAX_FUNCTION_LINES))
    return over


def test_no_module_or_function_over_its_limit() -> None:
    over = sizes()
    for key, size, limit in over:
        print(f"{key}: {size} lines (limit {limit}){' — exempt' if key in EXEMPT else ''}")
    offenders = [f"{key}: {size} lines (limit {limit})" for key, size, limit in over]
    unexempt = [o for (key, _, _), o in zip(over, offenders, strict=True) if key not in EXEMPT]
    assert not unexempt, "over the limit, split by concept or exempt with a reason:\n" + "\n".join(
        unexempt
    )


def test_exemptions_are_current_and_explained() -> None:
    over = {key for key, _, _ in sizes()}
    stale = sorted(set(EXEMPT) - over)
    assert not stale, f"exempt but no longer over the limit (drop them): {stale}"
    for key, reason in EXEMPT.items():
        words = reason.split()
        assert len(words) >= 4 and reason.rstrip().endswith((".", ")")), (
            f"{key}: the reason must be a sentence, not {reason!r}"
        )
        assert reason.strip().lower() not in {"todo", "tbd", "later", "fixme"}, key
