"""ConText on our sentences: each fact's context in English and Spanish."""

from __future__ import annotations

import pytest

from app.grading.truth.context import contexts, language_of, sentences


def _context(text: str, target: str, nth: int = 0) -> str:
    start = -1
    for _ in range(nth + 1):
        start = text.index(target, start + 1)
    return contexts(text, [(start, start + len(target))])[0]


@pytest.mark.parametrize(
    ("text", "target", "context"),
    [
        ("Your dose is lisinopril 10 mg once a day (not 20 mg).", "20 mg", "negated"),
        ("Your dose is lisinopril 10 mg once a day (not 20 mg).", "10 mg", "asserted"),
        ("Dr. Chen increased it from 10 mg at your last check.", "10 mg", "historical"),
        ("Dr. Chen increased it from 10 mg to 20 mg.", "20 mg", "asserted"),
        ("You used to take 20 mg.", "20 mg", "historical"),
        ("If it gets worse, take 20 mg.", "20 mg", "hypothetical"),
        ("Your mother takes 20 mg.", "20 mg", "other"),
        ("Would Friday at 9:00 work for you?", "9:00", "hypothetical"),
        ("You're booked Friday at 9:00. Reply here if you need to change it.", "9:00", "asserted"),
        ("We haven't sent a refill of ibuprofen.", "ibuprofen", "negated"),
        ("Su dosis es 10 mg, no 20 mg.", "20 mg", "negated"),
        ("Su dosis es 10 mg, no 20 mg.", "10 mg", "asserted"),
        ("Antes tomaba 20 mg.", "20 mg", "historical"),
        ("Si empeora, llame al 911.", "911", "hypothetical"),
        ("¿Le viene bien el viernes a las 9:00?", "9:00", "hypothetical"),
        # A clinic's name is no relative, and a sign-off ends a sentence.
        (
            "Call us. — Riverside Family Health\nPlease double your warfarin.",
            "warfarin",
            "asserted",
        ),
    ],
)
def test_context(text: str, target: str, context: str) -> None:
    assert _context(text, target) == context


def test_a_trigger_reaches_only_its_own_sentence() -> None:
    text = "If you notice bleeding, call us.\nYour dose is 5 mg."
    assert _context(text, "5 mg") == "asserted"


def test_language() -> None:
    assert language_of("Su cita con la doctora es el martes.") == "es"
    assert language_of("Antes tomaba 20 mg.") == "es"
    assert language_of("Your appointment is on Tuesday.") == "en"


def test_sentences_skip_abbreviations() -> None:
    text = "See Dr. Chen at 9 a.m. tomorrow. Bring your list.\nThanks — Riverside"
    spans = [text[a:b].strip() for a, b in sentences(text)]
    assert spans[0] == "See Dr. Chen at 9 a.m. tomorrow."
    assert spans[1] == "Bring your list."
