"""Random identifiers and API keys."""

from __future__ import annotations

import hashlib
import secrets
import string

_ALPHABET = string.ascii_lowercase + string.digits
# 16 characters of base36 is ~82 bits: collisions are not a concern within one tenant.
_RESOURCE_ID_LENGTH = 16
_KEY_PREFIX = "usk_"


def new_resource_id() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(_RESOURCE_ID_LENGTH))


def new_api_key() -> str:
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    # Keys carry 256 bits of entropy, so a plain SHA-256 is enough: no salt or slow hash needed.
    return hashlib.sha256(key.encode()).hexdigest()
