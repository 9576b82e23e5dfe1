"""Primitive formats: the FHIR R4 datatype regexes, calendar days, integer ranges and
the string length cap."""

from __future__ import annotations

import datetime
import re
from typing import Any, Final

_YEAR = r"([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)"


_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?"


_ZONE = r"(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"


_DAY = r"(0[1-9]|[1-2][0-9]|3[0-1])"


_MONTH = r"(0[1-9]|1[0-2])"


# fhir_type -> (pattern, what a valid value looks like)
_PATTERNS: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "date": (
        re.compile(rf"{_YEAR}(-{_MONTH}(-{_DAY})?)?"),
        "expected YYYY, YYYY-MM or YYYY-MM-DD",
    ),
    "dateTime": (
        re.compile(rf"{_YEAR}(-{_MONTH}(-{_DAY}(T{_TIME}{_ZONE})?)?)?"),
        "expected YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss[.fff] with Z or ±hh:mm;"
        " a time needs seconds and a timezone",
    ),
    "instant": (
        re.compile(rf"{_YEAR}-{_MONTH}-{_DAY}T{_TIME}{_ZONE}"),
        "expected YYYY-MM-DDThh:mm:ss[.fff] with Z or ±hh:mm",
    ),
    "time": (re.compile(_TIME), "expected hh:mm:ss[.fff]"),
    "code": (
        re.compile(r"[^\s]+(\s[^\s]+)*"),
        "no leading, trailing or repeated whitespace allowed",
    ),
    "id": (re.compile(r"[A-Za-z0-9\-.]{1,64}"), "expected 1-64 of A-Z, a-z, 0-9, '-' and '.'"),
    "oid": (re.compile(r"urn:oid:[0-2](\.(0|[1-9][0-9]*))+"), "expected urn:oid:1.2.3"),
    "uuid": (
        re.compile(r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I),
        "expected urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
    ),
    "uri": (re.compile(r"\S*"), "whitespace is not allowed"),
    "url": (re.compile(r"\S*"), "whitespace is not allowed"),
    "canonical": (re.compile(r"\S*"), "whitespace is not allowed"),
    "base64Binary": (re.compile(r"(\s*([0-9a-zA-Z+/=]){4}\s*)+"), "expected base64"),
}


_CALENDAR_TYPES: Final = frozenset({"date", "dateTime", "instant"})


INTEGER_RANGES: Final = {
    "integer": (-2147483648, 2147483647),
    "unsignedInt": (0, 2147483647),
    "positiveInt": (1, 2147483647),
}


_MAX_STRING = 1024 * 1024


def format_problem(fhir_type: str, value: Any) -> str | None:
    """What is wrong with a primitive whose JSON type is already right, if anything."""
    if isinstance(value, str):
        if not value:
            return "empty strings are not allowed"
        if len(value) > _MAX_STRING:
            return "longer than 1,048,576 characters"
        entry = _PATTERNS.get(fhir_type)
        if entry is not None and entry[0].fullmatch(value) is None:
            return entry[1]
        if fhir_type in _CALENDAR_TYPES and len(value) >= 10:
            try:
                datetime.date.fromisoformat(value[:10])
            except ValueError:
                return "no such day in the calendar"
        return None
    bounds = INTEGER_RANGES.get(fhir_type)
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        return f"out of range {bounds[0]}..{bounds[1]}"
    return None
