"""Concrete facts in a message and grounding them in what the system was shown."""

from __future__ import annotations

from typing import Any

import pytest

from app.grading.message.facts import SourceIndex, concrete_facts, grounded

NY = "America/New_York"
SLOT = {"resourceType": "Slot", "start": "2026-12-08T15:30:00Z", "end": "2026-12-08T16:00:00Z"}
PRACTITIONER = {
    "resourceType": "Practitioner",
    "name": [{"family": "Chen", "given": ["Sarah"], "prefix": ["Dr."]}],
}
DOSE = {
    "resourceType": "MedicationRequest",
    "dosageInstruction": [{"doseAndRate": [{"doseQuantity": {"value": 20, "unit": "mg"}}]}],
}
COVERAGE = {"copay": {"value": 25, "currency": "USD"}}
BRIEF = "Patient asks to rebook. Clinic line (555) 010-0100. Opening hours 8:00 to 17:00."
SOURCES: list[Any] = [SLOT, PRACTITIONER, DOSE, COVERAGE, BRIEF]


@pytest.mark.parametrize(
    ("message", "kinds"),
    [
        (
            "Dr. Chen will see you Tuesday, December 8 at 10:30 AM.",
            ["practitioner", "weekday", "date", "time"],
        ),
        ("Take 20 mg daily; your copay is $25.", ["quantity", "money"]),
        ("Call (555) 010-0100, or 911 in an emergency.", ["phone"]),
        ("La Dra. García le atenderá.", ["practitioner"]),
        ("Sarah Chen, MD, reviewed it.", ["practitioner"]),
        ("Thanks, we will be in touch soon.", []),
    ],
)
def test_concrete_facts(message: str, kinds: list[str]) -> None:
    assert [f.kind for f in concrete_facts(message)] == kinds


@pytest.mark.parametrize(
    "message",
    [
        "Dr. Chen will see you Tuesday, December 8 at 3:30 PM.",
        "Dr. Chen will see you Tuesday, December 8 at 10:30 AM.",  # New York time
        "Dr. Sarah Chen, Tue Dec 8, 15:30.",
        "Take 20 mg once a day.",
        "Take 20mg once a day.",
        "Take 0.02 g once a day.",
        "Your copay is $25.00.",
        "Your copay is 25 dollars.",
        "Call us at 555-010-0100 or +1 555 010 0100.",
        "Call 911 if it gets worse.",
        "We open at 8:00.",
        "Le esperamos el martes 8 de diciembre a las 15:30 con la doctora Chen.",
        "Thank you for your message.",
        "Your slot is 2026-12-08 15:30 UTC.",
        "See you at 3:30 on the 8th.",
    ],
)
def test_grounded(message: str) -> None:
    assert grounded(message, SOURCES, (NY,)) == []


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Dr. Chen will see you Tuesday, December 8 at 4:30 PM.", "time"),
        ("Dr. Chen will see you Monday, December 8 at 3:30 PM.", "weekday"),
        ("Dr. Chen will see you Wednesday, December 9 at 3:30 PM.", "date"),
        ("Dr. Patel will see you.", "practitioner"),
        ("Take 40 mg once a day.", "quantity"),
        ("Your copay is $35.", "money"),
        ("Call us at 555-010-0199.", "phone"),
        ("We are open Saturday.", "weekday"),
        ("See you at 9:15.", "time"),
    ],
)
def test_ungrounded(message: str, kind: str) -> None:
    failures = grounded(message, SOURCES, (NY,))
    assert [f.kind for f in failures] == [kind]
    assert failures[0].detail
    assert failures[0].text in message


def test_wrong_weekday_says_the_right_one() -> None:
    [failure] = grounded("Monday, December 8 at 3:30 PM", SOURCES)
    assert failure.text == "Monday"
    assert "Tuesday" in failure.detail


def test_source_text_grounds_and_index_is_reusable() -> None:
    index = SourceIndex.build(["Offered: Fri, Dec 11 at 15:30 with Dr. Ruiz. $40 copay."])
    assert grounded("Friday, December 11 at 3:30 PM with Dr. Ruiz, $40.", index) == []
    assert [f.kind for f in grounded("Friday, December 11 at 4:30 PM", index)] == ["time"]


def test_zone_is_needed_for_the_local_reading() -> None:
    message = "Tuesday, December 8 at 10:30 AM"
    assert grounded(message, [SLOT], (NY,)) == []
    assert [f.kind for f in grounded(message, [SLOT])] == ["time"]


def test_name_in_suffix_form_grounds_title_form() -> None:
    assert grounded("Dr. Chen will call you.", ["Sarah Chen, MD"]) == []
    assert grounded("Dr. Sarah Chen will call you.", ["Dr. Chen"]) != []


def test_datetime_inside_text_is_read_in_the_zone() -> None:
    outcome = {
        "resourceType": "OperationOutcome",
        "issue": [
            {"diagnostics": "nearest free times: 2026-12-10T14:00:00Z, 2026-12-10T14:30:00Z"}
        ],
    }
    assert grounded("Thursday, December 10 at 9:30 AM works.", [outcome], (NY,)) == []


@pytest.mark.parametrize(
    ("message", "holds"),
    [
        # The slot is 15:30 UTC, 10:30 in New York that day.
        ("Dr. Chen will see you Tuesday, December 8 at 10:30 AM Eastern.", True),
        ("Dr. Chen will see you Tuesday, December 8 at 3:30 PM UTC.", True),
        ("Dr. Chen will see you December 8 at 15:30 UTC (10:30 AM your time).", True),
        ("Dr. Chen will see you Tuesday, December 8 at 3:30 PM Eastern.", False),
        ("Dr. Chen will see you Tuesday, December 8 at 10:30 AM UTC.", False),
        ("Dr. Chen will see you Tuesday, December 8 at 10:30 AM Central.", False),
    ],
)
def test_a_stated_zone_is_read_as_that_zone(message: str, holds: bool) -> None:
    """A time written with its zone is grounded by the same instant only: the wall clock of
    another zone is no evidence ("3:30 PM Eastern" is 20:30 UTC)."""
    failures = grounded(message, SOURCES, (NY,))
    assert (failures == []) == holds, failures
    if not holds:
        assert failures[0].kind == "time" and "no source has this time in" in failures[0].detail


def test_an_index_read_again_is_the_same_and_reads_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The texts and instants of a build are read once per content (a live run's passes
    read mostly what the pass before read): a second build of the same sources holds the
    same, reads no text, and shares nothing a caller could change."""
    from app.grading.message import facts

    sources: list[Any] = [
        "Offered: Fri, Dec 11 at 15:30 with Dr. Ruiz. $40 copay, call 555-0142.",
        {"resourceType": "Slot", "start": "2026-12-08T15:30:00Z", "status": "free"},
        {"valueQuantity": {"value": 20, "unit": "mg"}, "note": "Mon-Wed 8:00-17:00"},
    ]
    facts._READ.clear()
    first = SourceIndex.build(sources, ("America/Chicago",))
    reads: list[str] = []
    real = SourceIndex._read_text

    def counted(self: SourceIndex, blob: str) -> None:
        reads.append(blob)
        real(self, blob)

    monkeypatch.setattr(SourceIndex, "_read_text", counted)
    second = SourceIndex.build(sources, ("America/Chicago",))
    assert reads == [] and second == first
    assert second.points_by_day and second.phones and second.money and second.quantities
    second.phones.append("0")
    next(iter(second.points_by_day.values())).append(next(iter(first.points_by_day.values()))[0])
    third = SourceIndex.build(sources, ("America/Chicago",))
    assert third == first and reads == []
    # Another zone, or other texts, are read afresh.
    SourceIndex.build(sources, ("Europe/Madrid",))
    SourceIndex.build([*sources, "Also Tue at 9:00"], ("America/Chicago",))
    assert len(reads) == 2
    for message in ("Friday, December 11 at 3:30 PM", "call 555-0142", "$40", "20 mg"):
        assert grounded(message, third, ("America/Chicago",)) == []
