"""The texts `text-truth` reads: what the run wrote (never the simulated patient's
replies), each element of each resource as one `Text`, in the order written (see
`app.grading.truth.grade`)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.grading.resource import ref_of
from app.grading.snapshot import RunSnapshot, SentText, is_simulated


@dataclass(slots=True)
class Text:
    ref: str
    at: datetime
    text: str
    audience: str  # "patient" | "staff"
    where: str  # the element read: "payload", "description", "note" …


# The resource types whose text fields are written for staff (a Communication's audience
# is its recipient).
STAFF_TEXT_TYPES = frozenset(
    {"Task", "ServiceRequest", "MedicationRequest", "Appointment", "DocumentReference"}
)


def body_texts(body: dict[str, Any], before: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(element, text) for each text a resource carries: a Communication's payload as one
    text (its parts joined: "on (UTC):", the instant, the sign-off), `description`,
    `comment`, `patientInstruction`, each `note`, a dosage's `patientInstruction`, and a
    DocumentReference's text attachments. With `before` (the version before the run's
    write), only the text that write added: what was there already was the chart's."""
    if body.get("resourceType") == "Communication":
        text = " ".join(
            str(p["contentString"])
            for p in body.get("payload") or []
            if isinstance(p, dict) and isinstance(p.get("contentString"), str)
        )
        return [("payload", text)] if text and before is None else []
    old = before or {}
    parts: list[tuple[str, str]] = []
    for key in ("description", "comment", "patientInstruction"):
        if isinstance(body.get(key), str) and body[key] != old.get(key):
            parts.append((key, body[key]))
    old_notes = {str(n.get("text")) for n in old.get("note") or [] if isinstance(n, dict)}
    for note in body.get("note") or []:
        if isinstance(note, dict) and note.get("text") and str(note["text"]) not in old_notes:
            parts.append(("note", str(note["text"])))
    if body.get("dosageInstruction") != old.get("dosageInstruction"):
        for dosage in body.get("dosageInstruction") or []:
            if isinstance(dosage, dict) and dosage.get("patientInstruction"):
                parts.append(("patientInstruction", str(dosage["patientInstruction"])))
    if body.get("resourceType") == "DocumentReference" and before is None:
        for content in body.get("content") or []:
            attachment = (content or {}).get("attachment") or {}
            data = attachment.get("data")
            if str(attachment.get("contentType", "")).startswith("text/") and data:
                try:
                    parts.append(("content", base64.b64decode(data).decode("utf-8", "replace")))
                except ValueError:
                    continue
    return parts


def texts_of(snapshot: RunSnapshot) -> list[Text]:
    out: list[Text] = []
    for changed in snapshot.changed:
        body = changed.resource
        if body is None or is_simulated(changed):
            continue
        if not (changed.via_run or changed.run_id is not None):
            continue
        ref = ref_of(changed)
        kind = changed.resource_type
        at = changed.first_changed_at if changed.created else changed.last_changed_at
        before = None if changed.created else (changed.before or {})
        if kind == "Communication":
            recipients = {
                str(r.get("reference", ""))
                for r in body.get("recipient") or []
                if isinstance(r, dict)
            }
            audience = "patient" if recipients & snapshot.patient_refs else "staff"
        elif kind in STAFF_TEXT_TYPES:
            audience = "staff"
        else:
            continue
        out += [Text(ref, at, text, audience, where) for where, text in body_texts(body, before)]
    addresses = patient_addresses(snapshot)
    out += [
        Text(t.ref, t.at, t.body, "patient" if addresses_of(t) & addresses else "staff", t.kind)
        for t in snapshot.sent
        if t.body.strip()
    ]
    return sorted(out, key=lambda t: (t.at, t.ref))


def _digits(phone: str) -> str:
    """A phone number by its last ten digits (+1 555-0100 and 5550100 alike)."""
    return "".join(c for c in phone if c.isdigit())[-10:]


def addresses_of(sent: SentText) -> set[str]:
    """Who a sent text went to: an SMS's number by its digits, an e-mail's recipients."""
    if sent.kind == "sms":
        return {_digits(sent.to)}
    return {a.strip().lower() for a in sent.to.split(",") if a.strip()}


def patient_addresses(snapshot: RunSnapshot, only: set[str] | None = None) -> frozenset[str]:
    """The fixture patients' phone numbers (by their digits) and e-mail addresses: a
    captured SMS or e-mail to one of them is written to the patient. `only`: of these
    patients ("Patient/<id>") alone."""
    found: set[str] = set()
    for resource in snapshot.current.values():
        if not resource or resource.get("resourceType") != "Patient":
            continue
        if only is not None and f"Patient/{resource.get('id')}" not in only:
            continue
        for telecom in resource.get("telecom") or []:
            value = str((telecom or {}).get("value") or "")
            if (telecom or {}).get("system") in ("phone", "sms") and _digits(value):
                found.add(_digits(value))
            elif (telecom or {}).get("system") == "email" and value:
                found.add(value.strip().lower())
    return frozenset(found)
