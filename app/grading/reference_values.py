"""How `matches-reference` reads a value before comparing it: instants as instants, codings
by system + code, references through the directory, spans, durations, and the plain
canonical form of what is compared as a whole (see `app.grading.reference`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from app.grading.changes import WITHDRAWN
from app.scenarios.consequential import (
    CHOICE_STEMS,
    Element,
)

# A Task restriction or execution period starting later than this after the run started
# defers the work (a year out); sooner is "now", as good as absent.
DEFERRAL_GRACE = timedelta(days=1)


@dataclass
class Context:
    aliases: Mapping[str, str]
    run_start: datetime
    known: set[str]  # references an added element may point at
    created: dict[str, str]  # run-created "Type/id" -> its type
    paired: dict[str, str] = field(default_factory=dict)  # replay ref -> run ref

    def resolve(self, ref: str) -> str:
        return self.aliases.get(ref, ref)


def element_value(resource: Mapping[str, Any] | None, element: Element) -> Any:
    if resource is None:
        return None
    if element.kind == "duration":
        return _duration(resource)
    if element.path in resource:
        return resource[element.path]
    if element.path in CHOICE_STEMS:  # `value` is valueQuantity, valueString …
        stem = element.path
        for key, value in resource.items():
            if key.startswith(stem) and key[len(stem) : len(stem) + 1].isupper():
                return value
    return None


def instant_value(value: Any) -> datetime | date | None:
    if not isinstance(value, str):
        return None
    try:
        if "T" in value:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        if len(value) == 10:
            return date.fromisoformat(value)
    except ValueError:
        return None
    return None


def span_of(value: Any) -> tuple[Any, Any]:
    """A dateTime, Period or Timing as (start, end) instants (end None for a moment); of
    a list (an Appointment's requestedPeriod), its first."""
    if isinstance(value, list):
        return span_of(value[0]) if value else (None, None)
    if isinstance(value, str):
        return instant_value(value), None
    if isinstance(value, dict):
        if "start" in value or "end" in value:
            start, end = instant_value(value.get("start")), instant_value(value.get("end"))
            return start, (None if end == start else end)
        events = value.get("event")
        if isinstance(events, list) and events:
            return instant_value(events[0]), None
        bounds = (value.get("repeat") or {}).get("boundsPeriod")
        if isinstance(bounds, dict):
            return span_of(bounds)
    return None, None


def _duration(resource: Mapping[str, Any]) -> timedelta | None:
    start, end = instant_value(resource.get("start")), instant_value(resource.get("end"))
    if isinstance(start, datetime) and isinstance(end, datetime):
        return end - start
    minutes = resource.get("minutesDuration")
    return timedelta(minutes=minutes) if isinstance(minutes, int) else None


def concepts_of(value: Any) -> list[frozenset[tuple[str, str]]]:
    """Each CodeableConcept (or Coding) as its set of (system, code); text-only ones
    drop out (their words are the text checks')."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        codings = item.get("coding") if "coding" in item else [item]
        codes = frozenset(
            (str(c.get("system", "")), str(c.get("code")))
            for c in codings or []
            if isinstance(c, dict) and c.get("code") is not None
        )
        if codes:
            out.append(codes)
    return out


def refs_in(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [
        str(item["reference"])
        for item in items
        if isinstance(item, dict) and isinstance(item.get("reference"), str)
    ]


_UNCOMPARED_KEYS = frozenset({"display", "text", "id", "extension"})


def plain_value(value: Any, dropped: frozenset[str] = _UNCOMPARED_KEYS) -> Any:
    """JSON in one form — instants as instants, decimals as numbers (7.40, 7.4 and 7.4e0
    are one; FHIR decimals keep their scale), lists in one order — without the keys
    `dropped` (by default displays and narrative)."""
    if isinstance(value, dict):
        return {k: plain_value(v, dropped) for k, v in sorted(value.items()) if k not in dropped}
    if isinstance(value, list):
        return sorted((plain_value(v, dropped) for v in value), key=order_key)
    if isinstance(value, str):
        moment = instant_value(value)
        return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else value
    if isinstance(value, Decimal | float | int) and not isinstance(value, bool):
        try:
            return str(Decimal(str(value)).normalize())
        except InvalidOperation:
            return str(value)
    return value


def canonical_form(resource: Mapping[str, Any]) -> Any:
    """A resource's whole content but `meta`, in `plain_value`'s one form."""
    return plain_value({k: v for k, v in resource.items() if k != "meta"}, frozenset())


def order_key(value: Any) -> bytes:
    """A sort key for plain JSON values (decimals as their text)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)


def shown_value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds() // 60)} min"
    if value is None:
        return "absent"
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= 120 else text[:119] + "…"


def is_withdrawn(resource: Mapping[str, Any] | None) -> bool:
    return resource is None or resource.get("status") in WITHDRAWN
