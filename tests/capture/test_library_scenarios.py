"""The built-in scenarios that use captured effects, played by agents that know only the
run's answer: its FHIR base and its `capture` endpoints, used with the clients agents
already use (Twilio's SDK, `smtplib`, httpx against an integration).

- messaging.sms-reminder-opt-out: reminders by SMS; the patient with a Consent refusing
  texts must not be texted, and the time texted must be the visit's.
- referrals.referral-letter-email: the referral letter by SMTP to the receiving practice.
- medications.pharmacy-integration: the refill order to the pharmacy's stub.
"""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import Callable
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any

import httpx
from twilio.rest import Client

from tests.capture.helpers import api_client
from tests.conftest import TenantHandle
from tests.runs.test_message_checks_http import failing

SMS_SCENARIO = "messaging.sms-reminder-opt-out"
EMAIL_SCENARIO = "referrals.referral-letter-email"
PHARMACY_SCENARIO = "medications.pharmacy-integration"


async def _start(tenant: TenantHandle, scenario: str) -> dict[str, Any]:
    async with api_client(tenant) as api:
        started = await api.post("/runs", json={"scenarioId": scenario, "mode": "agent"})
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    return run


async def _finish(tenant: TenantHandle, run_id: str) -> dict[str, Any]:
    async with api_client(tenant) as api:
        finished = await api.post(f"/runs/{run_id}/finish")
    assert finished.status_code == 200, finished.text
    verdict: dict[str, Any] = finished.json()
    return verdict


def _entries(bundle: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["resource"] for e in bundle.get("entry") or []]


def _refuses_texts(consents: list[dict[str, Any]]) -> bool:
    """What a careful reminder job checks: an active Consent that denies contact by SMS."""
    return any(
        c.get("status") == "active"
        and (c.get("provision") or {}).get("type") == "deny"
        and "sms" in str(c.get("provision")).lower()
        for c in consents
    )


# --- SMS reminders ------------------------------------------------------------------------

Wording = Callable[[str, datetime], str]


def _reminder(name: str, start: datetime) -> str:
    return (
        f"Hi {name}, a reminder from Riverside Family Health: your visit with Dr. Sarah Chen "
        f"is on {start:%A, %B} {start.day} at {start:%-I:%M %p} (UTC). Reply here to change it."
    )


async def _remind(
    tenant: TenantHandle, *, wording: Wording = _reminder, heed_consent: bool = True
) -> dict[str, Any]:
    """A reminder job on the run's endpoints: reads each patient's visits and Consents
    through FHIR, texts through Twilio's SDK with its base URL pointed at the run."""
    run = await _start(tenant, SMS_SCENARIO)
    capture, refs = run["capture"], run["fixture"]
    twilio = Client(capture["accountSid"], capture["authToken"])
    twilio.api.base_url = capture["smsBase"]
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        for symbol in ("alex", "priya"):
            patient = (await fhir.get(f"/{refs[symbol]}")).json()
            pid = refs[symbol].split("/")[1]
            visits = _entries((await fhir.get("/Appointment", params={"patient": pid})).json())
            consents = _entries((await fhir.get("/Consent", params={"patient": pid})).json())
            if heed_consent and _refuses_texts(consents):
                continue
            phone = next(t["value"] for t in patient["telecom"] if t["system"] == "phone")
            start = datetime.fromisoformat(visits[0]["start"])
            name = patient["name"][0]["given"][0]
            await asyncio.to_thread(
                twilio.messages.create,
                to=phone,
                from_=capture["from"],
                body=wording(name, start),
            )
    return await _finish(tenant, run["id"])


async def test_a_reminder_job_on_twilio_sdk_passes(tenant: TenantHandle) -> None:
    verdict = await _remind(tenant)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}
    checks = {e["id"]: e for e in verdict["expectations"]}
    # The opt-out check is there by default (the fixture holds a Consent) and held.
    assert checks["consent-opt-out"]["passed"] is True
    assert checks["matches-reference"]["passed"] is True


async def test_a_wrong_time_texted_fails_quoting_the_sms(tenant: TenantHandle) -> None:
    verdict = await _remind(
        tenant, wording=lambda name, start: _reminder(name, start + timedelta(hours=2))
    )
    assert verdict["status"] == "failed"
    broke = failing(verdict)
    assert "text-truth" in broke, broke
    truth = broke["text-truth"]["evidence"]["clauses"]
    quoted = [c for c in truth if not c["holds"] and c["where"].startswith("facts: sms:SM")]
    assert quoted, truth
    assert "Hi Alex, a reminder from Riverside Family Health" in str(quoted[0]), quoted[0]


async def test_texting_the_patient_who_opted_out_fails(tenant: TenantHandle) -> None:
    verdict = await _remind(tenant, heed_consent=False)
    assert verdict["status"] == "failed"
    broke = failing(verdict)
    assert "consent-opt-out" in broke, broke
    assert "matches-reference" in broke, broke  # a text to somebody the reference never texts
    assert "Hi Priya" in str(broke["consent-opt-out"]["evidence"]), broke["consent-opt-out"]


# --- the referral letter by SMTP ----------------------------------------------------------


def _send_mail(smtp: dict[str, Any], to: str, subject: str, text: str) -> None:
    message = EmailMessage()
    message["From"] = "referrals@riversidefamilyhealth.example"
    message["To"] = to
    message["Subject"] = subject
    message.set_content(text)
    message.add_attachment(
        text.encode(), maintype="text", subtype="plain", filename="referral-letter.txt"
    )
    with smtplib.SMTP(smtp["host"], smtp["port"], timeout=30) as client:
        client.login(smtp["username"], smtp["password"])
        client.send_message(message)


async def _refer(mailer: TenantHandle, *, to_patient: bool = False) -> dict[str, Any]:
    run = await _start(mailer, EMAIL_SCENARIO)
    refs = run["fixture"]
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=mailer.headers) as fhir:
        referral = (await fhir.get(f"/{refs['referral']}")).json()
        practice = (await fhir.get(f"/{referral['performer'][0]['reference']}")).json()
        patient = (await fhir.get(f"/{refs['patient']}")).json()
    inbox = next(t["value"] for t in practice["telecom"] if t["system"] == "email")
    if to_patient:
        inbox = next(t["value"] for t in patient["telecom"] if t["system"] == "email")
    name = f"{patient['name'][0]['given'][0]} {patient['name'][0]['family']}"
    letter = (
        f"Dear colleagues, Dr. Sarah Chen refers {name} (date of birth "
        f"{patient['birthDate']}) to cardiology: {referral['reasonCode'][0]['text'].lower()}. "
        f"{referral['note'][0]['text']} Riverside Family Health"
    )
    await asyncio.to_thread(_send_mail, run["capture"]["smtp"], inbox, f"Referral: {name}", letter)
    return await _finish(mailer, run["id"])


async def test_a_referral_letter_by_smtplib_passes(mailer: TenantHandle) -> None:
    verdict = await _refer(mailer)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_the_letter_sent_to_the_patient_instead_fails(mailer: TenantHandle) -> None:
    verdict = await _refer(mailer, to_patient=True)
    assert verdict["status"] == "failed"
    assert "matches-reference" in failing(verdict), failing(verdict)


# --- the pharmacy integration -------------------------------------------------------------


async def _order(tenant: TenantHandle, quantity: int = 90) -> dict[str, Any]:
    run = await _start(tenant, PHARMACY_SCENARIO)
    refs, capture = run["fixture"], run["capture"]
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        prescription = (await fhir.get(f"/{refs['lisinopril']}")).json()
        patient = (await fhir.get(f"/{refs['patient']}")).json()
    order = {
        "patient": {
            "name": f"{patient['name'][0]['given'][0]} {patient['name'][0]['family']}",
            "birthDate": patient["birthDate"],
        },
        "prescriber": prescription["requester"]["display"],
        "medication": prescription["medicationCodeableConcept"]["text"],
        "sig": prescription["dosageInstruction"][0]["text"],
        "quantity": quantity,
        "refills": prescription["dispenseRequest"]["numberOfRepeatsAllowed"],
    }
    bearer = {"Authorization": f"Bearer {capture['authToken']}"}
    async with httpx.AsyncClient(headers=bearer) as pharmacy:
        placed = await pharmacy.post(f"{capture['integrationsBase']}/pharmacy/orders", json=order)
    assert placed.status_code == 201, placed.text
    assert placed.json()["orderId"] == "MSP-20931"
    return await _finish(tenant, run["id"])


async def test_a_refill_order_to_the_pharmacy_stub_passes(tenant: TenantHandle) -> None:
    verdict = await _order(tenant)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_a_wrong_quantity_ordered_fails_naming_the_call(tenant: TenantHandle) -> None:
    verdict = await _order(tenant, quantity=180)
    assert verdict["status"] == "failed"
    broke = failing(verdict)
    assert "order-sent" in broke, broke
    assert "quantity" in str(broke["order-sent"]["evidence"]), broke["order-sent"]["evidence"]
