"""One chart for the text-truth corpus: a patient with a booking, a cancelled visit, an
active and a stopped order, a result, a lapsed coverage, a left-knee order and a pharmacy
— and `snapshot(texts)` puts the system's texts on it, as a graded run would see them.

Times: the run starts Friday 2026-12-04 08:00 UTC; the booking is Tuesday 2026-12-08
at 15:00 UTC (9:00 AM in the clinic's zone, America/Chicago); the cancelled visit was
Monday 2026-12-07 at 16:30 UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.grading.engine import grade
from app.grading.snapshot import ChangedResource, RunSnapshot
from app.scenarios.schema import TextTruthExpectation
from understudy_client.contract.runs import ExpectationResult

T0 = datetime(2026, 12, 4, 8, 0, tzinfo=UTC)
PATIENT = "Patient/pat-1"
OTHER = "Patient/pat-2"
CHEN = "Practitioner/dr-chen"
PATEL = "Practitioner/dr-patel"
MAIN = "Location/loc-main"
NORTH = "Location/loc-north"
PHARMACY = "Organization/pharm-walgreens"
OTHER_PHARMACY = "Organization/pharm-cvs"
BOOKED_AT = "2026-12-08T15:00:00Z"
CANCELLED_AT = "2026-12-07T16:30:00Z"
ZONE = "America/Chicago"

NAMES: dict[str, tuple[str, ...]] = {
    CHEN: ("Chen", "Sarah Chen"),
    PATEL: ("Patel", "Raj Patel"),
    MAIN: ("Riverside Clinic — Main Street", "Main Street", "100 Main Street"),
    NORTH: ("Riverside Clinic — Northgate", "Northgate", "42 Northgate Avenue"),
}


def _appointment(id: str, status: str, start: str, who: str, where: str) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "id": id,
        "status": status,
        "start": start,
        "end": (datetime.fromisoformat(start.replace("Z", "+00:00")) + timedelta(minutes=30))
        .isoformat()
        .replace("+00:00", "Z"),
        "description": "Blood pressure follow-up",
        "participant": [
            {"actor": {"reference": PATIENT}, "status": "accepted"},
            {"actor": {"reference": who}, "status": "accepted"},
            {"actor": {"reference": where}, "status": "accepted"},
        ],
    }


def _order(id: str, status: str, drug: str, mg: int, timing: str) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": id,
        "status": status,
        "intent": "order",
        "subject": {"reference": PATIENT},
        "medicationCodeableConcept": {"text": f"{drug} {mg} mg tablet"},
        "dosageInstruction": [
            {
                "text": f"Take 1 tablet ({mg} mg) by mouth {timing}",
                "doseAndRate": [{"doseQuantity": {"value": mg, "unit": "mg"}}],
            }
        ],
    }


FIXTURE: dict[str, dict[str, Any]] = {
    "patient": {
        "resourceType": "Patient",
        "id": "pat-1",
        "name": [{"given": ["Maria"], "family": "Garcia"}],
        "birthDate": "1986-07-14",
        "identifier": [{"system": "urn:mrn", "value": "RFH-310662"}],
    },
    "other": {
        "resourceType": "Patient",
        "id": "pat-2",
        "name": [{"given": ["Maria"], "family": "Garcia"}],
        "birthDate": "1990-03-02",
        "identifier": [{"system": "urn:mrn", "value": "RFH-455120"}],
    },
    "lisinopril": _order("med-1", "active", "lisinopril", 20, "once a day"),
    "old-lisinopril": _order("med-0", "stopped", "lisinopril", 10, "once a day"),
    "warfarin": _order("med-2", "active", "warfarin", 5, "once daily in the evening"),
    "a1c": {
        "resourceType": "Observation",
        "id": "obs-1",
        "status": "final",
        "code": {"text": "Hemoglobin A1c"},
        "subject": {"reference": PATIENT},
        "effectiveDateTime": "2026-12-01T09:00:00Z",
        "valueQuantity": {"value": 9.2, "unit": "%"},
    },
    "old-a1c": {
        "resourceType": "Observation",
        "id": "obs-0",
        "status": "final",
        "code": {"text": "Hemoglobin A1c"},
        "subject": {"reference": PATIENT},
        "effectiveDateTime": "2026-06-01T09:00:00Z",
        "valueQuantity": {"value": 6.1, "unit": "%"},
    },
    "coverage": {
        "resourceType": "Coverage",
        "id": "cov-1",
        "status": "active",
        "beneficiary": {"reference": PATIENT},
        "period": {"start": "2025-01-01", "end": "2026-10-31"},
    },
    "xray": {
        "resourceType": "ServiceRequest",
        "id": "sr-1",
        "status": "active",
        "intent": "order",
        "subject": {"reference": PATIENT},
        "code": {"text": "X-ray of knee"},
        "bodySite": [{"text": "Left knee"}],
    },
    "pharmacy": {"resourceType": "Organization", "id": "pharm-walgreens", "name": "Walgreens"},
    "other-pharmacy": {"resourceType": "Organization", "id": "pharm-cvs", "name": "CVS Pharmacy"},
    "cancelled": _appointment("appt-0", "cancelled", CANCELLED_AT, CHEN, MAIN),
}
FIXTURE_REFS = {k: f"{v['resourceType']}/{v['id']}" for k, v in FIXTURE.items()}

# What the system was shown: the brief, the chart, the `$find` answer it read.
SHOWN: list[Any] = [
    "Maria Garcia asks for a blood pressure follow-up with Dr. Chen.",
    *FIXTURE.values(),
    {
        "resourceType": "Bundle",
        "entry": [
            {"resource": {"resourceType": "Slot", "start": s, "status": "free"}}
            for s in ("2026-12-08T15:00:00Z", "2026-12-08T16:00:00Z", "2026-12-09T15:00:00Z")
        ],
    },
    "Call us at 555-0100.",
    "Lab prep: fasting draw, nothing to eat or drink except water for 10 to 12 hours before.",
]


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _changed(
    body: dict[str, Any],
    minute: float,
    *,
    created: bool = True,
    before: dict[str, Any] | None = None,
) -> ChangedResource:
    return ChangedResource(
        resource_type=body["resourceType"],
        id=body["id"],
        resource=body,
        first_changed_at=at(minute),
        last_changed_at=at(minute),
        created=created,
        all_refs=(),
        run_id="run-1",
        before=before,
        via_run=True,
    )


def booking() -> ChangedResource:
    return _changed(_appointment("appt-1", "booked", BOOKED_AT, CHEN, MAIN), 2)


def cancellation() -> ChangedResource:
    """The run's cancel of the Monday visit (the fixture holds it cancelled already: as it
    reads after this write)."""
    before = dict(FIXTURE["cancelled"], status="booked")
    return _changed(FIXTURE["cancelled"], 1.5, created=False, before=before)


def _task(
    id: str, description: str, minute: float, owner: str = CHEN, priority: str = "routine"
) -> ChangedResource:
    body = {
        "resourceType": "Task",
        "id": id,
        "status": "requested",
        "intent": "order",
        "priority": priority,
        "for": {"reference": PATIENT},
        "owner": {"reference": owner},
        "description": description,
    }
    return _changed(body, minute)


def refill_task(owner: str = CHEN, drug: str = "lisinopril") -> ChangedResource:
    return _task("task-refill", f"Refill request: {drug} 20 mg, 1 tablet once a day", 2.5, owner)


def message(text: str, minute: float = 3, to: str = PATIENT) -> ChangedResource:
    return _changed(
        {
            "resourceType": "Communication",
            "id": f"msg-{minute}",
            "status": "completed",
            "subject": {"reference": PATIENT},
            "recipient": [{"reference": to}],
            "payload": [{"contentString": text}],
        },
        minute,
    )


def urgent_task(minute: float = 2) -> ChangedResource:
    text = "Chest pain since this morning: please call her back within the hour."
    return _task("task-urgent", text, minute, priority="urgent")


def staff_task(text: str, minute: float = 3) -> ChangedResource:
    return _task(f"task-{minute}", text, minute)


def order_note(text: str) -> ChangedResource:
    body = dict(FIXTURE["xray"])
    body["note"] = [{"text": text}]
    return _changed(body, 3, created=False, before=FIXTURE["xray"])


def snapshot(writes: list[ChangedResource]) -> RunSnapshot:
    return RunSnapshot(
        run_id="run-1",
        started_at=T0,
        now=at(10),
        deadline=at(60),
        fixture=dict(FIXTURE_REFS),
        current={k: v for k, v in FIXTURE.items()},
        patient_refs=frozenset({PATIENT}),
        changed=writes,
        shown=list(SHOWN),
        zones=("UTC", ZONE),
        names=dict(NAMES),
    )


def truth(writes: list[ChangedResource], advice: bool = False) -> ExpectationResult:
    e = TextTruthExpectation.model_validate(
        {"id": "text-truth", "label": "t", "type": "text-truth", "allowAdvice": advice}
    )
    return grade([e], snapshot(writes)).expectations[0]
