"""The canonical directory every tenant starts with.

Stable ids (`demo-canonical-…`) let scenarios name Dr. Chen or the main clinic
directly. Slots are free 30-minute Slots on weekdays 09:00–17:00 UTC for the coming
weeks; `ensure_directory` is idempotent and is run again daily to roll them forward.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from app.db import Conn
from app.fhir import service
from app.fhir.repository import WriteStatement
from app.kit.clock import utcnow

ORG_ID = "demo-canonical-org"
SNOMED = "http://snomed.info/sct"
SLOT_MINUTES = 30
DAY_START = time(9, 0)
DAY_END = time(17, 0)


@dataclass(frozen=True)
class Clinician:
    key: str
    family: str
    given: str
    prefix: str
    gender: str
    npi: str
    specialty_code: str
    specialty: str
    location: str

    @property
    def id(self) -> str:
        return f"demo-canonical-prac-{self.key}"


LOCATIONS = {
    "demo-canonical-loc-main": ("Riverside Clinic — Main Street", "100 Main Street"),
    "demo-canonical-loc-north": ("Riverside Clinic — Northgate", "42 Northgate Avenue"),
}

CLINICIANS = (
    Clinician(
        "chen",
        "Chen",
        "Sarah",
        "Dr.",
        "female",
        "1000000001",
        "419772000",
        "Family practice",
        "demo-canonical-loc-main",
    ),
    Clinician(
        "patel",
        "Patel",
        "Raj",
        "Dr.",
        "male",
        "1000000002",
        "419772000",
        "Family practice",
        "demo-canonical-loc-north",
    ),
    Clinician(
        "okafor",
        "Okafor",
        "Grace",
        "Dr.",
        "female",
        "1000000003",
        "394579002",
        "Cardiology",
        "demo-canonical-loc-main",
    ),
    Clinician(
        "garcia",
        "Garcia",
        "Miguel",
        "Dr.",
        "male",
        "1000000004",
        "394583002",
        "Endocrinology",
        "demo-canonical-loc-north",
    ),
    Clinician(
        "nguyen",
        "Nguyen",
        "Linh",
        "Dr.",
        "female",
        "1000000005",
        "394582007",
        "Dermatology",
        "demo-canonical-loc-main",
    ),
)


def _static_resources() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "resourceType": "Organization",
            "id": ORG_ID,
            "active": True,
            "name": "Riverside Family Health",
            "telecom": [{"system": "phone", "value": "+1-555-0100", "use": "work"}],
        }
    ]
    for loc_id, (name, line) in LOCATIONS.items():
        out.append(
            {
                "resourceType": "Location",
                "id": loc_id,
                "status": "active",
                "mode": "instance",
                "name": name,
                "address": {
                    "line": [line],
                    "city": "Springfield",
                    "state": "IL",
                    "postalCode": "62701",
                    "country": "US",
                },
                "managingOrganization": {"reference": f"Organization/{ORG_ID}"},
            }
        )
    for c in CLINICIANS:
        specialty = {
            "coding": [{"system": SNOMED, "code": c.specialty_code, "display": c.specialty}],
            "text": c.specialty,
        }
        out.append(
            {
                "resourceType": "Practitioner",
                "id": c.id,
                "active": True,
                "identifier": [{"system": "http://hl7.org/fhir/sid/us-npi", "value": c.npi}],
                "name": [
                    {
                        "use": "official",
                        "family": c.family,
                        "given": [c.given],
                        "prefix": [c.prefix],
                        "text": f"{c.prefix} {c.given} {c.family}",
                    }
                ],
                "gender": c.gender,
            }
        )
        out.append(
            {
                "resourceType": "PractitionerRole",
                "id": f"demo-canonical-role-{c.key}",
                "active": True,
                "practitioner": {
                    "reference": f"Practitioner/{c.id}",
                    "display": f"{c.prefix} {c.given} {c.family}",
                },
                "organization": {"reference": f"Organization/{ORG_ID}"},
                "location": [{"reference": f"Location/{c.location}"}],
                "code": [
                    {
                        "coding": [
                            {
                                "system": "http://terminology.hl7.org/CodeSystem/practitioner-role",
                                "code": "doctor",
                                "display": "Doctor",
                            }
                        ]
                    }
                ],
                "specialty": [specialty],
            }
        )
        out.append(
            {
                "resourceType": "Schedule",
                "id": f"demo-canonical-sched-{c.key}",
                "active": True,
                "specialty": [specialty],
                "actor": [
                    {
                        "reference": f"Practitioner/{c.id}",
                        "display": f"{c.prefix} {c.given} {c.family}",
                    },
                    {"reference": f"Location/{c.location}"},
                ],
                "comment": f"Clinic hours of {c.prefix} {c.given} {c.family}",
            }
        )
    return out


def aliases() -> dict[str, str]:
    """The directory's references that stand for a practitioner: each one's
    PractitionerRole and Schedule -> "Practitioner/<id>" (grading reads a booking or an
    order naming either as naming the practitioner)."""
    out: dict[str, str] = {}
    for c in CLINICIANS:
        out[f"PractitionerRole/demo-canonical-role-{c.key}"] = f"Practitioner/{c.id}"
        out[f"Schedule/demo-canonical-sched-{c.key}"] = f"Practitioner/{c.id}"
    return out


def names() -> dict[str, tuple[str, ...]]:
    """What a text may call each directory entry: a practitioner by family name or full
    name (its PractitionerRole and Schedule resolve to it through `aliases`), a location
    by its name, the part after the dash ("Northgate") and its street address."""
    out: dict[str, tuple[str, ...]] = {
        f"Practitioner/{c.id}": (c.family, f"{c.given} {c.family}") for c in CLINICIANS
    }
    for loc_id, (name, address) in LOCATIONS.items():
        short = name.split("—")[-1].strip()
        out[f"Location/{loc_id}"] = (name, short, address)
    out[f"Organization/{ORG_ID}"] = ("Riverside Family Health",)
    return out


def slot_id(clinician_key: str, start: datetime) -> str:
    return f"demo-canonical-slot-{clinician_key}-{start:%Y%m%d%H%M}"


def _slots(first_day: date, weeks: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for offset in range(weeks * 7):
        day = first_day + timedelta(days=offset)
        if day.weekday() >= 5:
            continue
        moment = datetime.combine(day, DAY_START, UTC)
        end_of_day = datetime.combine(day, DAY_END, UTC)
        while moment < end_of_day:
            end = moment + timedelta(minutes=SLOT_MINUTES)
            for c in CLINICIANS:
                out.append(
                    {
                        "resourceType": "Slot",
                        "id": slot_id(c.key, moment),
                        "schedule": {"reference": f"Schedule/demo-canonical-sched-{c.key}"},
                        "status": "free",
                        "start": moment.isoformat().replace("+00:00", "Z"),
                        "end": end.isoformat().replace("+00:00", "Z"),
                    }
                )
            moment = end
    return out


async def ensure_directory(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    weeks: int,
    write_statement: WriteStatement,
    today: date | None = None,
) -> int:
    """Create whatever part of the directory is missing; return how many were written.

    `write_statement` is the FHIR write statement composed with the other features'
    parts (`app.runs.fhir_writes`, which this layer cannot import): the caller's."""
    today = today or utcnow().date()
    wanted = _static_resources() + _slots(today, weeks)
    existing = await service.ids_like(conn, tenant_id, "demo-canonical-%")
    ctx = service.FhirContext(
        tenant_id=tenant_id, base_url="", count_usage=False, write_statement=write_statement
    )
    now = utcnow()
    writes = [
        service.prepare_write(ctx, r["resourceType"], r, r["id"], 1, "create", now)
        for r in wanted
        if (r["resourceType"], r["id"]) not in existing
    ]
    if writes:
        async with conn.transaction():
            await ctx.write(conn, writes)
    return len(writes)
