"""Concrete facts a message states, and which of them appear nowhere in its sources.

`concrete_facts(message) -> list[Fact]`: every date, weekday, time of day (see
`datetimes`), phone number, amount of money, quantity with a unit (see `quantities`) and
practitioner's name ("Dr. Chen", "Dra. García", "la doctora Ruiz", "Sarah Chen, MD"), in
order. Emergency numbers (911 …) are left out: stating them is always right.

`SourceIndex.build(sources, zones=())`: what the system was shown, read once. `sources` are
strings (the brief, a patient's message) or parsed JSON (a fixture resource, a response
body): every string inside is read as text, and typed values are read as what they are — a
FHIR dateTime "2026-12-08T10:30:00Z" as a date and a time in UTC and in each of `zones`
(IANA names), a date "2026-12-08" with its weekday, a time "10:30:00", a Quantity
`{"value": 20, "unit": "mg"}`, a Money `{"value": 25, "currency": "USD"}`; names are found
as words anywhere in the text. A FHIR dateTime inside text (an OperationOutcome naming the
nearest free times) is read in every zone too. Identifiers (`id`, `reference`, `fullUrl`,
`system`, `url` …) are skipped: nothing in them is something a message states.

`grounded(message, sources, zones=()) -> list[Fact]`: the facts of `message` found nowhere
in `sources` (a list as above, or a built `SourceIndex` to check many messages against
one set of sources). Empty: the message is grounded. A fact is grounded when:
- date-times: a statement is read as a whole: its date is some source date (a stated year
  must agree), a weekday stated with it is that date's weekday, and its time is that
  date's time in some source (a slot at 10:30 on December 8), or else a time the sources
  state on its own (opening hours "8:00–17:00"). A weekday or a time stated alone needs
  the same weekday or time somewhere in the sources. A failing part is reported as its
  own fact (`kind` "date", "weekday" or "time") with `detail` saying why;
- a phone number: the same digits (country and area codes may be left out);
- money: the same amount in a source Money, a "$25"-like text, or any JSON number;
- a quantity: the same amount in the same dimension ("0.5 g" is "500 mg");
- a practitioner's name: every word of the name appears as a word in the sources.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from app.grading.message.quantities import (
    Money,
    Quantity,
    find_money,
    find_phones,
    find_quantities,
    parse_number,
    quantity,
    same_phone,
)
from app.kit.dates import (
    WEEKDAYS,
    Stated,
    StatedDate,
    StatedTime,
    find_datetimes,
    local_readings,
    parse_instant,
    scan_datetimes,
    zone_of,
)
from app.kit.phrases import fold, quote

Source = str | Mapping[str, Any] | Sequence[Any] | int | float | None

_NAME_WORD = r"[A-ZÁÉÍÓÚÑÜ][a-záéíóúñü'’-]+"
_NOT_NAMES = frozenset(
    str.split(
        "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April "
        "May June July August September October November December Lunes Martes Miércoles "
        "Jueves Viernes Sábado Domingo Enero Febrero Marzo Abril Mayo Junio Julio Agosto "
        "Septiembre Octubre Noviembre Diciembre The At On In Your You Will Office Clinic "
        "Para Su Le El La Los Las"
    )
)
_TITLE_NAME_RE = re.compile(
    rf"(?<![\w])(?:Dr|Dra|DR|Doctor|Doctora|doctor|doctora)\.?\s+(?P<name>{_NAME_WORD}"
    rf"(?:\s(?:de\s|del\s|de la\s)?{_NAME_WORD}){{0,2}})"
)
_SUFFIX_NAME_RE = re.compile(
    rf"(?<![\w])(?P<name>{_NAME_WORD}(?:\s{_NAME_WORD}){{1,2}}),?\s(?:MD|M\.D\.|DO|NP|PA-C|PA|RN|DNP)(?![\w])"
)
_ISO_DATETIME_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?"
)
_ISO_IN_TEXT_RE = re.compile(
    r"(?<!\d)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})"
)
_ISO_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIME_RE = re.compile(r"(?P<h>\d{2}):(?P<m>\d{2})(?::\d{2}(?:\.\d+)?)?")
_WEEKDAY_NAME = "|".join(WEEKDAYS)
# "Monday to Friday", "de lunes a viernes": every day in between is stated.
_WEEKDAY_RANGE_RE = re.compile(
    rf"(?P<first>{_WEEKDAY_NAME})\s*(?:-|to|through|thru|until|a|al|hasta)\s*(?P<last>{_WEEKDAY_NAME})"
)
# Identifiers and addresses: nothing in them is a fact a message could state.
_OPAQUE_KEYS = frozenset(
    {"id", "fullUrl", "reference", "system", "url", "profile", "versionId", "etag", "resourceType"}
)
# Text long enough to be a document, not a code, is read for facts; ids and codes are not.
_PLAIN_RE = re.compile(r"[\d\s]|[A-Za-z]{3}")


@dataclass(frozen=True, slots=True)
class Fact:
    """A concrete fact as written in a message: `kind` is one of date, weekday, time, phone,
    money, quantity, practitioner; `detail` says why it is ungrounded, when it is."""

    kind: str
    text: str
    start: int
    end: int
    quote: str
    detail: str = field(default="", compare=False)


@dataclass(slots=True)
class _Point:
    """A date-time the sources state: date readings, weekdays, times (hour, minute)."""

    ymds: tuple[tuple[int | None, int | None, int], ...]
    weekdays: frozenset[int]
    times: frozenset[tuple[int, int]]


@dataclass(slots=True)
class SourceIndex:
    points_by_day: dict[int, list[_Point]] = field(default_factory=dict)
    weekdays: set[int] = field(default_factory=set)
    times: set[tuple[int, int]] = field(default_factory=set)  # every time stated
    lone_times: set[tuple[int, int]] = field(default_factory=set)  # times with no date
    phones: list[str] = field(default_factory=list)
    money: set[Decimal] = field(default_factory=set)
    numbers: set[Decimal] = field(default_factory=set)
    quantities: list[Quantity] = field(default_factory=list)
    words: set[str] = field(default_factory=set)
    # Every date-time the sources state with its zone, in UTC: a time the message states
    # in a zone of its own ("10:00 AM Central") is grounded by the same instant only.
    instants: set[datetime] = field(default_factory=set)

    @classmethod
    def build(cls, sources: Iterable[Source], zones: Sequence[str] = ()) -> SourceIndex:
        index = cls()
        # Dicts as ordered sets: an agent reads the same values many times (every Slot of
        # a Bundle is "free", many share an end and the next one's start).
        texts: dict[str, None] = {}
        instants: dict[str, None] = {}
        for source in sources:
            index._walk(source, texts, instants)
        blob = " ;; ".join(texts)
        # A date-time with its zone inside text (an OperationOutcome's "2026-12-08T15:30:00Z
        # is not the start of a free Slot") is read in every zone too, as a value is.
        for m in _ISO_IN_TEXT_RE.finditer(blob):
            instants[m.group()] = None
        index._merge(_read_once(blob, tuple(instants), tuple(zones)))
        return index

    def _merge(self, other: SourceIndex) -> None:
        """Add what `other` holds (after what this one holds: the order it would have had
        read here)."""
        for day, points in other.points_by_day.items():
            self.points_by_day.setdefault(day, []).extend(points)
        self.weekdays |= other.weekdays
        self.times |= other.times
        self.lone_times |= other.lone_times
        self.phones.extend(other.phones)
        self.money |= other.money
        self.numbers |= other.numbers
        self.quantities.extend(other.quantities)
        self.words |= other.words
        self.instants |= other.instants

    def _add_point(self, point: _Point) -> None:
        for _, _, day in point.ymds:
            self.points_by_day.setdefault(day, []).append(point)
        self.weekdays |= point.weekdays
        self.times |= point.times
        if not point.ymds:
            self.lone_times |= point.times

    def _add_instant(self, value: str, zones: tuple[str, ...]) -> None:
        parsed = parse_instant(value)
        if isinstance(parsed, datetime):
            self.instants.add(parsed.astimezone(UTC))
            for _, local in local_readings(parsed, zones):
                d = local.date()
                self._add_point(
                    _Point(
                        ((d.year, d.month, d.day),),
                        frozenset({d.weekday()}),
                        frozenset({(local.hour, local.minute)}),
                    )
                )
        elif isinstance(parsed, date):
            d = parsed
            self._add_point(
                _Point(((d.year, d.month, d.day),), frozenset({d.weekday()}), frozenset())
            )

    def _walk(self, value: Any, texts: dict[str, None], instants: dict[str, None]) -> None:
        if isinstance(value, str):
            text = value.strip()
            if text in texts or text in instants:
                return
            if _ISO_DATETIME_RE.fullmatch(text) or _ISO_DATE_RE.fullmatch(text):
                instants[text] = None
            elif time := _ISO_TIME_RE.fullmatch(text):
                hm = (int(time["h"]), int(time["m"]))
                self.times.add(hm)
                self.lone_times.add(hm)
            elif _PLAIN_RE.search(text):
                texts[text] = None
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, int | float):
            number = parse_number(str(value))
            if number is not None:
                self.numbers.add(number)
        elif isinstance(value, Mapping):
            self._typed(value)
            for key, item in value.items():
                if key not in _OPAQUE_KEYS:
                    self._walk(item, texts, instants)
        elif isinstance(value, Sequence):
            for item in value:
                self._walk(item, texts, instants)

    def _typed(self, value: Mapping[str, Any]) -> None:
        amount = value.get("value")
        if not isinstance(amount, int | float) or isinstance(amount, bool):
            return
        number = parse_number(str(amount))
        if number is None:
            return
        if "currency" in value:
            self.money.add(number)
        for key in ("unit", "code"):
            unit = value.get(key)
            if isinstance(unit, str):
                q = quantity(number, unit)
                if q is not None:
                    self.quantities.append(q)
                    break

    def _read_text(self, blob: str) -> None:
        if not blob:
            return
        folded = fold(blob)
        for m in _WEEKDAY_RANGE_RE.finditer(folded.text):
            first, last = WEEKDAYS[m["first"]], WEEKDAYS[m["last"]]
            span = (last - first) % 7
            self.weekdays.update((first + i) % 7 for i in range(span + 1))
        for stated in scan_datetimes(blob, folded):
            ymds = tuple(c for d in stated.dates for c in d.candidates)
            hms = frozenset((h, t.minute) for t in stated.times for h in t.hours)
            weekdays = frozenset(stated.weekdays)
            weekdays |= frozenset(
                date(y, m, d).weekday() for y, m, d in ymds if y is not None and m is not None
            )
            self._add_point(_Point(ymds, weekdays, hms))
        self.phones.extend(p.digits for p in find_phones(blob, folded))
        self.money.update(m.value for m in find_money(blob, folded))
        self.quantities.extend(find_quantities(blob, folded))
        self.words.update(re.findall(r"[^\W\d_]+", folded.text))

    # -- checks ------------------------------------------------------------------------

    def has_phone(self, digits: str) -> bool:
        return any(same_phone(digits, p) for p in self.phones)

    def has_money(self, money: Money) -> bool:
        return money.value in self.money or money.value in self.numbers

    def has_quantity(self, q: Quantity) -> bool:
        return any(q.same(s) for s in self.quantities)

    def has_name(self, name: str) -> bool:
        words = re.findall(r"[^\W\d_]+", fold(name).text)
        return all(w in self.words for w in words if w not in ("de", "del", "la"))

    def date_points(self, stated: StatedDate) -> list[_Point]:
        days = {d for _, _, d in stated.candidates}
        found: list[_Point] = []
        for day in days:
            for point in self.points_by_day.get(day, ()):
                if any(_ymd_compatible(c, s) for c in stated.candidates for s in point.ymds):
                    found.append(point)
        return found


# The costly part of a build (reading the texts, every instant in every zone) by what it
# reads: a live run is graded after every write, and what its system was shown is mostly
# what the pass before read (py-spy: 13% of the worker's CPU at 5 tenants x 20 live
# runs). Entries are shared and never changed (`_merge` copies out of them); bounded,
# the oldest dropped first; the check grades in worker threads, hence the lock.
_READ: dict[tuple[str, tuple[str, ...], tuple[str, ...]], SourceIndex] = {}
READ_CACHED = 128
_read_lock = threading.Lock()


def _read_once(blob: str, instants: tuple[str, ...], zones: tuple[str, ...]) -> SourceIndex:
    key = (blob, instants, zones)
    with _read_lock:
        read = _READ.get(key)
    if read is None:
        read = SourceIndex()
        for instant in instants:
            read._add_instant(instant, zones)
        read._read_text(blob)
        with _read_lock:
            while len(_READ) >= READ_CACHED:
                _READ.pop(next(iter(_READ)))
            _READ[key] = read
    return read


def _ymd_compatible(
    a: tuple[int | None, int | None, int], b: tuple[int | None, int | None, int]
) -> bool:
    return (
        a[2] == b[2]
        and (a[1] is None or b[1] is None or a[1] == b[1])
        and (a[0] is None or b[0] is None or a[0] == b[0])
    )


def _weekday_agrees(weekdays: tuple[int, ...], point: _Point) -> bool:
    # A source date with neither a year nor a weekday cannot contradict a weekday.
    return not weekdays or not point.weekdays or all(w in point.weekdays for w in weekdays)


def _time_in(time: StatedTime, times: Iterable[tuple[int, int]]) -> bool:
    return any(time.matches(h, m) for h, m in times)


_WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _part_fact(stated: Stated, kind: str, message: str, detail: str, nth: int = 0) -> Fact:
    texts = [t for k, t in stated.parts if k == kind]
    text = texts[nth] if nth < len(texts) else stated.text
    at = message.find(text, stated.start)
    start = at if at != -1 else stated.start
    end = start + len(text)
    return Fact(kind, text, start, end, quote(message, start, end), detail)


def _zoned_time_shown(stated: Stated, time: StatedTime, index: SourceIndex) -> bool:
    """A time stated in a zone of its own: some source instant read in that zone has
    this time, and the statement's date (or weekday) there, when it states one."""
    tz = zone_of(time.zone or "UTC")
    if tz is None:
        return True  # a zone nobody can read is no evidence either way
    for instant in index.instants:
        local = instant.astimezone(tz)
        if not time.matches(local.hour, local.minute):
            continue
        day = local.date()
        if stated.dates and not any(
            _ymd_compatible(c, (day.year, day.month, day.day))
            for d in stated.dates
            for c in d.candidates
        ):
            continue
        if stated.weekdays and day.weekday() not in stated.weekdays:
            continue
        return True
    return False


def _check_stated(stated: Stated, message: str, index: SourceIndex) -> list[Fact]:
    failures: list[Fact] = []
    # Each time's own zone (the reader gives a time the zone its statement writes for it).
    zoned = [(nth, t) for nth, t in enumerate(stated.times) if t.zone is not None]
    if zoned and index.instants:
        # Read where the text says, not in every zone: "2 PM Eastern" for a 14:00 UTC
        # slot states 19:00 UTC, which no source has.
        for nth, time in zoned:
            if not _zoned_time_shown(stated, time, index):
                detail = f"no source has this time in {time.zone}"
                failures.append(_part_fact(stated, "time", message, detail, nth))
        if failures or len(zoned) == len(stated.times):
            return failures
    if stated.dates:
        points = [p for d in stated.dates for p in index.date_points(d)]
        if not points:
            return [_part_fact(stated, "date", message, "no source states this date")]
        agreeing = [p for p in points if _weekday_agrees(stated.weekdays, p)]
        if not agreeing:
            known = sorted({w for p in points for w in p.weekdays})
            said = ", ".join(_WEEKDAY_NAMES[w] for w in known)
            failures.append(
                _part_fact(stated, "weekday", message, f"the sources have that date on {said}")
            )
            agreeing = points
        for nth, time in enumerate(stated.times):
            if not any(_time_in(time, p.times) for p in agreeing) and not _time_in(
                time, index.lone_times
            ):
                detail = "no source has this time on that date"
                failures.append(_part_fact(stated, "time", message, detail, nth))
        return failures
    if stated.weekdays:
        if not all(w in index.weekdays for w in stated.weekdays):
            return [_part_fact(stated, "weekday", message, "no source date falls on this day")]
        for nth, time in enumerate(stated.times):
            on_day = [
                p
                for points in index.points_by_day.values()
                for p in points
                if any(w in p.weekdays for w in stated.weekdays)
            ]
            if not any(_time_in(time, p.times) for p in on_day) and not _time_in(
                time, index.lone_times
            ):
                detail = "no source has this time on that day"
                failures.append(_part_fact(stated, "time", message, detail, nth))
        return failures
    for nth, time in enumerate(stated.times):
        if not _time_in(time, index.times):
            detail = "no source states this time"
            failures.append(_part_fact(stated, "time", message, detail, nth))
    return failures


def _names(message: str) -> list[tuple[str, int, int]]:
    found: list[tuple[str, int, int]] = []
    for regex in (_TITLE_NAME_RE, _SUFFIX_NAME_RE):
        for m in regex.finditer(message):
            words = re.sub(r"['’]s$", "", m["name"]).split()
            while words and words[-1] in _NOT_NAMES:
                words.pop()
            if not words or words[0] in _NOT_NAMES:
                continue
            name = " ".join(words)
            start = m.start("name")
            if any(a <= start < b for _, a, b in found):
                continue
            found.append((name, m.start(), start + len(name)))
    return found


def concrete_facts(message: str) -> list[Fact]:
    folded = fold(message)
    facts: list[Fact] = []
    for stated in find_datetimes(message):
        cursor = stated.start
        for kind, text in stated.parts:
            at = message.find(text, cursor)
            start = at if at != -1 else stated.start
            cursor = start + len(text)
            facts.append(Fact(kind, text, start, cursor, quote(message, start, cursor)))
    for phone in find_phones(message, folded):
        if not phone.emergency:
            facts.append(
                Fact(
                    "phone",
                    phone.text,
                    phone.start,
                    phone.end,
                    quote(message, phone.start, phone.end),
                )
            )
    for money in find_money(message, folded):
        facts.append(
            Fact(
                "money", money.text, money.start, money.end, quote(message, money.start, money.end)
            )
        )
    for q in find_quantities(message, folded):
        facts.append(Fact("quantity", q.text, q.start, q.end, quote(message, q.start, q.end)))
    for _name, start, end in _names(message):
        facts.append(
            Fact("practitioner", message[start:end], start, end, quote(message, start, end))
        )
    facts.sort(key=lambda f: f.start)
    return facts


def grounded(
    message: str, sources: SourceIndex | Iterable[Source], zones: Sequence[str] = ()
) -> list[Fact]:
    index = sources if isinstance(sources, SourceIndex) else SourceIndex.build(sources, zones)
    folded = fold(message)
    ungrounded: list[Fact] = []
    for stated in find_datetimes(message):
        ungrounded.extend(_check_stated(stated, message, index))
    for phone in find_phones(message, folded):
        if not phone.emergency and not index.has_phone(phone.digits):
            ungrounded.append(
                Fact(
                    "phone",
                    phone.text,
                    phone.start,
                    phone.end,
                    quote(message, phone.start, phone.end),
                    "no source has this number",
                )
            )
    for money in find_money(message, folded):
        if not index.has_money(money):
            ungrounded.append(
                Fact(
                    "money",
                    money.text,
                    money.start,
                    money.end,
                    quote(message, money.start, money.end),
                    "no source has this amount",
                )
            )
    money_spans = [(m.start, m.end) for m in find_money(message, folded)]
    for q in find_quantities(message, folded):
        if any(a <= q.start < b for a, b in money_spans):
            continue
        if not index.has_quantity(q):
            ungrounded.append(
                Fact(
                    "quantity",
                    q.text,
                    q.start,
                    q.end,
                    quote(message, q.start, q.end),
                    "no source has this amount in this unit",
                )
            )
    for name, start, end in _names(message):
        if not index.has_name(name):
            ungrounded.append(
                Fact(
                    "practitioner",
                    message[start:end],
                    start,
                    end,
                    quote(message, start, end),
                    "no source names this practitioner",
                )
            )
    ungrounded.sort(key=lambda f: f.start)
    return ungrounded
