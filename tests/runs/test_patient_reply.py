"""The model's seed for a reply is fixed by the run and the message alone, whichever
channel the message came by: replaying a run asks the model the same way, and the
values recorded in `sim_reply` before stay the ones asked again."""

from __future__ import annotations

import pytest

from app.runs.patient_reply import reply_seed


@pytest.mark.parametrize(
    ("run_id", "message_id", "seed"),
    [
        ("run_abc", "msg_1", 112802719),  # a portal Communication
        ("run_abc", "SM0123", 1978208560),  # an SMS, by its SID
        ("run_abc", "msg_2", 1400491562),  # under 2**31: a signed 32-bit seed
    ],
)
def test_a_reply_seed_is_fixed_by_run_and_message(run_id: str, message_id: str, seed: int) -> None:
    assert reply_seed(run_id, message_id) == seed
