"""A value from a resource stated in some message, in any usual form."""

from __future__ import annotations

import pytest

from app.grading.message.mentions import states_value

NY = ("America/New_York",)


@pytest.mark.parametrize(
    ("messages", "value", "stated"),
    [
        (["See you Tuesday, December 8 at 10:30 AM."], "2026-12-08T15:30:00Z", True),
        (["See you Tuesday, December 8 at 11:30 AM."], "2026-12-08T15:30:00Z", False),
        (["Your test is on 12/8."], "2026-12-08", True),
        (["Take 20 mg daily."], {"value": 20, "unit": "mg"}, True),
        (["Tome 20 miligramos al día."], {"value": 20, "code": "mg"}, True),
        (["Take 0.02 g daily."], {"value": 20, "unit": "mg"}, True),
        (["Take 40 mg daily."], {"value": 20, "unit": "mg"}, False),
        (["Your copay is $25.00."], {"value": 25, "currency": "USD"}, True),
        (["Your copay is $35."], {"value": 25, "currency": "USD"}, False),
        (["Your room is 12."], 12, True),
        (["Your room is 120."], 12, False),
        (["It is with Dr. Chen, in Cardiología."], "cardiologia", True),
        (["Nothing here."], "Cardiology", False),
        (["Anything"], True, False),
    ],
)
def test_states_value(messages: list[str], value: object, stated: bool) -> None:
    assert (states_value(messages, value, NY) is not None) is stated
