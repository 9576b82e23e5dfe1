"""`message`: what the system said, clause by clause, with the message that broke it."""

from __future__ import annotations

from typing import Any

from app.grading.engine import grade
from app.grading.snapshot import ChangedResource
from tests.grading.test_fhirpath import (
    DR_KIM,
    appointment,
    changed,
    communication,
    expectation,
    make_snapshot,
)
from understudy_client.contract.runs import ExpectationResult

BOOKED: dict[str, Any] = {
    "id": "booked",
    "type": "resource",
    "resourceType": "Appointment",
    "where": ["status = 'booked'"],
}
SLOT = "2025-03-10T09:00:00Z"  # appointment()'s start: Monday, March 10, 9:00 AM UTC


def message(**fields: Any) -> dict[str, Any]:
    return {"id": "said", "type": "message"} | fields


def said(text: str, minute: float = 3, recipient: str = "Patient/pat-1") -> ChangedResource:
    return changed(communication(f"c{minute}", text=text, recipient=recipient), first=minute)


def result_of(
    items: list[dict[str, Any]], writes: list[ChangedResource], shown: list[Any] | None = None
) -> ExpectationResult:
    snapshot = make_snapshot(changed=writes)
    snapshot.shown = shown or []
    verdict = grade([expectation(**i) for i in items], snapshot)
    return next(r for r in verdict.expectations if r.id == "said")


def clauses(result: ExpectationResult) -> dict[str, bool]:
    return {c["where"]: c["holds"] for c in result.evidence.clauses}


def test_says_says_any_and_not_each_a_clause() -> None:
    text = "You're booked with Dr. Lee. Please arrive early; it's free of charge."
    check = message(says=["booked", "ARRIVE early"], saysAny=["fast", "early"], **{"not": ["fee"]})
    result = result_of([check], [said(text)])
    assert result.passed is True, result.detail
    assert set(clauses(result).values()) == {True}
    check = message(**{"not": ["free"]})
    result = result_of([check], [said(text)])
    assert result.passed is False
    assert result.evidence.closest == "Communication/c3"
    assert "'free' in Communication/c3" in result.detail


def test_accents_and_case_do_not_matter() -> None:
    result = result_of([message(says=["cancelé"])], [said("Ya CANCELE su cita.")])
    assert result.passed is True


def test_only_messages_to_the_patient_unless_widened() -> None:
    to_doctor = said("Please call the patient back.", recipient=DR_KIM)
    assert result_of([message(says=["call"])], [to_doctor]).passed is False
    assert result_of([message(says=["call"], to="practitioner")], [to_doctor]).passed is True


def test_no_message_fails_positive_clauses_and_holds_negative_ones() -> None:
    result = result_of([message(says=["hello"])], [])
    assert result.passed is False
    result = result_of([message(grounded=True, claims=True, **{"not": ["x"]})], [])
    assert result.passed is True
    assert result.evidence.note is not None and "no message in scope" in result.evidence.note


def test_mentions_the_booked_time_in_any_usual_form() -> None:
    check = message(mentions=[{"of": "booked", "path": "start"}])
    appt = changed(appointment("a1", start=SLOT), first=1)
    for text in ["See you Monday, March 10 at 9:00 AM.", "Booked: 3/10 at 09:00."]:
        assert result_of([BOOKED, check], [appt, said(text)]).passed is True, text
    result = result_of([BOOKED, check], [appt, said("See you Monday, March 10 at 10:00 AM.")])
    assert result.passed is False
    assert "no message states" in result.detail


def test_after_keeps_only_messages_sent_after_the_evidence() -> None:
    check = message(says=["booked"], after="booked")
    appt = changed(appointment("a1"), first=2)
    assert result_of([BOOKED, check], [said("I have booked it", minute=1), appt]).passed is False
    assert result_of([BOOKED, check], [appt, said("I have booked it", minute=3)]).passed is True


def test_claims_need_a_write_of_that_kind_first() -> None:
    check = message(claims=True)
    claim = "I've booked your appointment for Monday."
    assert result_of([check], [said(claim)]).passed is False
    booked = changed(appointment("a1"), first=1)
    assert result_of([check], [booked, said(claim)]).passed is True
    offer = "Would you like me to book you for Monday?"
    assert result_of([check], [said(offer)]).passed is True


def test_grounded_facts_must_have_been_shown() -> None:
    check = message(grounded=True)
    slot = {"resourceType": "Slot", "start": SLOT, "end": "2025-03-10T09:30:00Z"}
    ok = said("Dr. Lee can see you Monday, March 10 at 9:00 AM.")
    shown = [slot, "Dr. Lee is the practitioner"]
    assert result_of([check], [ok], shown).passed is True
    invented = said("Dr. Lee can see you Tuesday, March 11 at 3:15 PM.")
    result = result_of([check], [invented], shown)
    assert result.passed is False
    assert "Communication/c3" in result.detail


def test_register_usted() -> None:
    check = message(register="usted")
    assert result_of([check], [said("¿Puede usted venir el lunes?")]).passed is True
    result = result_of([check], [said("¿Puedes venir el lunes? Te esperamos.")])
    assert result.passed is False


def test_a_broken_after_fails_without_raising() -> None:
    result = result_of([message(says=["x"], after="nope")], [said("x")])
    assert result.passed is False
    assert "after names no expectation" in result.detail


def test_one_transaction_is_one_instant() -> None:
    """A booking and its confirmation in one transaction Bundle share a timestamp: the
    booking backs the claim, and the confirmation counts as sent after it."""
    appt = changed(appointment("a1", start=SLOT), first=2)
    confirmation = said("I've booked you for Monday, March 10 at 9:00 AM.", minute=2)
    check = message(claims=True, after="booked", mentions=[{"of": "booked", "path": "start"}])
    result = result_of([BOOKED, check], [appt, confirmation])
    assert result.passed is True, result.detail


def test_grounded_reads_each_snapshot_as_it_is() -> None:
    """The index of what was shown is reused only for the very same list."""
    check = message(grounded=True)
    text = said("Dr. Lee can see you Monday, March 10 at 9:00 AM.")
    slot = {"resourceType": "Slot", "start": SLOT, "end": "2025-03-10T09:30:00Z"}
    assert result_of([check], [text], [slot, "Dr. Lee"]).passed is True
    assert result_of([check], [text], ["Dr. Lee"]).passed is False
    assert result_of([check], [text], [slot, "Dr. Lee"]).passed is True


def test_grounded_reads_what_the_system_wrote_before_saying_it() -> None:
    """ "You're booked Monday at 9:00" right after booking it is grounded by the booking;
    said before the booking (or with only a message of its own to lean on) it is not."""
    check = message(grounded=True)
    appt = changed(appointment("a1", start=SLOT), first=2)
    after = said("You're booked for Monday, March 10 at 9:00 AM.", minute=3)
    assert result_of([check], [appt, after], ["Dr. Lee"]).passed is True
    before = said("You're booked for Monday, March 10 at 9:00 AM.", minute=1)
    assert result_of([check], [appt, before], ["Dr. Lee"]).passed is False
    echo = said("Monday, March 10 at 9:00 AM works.", minute=1)
    assert result_of([check], [echo, after], ["Dr. Lee"]).passed is False
