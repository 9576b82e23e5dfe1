"""Oracle calls as the API sees them: which are writes, a transaction Bundle's entry
URLs with their symbols expanded, and the order a transaction applies its entries in.
Shared by the replays (`app.grading.replay`) and the scenario check's derivations."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from app.scenarios.expansion import expand_path
from app.scenarios.schema import OracleCall

_WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# FHIR's transaction processing order (R4 http.html#trules): deletes, creates, updates,
# then patches.
_TRANSACTION_ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 3}


# An oracle call's path for a captured effect (docs/capture.md "In a reference solution"),
# as api_call expectations name them: an SMS sent, an e-mail sent, an integration call.
SMS_PATH = "/sms/Messages"
EMAIL_PATH = "/email"
INTEGRATIONS_PREFIX = "/integrations/"


def capture_kind(path: str) -> str | None:
    """`sms`, `email` or `integration` for an oracle call's path that sends a captured
    effect rather than a FHIR call; None otherwise."""
    path = urlsplit(path).path
    if path == SMS_PATH:
        return "sms"
    if path == EMAIL_PATH:
        return "email"
    if path.startswith(INTEGRATIONS_PREFIX) and len(path) > len(INTEGRATIONS_PREFIX):
        return "integration"
    return None


def capture_text(value: Any) -> str:
    """The text of a captured effect's `body` in an oracle call: a string, or a list of
    parts joined by spaces (so a time token, `{"$time": "+1wd@09:30"}`, can be one)."""
    if isinstance(value, list):
        return " ".join(str(part) for part in value if part is not None)
    return "" if value is None else str(value)


def is_write(call: OracleCall) -> bool:
    """A FHIR write of a resource (not an operation, a search, a transaction, a captured
    effect or a call outside FHIR)."""
    path = urlsplit(call.path).path
    return (
        capture_kind(path) is None
        and call.method in _WRITE_METHODS
        and not path.startswith("/api/")
        and "$" not in path
        and not path.endswith("/_search")
        and path not in ("", "/")
    )


def bundle_urls(body: Any, refs: dict[str, str]) -> Any:
    """A transaction Bundle's entry URLs with their symbols expanded (`Appointment/@x`),
    as `expand_path` does a call's path; anything else unchanged."""
    if not (isinstance(body, dict) and body.get("resourceType") == "Bundle"):
        return body
    out = dict(body)
    entries = []
    for entry in body.get("entry") or []:
        request = entry.get("request") if isinstance(entry, dict) else None
        if isinstance(request, dict) and isinstance(request.get("url"), str):
            entry = {**entry, "request": {**request, "url": expand_path(request["url"], refs)}}
        entries.append(entry)
    out["entry"] = entries
    return out


def transaction_order(method: str) -> int:
    return _TRANSACTION_ORDER.get(method, len(_TRANSACTION_ORDER))
