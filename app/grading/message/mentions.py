"""Whether some message states a value taken from a resource (the `mentions` field).

`states_value(messages, value, zones=()) -> Stated | None` dispatches on what FHIRPath gave:
- a FHIR dateTime / instant string or a datetime: `datetimes.states_datetime` (a date and
  a time of day, read in UTC or any of `zones`); a date string: the date;
- a Quantity `{"value": 20, "unit": "mg"}` (or `code`): a quantity with the same amount in
  the same dimension ("20 mg", "20mg", "0.02 g", "20 miligramos");
- a Money `{"value": 25, "currency": "USD"}`: an amount of money with that value;
- a number: that number written anywhere as a number;
- any other string: the string as a phrase (`text.find_phrase`: case, accents and spacing
  ignored).
None when no message states it (or the value is of no kind above). `Stated` names the
message and quotes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from app.grading.message.quantities import find_money, find_quantities, parse_number, quantity
from app.kit.dates import parse_instant, states_datetime
from app.kit.phrases import find_phrase, quote

_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}.*)?")
_NUMBER_RE = re.compile(r"(?<![\d.,])\d+(?:[.,]\d+)?(?![\d]|[.,]\d)")


@dataclass(frozen=True, slots=True)
class Stated:
    message_index: int
    quote: str


def _states_mapping(messages: Sequence[str], value: Mapping[str, Any]) -> Stated | None:
    amount = value.get("value")
    if not isinstance(amount, int | float) or isinstance(amount, bool):
        return None
    number = parse_number(str(amount))
    if number is None:
        return None
    if "currency" in value:
        for index, message in enumerate(messages):
            for money in find_money(message):
                if money.value == number:
                    return Stated(index, quote(message, money.start, money.end))
        return None
    unit = value.get("unit") if isinstance(value.get("unit"), str) else value.get("code")
    wanted = quantity(number, unit) if isinstance(unit, str) else None
    if wanted is None:
        return None
    for index, message in enumerate(messages):
        for q in find_quantities(message):
            if q.same(wanted):
                return Stated(index, quote(message, q.start, q.end))
    return None


def states_value(
    messages: Sequence[str], value: object, zones: Sequence[str] = ()
) -> Stated | None:
    if isinstance(value, datetime | date) or (
        isinstance(value, str) and _ISO_RE.fullmatch(value.strip())
    ):
        instant = value if not isinstance(value, str) else parse_instant(value)
        if instant is None:
            return None
        match = states_datetime(messages, instant, zones)
        return Stated(match.message_index, match.quote) if match else None
    if isinstance(value, Mapping):
        return _states_mapping(messages, value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = parse_number(str(value))
        for index, message in enumerate(messages):
            for m in _NUMBER_RE.finditer(message):
                if parse_number(m.group()) == number:
                    return Stated(index, quote(message, m.start(), m.end()))
        return None
    if isinstance(value, str):
        for index, message in enumerate(messages):
            found = find_phrase(value, message, index)
            if found is not None:
                return Stated(index, found.quote)
    return None
