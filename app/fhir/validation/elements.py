"""The element model: element tables ("shapes") read once per class from the R4B models
of fhir.resources (JSON names, FHIR types, arrays, required elements, choice groups,
contained resources), and `elements_of` for code that edits resources by element."""

from __future__ import annotations

import types
import typing
import uuid
from dataclasses import dataclass
from typing import Any, Final

from app.fhir.validation.primitives import INTEGER_RANGES
from app.fhir.validation.resource_types import RESOURCE_TYPES

# JSON kinds of a field's value
ANY, STRING, BOOLEAN, INTEGER, DECIMAL, OBJECT, RESOURCE = range(7)


KIND_NAMES: Final = {
    STRING: "string",
    BOOLEAN: "boolean",
    INTEGER: "number without a fraction",
    DECIMAL: "number",
    OBJECT: "object",
    RESOURCE: "object",
}


PRIMITIVE_KINDS: Final = frozenset({STRING, BOOLEAN, INTEGER, DECIMAL})


@dataclass(frozen=True, slots=True)
class Field:
    element: str  # FHIRPath name: the JSON key without the "_" of primitive extensions
    kind: int
    fhir_type: str  # primitive type name ("date", "boolean", ...) or the model name
    is_list: bool
    # Arrays of primitives and of their "_" extensions use null as a
    # placeholder to keep the two arrays aligned; other arrays may not.
    nulls_allowed: bool
    choice: str | None  # "value" for valueString etc.
    target: Any  # fhir_core FhirBase type of a complex field, resolved lazily


@dataclass(frozen=True, slots=True)
class Shape:
    fields: dict[str, Field]  # by JSON key
    required: tuple[tuple[str, str | None], ...]  # (key, key of its "_" extension)
    # Required choice elements as (element, its JSON keys), e.g. MedicationRequest
    # ("medication", ("medicationCodeableConcept", "medicationReference")).
    required_choices: tuple[tuple[str, tuple[str, ...]], ...]
    is_resource: bool


_SHAPES: dict[Any, Shape] = {}


_MODEL_CLASSES: dict[str, Any] = {}


def model_class(resource_type: str) -> Any:
    cls = _MODEL_CLASSES.get(resource_type)
    if cls is None:
        # Lazy: importing fhir.resources.R4B as a whole costs ~1.5 s and ~110 MB.
        from fhir.resources.R4B import get_fhir_model_class

        cls = get_fhir_model_class(resource_type)
        _MODEL_CLASSES[resource_type] = cls
    return cls


def _strip_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return annotation


def _classify(annotation: Any) -> tuple[int, str, bool, Any]:
    from fhir_core.types import FhirBase, FhirElementOrResourceBase

    ann = _strip_none(annotation)
    is_list = typing.get_origin(ann) is list
    if is_list:
        ann = _strip_none(typing.get_args(ann)[0])
    if ann is bool:
        return BOOLEAN, "boolean", is_list, None
    if typing.get_origin(ann) is typing.Annotated:
        if typing.get_args(ann)[0] is uuid.UUID:  # fhir_core maps uuid to pydantic's UUID4
            return STRING, "uuid", is_list, None
        for meta in ann.__metadata__:
            cls = type(meta)
            if cls.__module__ == "fhir_core.types":
                name = cls.__name__[0].lower() + cls.__name__[1:]
                if name in INTEGER_RANGES:
                    return INTEGER, name, is_list, None
                if name == "decimal":
                    return DECIMAL, name, is_list, None
                if name == "integer64":  # a JSON string in R5; absent from R4B
                    return ANY, name, is_list, None
                return STRING, name, is_list, None
        return ANY, "", is_list, None
    if isinstance(ann, type) and issubclass(ann, FhirBase):
        model_name = ann._model_klass.rsplit(".", 1)[-1]
        if issubclass(ann, FhirElementOrResourceBase) and model_name == "Resource":
            return RESOURCE, "Resource", is_list, None
        return OBJECT, model_name, is_list, ann
    return ANY, "", is_list, None


def _build_shape(cls: Any) -> Shape:
    # Instance methods that return per-class constants.
    probe = cls.model_construct()
    choice_of = {
        member: element
        for element, members in probe.get_one_of_many_fields().items()
        for member in members
    }
    fields: dict[str, Field] = {}
    keys: dict[str, str] = {}  # python field name -> JSON key (class_fhir -> class)
    for name, info in cls.model_fields.items():
        key = info.alias or name
        keys[name] = key
        kind, fhir_type, is_list, target = _classify(info.annotation)
        is_extension = key.startswith("_")
        fields[key] = Field(
            element=key[1:] if is_extension else key,
            kind=kind,
            fhir_type=fhir_type,
            is_list=is_list,
            nulls_allowed=is_extension or kind in PRIMITIVE_KINDS,
            choice=choice_of.get(name),
            target=target,
        )

    required = [(keys[name], None) for name, info in cls.model_fields.items() if info.is_required()]
    for name, ext in probe.get_required_fields():
        required.append((keys.get(name, name), keys.get(ext, ext) if ext else None))
    required_choices = tuple(
        (element, tuple(keys.get(m, m) for m in members))
        for element, members in probe.get_one_of_many_fields().items()
        if (cls.model_fields[members[0]].json_schema_extra or {}).get("one_of_many_required")
        is True
    )
    return Shape(
        fields, tuple(dict.fromkeys(required)), required_choices, bool(cls.has_resource_base())
    )


def shape(cls: Any) -> Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _build_shape(cls)
    return shape


@dataclass(frozen=True, slots=True)
class Element:
    """One child element of a resource or complex type, for code that edits resources
    by element (FHIRPath Patch): its JSON key, its FHIRPath name (the choice group's
    for `valueQuantity` and the like), whether it repeats, and its type."""

    key: str
    name: str
    is_list: bool
    fhir_type: str  # "HumanName", "date", "Resource", a backbone's model name; "" unknown
    choice: bool
    # Pass to `elements_of` for this element's own children (None: a primitive, a
    # contained resource (look at its resourceType) or unknown).
    owner: Any


_ELEMENTS: dict[Any, dict[str, Element]] = {}


def elements_of(owner: Any) -> dict[str, Element] | None:
    """The child elements (by JSON key, "_" extension keys left out) of a resource type
    (its name) or of a complex element (the `owner` of an `Element`); None if unknown."""
    if owner is None:
        return None
    if isinstance(owner, str):
        if owner not in RESOURCE_TYPES:
            return None
        owner = model_class(owner)
    elif hasattr(owner, "get_model_klass"):
        owner = owner.get_model_klass()
    found = _ELEMENTS.get(owner)
    if found is None:
        found = {
            key: Element(
                key,
                field.choice or field.element,
                field.is_list,
                field.fhir_type,
                field.choice is not None,
                field.target,
            )
            for key, field in shape(owner).fields.items()
            if not key.startswith("_")
        }
        _ELEMENTS[owner] = found
    return found
