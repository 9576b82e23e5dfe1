"""The CapabilityStatement: generated from the search registry, so it lists exactly
what the server supports."""

from __future__ import annotations

import functools
from typing import Any

import orjson

from app.fhir.search.params import SEARCH_PARAMS, params_for
from app.fhir.validation import RESOURCE_TYPES
from app.kit.clock import fhir_instant, utcnow

_STARTED = fhir_instant(utcnow())
_INTERACTIONS = [
    {"code": c}
    for c in (
        "read",
        "vread",
        "update",
        "patch",
        "delete",
        "history-instance",
        "history-type",
        "create",
        "search-type",
    )
]
_COMMON = [
    {"name": "_id", "type": "token", "documentation": "Logical id; comma-separated for any of"},
    {"name": "_lastUpdated", "type": "date", "documentation": "When the resource last changed"},
]
_RESULT_PARAMS = (
    "_count (default 20, max 500), _sort, _include, _revinclude, _summary=count, _elements, "
    "_total; paging links carry _after/_before (keyset) or _offset. On every interaction "
    "_format=json (or Accept: application/json) labels the answer application/json, "
    "application/fhir+json being the default; XML is 406"
)
# R4 has no element for conditional patch: said here.
_CONDITIONAL = (
    "Conditional update, patch and delete (PUT, PATCH, DELETE [type]?criteria) act on the "
    "one match and answer 412 for several; with no match a conditional update creates, a "
    "conditional patch is 404 and a conditional delete deletes nothing. PATCH takes JSON "
    "Patch, JSON merge patch and FHIRPath Patch (a Parameters resource as "
    "application/fhir+json)."
)


def _resource_entry(resource_type: str) -> dict[str, Any]:
    params = [
        *_COMMON,
        *(
            {
                "name": p.name,
                "type": str(p.kind),
                **({"documentation": p.description} if p.description else {}),
            }
            for p in params_for(resource_type).values()
        ),
    ]
    ref_params = [p.name for p in params_for(resource_type).values() if str(p.kind) == "reference"]
    entry: dict[str, Any] = {
        "type": resource_type,
        "interaction": _INTERACTIONS,
        "versioning": "versioned",
        "readHistory": True,
        "updateCreate": True,
        "conditionalCreate": True,
        "conditionalUpdate": True,
        # R4's single-match form: several matches are a 412, none deletes nothing.
        "conditionalDelete": "single",
        "searchParam": params,
    }
    if ref_params:
        entry["searchInclude"] = [f"{resource_type}:{n}" for n in ref_params]
    if resource_type == "Appointment":
        entry["operation"] = [
            {"name": "find", "definition": "urn:understudy:operation:appointment-find"}
        ]
    return entry


@functools.lru_cache(maxsize=16)
def capability_statement(base_url: str) -> bytes:
    detailed = sorted(SEARCH_PARAMS)
    others = sorted(t for t in RESOURCE_TYPES if t not in SEARCH_PARAMS)
    statement = {
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": _STARTED,
        "publisher": "Understudy",
        "kind": "instance",
        "software": {"name": "Understudy", "version": "0.1.0"},
        "implementation": {"description": "Understudy FHIR R4 sandbox", "url": base_url},
        "fhirVersion": "4.0.1",
        # The same JSON under either type: Accept or _format picks the label; no XML.
        "format": ["application/fhir+json", "application/json", "json"],
        # JSON Patch, JSON merge patch, and FHIRPath Patch (a Parameters resource); PATCH
        # and conditional PATCH ([type]?criteria) take each.
        "patchFormat": [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/fhir+json",
        ],
        "rest": [
            {
                "mode": "server",
                "documentation": "Search result parameters: "
                + _RESULT_PARAMS
                + ". "
                + _CONDITIONAL,
                "security": {
                    "description": "Send 'Authorization: Bearer <tenant key>' on every request "
                    "except this one."
                },
                "resource": [_resource_entry(t) for t in detailed + others],
                "interaction": [
                    {"code": "transaction"},
                    {"code": "batch"},
                    {"code": "history-system"},
                ],
            }
        ],
    }
    return orjson.dumps(statement)
