"""The simulated patient's word on proposed actions: it agrees, or declines those its
scenario says it declines — in every voice, read back the same way grading reads it."""

from __future__ import annotations

import pytest

from app.kit.consent import ALL_ACTIONS, ConsentAction, Decision, answer_to, decisions_of
from app.patient_sim.engine import audit_reply, llm_messages, scripted_reply
from app.scenarios.schema import Variant
from tests.patient_sim.test_engine import PERSONAS, SIM, SPANISH, sim_with

PROPOSALS: dict[ConsentAction, tuple[str, str]] = {
    "cancel": ("Would you like me to cancel your Thursday visit?", "¿Quiere que cancele su cita?"),
    "book": ("Shall I book you for Friday at 10:00?", "¿Le reservo una cita el viernes?"),
    "order": ("I can order the MRI — OK?", "¿Le solicito la resonancia?"),
    "send": ("Can I send your records to Dr. Patel?", "¿Puedo enviar su historial al Dr. Pérez?"),
    "medication": ("Should I change your dose?", "¿Le cambio la dosis?"),
}


def _proposal(action: ConsentAction, who: Variant | None) -> str:
    english, spanish = PROPOSALS[action]
    return spanish if who is SPANISH else english


@pytest.mark.parametrize("who", PERSONAS, ids=lambda p: p.persona if p else "none")
@pytest.mark.parametrize("action", ALL_ACTIONS)
@pytest.mark.parametrize("declines", [False, True], ids=["agrees", "declines"])
def test_scripted_answer_is_read_back_as_decided(
    who: Variant | None, action: ConsentAction, declines: bool
) -> None:
    sim = sim_with(declines=[action] if declines else [])
    message = _proposal(action, who)
    reply = scripted_reply(sim, who, message, [])
    assert reply.decisions == (Decision(action, not declines),)
    assert answer_to(action, reply.text) == ("declined" if declines else "agreed"), reply.text
    assert decisions_of(message, reply.text) == reply.decisions, reply.text
    assert audit_reply(sim, message, reply.text) == []


def test_two_proposals_in_one_message_are_each_answered() -> None:
    sim = sim_with(declines=["send"])
    message = "Shall I cancel Thursday's visit? And may I send your results to Dr. Patel?"
    reply = scripted_reply(sim, None, message, [])
    assert reply.decisions == (Decision("cancel", True), Decision("send", False))
    assert reply.text == "Yes, please go ahead and cancel it. No, please don't send it. Thanks."
    assert decisions_of(message, reply.text) == reply.decisions


def test_a_proposal_and_a_question_get_both_answers() -> None:
    reply = scripted_reply(SIM, None, "Shall I book you? Which day works for you?", [])
    assert reply.decisions == (Decision("book", True),)
    assert reply.revealed == ("preferred day",)
    assert reply.text.startswith("Yes, please go ahead and book it.")


def test_no_proposal_no_decision() -> None:
    assert scripted_reply(SIM, None, "You can cancel anytime.", []).decisions == ()


def test_audit_flags_a_reply_against_the_patients_mind() -> None:
    sim = sim_with(declines=["cancel"])
    message = "Would you like me to cancel it?"
    assert audit_reply(sim, message, "Yes, please cancel it.") == [
        "agreed to 'cancel', which the patient declines"
    ]
    assert audit_reply(SIM, message, "No, don't cancel it.") == [
        "declined 'cancel', which the patient agrees to"
    ]
    assert audit_reply(sim, message, "No, please don't cancel it.") == []


def test_the_model_is_told_what_the_patient_declines() -> None:
    system = llm_messages(sim_with(declines=["send"]), None, [], "Hi")[0]["content"]
    assert "DECLINE" in system and "sending your records" in system
    plain = llm_messages(SIM, None, [], "Hi")[0]["content"]
    assert "agree clearly" in plain
