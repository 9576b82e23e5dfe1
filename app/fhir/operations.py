"""Operations beyond CRUD: `Appointment/$find` and the eligibility check."""

from __future__ import annotations

import datetime as dt
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.db import Conn
from app.errors import BadRequest, Issue, NotFound
from app.fhir import booking_rules, repository, service
from app.fhir.repository import index_keys
from app.fhir.search.index import normalize_reference, parse_date_range
from app.kit.clock import fhir_instant, utcnow

DEFAULT_FIND_DAYS = 7
MAX_FIND_DAYS = 62
MAX_FIND_RESULTS = 500


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
    if not 5 <= duration <= booking_rules.MAX_VISIT_MINUTES:
        raise BadRequest(
            f"'duration' must be 5 to {booking_rules.MAX_VISIT_MINUTES} minutes",
            [Issue("out of range", "duration")],
        )
    ctx.touch(practitioner)

    if not await repository.resource_is_live(
        conn, ctx.tenant_id, "Practitioner", practitioner.split("/", 1)[1]
    ):
        raise NotFound(f"{practitioner} is not known")
    time = await booking_rules.free_time(
        conn, ctx.tenant_id, ctx.run_id, practitioner, start, end, now=now
    )
    duration_td = timedelta(minutes=duration)
    proposals = [p for p in booking_rules.combine(time.free, duration_td) if p[1] <= end]
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
    if not await repository.resource_is_live(
        conn, ctx.tenant_id, "Patient", patient.split("/", 1)[1]
    ):
        raise NotFound(f"{patient} is not known")
    rows = await repository.fetch_visible_referencing(
        conn,
        ctx.tenant_id,
        ctx.run_id,
        "Coverage",
        index_keys(ctx.tenant_id, "Coverage", [f"beneficiary={patient}", f"patient={patient}"]),
    )
    if not rows:
        return EligibilityResponse(
            eligible=False, coverage=None, reason=f"no Coverage on file for {patient}"
        )
    reasons: list[str] = []
    fallback: str | None = None
    for row in rows:
        ref = f"Coverage/{row.id}"
        ctx.touch(ref)
        coverage = orjson.loads(row.resource)
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
