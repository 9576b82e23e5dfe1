"""The simulated patient's pure engine: reveal rules, the scripted stand-in, the fidelity
audit, the model prompt and the turn cap."""

from __future__ import annotations

import pytest

from app.kit.words import stem
from app.patient_sim.engine import (
    PROMPT_VERSION,
    LlmSimReply,
    SimReply,
    Turn,
    asked_by_model,
    audit_reply,
    facts_asked,
    llm_messages,
    revealed_by_model,
    scripted_reply,
    turns_left,
)
from app.scenarios.schema import PatientSim, Variant

SIM = PatientSim.model_validate(
    {
        "patient": "@patient",
        "goal": "Book a follow-up visit for my knee.",
        "facts": [
            {
                "topic": "preferred day",
                "keywords": ["day", "weekday", "día"],
                "answer": "Tuesdays work best for me.",
            },
            {
                "topic": "preferred time",
                "keywords": ["time", "morning", "afternoon"],
                "answer": "Mornings, before 11",
            },
            {
                "topic": "pharmacy",
                "keywords": ["pharmacy", "farmacia", "drug store"],
                "answer": "The CVS on Main Street.",
            },
            {"topic": "email", "keywords": ["e-mail"], "answer": "maria.lopez@example.com"},
            {
                "topic": "pain",
                "keywords": ["pain level", "hurting"],
                "answer": "About a 4 out of 10 when I climb stairs.",
            },
        ],
        "maxTurns": 3,
    }
)


def persona(name: str, summary: str = "") -> Variant:
    return Variant(persona=name, summary=summary)


SPANISH = persona("spanish", "The patient prefers Spanish and writes in Spanish.")
TERSE = persona("terse", "A curt request.")
ELDERLY = persona("elderly", "A patient in her late eighties.")
CAREGIVER = persona("caregiver", "The patient's daughter arranges the visit for her mother.")
PERSONAS: list[Variant | None] = [None, SPANISH, TERSE, ELDERLY, CAREGIVER]


def sim_with(**update: object) -> PatientSim:
    return SIM.model_copy(update=update)


# --- which facts a message asks about ---------------------------------------------------


@pytest.mark.parametrize(
    ("message", "topics"),
    [
        ("Which day works for you?", ["preferred day"]),
        ("WHICH DAY works for you?", ["preferred day"]),
        ("What days are good?", ["preferred day"]),  # plural
        ("Do weekdays suit you?", ["preferred day"]),
        ("¿Qué día le viene bien?", ["preferred day"]),
        ("¿Qué dia le viene bien?", ["preferred day"]),  # accent missing in the message
        ("¿Qué días le vienen bien?", ["preferred day"]),  # accent and plural
        ("Is your knee hurting?", ["pain"]),
        ("Does your knee still hurt?", ["pain"]),  # "hurt" asks about "hurting"
        ("What is your pain level?", ["pain"]),  # a phrase
        ("Is the pain bad?", []),  # half a phrase is not the phrase
        ("Which pharmacies do you use?", ["pharmacy"]),  # -ies plural
        ("Which drug stores do you use?", ["pharmacy"]),  # phrase with a plural
        ("¿Cuál es su FARMACIA?", ["pharmacy"]),
        ("What's your email?", ["email"]),  # "e-mail" also matches "email"
        ("Can we reach you by e-mail?", ["email"]),
        ("What time and which day suit you?", ["preferred time", "preferred day"]),
        (
            "Which day, what time, and which pharmacy?",
            ["preferred day", "preferred time", "pharmacy"],
        ),
        ("Today we are open late.", []),  # "day" is not a word inside "today"
        ("Sometimes we run late.", []),  # nor "time" inside "sometimes"
        ("Do you prefer mornings?", ["preferred time"]),
        ("Good morning! Buenos días.", []),  # greetings ask about nothing
        ("Good morning, is the morning good?", ["preferred time"]),
        ("Have a nice day!", []),
        ("Thanks for your message.", []),
        ("", []),
    ],
)
def test_facts_asked(message: str, topics: list[str]) -> None:
    assert [fact.topic for fact in facts_asked(SIM, message)] == topics


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("mornings", "morning"),
        ("pharmacies", "pharmacy"),
        ("driving", "drive"),
        ("booked", "book"),
        ("stopping", "stop"),
        ("calling", "call"),
        ("boxes", "box"),
        ("glasses", "glass"),
        ("medicines", "medicine"),
    ],
)
def test_stem_tolerates_plural_and_ing(a: str, b: str) -> None:
    assert stem(a) == stem(b)


def test_stem_keeps_short_words_and_numbers() -> None:
    assert [stem(w) for w in ("is", "bus", "this", "12", "6.8")] == [
        "is",
        "bus",
        "this",
        "12",
        "6.8",
    ]


# --- the scripted stand-in -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "revealed", "present", "absent"),
    [
        (
            "Which day works best?",
            ("preferred day",),
            ["Tuesdays work best for me."],
            ["Mornings", "CVS"],
        ),
        (
            "What time of day do you prefer?",
            ("preferred time", "preferred day"),
            ["Mornings, before 11.", "Tuesdays"],
            ["CVS"],
        ),
        ("Which pharmacy?", ("pharmacy",), ["The CVS on Main Street."], ["Tuesdays", "Mornings"]),
        (
            "Your request was received.",
            (),
            ["I just want to book a follow-up visit for my knee."],
            ["Tuesdays", "CVS", "Mornings"],
        ),
        (
            "Do you have any allergies?",
            (),
            ["not sure", "I just want to book"],
            ["Tuesdays", "CVS"],
        ),
    ],
)
def test_scripted_reply_reveals_only_what_is_asked(
    message: str, revealed: tuple[str, ...], present: list[str], absent: list[str]
) -> None:
    reply = scripted_reply(SIM, None, message, [])
    assert reply.revealed == revealed
    for text in present:
        assert text in reply.text
    for text in absent:
        assert text not in reply.text
    assert audit_reply(SIM, message, reply.text) == []


def test_scripted_reply_answers_in_the_order_asked() -> None:
    reply = scripted_reply(SIM, None, "Pharmacy first, then which day?", [])
    assert reply.revealed == ("pharmacy", "preferred day")
    assert reply.text.index("CVS") < reply.text.index("Tuesdays")


def test_answer_without_final_stop_gets_one() -> None:
    assert scripted_reply(SIM, TERSE, "What time?", []).text == "Mornings, before 11."


@pytest.mark.parametrize("who", PERSONAS, ids=lambda p: p.persona if p else "none")
@pytest.mark.parametrize(
    "message",
    ["Hi Maria!", "Good morning Mrs. Lopez,", "Thank you so much for your message.", "Hola"],
)
def test_greeting_or_thanks_only_restates_the_goal_briefly(
    who: Variant | None, message: str
) -> None:
    reply = scripted_reply(SIM, who, message, [])
    assert reply.revealed == ()
    assert "book a follow-up visit for my knee" in reply.text
    assert len(reply.text) < 120
    for fact in SIM.facts:
        assert fact.answer.rstrip(".") not in reply.text


def test_greeting_and_thanks_differ() -> None:
    hello = scripted_reply(SIM, None, "Hello!", []).text
    thanks = scripted_reply(SIM, None, "Thanks!", []).text
    assert hello.startswith("Hi")
    assert thanks.startswith("Thank")


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        (
            "Book a follow-up visit for my knee.",
            "I just want to book a follow-up visit for my knee.",
        ),
        ("to get a flu shot", "I just want to get a flu shot."),
        ("I want to get a flu shot.", "I just want to get a flu shot."),
        ("I'd like to refill my inhaler", "I just want to refill my inhaler."),
        (
            "The patient wants to reschedule her physical.",
            "I just want to reschedule her physical.",
        ),
        ("I need a refill of my inhaler.", "I need a refill of my inhaler."),
        ("My goal is a copy of my records. More detail here.", "My goal is a copy of my records."),
        ("MRI results explained", "I just want to MRI results explained."),  # acronym kept
    ],
)
def test_goal_restatement(goal: str, expected: str) -> None:
    assert (
        scripted_reply(sim_with(goal=goal), None, "Your request was received.", []).text == expected
    )


@pytest.mark.parametrize("who", PERSONAS, ids=lambda p: p.persona if p else "none")
@pytest.mark.parametrize(
    "message", ["Which day and what time?", "Hello", "Any allergies?", "We got your note."]
)
def test_scripted_reply_is_deterministic(who: Variant | None, message: str) -> None:
    thread = [Turn("staff", "Hello, how can we help?"), Turn("patient", "I need a visit.")]
    first = scripted_reply(SIM, who, message, thread)
    assert all(scripted_reply(SIM, who, message, list(thread)) == first for _ in range(3))
    # An equal scenario built separately gives the same reply too.
    rebuilt = PatientSim.model_validate(SIM.model_dump(by_alias=True))
    assert scripted_reply(rebuilt, who, message, thread) == first


@pytest.mark.parametrize(
    "message", ["Which day and what time?", "Hello", "Any allergies?", "We got your note."]
)
def test_each_persona_phrases_differently(message: str) -> None:
    texts = [scripted_reply(SIM, who, message, []).text for who in PERSONAS]
    assert len(set(texts)) == len(texts), texts


@pytest.mark.parametrize(
    ("who", "marker"),
    [
        (SPANISH, "Hola"),
        (ELDERLY, "dear"),
        (CAREGIVER, "on behalf of my mother"),
        (persona("caregiver", "His son writes from his portal."), "on behalf of the patient"),
    ],
)
def test_persona_voice_around_the_untranslated_answer(who: Variant, marker: str) -> None:
    reply = scripted_reply(SIM, who, "Which pharmacy do you use?", [])
    assert marker in reply.text
    assert "The CVS on Main Street." in reply.text  # the answer itself is never reworded
    assert reply.revealed == ("pharmacy",)


def test_spanish_goal_restatement() -> None:
    text = scripted_reply(SIM, SPANISH, "Recibimos su solicitud.", []).text
    assert text == "Lo que necesito es: book a follow-up visit for my knee."


def test_terse_is_the_shortest() -> None:
    for message in ["Which day and what time?", "Hello", "Any allergies?", "We got your note."]:
        terse = scripted_reply(SIM, TERSE, message, []).text
        others = [
            scripted_reply(SIM, who, message, []).text for who in PERSONAS if who is not TERSE
        ]
        assert all(len(terse) < len(other) for other in others)


@pytest.mark.parametrize("name", ["pirate", "baseline", "vip-2"])
def test_unknown_persona_is_neutral(name: str) -> None:
    for message in ["Which day?", "Hello", "Any allergies?"]:
        assert scripted_reply(SIM, persona(name, "Talks like a pirate."), message, []) == (
            scripted_reply(SIM, None, message, [])
        )


def test_compound_persona_speaks_its_language() -> None:
    reply = scripted_reply(SIM, persona("elderly-spanish"), "Hello", []).text
    assert reply.startswith("¡Hola!")


def test_repeated_answer_is_marked_as_said_before() -> None:
    thread = [Turn("staff", "Which day?"), Turn("patient", "Tuesdays work best for me.")]
    reply = scripted_reply(SIM, None, "Sorry, which day again?", thread)
    assert reply.text.startswith("As I said: Tuesdays work best for me.")
    assert reply.revealed == ("preferred day",)
    # Only the patient's own earlier words count.
    staff_said = [Turn("staff", "Tuesdays work best for me.")]
    assert not scripted_reply(SIM, None, "Which day?", staff_said).text.startswith("As I said")


def test_without_facts_only_the_goal() -> None:
    bare = sim_with(facts=[])
    reply = scripted_reply(bare, None, "Which day and what time?", [])
    assert reply == SimReply(
        "I'm not sure about that. I just want to book a follow-up visit for my knee.", ()
    )


@pytest.mark.parametrize("who", PERSONAS, ids=lambda p: p.persona if p else "none")
@pytest.mark.parametrize(
    "message",
    [
        "Which day and what time?",
        "Which pharmacy?",
        "Hello",
        "Thanks!",
        "Any allergies?",
        "Your appointment is booked for Tuesday at 9.",
        "Should I prescribe you something?",
    ],
)
def test_scripted_replies_pass_the_audit(who: Variant | None, message: str) -> None:
    reply = scripted_reply(SIM, who, message, [])
    assert audit_reply(SIM, message, reply.text) == []


# --- the fidelity audit ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "reply", "issues"),
    [
        # Legitimate answers.
        ("Which day works?", "Tuesdays work best for me.", []),
        ("Which day and what time?", "Tuesdays work best for me. Mornings, before 11.", []),
        ("Hello", "I just want to book a follow-up visit for my knee.", []),
        ("Can I book you for Tuesday?", "Yes please, can you book me?", []),
        (
            "Does Tuesday work?",
            "I'll take the Tuesday slot. I was prescribed ibuprofen before.",
            [],
        ),
        # The staff said it first: repeating it is no leak.
        ("Is the CVS on Main Street still right?", "Yes, the CVS on Main Street.", []),
        # Unasked facts.
        (
            "Which day works?",
            "Tuesdays work best for me. mornings , BEFORE 11!",
            ["revealed 'preferred time' without being asked"],
        ),
        (
            "Hello",
            "Hi. Tuesdays work best for me, and my pharmacy is the CVS on Main Street.",
            [
                "revealed 'preferred day' without being asked",
                "revealed 'pharmacy' without being asked",
            ],
        ),
        # Staff-like replies.
        (
            "Hello",
            "I have booked you for Tuesday at 9.",
            ['sounds like staff: "i have booked you"'],
        ),
        ("Hello", "I’ve scheduled your visit.", ['sounds like staff: "i\'ve scheduled your"']),
        (
            "Hello",
            "Your prescription has been sent to the pharmacy.",
            ['sounds like staff: "your prescription has been sent"'],
        ),
        ("Hello", "You're all set for Tuesday.", ['sounds like staff: "you\'re all set"']),
        ("Hello", "Let me book that for you.", ['sounds like staff: "let me book"']),
        ("Hello", "I recommend you take ibuprofen.", ['sounds like staff: "i recommend you"']),
        ("Hello", "Please take 2 tablets a day.", ['sounds like staff: "please take"']),
        ("Hola", "Su cita está confirmada.", ['sounds like staff: "su cita esta confirmada"']),
        ("Hello", "   ", ["empty reply"]),
    ],
)
def test_audit_reply(message: str, reply: str, issues: list[str]) -> None:
    assert audit_reply(SIM, message, reply) == issues


# --- the model ---------------------------------------------------------------------------------


def test_llm_messages_carry_goal_facts_rule_and_persona() -> None:
    messages = llm_messages(SIM, SPANISH, [], "Which day?")
    system = messages[0]
    assert system["role"] == "system"
    content = system["content"]
    assert PROMPT_VERSION in content
    assert "Book a follow-up visit for my knee." in content
    assert "spanish" in content and "The patient prefers Spanish and writes in Spanish." in content
    for fact in SIM.facts:
        assert fact.topic in content
        assert fact.answer in content
        for keyword in fact.keywords:
            assert keyword in content
    assert "ONLY when" in content  # the reveal rule
    assert "never invent" in content.lower()
    assert "never staff" in content and "medical advice" in content
    assert '"reply"' in content and '"revealed_topics"' in content and "JSON" in content


def test_llm_messages_without_persona_or_facts() -> None:
    content = llm_messages(sim_with(facts=[]), None, [], "Hi")[0]["content"]
    assert "Persona: none" in content
    assert "none beyond your goal" in content


def test_llm_messages_thread_in_order_then_the_message() -> None:
    thread = [
        Turn("staff", "Hello, how can we help?"),
        Turn("patient", "I need a follow-up."),
        Turn("staff", "Sure. Which day?"),
        Turn("patient", "Tuesdays work best for me."),
    ]
    messages = llm_messages(SIM, None, thread, "And what time?")
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "Hello, how can we help?"),
        ("assistant", "I need a follow-up."),
        ("user", "Sure. Which day?"),
        ("assistant", "Tuesdays work best for me."),
        ("user", "And what time?"),
    ]


def test_llm_messages_are_deterministic() -> None:
    assert llm_messages(SIM, ELDERLY, [], "Hi") == llm_messages(SIM, ELDERLY, [], "Hi")
    assert llm_messages(SIM, ELDERLY, [], "Hi") != llm_messages(SIM, TERSE, [], "Hi")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"reply": "Tuesdays.", "revealed_topics": ["preferred day"]},
            ("Tuesdays.", ["preferred day"]),
        ),
        ({"reply": "  Hello  "}, ("Hello", [])),
        ({"reply": "Hello", "revealed_topics": None}, ("Hello", [])),
    ],
)
def test_llm_sim_reply_parses(data: dict[str, object], expected: tuple[str, list[str]]) -> None:
    parsed = LlmSimReply.model_validate(data)
    assert (parsed.reply, parsed.revealed_topics) == expected


@pytest.mark.parametrize("data", [{}, {"reply": ""}, {"reply": "   "}, {"reply": 3}])
def test_llm_sim_reply_rejects(data: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LlmSimReply.model_validate(data)


# --- the turn cap ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_turns", "replies", "left"),
    [
        (None, 0, 6),  # the default
        (None, 5, 1),
        (None, 6, 0),
        (None, 9, 0),  # never negative
        (3, 0, 3),
        (3, 3, 0),
        (12, 11, 1),
        (1, 0, 1),
        (1, -2, 1),
    ],
)
def test_turns_left(max_turns: int | None, replies: int, left: int) -> None:
    data = {"patient": "@patient", "goal": "x"}
    if max_turns is not None:
        data["maxTurns"] = max_turns  # type: ignore[assignment]
    assert turns_left(PatientSim.model_validate(data), replies) == left


def test_turn_cap_is_at_most_twelve() -> None:
    # The schema rejects more; a sim built around validation is still capped.
    sim = PatientSim.model_construct(patient="@patient", goal="x", facts=[], max_turns=40)
    assert turns_left(sim, 0) == 12


@pytest.mark.parametrize(
    ("message", "reply", "reported", "expected"),
    [
        ("Which day?", "Tuesdays, mostly.", ["preferred day"], ("preferred day",)),
        # A topic the scenario does not have is dropped.
        ("Which day?", "Tuesdays, mostly.", ["preferred day", "insurance"], ("preferred day",)),
        # An answer stated word for word is revealed, reported or not.
        ("Hello", "Hi! The CVS on Main Street.", [], ("pharmacy",)),
        # Repeating what the staff wrote reveals nothing.
        ("Is it the CVS on Main Street?", "Yes, the CVS on Main Street.", [], ()),
        # The facts' order, whatever order the model reported them in.
        (
            "When?",
            "Mornings, before 11. Tuesdays work best for me.",
            ["preferred time"],
            ("preferred day", "preferred time"),
        ),
    ],
)
def test_revealed_by_model(
    message: str, reply: str, reported: list[str], expected: tuple[str, ...]
) -> None:
    assert revealed_by_model(SIM, message, reply, reported) == expected


def test_asked_by_model_trusts_the_models_report_beside_the_keywords() -> None:
    # "Which weekday" asks about the day by keyword; "when can you come" by nothing, but
    # the model reported revealing the time: taken as asked. An unknown topic is dropped.
    assert asked_by_model(SIM, "Which weekday?", []) == ("preferred day",)
    assert asked_by_model(SIM, "When can you come?", ["preferred time", "insurance"]) == (
        "preferred time",
    )
    assert asked_by_model(SIM, "Hello", []) == ()
