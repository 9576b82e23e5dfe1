"""Text we refuse: what PostgreSQL cannot store (NUL, lone surrogates, invalid UTF-8 once
percent-decoded) and the control characters FHIR's primitive types forbid (every one below
U+0020 but tab, line feed and carriage return: string, code, id, uri… may not hold them;
our search index keys are joined with U+001F, so one inside a value could forge a key).

Checked once at the edge of the API (app/edge.py) for paths, queries, headers and JSON
bodies, and by the FHIR Bundle processor for the query strings its entries carry inside
their JSON (`request.url`, `ifNoneExist`), which reach searches the same way.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

_BAD_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
_NEEDS_DECODING = re.compile(rb"[%\x00-\x08\x0b\x0c\x0e-\x1f]")


class BadText(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def describe(text: str) -> str | None:
    found = _BAD_CHAR.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "a NUL character (U+0000)"
    if char < " ":
        return f"a control character (U+{ord(char):04X}), which FHIR text may not hold"
    return f"a lone surrogate (U+{ord(char):04X})"


def decoded(raw: bytes, field: str, what: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadText(field, f"{what} is not valid UTF-8 once percent-decoded") from None
    problem = describe(text)
    if problem is not None:
        raise BadText(field, f"{what} contains {problem}")
    return text


def needs_decoding(raw: bytes) -> bool:
    return not raw.isascii() or _NEEDS_DECODING.search(raw) is not None


def check_form(raw: bytes, prefix: str, what: str) -> None:
    """A query string or a form body: each name and value, percent-decoded."""
    if not needs_decoding(raw):
        return
    for part in raw.split(b"&"):
        name_raw, _, value_raw = part.partition(b"=")
        name_bytes = unquote_to_bytes(name_raw.replace(b"+", b" "))
        printable = name_bytes.decode("utf-8", "replace").replace("\x00", "\\u0000")[:40]
        field = f"{prefix}.{printable}" if prefix else printable
        decoded(name_bytes, field, f"the name of {what} '{printable}'")
        decoded(unquote_to_bytes(value_raw.replace(b"+", b" ")), field, f"{what} '{printable}'")
