"""The one fact reader for every text the system writes.

`read(text, chart, zones) -> list[Fact]`: each mention in `text` as a `Fact` with
- `kind`: "datetime" (a date and/or time of day, with its stated zone: `value["instants"]`
  every instant it can mean, `value["dates"]` every calendar date), "practitioner",
  "location", "organization", "medication" (`value`: drug, dose Quantity, times a day),
  "lab" (`value`: test words, number), "coverage-status" / "appointment-status"
  (`value["state"]`), "instruction" (`value`: verb, drug), "document-claim", "dob",
  "mrn", "side", "phone", "money";
- `context` (see `context`): asserted, negated, historical, hypothetical, other;
- `sentence`: the span of its sentence, which the checks read for what it is about.

Dates and times come from the one date reader (`app.kit.dates` via
`app.grading.message.datetimes`), quantities, money and phones from `quantities`,
practitioners' names from `facts`; drugs and tests from the chart and `lexicon`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from app.grading.message.facts import _names as practitioner_names
from app.grading.message.quantities import find_money, find_phones, find_quantities, parse_number
from app.grading.truth import lexicon
from app.grading.truth.chart import Chart, routes_in, sides_in, times_a_day, words_of
from app.grading.truth.context import contexts, language_of, sentences
from app.kit import dates
from app.kit.phrases import Folded, fold, quote


@dataclass(slots=True)
class Fact:
    kind: str
    text: str
    start: int
    end: int
    sentence: tuple[int, int]
    value: dict[str, Any] = field(default_factory=dict)
    context: str = "asserted"
    # Filled by the checks: which check read it, whether it held, and why.
    check: str = ""
    holds: bool | None = None
    detail: str = ""

    def shown(self, text: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "context": self.context,
            "quote": quote(text, self.start, self.end),
        }
        if self.check:
            out["check"] = self.check
            out["holds"] = self.holds
        if self.detail:
            out["detail"] = self.detail
        return out


def _sentence_of(spans: list[tuple[int, int]], at: int) -> tuple[int, int]:
    for a, b in spans:
        if a <= at < b:
            return (a, b)
    return spans[-1] if spans else (0, 0)


def _years(now: datetime) -> tuple[int, ...]:
    return (now.year, now.year + 1, now.year - 1)


def stated_instants(
    stated: dates.Stated, zones: tuple[str, ...], now: datetime
) -> tuple[list[datetime], list[date]]:
    """Every instant (date × time × zone) and every calendar date a statement may mean.
    A time's stated zone (its own, else the statement's: an IANA name or an offset) is the
    only zone; otherwise UTC and the clinic's zones. Unlike `dates.stated_instants`, a
    weekday alone means each such day of the three weeks around `now` (a booking "on
    Tuesday at 9:00" is checked), and a date with no year this year, the next or the last."""
    days: list[date] = []
    for stated_date in stated.dates:
        for y, m, day in stated_date.candidates:
            for year in (y,) if y is not None else _years(now):
                months = (m,) if m is not None else (now.month, now.month % 12 + 1)
                for month in months:
                    if month is None:
                        continue
                    try:
                        days.append(date(year, month, day))
                    except ValueError:
                        continue
    if not days and stated.weekdays:
        # A weekday alone: the next three weeks' such days.
        base = now.date()
        days = [
            base + timedelta(days=i)
            for i in range(-7, 21)
            if (base + timedelta(days=i)).weekday() in stated.weekdays
        ]
    if stated.weekdays:
        days = [d for d in days if d.weekday() in stated.weekdays] or days
    instants: list[datetime] = []
    for d in days:
        for t in stated.times:
            zone = t.zone  # the reader gives each time its statement's zone, where it has one
            readings = (zone,) if zone else ("UTC", *zones)
            for hour in t.hours:
                for name in readings:
                    tz = dates.zone_of(name) if name != "UTC" else UTC
                    if tz is None:
                        continue
                    try:
                        local = datetime(d.year, d.month, d.day, hour, t.minute, tzinfo=tz)
                    except ValueError:
                        continue
                    instants.append(local.astimezone(UTC))
    return instants, days


_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w])")
_NOT_VALUE_RE = re.compile(
    r"\b(goal|target|range|reference|ref|between|under|below|above|over|less|more|than|up to"
    r"|at least|normal|meta|objetivo|rango|entre)\b|[<>≤≥]"
)
_RANGE_AFTER_RE = re.compile(r"^\s*(?:[-–—]|to|a)\s*\d")
_COVERAGE_RE = re.compile(r"\b(coverage|insurance|plan|policy|seguro|cobertura|póliza|poliza)\b")
_ACTIVE_RE = re.compile(
    r"\b(is|are|remains|still)\s+(active|valid|current|in effect|in force|good)\b"
    r"|\b(esta|sigue)\s+(activ[oa]|vigente)\b|\bcovered\b|\bcubiert[oa]\b"
)
_ENDED_RE = re.compile(
    r"\b(ended|lapsed|expired|inactive|terminated|cancelled|canceled|not active|no longer active"
    r"|vencid[oa]|termin[oó]|expir[oó]|inactiv[oa])\b"
)
_KEPT_RE = re.compile(
    r"\b(keep|keeping|kept|stays|stay|remains|still)\b[^.]{0,30}\b(booked|on|scheduled|the same"
    r"|in place|appointment|visit)\b|\bsigue (en pie|programad[oa]|reservad[oa])\b"
    r"|\bse mantiene\b"
)
# A visit's length: "a 30-minute visit", "for 45 minutes", "una consulta de 30 minutos".
_DURATION_RE = re.compile(
    r"\b(?P<n>\d{1,3})[- ]?(?:minute|min)s?\b(?= (?:visit|appointment|slot|check|consult|exam))"
    r"|\b(?:visit|appointment|consulta|cita)s? (?:of|de|is|lasts|takes) (?P<m>\d{1,3})"
    r" (?:minutes|minutos|min)\b"
)
# A wait stated for a call back or a visit: wrong when the run itself marked it urgent.
_DELAY_RE = re.compile(
    r"\b(next week|in a (?:few|couple of) (?:days|weeks)|in \d+ (?:days|weeks)|next month"
    r"|within (?:\d+|a few|two|three)(?:\s*(?:-|–|to)\s*\d+)? (?:business |working )?(?:days|weeks)"
    r"|la (?:próxima|proxima) semana|en unos días|en unos dias|el próximo mes)\b"
)
_CONTACT_RE = re.compile(
    r"\b(call|calls|contact|reach|hear from|see you|appointment|visit|follow[- ]up|get back"
    r"|llam\w*|cita|contact\w*|visita)\b"
)
_EVENT_RE = re.compile(r"\b(" + "|".join(sorted(lexicon.EVENTS, key=len, reverse=True)) + r")\b")
_DOB_RE = re.compile(
    r"\b(dob|d\.o\.b|date of birth|born|birth date|fecha de nacimiento|nacid[oa])\b"
)
_MRN_RE = re.compile(
    r"\b(?:mrn|medical record(?: number)?|record number)\s*[:#]?\s*([A-Za-z0-9-]{4,})"
)
_DOCUMENT_CLAIM_RE = re.compile(
    r"\b(?:i(?:'ve| have)?|we(?:'ve| have)?|has been|have been|was|were|is now)\s+"
    r"(?:just |already |now )?"
    r"(posted|uploaded|attached|shared|put|signed|written|wrote|sent)\b[^.?!]{0,40}?"
    r"\b(note|letter|document|form|excuse|record|records|report|summary)\b"
)
_INSTRUCTION_LEAD = (
    r"(?:^|[.;:!,]\s*|\bplease\s+|\byou (?:should|can|may|could|need to|must|will need to)\s+"
    r"|\b(?:i|we) (?:recommend|suggest|advise)(?: that you| you)?\s+|\bgo ahead and\s+"
    r"|\bit(?:'s| is) (?:ok|okay|fine|safe) to\s+|\bpor favor\s+|\bdebe\s+|\bpuede\s+"
    r"|\ble recomiendo\s+|\btry to\s+|\bjust\s+)"
)


_SPANISH_SIDE = {"left": "izquierd", "right": "derech"}


def _drug_words(chart: Chart) -> set[str]:
    return set(lexicon.DRUGS) | {w for o in chart.orders for w in o.drug}


def read(text: str, chart: Chart, zones: tuple[str, ...], now: datetime) -> list[Fact]:
    """One pass over the text: each kind of fact read in turn (the sentence-wise kinds
    sentence by sentence), then every fact in the order it stands, with its context."""
    r = _Reading(text)
    _read_datetimes(r, zones, now)
    _read_practitioners(r)
    _read_places(r, chart)
    drugs = _drug_words(chart)
    _read_medications(r, drugs)
    _read_labs(r)
    for start, end in r.spans:
        sentence = _Sentence(start, end, folded_index(r.folded, start), r.clause(start, end))
        for step in _SENTENCE_STEPS:
            step(r, sentence)
    _read_instructions(r, drugs)
    _read_care(r, [(f.start, f.end) for f in r.facts if f.kind == "instruction"])
    _read_events(r)
    _read_phones(r)
    _read_money(r)
    r.facts.sort(key=lambda f: f.start)
    _contexts(text, r.facts)
    return r.facts


class _Reading:
    """A text being read: the text, its folded form (`fold`: what the patterns read),
    its sentences, and the facts read so far."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans = sentences(text)
        self.folded: Folded = fold(text)
        self.low = self.folded.text
        self.facts: list[Fact] = []

    def span(self, fs: int, fe: int) -> tuple[int, int]:
        """The original span of a span of the folded text."""
        return self.folded.span(fs, fe)

    def clause(self, start: int, end: int) -> str:
        """The folded text of an original span."""
        return self.low[folded_index(self.folded, start) : folded_index(self.folded, end)]

    def add(self, kind: str, start: int, end: int, value: dict[str, Any] | None = None) -> Fact:
        fact = Fact(
            kind, self.text[start:end], start, end, _sentence_of(self.spans, start), value or {}
        )
        self.facts.append(fact)
        return fact

    def add_folded(self, kind: str, fs: int, fe: int, value: dict[str, Any]) -> Fact:
        """A fact found in the folded text at `fs`..`fe`."""
        a, b = self.span(fs, fe)
        return self.add(kind, a, b, value)


@dataclass(frozen=True, slots=True)
class _Sentence:
    """A sentence of the text: its original span, where it starts in the folded text,
    and its folded text (`clause`)."""

    start: int
    end: int
    at: int
    clause: str


def _read_datetimes(r: _Reading, zones: tuple[str, ...], now: datetime) -> None:
    for stated in dates.find_datetimes(r.text):
        instants, days = stated_instants(stated, zones, now)
        r.add(
            "datetime",
            stated.start,
            stated.end,
            {
                "instants": instants,
                "dates": days,
                "has_time": bool(stated.times),
                "has_date": bool(stated.dates),
                "zone": stated.zone,
                "times": [(tuple(sorted(t.hours)), t.minute, t.zone) for t in stated.times],
            },
        )


def _read_practitioners(r: _Reading) -> None:
    for name, start, end in practitioner_names(r.text):
        r.add("practitioner", start, end, {"name": name})


def _read_places(r: _Reading, chart: Chart) -> None:
    """The directory's locations and organisation by the names the chart gives them, the
    longest name first (a place already read is not read again inside itself)."""
    for ref, names in chart.names.items():
        kind = ref.split("/", 1)[0]
        if kind not in ("Location", "Organization"):
            continue
        for name in sorted(set(names), key=len, reverse=True):
            key = fold(name).text
            if len(key) < 4:
                continue
            for m in re.finditer(rf"(?<!\w){re.escape(key)}(?!\w)", r.low):
                a, b = r.span(m.start(), m.end())
                if not any(
                    f.start <= a < f.end for f in r.facts if f.kind in ("location", "organization")
                ):
                    r.add(kind.lower(), a, b, {"ref": ref})


def _read_medications(r: _Reading, drugs: set[str]) -> None:
    """Each drug named, with the dose after it (in its sentence, before another drug), how
    many times a day and by which route."""
    text, spans = r.text, r.spans
    quantities = [q for q in find_quantities(text, r.folded)]
    for m in re.finditer(r"[^\W\d_]+", r.low):
        word = m.group()
        if word not in drugs:
            continue
        a, b = r.span(m.start(), m.end())
        sentence = _sentence_of(spans, a)
        dose = next(
            (
                q
                for q in quantities
                if q.dimension == "mass"
                and b <= q.start <= b + 40
                and q.start < sentence[1]
                # "warfarin and lisinopril 20 mg": the dose is the nearer drug's
                and not any(
                    w in drugs for w in re.findall(r"[^\W\d_]+", fold(text[b : q.start]).text)
                )
            ),
            None,
        )
        tail_end = min(sentence[1], (dose.end if dose else b) + 40)
        per_day = times_a_day(text[b:tail_end])
        route = routes_in(text[b:tail_end])
        fact = r.add(
            "medication", a, b, {"drug": word, "dose": dose, "per_day": per_day, "routes": route}
        )
        if dose is not None:
            # The dose is what ConText reads ("not 20 mg"): the span it judges.
            fact.value["dose_span"] = (dose.start, dose.end)


def _read_coverage(r: _Reading, s: _Sentence) -> None:
    """Coverage said to be active or ended."""
    named = _COVERAGE_RE.search(s.clause)
    if not named:
        return
    state = (
        "ended"
        if _ENDED_RE.search(s.clause)
        else ("active" if _ACTIVE_RE.search(s.clause) else None)
    )
    if state:
        fs = s.at + named.start()
        r.add_folded("coverage-status", fs, fs + len(named.group()), {"state": state})


def _read_durations(r: _Reading, s: _Sentence) -> None:
    for m in _DURATION_RE.finditer(s.clause):
        fs = s.at + m.start()
        minutes = int(m.group("n") or m.group("m"))
        r.add_folded("duration", fs, fs + len(m.group()), {"minutes": minutes})


def _read_delay(r: _Reading, s: _Sentence) -> None:
    """A wait stated for a call back or a visit."""
    delay = _DELAY_RE.search(s.clause)
    if delay and _CONTACT_RE.search(s.clause):
        fs = s.at + delay.start()
        r.add_folded("delay", fs, fs + len(delay.group()), {"text": delay.group()})


def _read_kept(r: _Reading, s: _Sentence) -> None:
    """An appointment said to stand ("your visit stays booked")."""
    kept = _KEPT_RE.search(s.clause)
    if kept and re.search(
        r"\b(appointment|visit|booking|physical|follow-up|cita|consulta)\b", s.clause
    ):
        fs = s.at + kept.start()
        value = {"state": "kept", "sentence_text": s.clause}
        r.add_folded("appointment-status", fs, fs + len(kept.group()), value)


def _read_document_claims(r: _Reading, s: _Sentence) -> None:
    for m in _DOCUMENT_CLAIM_RE.finditer(s.clause):
        fs = s.at + m.start()
        value = {"verb": m.group(1), "noun": m.group(2)}
        r.add_folded("document-claim", fs, fs + len(m.group()), value)


def _mark_dobs(r: _Reading, s: _Sentence) -> None:
    """The dates of a sentence about a date of birth are one."""
    if _DOB_RE.search(s.clause):
        for f in [f for f in r.facts if f.kind == "datetime" and s.start <= f.start < s.end]:
            f.value["dob"] = True


def _read_mrns(r: _Reading, s: _Sentence) -> None:
    for m in _MRN_RE.finditer(s.clause):
        fs = s.at + m.start(1)
        a, b = r.span(fs, fs + len(m.group(1)))
        r.add("mrn", a, b, {"value": r.text[a:b]})


def _read_sides(r: _Reading, s: _Sentence) -> None:
    """A side of the body (left, right) the sentence states."""
    for side in sides_in(s.clause):
        said = re.search(
            rf"(?<![\w])({side}|{side[0]}|{_SPANISH_SIDE[side]}\w*)(?![\w])",
            s.clause,
        )
        if said:
            fs = s.at + said.start()
            r.add_folded("side", fs, fs + len(said.group()), {"side": side})


# The kinds of fact read sentence by sentence, in the order each sentence is read.
_SENTENCE_STEPS = (
    _read_coverage,
    _read_durations,
    _read_delay,
    _read_kept,
    _read_document_claims,
    _mark_dobs,
    _read_mrns,
    _read_sides,
)


def _read_events(r: _Reading) -> None:
    for m in _EVENT_RE.finditer(r.low):
        a, b = r.span(m.start(), m.end())
        r.add("event", a, b, {"words": lexicon.EVENTS[m.group()]})


def _read_phones(r: _Reading) -> None:
    """Phone numbers, emergency numbers aside."""
    for phone in find_phones(r.text, r.folded):
        if not phone.emergency:
            r.add("phone", phone.start, phone.end, {"digits": phone.digits})


def _read_money(r: _Reading) -> None:
    for money in find_money(r.text, r.folded):
        r.add("money", money.start, money.end, {"value": money.value})


def folded_index(folded: Any, original: int) -> int:
    """The folded index of an original index (the first folded char at or after it)."""
    origin = folded.origin
    lo, hi = 0, len(origin) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if origin[mid] < original:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _read_labs(r: _Reading) -> None:
    """Each lab test named with the value after it (a goal or a range is not a result)."""
    text, low, span, add = r.text, r.low, r.span, r.add
    keys = sorted(lexicon.LAB_NAMES, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
    mentions = [(m.start(), m.end(), m.group()) for m in pattern.finditer(low)]
    if not mentions:
        return
    numbers = [(m.start(), m.end(), m.group()) for m in _NUMBER_RE.finditer(low)]
    previous_end = -100
    for s, e, key in mentions:
        if key == "k" and not re.match(r"\s*(?:[:=]|\d|of|is|was)", low[e : e + 6]):
            continue  # "k" alone is potassium only before its value
        gap = low[previous_end:s] if previous_end >= 0 else ""
        if 0 <= s - previous_end <= 25 and not _NUMBER_RE.search(gap):
            previous_end = e
            continue  # "HDL ("good") cholesterol 61": the first name takes the value
        previous_end = e
        nxt = next(((a, b, t) for a, b, t in numbers if e <= a <= e + 30), None)
        if nxt is None:
            continue
        between = low[e : nxt[0]]
        if re.search(r"[.;!?]", between) or _NOT_VALUE_RE.search(between):
            continue
        if _RANGE_AFTER_RE.match(low[nxt[1] : nxt[1] + 6]):
            continue  # "INR 2.0–3.0": a range is a goal, not a result
        number = parse_number(nxt[2].replace(",", "."))
        if number is None:
            continue
        a, b = span(s, e)
        na, nb = span(nxt[0], nxt[1])
        add(
            "lab",
            a,
            nb,
            {
                "test": lexicon.LAB_NAMES[key],
                "number": number,
                "name": text[a:b],
                "value_span": (na, nb),
            },
        )


def _read_instructions(r: _Reading, drugs: set[str]) -> None:
    """A medicine instruction: a verb (change, take) on a drug or a medicine noun."""
    text, low, folded, add = r.text, r.low, r.folded, r.add
    verbs = sorted({*lexicon.CHANGE_VERBS, *lexicon.TAKE_VERBS}, key=len, reverse=True)
    verb_re = "|".join(re.escape(fold(v).text) for v in verbs)
    regex = re.compile(rf"{_INSTRUCTION_LEAD}(?P<verb>{verb_re})\b(?P<rest>[^.;!?\n]{{0,80}})")
    for m in regex.finditer(low):
        rest = m.group("rest")
        drug = next((w for w in re.findall(r"[^\W\d_]+", rest) if w in drugs), None)
        noun = re.search(rf"\b({lexicon.MEDICINE_NOUNS})\b", rest)
        verb = m.group("verb")
        if drug is None and (noun is None or verb in lexicon.NEEDS_DRUG):
            continue
        fs, fe = m.start("verb"), m.end("rest")
        a, b = folded.span(fs, fe)
        add(
            "instruction",
            a,
            b,
            {
                "verb": verb,
                "drug": drug,
                "as_ordered": bool(re.search(rf"\b({lexicon.AS_ORDERED})\b", rest)),
                "doses": [q for q in find_quantities(text[a:b]) if q.dimension == "mass"],
                "change": verb in {fold(v).text for v in lexicon.CHANGE_VERBS}
                or bool(re.search(r"\b(half|double|extra|twice as|mitad|doble)\b", rest)),
                "words": words_of(text[a:b]),
            },
        )


def _read_care(r: _Reading, taken: list[tuple[int, int]]) -> None:
    """A care instruction ("keep the wound dry"), outside the medicine instructions
    already read (`taken`)."""
    text, low, folded, add = r.text, r.low, r.folded, r.add
    verbs = "|".join(re.escape(v) for v in sorted(lexicon.CARE_VERBS, key=len, reverse=True))
    lead = _INSTRUCTION_LEAD[:-1] + r"|\b(?:do not|don't|dont|never|no)\s+)"
    regex = re.compile(rf"{lead}(?P<verb>{verbs})\b(?P<rest>[^.;!?\n]{{0,80}})")
    objects = re.compile(rf"\b({lexicon.CARE_OBJECTS})\b")
    for m in regex.finditer(low):
        verb, rest = m.group("verb"), m.group("rest")
        if not (objects.search(rest) or objects.fullmatch(verb)):
            continue
        a, b = folded.span(m.start("verb"), m.end("rest"))
        if any(x <= a < y for x, y in taken):
            continue  # a medicine instruction already ("take it with food")
        negated = bool(
            re.search(
                r"(do not|don't|dont|never|no)\s+$",
                low[max(0, m.start("verb") - 8) : m.start("verb")],
            )
        )
        add(
            "care-instruction",
            a,
            b,
            {"verb": verb, "negated": negated, "words": words_of(text[a:b])},
        )


def _contexts(text: str, facts: list[Fact]) -> None:
    judged = []
    for fact in facts:
        if fact.kind == "medication" and "dose_span" in fact.value:
            judged.append(fact.value["dose_span"])
        elif fact.kind == "lab":
            judged.append(fact.value["value_span"])
        else:
            judged.append((fact.start, fact.end))
    language = language_of(text)
    for fact, context in zip(facts, contexts(text, judged, language), strict=True):
        fact.context = context


def number_equal(a: Decimal, b: Decimal) -> bool:
    """Equal as written to the stated precision ("9.1" equals 9.10, "182" equals 182.0)."""
    return a.normalize() == b.normalize() or abs(a - b) < Decimal("0.0001")


_read_cache: dict[tuple[Any, ...], list[Fact]] = {}
_read_lock = threading.Lock()
_READ_CACHE_SIZE = 4096


def read_cached(text: str, chart: Chart, zones: tuple[str, ...], now: datetime) -> list[Fact]:
    """`read`, remembered: the scenario check grades hundreds of near misses whose texts
    and vocabulary are the oracle's. What the reader depends on is the key: the text, the
    chart's drugs and names, the zones and the day. The facts are copies (checks mark them)."""
    key = (
        text,
        frozenset(w for o in chart.orders for w in o.drug),
        tuple(sorted((r, tuple(n)) for r, n in chart.names.items())),
        zones,
        now.date(),
    )
    with _read_lock:
        facts = _read_cache.get(key)
    if facts is None:
        facts = read(text, chart, zones, now)
        with _read_lock:
            if len(_read_cache) >= _READ_CACHE_SIZE:
                _read_cache.pop(next(iter(_read_cache)))
            _read_cache[key] = facts
    return [replace(f, value=dict(f.value)) for f in facts]
