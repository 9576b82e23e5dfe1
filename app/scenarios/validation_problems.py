"""A scenario validation problem (`{path, message}`) and its path: a JSON pointer into
the document with the JSON (camelCase) names, problems listed in path order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str  # JSON pointer into the scenario document; "" is the document itself
    message: str


def escape_key(key: str | int) -> str:
    # RFC 6901: "~" and "/" in a key are written "~0" and "~1".
    return str(key).replace("~", "~0").replace("/", "~1")


def json_pointer(*parts: str | int) -> str:
    return "".join(f"/{escape_key(part)}" for part in parts)


def _path_key(path: str) -> tuple[tuple[int, int, str], ...]:
    # Numeric steps sort as numbers: /expectations/2 before /expectations/10.
    return tuple(
        # ASCII digits only: str.isdigit() holds for "¹" too, which int() refuses.
        (0, int(step), "") if step.isascii() and step.isdigit() else (1, 0, step)
        for step in path.split("/")[1:]
    )


def in_path_order(problems: list[Problem]) -> list[Problem]:
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: _path_key(p.path))  # stable: keeps check order
