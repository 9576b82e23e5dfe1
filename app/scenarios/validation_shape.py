"""Shape problems: the Pydantic model's errors (`app.scenarios.schema`) as problems at
JSON pointers with the JSON names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from pydantic import BaseModel, ValidationError

from app.scenarios import schema
from app.scenarios.validation_base import EXPECTATION_TYPES, TIMEOUT_MESSAGE
from app.scenarios.validation_problems import Problem, json_pointer


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
    return json_pointer(*parts)


def shape_problems(exc: ValidationError) -> Iterator[Problem]:
    tags = ", ".join(EXPECTATION_TYPES)
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
            message = TIMEOUT_MESSAGE
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "extra_forbidden":
            message = "unknown field"
        else:
            message = error["msg"]
        yield Problem(path, message)
