"""Operations beyond CRUD: `Appointment/$find` and the eligibility check."""

from __future__ import annotations

import datetime as dt
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.db import Conn
from app.errors import BadRequest, Issue, NotFound
from app.fhir import service
from app.fhir.repository import index_keys
from app.fhir.search.index import normalize_reference, parse_date_range
from app.kit.clock import fhir_instant, utcnow

DEFAULT_FIND_DAYS = 7
MAX_FIND_DAYS = 62
MAX_FIND_RESULTS = 500
# Appointment statuses that do not hold a practitioner's time.
_NOT_HOLDING = ["cancelled", "noshow", "entered-in-error", "proposed", "waitlist"]


def parameters_from_body(body: Any) -> dict[str, str]:
    """A FHIR Parameters resource (or a flat JSON object) → name → string value."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a Parameters resource or a JSON object")
    if body.get("resourceType") != "Parameters":
        return {str(k): str(v) for k, v in body.items() if v is not None}
    out: dict[str, str] = {}
    for p in body.get("parameter") or []:
        if not isinstance(p, dict) or "name" not in p:
            continue
        for key, value in p.items():
            if key.startswith("value"):
                out[str(p["name"])] = (
                    value.get("reference", "") if isinstance(value, dict) else str(value)
                )
    return out


def _practitioner_ref(value: str | None) -> str:
    if not value:
        raise BadRequest(
            "$find needs a 'practitioner' (e.g. Practitioner/demo-canonical-prac-chen)",
            [Issue("missing", expression="practitioner", code="required")],
        )
    if "/" not in value:
        value = f"Practitioner/{value}"
    ref = normalize_reference(value)
    if ref is None or not ref.startswith("Practitioner/"):
        raise BadRequest(
            f"'{value}' is not a Practitioner reference", [Issue("bad", "practitioner")]
        )
    return ref


def _moment(value: str | None, name: str, default: datetime) -> datetime:
    if not value:
        return default
    try:
        return parse_date_range(value)[0]
    except ValueError as exc:
        raise BadRequest(f"invalid '{name}': {exc}", [Issue(str(exc), expression=name)]) from None


def _parse_instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


async def find_appointments(ctx: service.FhirContext, conn: Conn, params: dict[str, str]) -> bytes:
    practitioner = _practitioner_ref(params.get("practitioner"))
    now = utcnow()
    start = _moment(params.get("start"), "start", now)
    end = _moment(params.get("end"), "end", start + timedelta(days=DEFAULT_FIND_DAYS))
    if "end" in params and len(params["end"]) == 10:
        end += timedelta(days=1)  # a bare end date includes that whole day
    if end <= start:
        raise BadRequest("'end' must be after 'start'", [Issue("end before start", "end")])
    if end - start > timedelta(days=MAX_FIND_DAYS):
        raise BadRequest(
            f"the range may span at most {MAX_FIND_DAYS} days", [Issue("too long", "end")]
        )
    try:
        duration = int(params.get("duration") or 30)
    except ValueError:
        raise BadRequest("'duration' must be whole minutes", [Issue("bad", "duration")]) from None
    if not 5 <= duration <= 480:
        raise BadRequest("'duration' must be 5 to 480 minutes", [Issue("out of range", "duration")])
    ctx.touch(practitioner)

    current = await conn.fetchval(
        "SELECT deleted FROM fhir_resource WHERE tenant_id = $1 AND resource_type = 'Practitioner' "
        "AND id = $2",
        ctx.tenant_id,
        practitioner.split("/", 1)[1],
    )
    if current is None or current:
        raise NotFound(f"{practitioner} is not known")
    schedules = [
        f"schedule=Schedule/{r['id']}"
        for r in await conn.fetch(
            """SELECT id FROM fhir_resource WHERE tenant_id = $1 AND resource_type = 'Schedule'
            AND NOT deleted AND refs && $2::text[]""",
            ctx.tenant_id,
            index_keys(ctx.tenant_id, "Schedule", [f"actor={practitioner}"]),
        )
    ]
    slots = await conn.fetch(
        """SELECT r.id, r.resource FROM fhir_resource r WHERE r.tenant_id = $1
        AND r.resource_type = 'Slot' AND NOT r.deleted AND r.refs && $2::text[]
        AND r.tokens @> $5::text[] AND r.id IN (
            SELECT id FROM fhir_date WHERE tenant_id = $1 AND resource_type = 'Slot'
            AND param = 'start' AND low >= $3 AND low < $4)""",
        ctx.tenant_id,
        index_keys(ctx.tenant_id, "Slot", schedules),
        start,
        end,
        index_keys(ctx.tenant_id, "Slot", ["status=free"]),
    )
    busy = [
        (_parse_instant(b["s"]), _parse_instant(b["e"]))
        for b in await conn.fetch(
            """SELECT resource->>'start' AS s, resource->>'end' AS e FROM fhir_resource
            WHERE tenant_id = $1 AND resource_type = 'Appointment' AND NOT deleted
            AND refs && $2::text[] AND NOT tokens && $3::text[]
            AND resource ? 'start' AND resource ? 'end'""",
            ctx.tenant_id,
            index_keys(
                ctx.tenant_id,
                "Appointment",
                [f"practitioner={practitioner}", f"actor={practitioner}"],
            ),
            index_keys(ctx.tenant_id, "Appointment", [f"status={s}" for s in _NOT_HOLDING]),
        )
    ]
    free: list[tuple[datetime, datetime, str]] = []
    for row in slots:
        slot = orjson.loads(row["resource"])
        s, e = _parse_instant(slot["start"]), _parse_instant(slot["end"])
        if e <= now or any(bs < e and be > s for bs, be in busy):
            continue
        free.append((s, e, row["id"]))
    free.sort()
    proposals = [p for p in _combine(free, timedelta(minutes=duration)) if p[1] <= end]
    entries = []
    for s, e, slot_ids in proposals[:MAX_FIND_RESULTS]:
        entries.append(
            {
                "resource": {
                    "resourceType": "Appointment",
                    "status": "proposed",
                    "start": fhir_instant(s),
                    "end": fhir_instant(e),
                    "minutesDuration": duration,
                    "slot": [{"reference": f"Slot/{i}"} for i in slot_ids],
                    "participant": [
                        {"actor": {"reference": practitioner}, "status": "needs-action"}
                    ],
                },
                "search": {"mode": "match"},
            }
        )
    return orjson.dumps(
        {
            "resourceType": "Bundle",
            "type": "searchset",
            "total": len(entries),
            "entry": entries,
        }
    )


def _combine(
    free: list[tuple[datetime, datetime, str]], duration: timedelta
) -> list[tuple[datetime, datetime, list[str]]]:
    """Each start where consecutive free slots cover `duration`."""
    out: list[tuple[datetime, datetime, list[str]]] = []
    for i, (start, end, first) in enumerate(free):
        ids, reach, j = [first], end, i
        while reach - start < duration and j + 1 < len(free) and free[j + 1][0] == reach:
            j += 1
            reach = free[j][1]
            ids.append(free[j][2])
        if reach - start >= duration:
            out.append((start, start + duration, ids))
    return out


class EligibilityRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    patient: str = Field(description="Patient id or 'Patient/<id>'")
    date: dt.date = Field(description="Date of service, YYYY-MM-DD")
    service_type: str | None = Field(
        default=None, alias="serviceType", description="Optional service type code"
    )

    @field_validator("patient")
    @classmethod
    def _patient(cls, value: str) -> str:
        value = value.strip()
        ref = normalize_reference(value if "/" in value else f"Patient/{value}")
        if ref is None or not ref.startswith("Patient/"):
            raise ValueError("must be a Patient id or 'Patient/<id>'")
        return ref


class EligibilityResponse(BaseModel):
    eligible: bool
    coverage: str | None = Field(description="'Coverage/<id>' used for the answer, or null")
    reason: str


def _period_contains(period: dict[str, Any] | None, day: date) -> tuple[bool, str]:
    if not period:
        return True, ""
    start = period.get("start")
    end = period.get("end")
    lo = datetime.combine(day, time.min, UTC)
    hi = lo + timedelta(days=1)
    if start and parse_date_range(start)[0] >= hi:
        return False, f"starts on {start[:10]}"
    if end and parse_date_range(end)[1] <= lo:
        return False, f"ended on {end[:10]}"
    return True, ""


def _covers_service(coverage: dict[str, Any], service_type: str | None) -> bool:
    if not service_type:
        return True
    listed = {
        coding.get("code")
        for cost in coverage.get("costToBeneficiary") or []
        for coding in ((cost.get("type") or {}).get("coding") or [])
    }
    return not listed or service_type in listed


async def check_eligibility(
    ctx: service.FhirContext, conn: Conn, request: EligibilityRequest
) -> EligibilityResponse:
    patient = request.patient
    ctx.touch(patient)
    known = await conn.fetchval(
        "SELECT NOT deleted FROM fhir_resource WHERE tenant_id = $1 AND resource_type = 'Patient' "
        "AND id = $2",
        ctx.tenant_id,
        patient.split("/", 1)[1],
    )
    if not known:
        raise NotFound(f"{patient} is not known")
    rows = await conn.fetch(
        """SELECT id, resource FROM fhir_resource WHERE tenant_id = $1
        AND resource_type = 'Coverage' AND NOT deleted AND refs && $2::text[]
        AND ($3::text IS NULL OR run_id IS NULL OR run_id = $3)
        ORDER BY id""",
        ctx.tenant_id,
        index_keys(ctx.tenant_id, "Coverage", [f"beneficiary={patient}", f"patient={patient}"]),
        ctx.run_id,
    )
    if not rows:
        return EligibilityResponse(
            eligible=False, coverage=None, reason=f"no Coverage on file for {patient}"
        )
    reasons: list[str] = []
    fallback: str | None = None
    for row in rows:
        ref = f"Coverage/{row['id']}"
        ctx.touch(ref)
        coverage = orjson.loads(row["resource"])
        fallback = fallback or ref
        status = coverage.get("status")
        if status != "active":
            reasons.append(f"{ref} is {status}")
            continue
        inside, why = _period_contains(coverage.get("period"), request.date)
        if not inside:
            reasons.append(f"{ref} {why}")
            continue
        if not _covers_service(coverage, request.service_type):
            reasons.append(f"{ref} does not cover service type '{request.service_type}'")
            continue
        payor = ", ".join(
            p.get("display") or p.get("reference", "") for p in coverage.get("payor") or []
        )
        return EligibilityResponse(
            eligible=True,
            coverage=ref,
            reason=f"{ref} is active on {request.date.isoformat()}"
            + (f" ({payor})" if payor else ""),
        )
    return EligibilityResponse(
        eligible=False,
        coverage=fallback,
        reason="no active coverage on " + request.date.isoformat() + ": " + "; ".join(reasons),
    )
