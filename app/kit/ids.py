"""Random identifiers and API keys."""

from __future__ import annotations

import hashlib
import secrets
import string

_ALPHABET = string.ascii_lowercase + string.digits
# 16 characters of base36 is ~82 bits: collisions are not a concern within one tenant.
_RESOURCE_ID_LENGTH = 16
_KEY_PREFIX = "usk_"


_RESOURCE_ID_SPACE = len(_ALPHABET) ** _RESOURCE_ID_LENGTH


def new_resource_id() -> str:
    """16 base36 characters, uniform over all of them: one draw below 36**16 written in
    base36 (one OS random read instead of a `secrets.choice` and its reads per
    character; it is on every create's path)."""
    number = secrets.randbelow(_RESOURCE_ID_SPACE)
    chars = []
    for _ in range(_RESOURCE_ID_LENGTH):
        number, digit = divmod(number, 36)
        chars.append(_ALPHABET[digit])
    return "".join(chars)


def new_api_key() -> str:
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    # Keys carry 256 bits of entropy, so a plain SHA-256 is enough: no salt or slow hash needed.
    return hashlib.sha256(key.encode()).hexdigest()
