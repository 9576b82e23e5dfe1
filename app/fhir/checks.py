"""What the interactions check of a request before they touch the store: a known type,
a valid id, a JSON body, an If-Match version, and whether the context may see a
resource (a run's view hides other runs' resources)."""

from __future__ import annotations

from typing import Any

from app.errors import BadRequest, Issue, NotFound
from app.fhir import repository
from app.fhir.context import FhirContext
from app.fhir.validation import is_known_type
from app.kit import jsontext

# FHIR's id rule: 1–64 of [A-Za-z0-9-.].
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")
_ID_MAX = 64


def check_type(resource_type: str) -> None:
    if not is_known_type(resource_type):
        raise NotFound(f"unknown resource type '{resource_type}'")


def is_valid_id(resource_id: str) -> bool:
    return 0 < len(resource_id) <= _ID_MAX and set(resource_id) <= _ID_CHARS


def check_id(resource_id: str) -> None:
    if not is_valid_id(resource_id):
        raise BadRequest(
            f"invalid id '{resource_id[:80]}': 1-64 characters of A-Z, a-z, 0-9, '-' and '.'",
            [Issue("invalid id", expression="id")],
        )


def parse_body(body: bytes) -> Any:
    if not body.strip():
        raise BadRequest("the request body is empty; a FHIR JSON resource is expected")
    try:
        return jsontext.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}", [Issue(f"malformed JSON: {exc}")]) from None


def parse_if_match(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if text.startswith("W/"):
        text = text[2:]
    text = text.strip('"')
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"If-Match '{value}' is not a version ETag like W/\"3\"") from None


def require_id(resource_type: str, resource_id: str) -> None:
    # An id no resource can have (too long, odd characters, NUL) is simply not found.
    if not is_valid_id(resource_id):
        raise NotFound(f"{resource_type}/{resource_id[:80]} is not known")


def require_visible(
    ctx: FhirContext,
    current: repository.StoredResource | None,
    resource_type: str,
    resource_id: str,
) -> None:
    hidden = (
        current is not None
        and ctx.run_id is not None
        and current.run_id is not None
        and current.run_id != ctx.run_id
    )
    if current is None or hidden:
        raise NotFound(f"{resource_type}/{resource_id} is not known")
