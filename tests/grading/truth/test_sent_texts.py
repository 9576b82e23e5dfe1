"""Captured SMS and e-mail among the texts text truth reads: each as one text, written to
the patient when it went to a fixture patient's phone (by its digits) or e-mail, else
to staff; an empty body is no text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.grading.snapshot import RunSnapshot, SentText
from app.grading.truth.texts import texts_of

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PATIENT = {
    "resourceType": "Patient",
    "id": "p1",
    "telecom": [
        {"system": "phone", "value": "+1 (555) 014-2000"},
        {"system": "email", "value": "Alex.Rivera@example.com"},
    ],
}


def _snapshot(*sent: SentText) -> RunSnapshot:
    return RunSnapshot(
        run_id="run_x",
        started_at=T0,
        now=T0 + timedelta(minutes=5),
        deadline=T0 + timedelta(hours=1),
        fixture={"patient": "Patient/p1"},
        current={"patient": PATIENT},
        patient_refs=frozenset({"Patient/p1"}),
        sent=list(sent),
    )


def test_sent_texts_are_read_with_their_audience_in_order() -> None:
    snapshot = _snapshot(
        SentText(
            "email:e1",
            "email",
            T0 + timedelta(minutes=2),
            "gp@example.org, alex.rivera@EXAMPLE.com ",
            "B",
        ),
        SentText("sms:SM1", "sms", T0 + timedelta(minutes=1), "15550142000", "A"),
        SentText("sms:SM2", "sms", T0 + timedelta(minutes=3), "+1 555 0199 999", "C"),
        SentText("sms:SM3", "sms", T0 + timedelta(minutes=4), "15550142000", "   "),
    )
    read = [(t.ref, t.audience, t.where, t.text) for t in texts_of(snapshot)]
    assert read == [
        ("sms:SM1", "patient", "sms", "A"),
        ("email:e1", "patient", "email", "B"),
        ("sms:SM2", "staff", "sms", "C"),
    ]
