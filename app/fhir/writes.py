"""What a write does to a resource, before it is stored: pure, shared by the FHIR API
(`app.fhir.interactions`) and by every in-memory replay of writes (`app.grading.replay`:
the expected end state of a scenario's reference solution, the scenario check's
mutants), so the two can never disagree on what a PUT, a PATCH or a create leaves.

Each function raises the same `AppError` the API answers with; a replay reads its
`status`. What needs the database (the current version, If-Match, the scheduling rules)
stays in the service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import json_merge_patch
import jsonpatch

from app.errors import BadRequest, InvalidResource, Issue, Unprocessable
from app.fhir.fhirpatch import apply_fhirpath_patch, is_fhirpath_patch
from app.fhir.validation import validate_resource
from app.kit.clock import fhir_instant

# Resources written by a run (its fixture, stimulus, or through its view) carry a tag.
RUN_TAG = {"system": "urn:understudy:source", "code": "test-run"}
SIM_TAG = {"system": "urn:understudy:source", "code": "simulated-patient"}


def require_shape(resource_type: str, resource: Any) -> dict[str, Any]:
    """The cheap part of validation: a JSON object of the URL's type."""
    if not isinstance(resource, dict):
        raise InvalidResource(
            "the body must be a JSON object",
            [Issue("the body must be a JSON object", expression=resource_type)],
        )
    found = resource.get("resourceType")
    if found != resource_type:
        raise InvalidResource(
            f"resourceType '{found}' does not match the URL's type '{resource_type}'",
            [Issue("resourceType does not match the URL", expression="resourceType")],
        )
    return resource


def validated(resource_type: str, resource: Any) -> dict[str, Any]:
    """The resource, if it is valid FHIR R4 of that type; else InvalidResource naming
    each problem at its element."""
    checked = require_shape(resource_type, resource)
    problems = validate_resource(resource_type, checked)
    if problems:
        raise InvalidResource(
            f"invalid {resource_type}: " + "; ".join(p.message for p in problems[:5]),
            [Issue(p.message, expression=p.expression, code=p.code) for p in problems],
        )
    return checked


def update_body(resource_type: str, resource_id: str, resource: Any) -> dict[str, Any]:
    """A PUT's body: of the URL's type, and naming the URL's id when it names one."""
    checked = require_shape(resource_type, resource)
    body_id = checked.get("id")
    if body_id is not None and body_id != resource_id:
        raise BadRequest(
            f"the body's id '{body_id}' does not match the URL's id '{resource_id}'",
            [Issue("id does not match the URL", expression=f"{resource_type}.id")],
        )
    return checked


def apply_patch(original: dict[str, Any], document: Any, content_type: str) -> Any:
    """JSON Patch (RFC 6902) for application/json-patch+json; FHIRPath Patch for a
    Parameters resource (sent as FHIR JSON); else JSON merge patch."""
    if "json-patch" not in content_type and is_fhirpath_patch(document):
        return apply_fhirpath_patch(original, document)
    if "json-patch" in content_type or isinstance(document, list):
        try:
            return jsonpatch.apply_patch(original, document)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise Unprocessable(f"the JSON Patch cannot be applied: {exc}") from None
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise BadRequest(f"malformed JSON Patch document: {exc}") from None
    if not isinstance(document, dict):
        raise BadRequest("a merge patch must be a JSON object")
    merged: Any = json_merge_patch.merge(original, document)
    return merged


def patched(
    resource_type: str,
    resource_id: str,
    original: dict[str, Any],
    document: Any,
    content_type: str,
) -> dict[str, Any]:
    """The resource a PATCH leaves (not yet validated): it must stay one JSON object of
    the same type and id."""
    result = apply_patch(original, document, content_type)
    if not isinstance(result, dict):
        raise Unprocessable("the patch must leave a JSON object")
    if result.get("id") != resource_id or result.get("resourceType") != resource_type:
        raise Unprocessable("a patch may not change resourceType or id")
    return result


def stamp(
    resource: dict[str, Any],
    resource_id: str,
    version_id: int,
    now: datetime,
    tag: dict[str, str] | None,
) -> dict[str, Any]:
    """Give a validated resource its id and `meta` (version, time of writing, the run's
    tag when a run wrote it), keeping the rest of the `meta` the client sent. Mutates
    and returns `resource`."""
    meta = dict(resource.get("meta") or {})
    meta["versionId"] = str(version_id)
    meta["lastUpdated"] = fhir_instant(now)
    if tag is not None:
        tags = [t for t in meta.get("tag") or [] if isinstance(t, dict)]
        if not any(t.get("system") == tag["system"] and t.get("code") == tag["code"] for t in tags):
            meta["tag"] = [*tags, tag]
    resource["id"] = resource_id
    resource["meta"] = meta
    return resource
