"""Folding and phrase matching: case, accents, whitespace, apostrophes and dashes."""

from __future__ import annotations

import pytest

from app.kit.phrases import find_phrase, find_phrases, fold, quote


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Hello  World", "hello world"),
        ("  leading and trailing \n", "leading and trailing"),
        ("MAÑANA a las diez", "manana a las diez"),
        ("Médico\tgeneral", "medico general"),
        ("we’re", "we're"),
        ("we‘re", "we're"),
        ("10–11 am", "10-11 am"),
        ("in—person", "in-person"),
        ("Ｆｕｌｌ", "full"),
        ("Straße", "strasse"),
    ],
)
def test_fold(text: str, folded: str) -> None:
    assert fold(text).text == folded


def test_fold_keeps_accents_when_asked() -> None:
    assert fold("Reservé su CITA", keep_accents=True).text == "reservé su cita"


@pytest.mark.parametrize(
    ("phrase", "message", "matched"),
    [
        ("20 mg", "Take 20   MG daily", "20   MG"),
        ("manana", "Le esperamos MAÑANA", "MAÑANA"),
        ("mañana", "Le esperamos manana", "manana"),
        ("we're", "We’re all set", "We’re"),
        ("free", "Enjoy your freedom", "free"),  # as text, by design
        ("follow-up", "your follow–up visit", "follow–up"),
        ("dr. chen", "with Dr.  Chen on Tuesday", "Dr.  Chen"),
    ],
)
def test_find_phrase_matches(phrase: str, message: str, matched: str) -> None:
    match = find_phrase(phrase, message)
    assert match is not None
    assert match.matched == matched
    assert message[match.start : match.end] == matched


@pytest.mark.parametrize(
    ("phrase", "message"),
    [("20 mg", "Take 2 mg"), ("booked", "We can book you"), ("", "anything")],
)
def test_find_phrase_misses(phrase: str, message: str) -> None:
    assert find_phrase(phrase, message) is None


def test_find_phrases_names_each_message() -> None:
    found = find_phrases(["cita", "martes"], ["Su cita es el martes", "Otra CITA"])
    assert [m.message_index for m in found["cita"]] == [0, 1]
    assert [m.message_index for m in found["martes"]] == [0]


def test_quote_cuts_at_words() -> None:
    text = "word " * 30 + "TARGET " + "more " * 30
    start = text.index("TARGET")
    q = quote(text, start, start + 6, context=20)
    assert q.startswith("…") and q.endswith("…")
    assert "TARGET" in q
    assert len(q) < 60


def test_quote_whole_short_message() -> None:
    assert quote("See you  Tuesday", 9, 16) == "See you Tuesday"
