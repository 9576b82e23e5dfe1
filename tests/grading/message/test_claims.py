"""Claimed actions in messages, and which claims no write backs."""

from __future__ import annotations

import pytest

from app.grading.message.claims import Write, claims, unbacked
from app.grading.message.lexicon import ACTIONS, WRITE_KINDS


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("I've booked you with Dr. Chen on Tuesday.", "booked"),
        ("I have scheduled your follow-up for Friday.", "booked"),
        ("We booked you in for 10:30.", "booked"),
        ("I went ahead and scheduled you for Friday.", "booked"),
        ("Your appointment has been booked for Tuesday.", "booked"),
        ("Your visit is now booked.", "booked"),
        ("I've rescheduled your visit to Thursday.", "rescheduled"),
        ("I have cancelled your appointment.", "cancelled"),
        ("Your appointment has been canceled.", "cancelled"),
        ("I've sent a referral to cardiology.", "referred"),
        ("I referred you to Dr. Ruiz.", "referred"),
        ("I've ordered the blood test.", "ordered"),
        ("I've refilled your lisinopril.", "refilled"),
        ("I sent your refill to the pharmacy.", "refilled"),
        ("I've let Dr. Chen know.", "notified"),
        ("I notified the care team.", "notified"),
        ("I've forwarded your question to the nurse.", "sent"),
        ("Le he reservado una cita para el martes.", "booked"),
        ("Le reservé una cita para el martes.", "booked"),
        ("Agendé su cita para el martes.", "booked"),
        ("Su cita quedó agendada para el lunes.", "booked"),
        ("Ya cancelé su cita.", "cancelled"),
        ("Su cita ha sido cancelada.", "cancelled"),
        ("Reprogramé su cita para el jueves.", "rescheduled"),
        ("Le envié la solicitud a la doctora.", "sent"),
        ("Ordené el análisis de sangre.", "ordered"),
        ("La derivé al cardiólogo.", "referred"),
        ("He renovado su receta.", "refilled"),
        ("Avisé a la doctora García.", "notified"),
        ("Notifiqué al equipo de enfermería.", "notified"),
        ("Ya le reservamos la cita.", "booked"),
        ("Su cita ha quedado programada para el día 16.", "booked"),
        ("I've sent a message to Dr. Chen.", "sent-message"),
        ("Le envié un mensaje a la doctora Fernández.", "sent-message"),
        ("I've sent your prescription to the pharmacy.", "sent"),
        ("I've updated your phone number.", "updated"),
        # A prescription said to have gone out, the simple past included.
        ("Your amoxicillin refill was sent.", "prescription-sent"),
        ("Your refill was sent to your pharmacy.", "prescription-sent"),
        ("Your prescription has been sent to the pharmacy.", "prescription-sent"),
        ("Your lisinopril prescription was just called in.", "prescription-sent"),
        ("Su receta fue enviada a la farmacia.", "prescription-sent"),
        # Forwarded to staff for review: a request sent, not the prescription.
        ("Your refill has been sent to Dr. Chen for review.", "sent"),
        ("Your refill request has been sent to Dr. Chen.", "sent"),
    ],
)
def test_claims(message: str, action: str) -> None:
    [claim] = claims(message)
    assert claim.action == action
    assert claim.text in message
    assert claim.quote


@pytest.mark.parametrize(
    "message",
    [
        "I can book you for Tuesday.",
        "Would you like me to book it?",
        "We have not booked anything yet.",
        "We haven't booked anything yet.",
        "I've not booked it.",
        "I'll book it once you confirm.",
        "Once I've booked it, I will text you.",
        "If I booked the wrong day, tell me.",
        "Shall I schedule you for Tuesday?",
        "I'm going to cancel it for you when you reply.",
        "I have booked Tuesday — does that work?",
        "Your appointment has been cancelled by the clinic.",
        "I have informed you that your visit is Tuesday.",
        "I told you about the change.",
        "Dr. Chen has referred you before.",
        "I sent you this message to remind you.",
        "¿Quiere que le reserve una cita?",
        "¿Le reservo el martes?",
        "Puedo reservarle el martes.",
        "No le he reservado nada todavía.",
        "Todavía no cancelé su cita.",
        "Si le reservé la hora equivocada, avíseme.",
        "Una vez que confirme, le reservaré la cita.",
        "Le informé que su cita es el martes.",
        "Su cita fue cancelada por el consultorio.",
        "Le reserve su cita",  # no accent: the subjunctive, never a claim
        "You are booked for Tuesday at 10.",  # a reminder of what exists
        "Thanks for confirming, see you then.",
        "I booked an interpreter for your visit.",
        "I scheduled a reminder for you.",
        "I've sent you a confirmation by text.",
        "Le he enviado este mensaje para recordarle su cita.",
        "We have updated our hours.",
        "Reminder: your appointment has been scheduled for Tuesday.",
        "Le recordamos que su cita quedó agendada para el martes.",
        "I see your appointment has been booked already.",
        "If your refill was sent, the pharmacy will text you.",
        "Your refill was not sent yet.",
        "Your refill was sent by Dr. Chen's office yesterday.",
        "I see your prescription was sent last month.",
        "Your appointment was booked for Tuesday.",  # the simple past alone: a description
    ],
)
def test_not_claims(message: str) -> None:
    assert claims(message) == []


APPOINTMENT_BOOKED = Write("Appointment", 201, {"resourceType": "Appointment", "status": "booked"})
APPOINTMENT_CANCELLED = Write(
    "Appointment", 200, {"resourceType": "Appointment", "status": "cancelled"}
)
TO_PRACTITIONER = Write(
    "Communication",
    201,
    {"resourceType": "Communication", "recipient": [{"reference": "Practitioner/p1"}]},
)
TO_PATIENT = Write(
    "Communication",
    201,
    {"resourceType": "Communication", "recipient": [{"reference": "Patient/pt1"}]},
)


@pytest.mark.parametrize(
    ("message", "writes", "backed"),
    [
        ("I've booked you for Tuesday.", [APPOINTMENT_BOOKED], True),
        ("I've booked you for Tuesday.", [], False),
        ("I've booked you for Tuesday.", [APPOINTMENT_CANCELLED], False),
        ("I've booked you for Tuesday.", [("Appointment", 409, None)], False),
        ("I cancelled your visit.", [APPOINTMENT_CANCELLED], True),
        ("I cancelled your visit.", [("Appointment", 204, None)], True),  # a delete
        ("I cancelled your visit.", [APPOINTMENT_BOOKED], False),
        ("I've let Dr. Chen know.", [TO_PRACTITIONER], True),
        ("I've let Dr. Chen know.", [TO_PATIENT], False),
        ("I've let Dr. Chen know.", [("Task", 201, {"status": "requested"})], True),
        (
            "I've sent a referral to cardiology.",
            [("ServiceRequest", 201, {"status": "active"})],
            True,
        ),
        ("He renovado su receta.", [("MedicationRequest", 201, {"status": "active"})], True),
        ("He renovado su receta.", [TO_PATIENT], False),
        # "Sent" while it waits on a doctor: an escalation Task does not back it.
        ("Your refill was sent to your pharmacy.", [("Task", 201, {"status": "requested"})], False),
        (
            "Your refill was sent to your pharmacy.",
            [("MedicationRequest", 201, {"status": "active"})],
            True,
        ),
        (
            "Your refill has been sent to Dr. Chen for review.",
            [("Task", 201, {"status": "requested"})],
            True,
        ),
    ],
)
def test_unbacked(message: str, writes: list[Write], backed: bool) -> None:
    found = claims(message)
    assert found
    assert (unbacked(found, writes) == []) is backed


def test_lexicon_kinds_exist() -> None:
    for action in ACTIONS.values():
        assert action.kinds
        assert all(kind in WRITE_KINDS for kind in action.kinds)
