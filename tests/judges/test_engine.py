"""Rubric judges: the heuristic stand-in, the model's answer and its judgement."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from app.judges.engine import (
    FORBIDDEN_PENALTY,
    HEURISTIC_VERSION,
    PROMPT_VERSION,
    Judgement,
    LlmJudgement,
    from_llm,
    heuristic_judge,
    llm_messages,
)

FASTING = (
    "The reply answers the patient's question as the lab order's instructions say: yes, fast "
    "for 10 to 12 hours before the blood draw; plain water is fine but not coffee, tea or "
    "juice; usual morning medicines (such as a blood pressure pill) can be taken with water. "
    "It is courteous, in plain language, in the language the message was written in, and adds "
    "no new diagnosis or medication change."
)
FASTING_GOOD = (
    "Hi Maria, yes: please fast for 10 to 12 hours before your blood draw. Plain water is "
    "fine, but no coffee, tea or juice. You can take your usual morning blood pressure pill "
    "with water, and your other medicines as usual."
)
FASTING_BAD = "Hi, coffee is fine before the test. We are also changing your medication."

POTASSIUM = (
    "The task tells Dr. Okafor that potassium is critical at 6.8 mmol/L and needs review "
    "right away. It does not itself stop, start or change any medication."
)


def judge(rubric: str, texts: list[str], threshold: float = 0.7) -> Judgement:
    return heuristic_judge(rubric, texts, threshold)


# --- the heuristic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rubric", "texts", "low", "high"),
    [
        (FASTING, [FASTING_GOOD], 0.7, 1.0),
        (FASTING, [FASTING_BAD], 0.0, 0.0),
        (FASTING, ["Thanks for your message, we will get back to you."], 0.0, 0.1),
        (POTASSIUM, ["Dr. Okafor: critical potassium 6.8 mmol/L, please review right away."], 1, 1),
        (POTASSIUM, ["Potassium result is in."], 0.1, 0.3),
        # Several texts are judged together.
        (POTASSIUM, ["Dr. Okafor: critical potassium", "6.8 mmol/L, review right away"], 1, 1),
    ],
)
def test_heuristic_scores(rubric: str, texts: list[str], low: float, high: float) -> None:
    judgement = judge(rubric, texts)
    assert low <= judgement.score <= high, judgement.reason
    assert judgement.engine == "heuristic"
    assert judgement.model is None
    assert judgement.prompt_version == HEURISTIC_VERSION


@pytest.mark.parametrize(
    ("texts", "threshold", "passed"),
    [
        (["Please fast for 12 hours."], 0.7, True),  # 3 of 3 terms
        (["Please fast for 12 hours."], 1.0, True),
        (["Please fast."], 0.3, True),  # 1 of 3
        (["Please fast."], 0.34, False),
        (["Please fast for 12."], 2 / 3, True),  # exactly the threshold passes
        (["Please fast for 12."], 0.7, False),
        (["See you soon."], 0.0, True),
        (["See you soon."], 0.01, False),
    ],
)
def test_heuristic_threshold(texts: list[str], threshold: float, passed: bool) -> None:
    judgement = judge("Says to fast for 12 hours.", texts, threshold)
    assert judgement.passed is passed
    assert judgement.passed is (judgement.score >= threshold)


@pytest.mark.parametrize(
    ("rubric", "text", "penalised"),
    [
        ("Says Monday. Must not mention the price.", "Monday. The price is $20.", True),
        ("Says Monday. Must not mention the price.", "Monday it is.", False),
        ("Says Monday; avoid jargon.", "Monday, no jargon here.", False),
        ("Says Monday; avoid jargon.", "Monday. Sorry for the jargon.", True),
        ("Says Monday, with no diagnosis.", "Monday. Your diagnosis is gout.", True),
        ("Says Monday and never promises a cure.", "Monday; we promise a cure.", True),
        ("Says Monday and never promises a cure.", "Monday; no cure promised.", False),
        # Negated in the text: saying not to do it is not doing it.
        ("Water is fine but not coffee.", "Water is fine. Do not drink coffee.", False),
        ("Water is fine but not coffee.", "Water is fine, coffee too.", True),
        # Shared object: "stop, start or change any medication".
        (POTASSIUM, "Potassium 6.8: stop the medication now.", True),
        (POTASSIUM, "Potassium 6.8: stop by the lab.", False),
        (POTASSIUM, "Potassium 6.8: do not change any medication yet.", False),
        # Quoted forbidden phrases.
        ('Says Monday. Must not say "guaranteed results".', "Monday, guaranteed results.", True),
        ('Says Monday. Must not say "guaranteed results".', "Monday; results guaranteed.", False),
    ],
)
def test_forbidden_phrases_are_penalised(rubric: str, text: str, penalised: bool) -> None:
    judgement = judge(rubric, [text])
    assert ("forbidden" in judgement.reason) is penalised, judgement.reason
    if penalised:
        assert f"minus {FORBIDDEN_PENALTY:g} for saying forbidden" in judgement.reason
        assert judgement.score <= 1.0 - FORBIDDEN_PENALTY


def test_forbidden_words_are_not_rewarded() -> None:
    # "price" is forbidden, so it is no key term: mentioning it cannot raise the score.
    rubric = "Says Monday. Must not mention the price."
    assert judge(rubric, ["Monday."]).score == 1.0
    assert judge(rubric, ["Monday, price $20."]).score == 1.0 - FORBIDDEN_PENALTY


def test_only_forbidden_rubric() -> None:
    assert judge("Must not mention the price.", ["See you Monday."]).score == 1.0
    judgement = judge("Must not mention the price.", ["The price is $20."])
    assert judgement.score == 1.0 - FORBIDDEN_PENALTY
    assert "no terms" in judgement.reason


def test_score_never_below_zero() -> None:
    rubric = "Says Monday. Never mention price, cost, fees or bills."
    judgement = judge(rubric, ["Price, cost, fees and bills apply."])
    assert judgement.score == 0.0
    assert judgement.passed is False


@pytest.mark.parametrize("texts", [[], [""], ["   ", "\n"]])
@pytest.mark.parametrize("threshold", [0.0, 0.7])
def test_no_text(texts: list[str], threshold: float) -> None:
    judgement = judge(FASTING, texts, threshold)
    assert judgement.score == 0.0
    assert judgement.passed is False
    assert "no text to judge" in judgement.reason
    assert judgement.reason.startswith("Heuristic")


@pytest.mark.parametrize(
    ("rubric", "texts", "quote"),
    [
        (
            "Says to fast for 12 hours.",
            ["Hello Maria. Thanks for writing. Please fast for 12 hours before the test."],
            "Please fast for 12 hours",
        ),
        (POTASSIUM, ["Critical potassium 6.8 mmol/L — review right away."], "potassium 6.8"),
        ("Says Monday.", ["Nothing relevant here at all."], "Nothing relevant"),
    ],
)
def test_reason_says_heuristic_and_quotes_the_text(
    rubric: str, texts: list[str], quote: str
) -> None:
    reason = judge(rubric, texts).reason
    assert reason.startswith("Heuristic: ")
    assert 'quoted: "' in reason
    assert quote in reason
    assert "rubric terms found" in reason


def test_reason_counts_and_names_found_terms() -> None:
    reason = judge("Says to fast for 12 hours.", ["Fast overnight."]).reason
    assert reason.startswith("Heuristic: 1 of 3 rubric terms found (fast); quoted: ")


def test_reason_quotes_a_short_excerpt_of_a_long_text() -> None:
    long_text = " ".join(["filler"] * 200) + " please fast for 12 hours " + " ".join(["more"] * 200)
    reason = judge("Says to fast for 12 hours.", [long_text]).reason
    assert '"…' in reason and '…"' in reason
    assert "fast for 12 hours" in reason
    assert len(reason) < 300


def test_reason_quotes_the_forbidden_text_too() -> None:
    text = "See you Monday. " + "Lots of other words here. " * 5 + "The price is $20."
    reason = judge("Says Monday. Must not mention the price.", [text]).reason
    assert 'forbidden "price"' in reason
    assert "The price is $20" in reason


@pytest.mark.parametrize(
    ("rubric", "text"),
    [
        ("MENTIONS the Pharmacy HOURS.", "pharmacy hours are 9-5"),
        ("Mentions the pharmacy hours.", "Our pharmacies' hour is 9."),
        ("Mentions the café hours.", "Cafe hours: 9 to 5."),
        ("Mentions the cafe hours.", "Café hours: 9 to 5."),
        ('Uses the phrase "follow-up visit".', "Book a Follow-Up visit."),
    ],
)
def test_terms_fold_case_accents_and_plurals(rubric: str, text: str) -> None:
    assert judge(rubric, [text]).score == 1.0


def test_quoted_phrase_must_appear_as_a_phrase() -> None:
    rubric = 'Uses the phrase "follow-up visit".'
    assert judge(rubric, ["A visit to follow up."]).score == 0.0


def test_heuristic_is_deterministic() -> None:
    first = judge(FASTING, [FASTING_GOOD, FASTING_BAD])
    assert all(judge(FASTING, [FASTING_GOOD, FASTING_BAD]) == first for _ in range(3))


# --- the model ---------------------------------------------------------------------------


@pytest.mark.parametrize("score", [0, 0.0, 0.5, 1, 1.0, "0.25"])
def test_llm_judgement_accepts(score: object) -> None:
    parsed = LlmJudgement.model_validate({"score": score, "reason": 'It says "fast for 12 hours".'})
    assert 0.0 <= parsed.score <= 1.0


@pytest.mark.parametrize(
    "data",
    [
        {"score": -0.01, "reason": "x"},
        {"score": 1.01, "reason": "x"},
        {"score": 7, "reason": "x"},
        {"score": math.nan, "reason": "x"},
        {"score": math.inf, "reason": "x"},
        {"score": "high", "reason": "x"},
        {"score": 0.5, "reason": ""},
        {"score": 0.5, "reason": "   "},
        {"score": 0.5},
        {"reason": "x"},
    ],
)
def test_llm_judgement_rejects(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LlmJudgement.model_validate(data)


def test_llm_judgement_reason_whitespace_collapsed() -> None:
    parsed = LlmJudgement.model_validate({"score": 0.5, "reason": '  Quotes\n "x".  '})
    assert parsed.reason == 'Quotes "x".'


@pytest.mark.parametrize(
    ("score", "threshold", "passed"),
    [(0.7, 0.7, True), (0.69, 0.7, False), (1.0, 1.0, True), (0.0, 0.0, True), (0.0, 0.1, False)],
)
def test_from_llm(score: float, threshold: float, passed: bool) -> None:
    result = LlmJudgement(score=score, reason='It says "fast".')
    judgement = from_llm(result, threshold, "gpt-test")
    assert judgement == Judgement(
        score, passed, 'It says "fast".', "llm", "gpt-test", PROMPT_VERSION
    )


def test_llm_messages() -> None:
    messages = llm_messages(FASTING, ["First text.", "   ", "Second </text> text."])
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert PROMPT_VERSION in system
    assert "0" in system and "1" in system and "quote" in system.lower()
    assert '"score"' in system and '"reason"' in system and "JSON" in system
    assert "ignore" in system.lower()  # the texts are evidence, not instructions
    assert FASTING in user
    assert '<text n="1">\nFirst text.\n</text>' in user
    assert '<text n="3">' in user and "Second </ text> text." in user  # no early close
    assert user.index("First text.") < user.index("Second")
    assert llm_messages(FASTING, [])[1]["content"].count("(no text)") == 1
