"""The walk over parsed JSON: each element against its shape, each primitive against its
format, then the required bindings."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from app.fhir.validation.bindings import check_bindings
from app.fhir.validation.elements import (
    BOOLEAN,
    DECIMAL,
    INTEGER,
    KIND_NAMES,
    OBJECT,
    PRIMITIVE_KINDS,
    RESOURCE,
    STRING,
    Field,
    Shape,
    model_class,
    shape,
)
from app.fhir.validation.issues import ValidationIssue, show
from app.fhir.validation.primitives import format_problem
from app.fhir.validation.resource_types import is_known_type


def _kind_ok(kind: int, value: Any) -> bool:
    if kind == STRING:
        return type(value) is str
    if kind == BOOLEAN:
        return type(value) is bool
    if kind == INTEGER:
        return type(value) is int
    if kind == DECIMAL:
        # The store parses fractions as Decimal to keep their scale (app.kit.jsontext).
        return type(value) is int or type(value) is float or type(value) is Decimal
    if kind in (OBJECT, RESOURCE):
        return isinstance(value, dict)
    return True


class Walk:
    __slots__ = ("flagged", "issues")

    def __init__(self) -> None:
        self.issues: list[ValidationIssue] = []
        self.flagged: set[str] = set()

    def add(self, expr: str, message: str, code: str) -> None:
        self.issues.append(ValidationIssue(expr, f"{expr}: {message}", code))
        self.flagged.add(expr)

    def resource(self, node: dict[str, Any], expr: str, resource_type: str) -> None:
        self.element(node, shape(model_class(resource_type)), expr)
        codes: list[ValidationIssue] = []
        check_bindings(resource_type, node, expr, codes)
        # ' male' is one problem (bad code format), not two
        self.issues.extend(issue for issue in codes if issue.expression not in self.flagged)

    def element(self, node: dict[str, Any], shape: Shape, expr: str) -> None:
        fields = shape.fields
        chosen: dict[str, list[str]] | None = None
        for key, value in node.items():
            field = fields.get(key)
            if field is None:
                if not (key == "resourceType" and shape.is_resource):
                    self.add(f"{expr}.{key}", "unknown element", "structure")
                continue
            if value is None:
                continue  # invalid FHIR JSON, but harmless: treated as absent
            if field.choice is not None:
                if chosen is None:
                    chosen = {}
                chosen.setdefault(field.choice, []).append(key)
            sub = f"{expr}.{field.element}"
            if not field.is_list:
                self.value(value, field, sub)
            elif not isinstance(value, list):
                self._wrong_type(sub, field, value, "array")
            else:
                for i, item in enumerate(value):
                    if item is not None:
                        self.value(item, field, f"{sub}[{i}]")
                    elif not field.nulls_allowed:
                        self.add(f"{sub}[{i}]", "null is not allowed here", "structure")

        for key, ext in shape.required:
            value = node.get(key)
            if value is None or value == []:
                extension = node.get(ext) if ext else None
                if isinstance(extension, dict) and extension.get("extension"):
                    continue  # e.g. a data-absent-reason extension stands in for the value
                element = key[1:] if key.startswith("_") else key
                self.add(f"{expr}.{element}", "required element is missing", "required")
        if chosen is not None:
            for element, present in chosen.items():
                if len(present) > 1:
                    self.add(
                        f"{expr}.{element}",
                        f"only one of {', '.join(present)} may be present",
                        "structure",
                    )
        for element, keys in shape.required_choices:
            if chosen is None or element not in chosen:
                self.add(
                    f"{expr}.{element}",
                    f"required element is missing (one of {', '.join(keys)})",
                    "required",
                )

    def value(self, value: Any, field: Field, expr: str) -> None:
        kind = field.kind
        if not _kind_ok(kind, value):
            self._wrong_type(expr, field, value, KIND_NAMES[kind])
        elif kind == OBJECT:
            if field.fhir_type == "FHIRPrimitiveExtension" and all(
                v is None for v in value.values()
            ):
                # "_birthDate": {} says nothing; fhir.resources rejects it too
                self.add(expr, "primitive extension needs an id or extension", "structure")
            self.element(value, shape(field.target.get_model_klass()), expr)
        elif kind in PRIMITIVE_KINDS:
            problem = format_problem(field.fhir_type, value)
            if problem is not None:
                self.add(expr, f"invalid {field.fhir_type} {value!r} ({problem})", "value")
        elif kind == RESOURCE:
            resource_type = value.get("resourceType")
            if resource_type is None:
                self.add(f"{expr}.resourceType", "required element is missing", "required")
            elif not isinstance(resource_type, str) or not is_known_type(resource_type):
                self.add(
                    f"{expr}.resourceType",
                    f"unknown resource type ({show(resource_type)})",
                    "structure",
                )
            else:
                self.resource(value, expr, resource_type)

    def _wrong_type(self, expr: str, field: Field, value: Any, expected: str) -> None:
        what = f"{field.fhir_type} " if field.fhir_type else ""
        if expected == "array":
            what = f"an array of {what}"
        self.add(expr, f"expected {what}(JSON {expected}), got {show(value)}", "structure")
