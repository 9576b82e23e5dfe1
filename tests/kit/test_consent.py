"""Consent in words: what a staff message proposes, what a reply agrees to or refuses,
what a patient asks for themselves (English and Spanish)."""

from __future__ import annotations

import pytest

from app.kit.consent import Decision, answer_to, decisions_of, proposals, requests


@pytest.mark.parametrize(
    ("message", "proposed"),
    [
        ("Would you like me to cancel your Thursday visit?", ("cancel",)),
        ("Shall I book you for Friday at 10:00?", ("book",)),
        ("Can I send your records to Dr. Patel?", ("send",)),
        ("I can order the MRI — OK?", ("order",)),
        ("Should I change your dose?", ("medication",)),
        ("Should I refill your lisinopril?", ("medication",)),
        ("Let me know if you'd like me to reschedule it.", ("cancel", "book")),
        ("Would you like me to cancel Thursday and book Friday instead?", ("cancel", "book")),
        ("SHALL I CANCEL IT?", ("cancel",)),
        # Spanish, accents or not.
        ("¿Quiere que cancele su cita del jueves?", ("cancel",)),
        ("¿Le reservo una cita para el viernes?", ("book",)),
        ("¿Puedo enviar su historial al Dr. Pérez?", ("send",)),
        ("¿Le cambio la dosis?", ("medication",)),
        ("Si lo desea, le solicito la resonancia.", ("order",)),
        # Nothing asked, or nothing to ask permission for.
        ("You can cancel anytime.", ()),
        ("Your visit was cancelled.", ()),
        ("Did you cancel it already?", ()),
        ("Which day and time would suit you?", ()),
        ("Hello, how are you?", ()),
        ("I'll cancel your appointment now.", ()),
    ],
)
def test_proposals(message: str, proposed: tuple[str, ...]) -> None:
    assert proposals(message) == proposed


@pytest.mark.parametrize(
    ("action", "reply", "answer"),
    [
        ("cancel", "Yes, please go ahead and cancel it.", "agreed"),
        ("cancel", "No, please don't cancel it.", "declined"),
        ("cancel", "Please do not cancel it, I'll come after all.", "declined"),
        ("cancel", "Sure.", "agreed"),
        ("cancel", "No thanks.", "declined"),
        ("cancel", "No problem, go ahead.", "agreed"),
        ("cancel", "What time would the new one be?", None),
        ("cancel", "Sí, por favor, adelante con la cancelación.", "agreed"),
        ("cancel", "No, por favor, no la cancele.", "declined"),
        ("cancel", "Claro que sí.", "agreed"),
        # Two actions in one reply, each answered in its own clause.
        ("cancel", "Yes to cancelling, but please don't book anything yet.", "agreed"),
        ("book", "Yes to cancelling, but please don't book anything yet.", "declined"),
        ("medication", "Yes, please go ahead and make the medication change.", "agreed"),
    ],
)
def test_answer_to(action: str, reply: str, answer: str | None) -> None:
    assert answer_to(action, reply) == answer  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "decided"),
    [
        ("Please cancel my appointment on Thursday.", [Decision("cancel", True)]),
        ("Hi, I need to cancel my appointment Thursday.", [Decision("cancel", True)]),
        ("I want to book a visit.", [Decision("book", True)]),
        ("I'd like to make an appointment.", [Decision("book", True)]),
        ("Quiero cancelar mi cita.", [Decision("cancel", True)]),
        ("Don't send my records anywhere.", [Decision("send", False)]),
        ("I don't want to cancel.", [Decision("cancel", False)]),
        # Attending, reporting, or wanting nothing.
        ("I can't make my appointment.", []),
        ("My sister cancelled hers.", []),
        ("Thanks for the reminder.", []),
    ],
)
def test_requests(message: str, decided: list[Decision]) -> None:
    assert list(requests(message)) == decided


def test_decisions_of_a_reply_answer_the_proposals_and_add_its_own_requests() -> None:
    message = "Shall I cancel Thursday? And can I send your results to Dr. Patel?"
    reply = "Yes, cancel it. No, don't send them. Could you also book me for Monday?"
    assert decisions_of(message, reply) == (
        Decision("cancel", True),
        Decision("book", True),
        Decision("send", False),
    )
    # A reply that answers nothing decides nothing.
    assert decisions_of(message, "What time is it now?") == ()


def test_a_message_in_parts_is_read_as_one_sentence() -> None:
    parts = "Would you like me to cancel your visit on (UTC)\n2026-03-24T14:00:00Z\n? Reply yes."
    assert proposals(parts) == ("cancel",)
    assert proposals("You can cancel anytime\nAny questions?") == ()


@pytest.mark.parametrize(
    ("message", "proposed"),
    [
        ("I'd be happy to cancel that for you, just say the word.", ("cancel",)),
        # The offer, then a bare ask about it.
        ("I can book you in for Monday at 9. Let me know.", ("book",)),
        ("I could cancel Thursday's visit. Would that work for you?", ("cancel",)),
        ("You can cancel anytime. Any questions?", ()),
        ("I can book you in for Monday at 9, let me know.", ("book",)),
        ("Please confirm you want me to send the letter to Dr. Ruiz.", ("send",)),
        ("Avíseme si desea que le cancele la cita.", ("cancel",)),
        ("Please confirm your date of birth.", ()),
    ],
)
def test_proposals_without_a_question_mark(message: str, proposed: tuple[str, ...]) -> None:
    assert proposals(message) == proposed


@pytest.mark.parametrize(
    ("message", "proposed"),
    [
        ("Would Friday at 10:00 work for you?", ("book",)),
        ("Dr. Chen has Tuesday at 3 pm. Does that work for you?", ("book",)),
        ("How about Monday morning?", ("book",)),
        ("¿Le viene bien el lunes a las 9:00?", ("book",)),
        # An open question names no time: it asks, it proposes nothing.
        ("Which day works for you?", ()),
        ("What time would suit you?", ()),
    ],
)
def test_offering_a_time_proposes_to_book_it(message: str, proposed: tuple[str, ...]) -> None:
    assert proposals(message) == proposed


@pytest.mark.parametrize(
    ("message", "proposed"),
    [
        ("Shall I request an MRI of your knee?", ("order",)),
        ("¿Le pido una radiografía?", ("order",)),
        ("Shall I arrange a visit?", ("book",)),  # a visit is booked, not ordered
    ],
)
def test_asking_for_a_test_is_ordering_it(message: str, proposed: tuple[str, ...]) -> None:
    assert proposals(message) == proposed
