"""Random identifiers and API keys."""

from __future__ import annotations

import hashlib
import secrets
import string

_ALPHABET = string.ascii_lowercase + string.digits
# 16 characters of base36 is ~82 bits: collisions are not a concern within one tenant.
_RESOURCE_ID_LENGTH = 16
_RESOURCE_ID_SPACE = len(_ALPHABET) ** _RESOURCE_ID_LENGTH
_KEY_PREFIX = "usk_"


def new_resource_id() -> str:
    # One draw from the OS generator, written in base36: uniform over the same 36**16 ids
    # as 16 secrets.choice calls, which cost 16+ urandom reads (~110 us an id, about a
    # tenth of a transaction Bundle of creates in a profile; this is ~7 us).
    n = secrets.randbelow(_RESOURCE_ID_SPACE)
    chars = []
    for _ in range(_RESOURCE_ID_LENGTH):
        n, digit = divmod(n, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(chars)


def new_api_key() -> str:
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    # Keys carry 256 bits of entropy, so a plain SHA-256 is enough: no salt or slow hash needed.
    return hashlib.sha256(key.encode()).hexdigest()
