"""`matches-reference` over the SMS and e-mail sent (`reference_messages.grade_sent`):
paired by kind and recipient, a stray recipient and a duplicate collateral, a recipient
the reference texts who got nothing missing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.grading.reference_messages import grade_sent
from app.grading.reference_resources import Finding
from app.grading.snapshot import SentText

AT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
ALEX, PRIYA = "+1 555 555 0142", "+15555550177"


def _sms(ref: str, to: str, body: str = "Your visit is tomorrow at 9:30.", n: int = 0) -> SentText:
    return SentText(f"sms:{ref}", "sms", AT + timedelta(seconds=n), to, body)


def _graded(
    expected: list[SentText], actual: list[SentText], otherwise: frozenset[str] = frozenset()
) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    matches: list[str] = []
    grade_sent(expected, actual, otherwise, findings, matches)
    return findings, matches


def test_the_same_recipient_written_another_way_pairs() -> None:
    findings, matches = _graded([_sms("ref", "+15555550142")], [_sms("SM1", ALEX)])
    assert findings == [] and matches == [f"sms sms:SM1 to {ALEX}"]


def test_a_text_to_somebody_else_is_collateral_and_the_recipient_missing() -> None:
    findings, _ = _graded([_sms("ref", ALEX)], [_sms("SM1", PRIYA)])
    assert [f.kind for f in findings] == ["collateral", "missing"]
    assert "5555550177" in findings[0].where and findings[1].closest == "sms:SM1"


def test_a_patient_the_reference_writes_to_in_the_portal_may_be_texted() -> None:
    findings, _ = _graded([], [_sms("SM1", PRIYA)], frozenset({"5555550177"}))
    assert findings == []


def test_the_same_text_twice_is_a_duplicate() -> None:
    findings, _ = _graded([_sms("ref", ALEX)], [_sms("SM1", ALEX), _sms("SM2", ALEX, n=1)])
    assert [f.kind for f in findings] == ["collateral"]
    assert "a duplicate of sms:SM1" in findings[0].where


def test_a_second_different_text_to_the_same_patient_is_no_duplicate() -> None:
    later = _sms("SM2", ALEX, "Reply here to change it.", n=1)
    findings, _ = _graded([_sms("ref", ALEX)], [_sms("SM1", ALEX), later])
    assert findings == []
