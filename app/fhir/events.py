"""The webhook events a write emits: `<Type>.created|updated|deleted`, and the named
events (`message.received`, `appointment.noshow`, `result.final`) that depend on what the
write changed."""

from __future__ import annotations

from typing import Any

from app.fhir import repository
from app.fhir.context import FhirContext
from app.kit import jsontext

_FINAL = ("final", "amended")


_INTERACTION_EVENT = {"create": "created", "update": "updated", "delete": "deleted"}


def events_for(
    ctx: FhirContext,
    resource_type: str,
    interaction: str,
    resource: dict[str, Any] | None,
    previous_status: Any = None,
) -> list[str]:
    """The webhook events a write emits: `<Type>.created|updated|deleted` and the named
    events. Setup writes of a run emit nothing."""
    if ctx.source == "setup":
        return []
    out = [f"{resource_type}.{_INTERACTION_EVENT[interaction]}"]
    if resource is None:
        return out
    status = resource.get("status")
    if resource_type == "Communication" and interaction == "create":
        sender = resource.get("sender")
        if isinstance(sender, dict) and str(sender.get("reference", "")).startswith("Patient/"):
            out.append("message.received")
    elif resource_type == "Appointment" and status == "noshow" and previous_status != "noshow":
        out.append("appointment.noshow")
    elif (
        resource_type in ("DiagnosticReport", "Observation")
        and status in _FINAL
        and previous_status not in _FINAL
    ):
        out.append("result.final")
    return out


_STATUS_EVENT_TYPES = frozenset({"Appointment", "DiagnosticReport", "Observation"})


def previous_status(resource_type: str, current: repository.StoredResource | None) -> Any:
    if current is None or current.deleted or current.json is None:
        return None
    if resource_type not in _STATUS_EVENT_TYPES:
        return None
    return jsontext.loads(current.json).get("status")
