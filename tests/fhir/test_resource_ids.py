"""Server-assigned resource ids (`app.kit.ids.new_resource_id`, on every create's path)."""

from __future__ import annotations

import string
from collections import Counter

from app.fhir.service import is_valid_id
from app.kit.ids import new_resource_id

ALPHABET = set(string.ascii_lowercase + string.digits)


def test_ids_are_16_base36_characters_and_valid_fhir_ids() -> None:
    for _ in range(500):
        rid = new_resource_id()
        assert len(rid) == 16
        assert set(rid) <= ALPHABET
        assert is_valid_id(rid)


def test_ids_are_distinct_and_every_position_takes_every_character() -> None:
    ids = [new_resource_id() for _ in range(4000)]
    assert len(set(ids)) == len(ids)
    for position in range(16):
        seen = Counter(rid[position] for rid in ids)
        # 4000 uniform draws over 36 characters: ~111 each; missing one has odds ~1e-47.
        assert set(seen) == ALPHABET, position
        assert max(seen.values()) < 3 * min(seen.values()), position
