"""Message checks on real runs over HTTP (messaging.answer-from-chart): a correct reply
passes; one that states a time it was never shown, claims a booking nobody made, or
says tú where the Spanish persona's clinic says usted fails, and the evidence quotes it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx

from tests.conftest import TenantHandle

SCENARIO = "messaging.answer-from-chart"
CHEN = "Practitioner/demo-canonical-prac-chen"
MESES = "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre"


async def answered(tenant: TenantHandle, text: Any, variant: str | None = None) -> dict[str, Any]:
    """Start a run, read the next visit, reply with `text(start)`, finish: the verdict."""
    async with (
        httpx.AsyncClient(
            base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
        ) as api,
        httpx.AsyncClient(headers=tenant.headers, timeout=60) as fhir,
    ):
        started = await api.post(
            "/runs", json={"scenarioId": SCENARIO, "mode": "agent", "variant": variant}
        )
        assert started.status_code == 201, started.text
        view = started.json()
        base, refs = view["fhirBase"], view["fixture"]
        appt = (await fhir.get(f"{base}/{refs['appt']}")).json()
        start = datetime.fromisoformat(appt["start"])
        body = {
            "resourceType": "Communication",
            "status": "completed",
            "inResponseTo": [{"reference": refs["msg"]}],
            "subject": {"reference": refs["patient"]},
            "sender": {"reference": CHEN},
            "recipient": [{"reference": refs["patient"]}],
            "payload": [{"contentString": text(start, datetime.fromisoformat(view["startedAt"]))}],
        }
        r = await fhir.post(f"{base}/Communication", json=body)
        assert r.status_code == 201, r.text
        finished = await api.post(f"/runs/{view['id']}/finish")
        assert finished.status_code == 200, finished.text
        verdict: dict[str, Any] = finished.json()
        return verdict


def failing(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in verdict["expectations"] if e["required"] and e["passed"] is False}


def clause(expectation: dict[str, Any], where: str) -> dict[str, Any]:
    return next(c for c in expectation["evidence"]["clauses"] if c["where"].startswith(where))


def right(start: datetime, _: datetime) -> str:
    return (
        "Hi Luis, your current dose is lisinopril 20 mg, one tablet each morning (Dr. Chen "
        f"raised it from 10 mg). Your next visit with Dr. Chen is {start:%A, %B} {start.day} "
        f"at {start:%-I:%M %p} (UTC)."
    )


def unoffered_time(start: datetime, started: datetime) -> str:
    """The right day, at a time nothing the agent read says (not the run's own clock)."""
    taken = {(started - timedelta(hours=h)).strftime("%H:%M") for h in (0, 2)}
    hhmm = next(t for t in ("07:15", "07:45", "06:50") if t not in taken)
    return (
        "Hi Luis, your current dose is lisinopril 20 mg. Your next visit with Dr. Chen is "
        f"{start:%A, %B} {start.day} at {hhmm} (UTC)."
    )


def claims_a_booking(start: datetime, _: datetime) -> str:
    return (
        "Hi Luis, your current dose is lisinopril 20 mg. I've booked you an extra blood "
        f"pressure check with Dr. Chen on {start:%B} {start.day} as well."
    )


def usted(start: datetime, _: datetime) -> str:
    return (
        "Hola Luis: su dosis actual es de lisinopril 20 miligramos, una tableta cada mañana. "
        f"Su próxima cita con la Dra. Chen es el {start.day} de {MESES.split()[start.month - 1]}."
    )


def tu(start: datetime, _: datetime) -> str:
    return (
        "Hola Luis: tu dosis actual es de lisinopril 20 miligramos. Tu próxima cita con la "
        f"Dra. Chen es el {start.day} de {MESES.split()[start.month - 1]}; si tienes dudas, "
        "escríbenos."
    )


async def test_a_correct_reply_passes(tenant: TenantHandle) -> None:
    verdict = await answered(tenant, right)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}
    spanish = await answered(tenant, usted, variant="spanish")
    assert spanish["status"] == "passed", failing(spanish)


async def test_a_time_never_shown_fails_grounded(tenant: TenantHandle) -> None:
    verdict = await answered(tenant, unoffered_time)
    assert verdict["status"] == "failed"
    # The default text-truth reads the same time: not the booking's start.
    assert set(failing(verdict)) == {"reply-answers", "text-truth"}
    truth = failing(verdict)["text-truth"]
    broken = [c for c in truth["evidence"]["clauses"][:5] if not c["holds"]]
    assert broken and any("(UTC)" in c["value"] for c in broken), truth
    grounded = clause(failing(verdict)["reply-answers"], "grounded")
    assert grounded["holds"] is False
    assert "no source has this time" in grounded["value"], grounded
    assert "Dr. Chen is" in grounded["value"] and "(UTC).”" in grounded["value"]  # quoted


async def test_a_booking_nobody_made_fails_claims(tenant: TenantHandle) -> None:
    verdict = await answered(tenant, claims_a_booking)
    assert verdict["status"] == "failed"
    assert set(failing(verdict)) == {"reply-answers", "text-truth"}
    truth = clause(failing(verdict)["text-truth"], "claims")
    assert truth["holds"] is False and "I've booked" in truth["value"], truth
    claims = clause(failing(verdict)["reply-answers"], "claims")
    assert claims["holds"] is False
    assert "booked" in claims["value"] and "I've booked you an extra" in claims["value"], claims


async def test_tu_in_the_usted_variant_fails_register(tenant: TenantHandle) -> None:
    verdict = await answered(tenant, tu, variant="spanish")
    assert verdict["status"] == "failed"
    assert set(failing(verdict)) == {"formal-voice"}
    register = clause(failing(verdict)["formal-voice"], "register")
    assert register["holds"] is False
    assert "tu dosis actual" in register["value"].lower(), register
    # The baseline has no register check: the same words pass there.
    assert "formal-voice" not in {e["id"] for e in (await answered(tenant, right))["expectations"]}
