"""Resource ids: 16 base36 characters drawn uniformly (one OS draw an id)."""

from __future__ import annotations

import string
from collections import Counter

from app.fhir.service import is_valid_id
from app.kit.ids import new_resource_id

ALPHABET = set(string.ascii_lowercase + string.digits)


def test_ids_are_sixteen_base36_characters() -> None:
    for _ in range(1_000):
        rid = new_resource_id()
        assert len(rid) == 16
        assert set(rid) <= ALPHABET
        assert is_valid_id(rid)


def test_ids_do_not_repeat() -> None:
    ids = [new_resource_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)


def test_every_position_uses_the_whole_alphabet_evenly() -> None:
    # 3,600 ids: each of the 36 characters is expected 100 times at each position; a
    # position stuck on a few characters (a base conversion that drops high digits, say)
    # would show as characters never seen or seen far too often.
    ids = [new_resource_id() for _ in range(3_600)]
    for position in range(16):
        counts = Counter(rid[position] for rid in ids)
        assert set(counts) == ALPHABET
        assert max(counts.values()) < 200
