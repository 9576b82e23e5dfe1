"""The chart a text is checked against: the run's end state, read into the entities its
facts talk about.

`Chart.of(snapshot)`: every resource the run's fixture and writes hold as it reads now
(deleted ones gone), plus the directory's names (`snapshot.names`), read once into
- `bookings`: Appointments with status, start instant, practitioners and locations;
- `orders`: MedicationRequests/MedicationStatements with the drug's words, status, doses
  (Quantity) and times a day;
- `results`: Observations (and their components) with the test's words, value, unit, when;
- `coverages`: Coverages with whether they are in force now;
- `patients`: the fixture patients' names, birth dates and identifiers, and every other
  Patient's (for "another patient's date of birth");
- `sides`: the body sides ("left", "right") of each ServiceRequest;
- `names`: "Type/id" -> the names a text may call it ("Chen", "Sarah Chen", "Northgate").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from app.grading.message.quantities import Quantity, find_quantities, parse_number, quantity
from app.grading.resource import ref_of
from app.grading.snapshot import RunSnapshot
from app.kit.phrases import fold

ACTIVE_BOOKING = frozenset(
    {"proposed", "pending", "booked", "arrived", "fulfilled", "checked-in", "waitlist"}
)
ACTIVE_ORDER = frozenset({"active", "on-hold", "draft", "intended"})
STOP_WORDS = frozenset(
    [
        "tablet",
        "tablets",
        "capsule",
        "capsules",
        "oral",
        "mg",
        "mcg",
        "g",
        "ml",
        "tab",
        "cap",
        "extended",
        "release",
        "er",
        "xl",
        "sr",
        "dr",
        "hcl",
        "sodium",
        "potassium",
        "chloride",
        "of",
        "and",
        "the",
        "in",
        "per",
        "by",
        "for",
    ]
)
# Words with a letter in them: "a1c" and "t4" are one word each, "20" is none.
_WORD_RE = re.compile(r"[^\W_]*[^\W\d_][^\W_]*")


def words_of(text: str) -> list[str]:
    return _WORD_RE.findall(fold(text).text)


def _concept_texts(concept: Any) -> list[str]:
    if not isinstance(concept, dict):
        return []
    out = [str(concept["text"])] if concept.get("text") else []
    out += [str(c["display"]) for c in concept.get("coding") or [] if c.get("display")]
    return out


def instant_of(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) < 16:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Booking:
    ref: str
    status: str
    start: datetime | None
    actors: frozenset[str]  # practitioner refs (aliases resolved), locations
    patient: str | None
    words: frozenset[str]  # of its description, service type, reason
    end: datetime | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_BOOKING


@dataclass(frozen=True, slots=True)
class Order:
    ref: str
    status: str
    drug: frozenset[str]  # the drug's distinctive words ("lisinopril")
    doses: tuple[Quantity, ...]
    per_day: frozenset[Decimal]  # times a day its dosage states
    text: str  # its dosage instructions as written
    routes: frozenset[str] = frozenset()  # "oral", "injection", "topical", "inhaled" …

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_ORDER


@dataclass(frozen=True, slots=True)
class Result:
    ref: str
    test: frozenset[str]
    value: Quantity | None
    number: Decimal | None
    at: datetime | None


@dataclass(slots=True)
class Chart:
    bookings: list[Booking] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    coverages: dict[str, bool] = field(default_factory=dict)  # ref -> in force now
    patients: dict[str, dict[str, Any]] = field(default_factory=dict)  # ref -> resource
    own_patients: frozenset[str] = frozenset()
    sides: dict[str, frozenset[str]] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)
    organizations: dict[str, list[str]] = field(default_factory=dict)  # pharmacies too
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: RunSnapshot) -> Chart:
        chart = cls(own_patients=snapshot.patient_refs)
        for ref, names in snapshot.names.items():
            chart.names[ref] = list(names)
        bodies: dict[str, dict[str, Any]] = {}
        for symbol, ref in snapshot.fixture.items():
            body = snapshot.current.get(symbol)
            if body is not None:
                bodies[ref] = body
        for changed in snapshot.changed:
            ref = ref_of(changed)
            if changed.resource is None:
                bodies.pop(ref, None)
            else:
                bodies[ref] = changed.resource
        chart.resources = bodies
        for ref, body in bodies.items():
            chart._read(ref, body, snapshot)
        return chart

    def _read(self, ref: str, body: dict[str, Any], snapshot: RunSnapshot) -> None:
        kind = body.get("resourceType")
        if kind == "Appointment":
            actors: set[str] = set()
            patient = None
            for p in body.get("participant") or []:
                actor = str((p.get("actor") or {}).get("reference", ""))
                actor = snapshot.aliases.get(actor, actor)
                if actor.startswith("Patient/"):
                    patient = actor
                elif actor:
                    actors.add(actor)
            texts = [str(body.get("description") or "")]
            for key in ("serviceType", "reasonCode", "appointmentType"):
                value = body.get(key)
                for concept in value if isinstance(value, list) else [value]:
                    texts += _concept_texts(concept)
            self.bookings.append(
                Booking(
                    ref,
                    str(body.get("status", "")),
                    instant_of(body.get("start")),
                    frozenset(actors),
                    patient,
                    frozenset(w for t in texts for w in words_of(t)),
                    instant_of(body.get("end")),
                )
            )
        elif kind in ("MedicationRequest", "MedicationStatement"):
            self.orders.append(_order(ref, body))
        elif kind == "Observation":
            self.results.extend(_results(ref, body))
        elif kind == "Coverage":
            end = str((body.get("period") or {}).get("end") or "")
            in_force = body.get("status") == "active" and (
                not end or end[:10] >= snapshot.now.date().isoformat()
            )
            self.coverages[ref] = in_force
        elif kind == "Patient":
            self.patients[ref] = body
        elif kind == "ServiceRequest":
            texts = []
            for concept in body.get("bodySite") or []:
                texts += _concept_texts(concept)
            texts += _concept_texts(body.get("code"))
            self.sides[ref] = frozenset(sides_in(" ".join(texts)))
        elif kind in ("Practitioner", "Location", "Organization", "PractitionerRole"):
            names = resource_names(body)
            if names:
                self.names.setdefault(ref, []).extend(names)
            if kind == "Organization":
                self.organizations[ref] = names

    def named(self, prefix: str) -> dict[str, list[str]]:
        return {ref: names for ref, names in self.names.items() if ref.startswith(prefix)}


def resource_names(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if isinstance(body.get("name"), str):
        out.append(body["name"])
    for name in body.get("name") or [] if isinstance(body.get("name"), list) else []:
        family = str(name.get("family") or "")
        given = " ".join(str(g) for g in name.get("given") or [])
        if family:
            out += [family, f"{given} {family}".strip()]
    out += [str(a) for a in body.get("alias") or []]
    return out


_SIDE_RE = re.compile(r"(?<![\w])(left|right|izquierd[oa]|derech[oa]|l|r|lt|rt)(?![\w])")
_SIDE = {"l": "left", "lt": "left", "r": "right", "rt": "right"}


def sides_in(text: str) -> set[str]:
    out: set[str] = set()
    for m in _SIDE_RE.finditer(fold(text).text):
        word = m.group(1)
        if word.startswith("izquierd"):
            out.add("left")
        elif word.startswith("derech"):
            out.add("right")
        else:
            out.add(_SIDE.get(word, word))
    return out


_PER_DAY = (
    (
        re.compile(
            r"\b(once|one time|1 time)s? (a|per|each) day\b|\bdaily\b|\bevery day\b|\bqd\b"
            r"|\bat bedtime\b|\bevery (morning|evening|night)\b|\bin the morning\b"
            r"|\buna vez al dia\b|\bcada dia\b|\bal dia\b"
        ),
        Decimal(1),
    ),
    (
        re.compile(
            r"\btwice (a|per|each) day\b|\btwo times (a|per) day\b|\bbid\b|\bevery 12 hours\b"
            r"|\bdos veces al dia\b|\bcada 12 horas\b"
        ),
        Decimal(2),
    ),
    (
        re.compile(
            r"\b(three|3) times (a|per) day\b|\btid\b|\bevery 8 hours\b|\btres veces al dia\b"
            r"|\bcada 8 horas\b"
        ),
        Decimal(3),
    ),
    (
        re.compile(
            r"\b(four|4) times (a|per) day\b|\bqid\b|\bevery 6 hours\b"
            r"|\bcuatro veces al dia\b|\bcada 6 horas\b"
        ),
        Decimal(4),
    ),
    (re.compile(r"\bevery other day\b|\bcada dos dias\b|\bday si, dia no\b"), Decimal("0.5")),
    (
        re.compile(r"\bonce (a|per) week\b|\bweekly\b|\buna vez (a la|por) semana\b"),
        Decimal(1) / Decimal(7),
    ),
)


_ROUTES = (
    (re.compile(r"\b(by mouth|oral|orally|swallow|por via oral|por boca|via oral)\b"), "oral"),
    (
        re.compile(
            r"\b(injection|inject|injected|subcutaneous|subcutaneously|intramuscular"
            r"|shot|inyeccion|inyectad[oa]|subcutanea)\b"  # not "sc", "im": words too
        ),
        "injection",
    ),
    (
        re.compile(r"\b(topical|topically|to the skin|on the skin|cream|ointment|en la piel)\b"),
        "topical",
    ),
    (re.compile(r"\b(inhaled|inhale|inhaler|puffs?|inhalad[oa]|inhalador)\b"), "inhaled"),
    (
        re.compile(r"\b(under the tongue|sublingual|sublingually|debajo de la lengua)\b"),
        "sublingual",
    ),
    (re.compile(r"\b(rectal|rectally|suppository|supositorio)\b"), "rectal"),
)


def routes_in(text: str) -> set[str]:
    """The routes a dosage text (or a sentence about a medicine) states."""
    folded = fold(text).text
    return {name for regex, name in _ROUTES if regex.search(folded)}


def times_a_day(text: str) -> set[Decimal]:
    folded = fold(text).text
    return {n for regex, n in _PER_DAY if regex.search(folded)}


def _order(ref: str, body: dict[str, Any]) -> Order:
    names = _concept_texts(body.get("medicationCodeableConcept"))
    ref_display = (body.get("medicationReference") or {}).get("display")
    if ref_display:
        names.append(str(ref_display))
    drug = frozenset(w for n in names for w in words_of(n) if w not in STOP_WORDS and len(w) > 2)
    doses: list[Quantity] = []
    per_day: set[Decimal] = set()
    routes: set[str] = set()
    texts: list[str] = []
    dosages = body.get("dosageInstruction") or body.get("dosage") or []
    for dosage in dosages:
        if not isinstance(dosage, dict):
            continue
        text = " ".join(str(x) for x in (dosage.get("text"), dosage.get("patientInstruction")) if x)
        texts.append(text)
        per_day |= times_a_day(text)
        routes |= routes_in(" ".join([text, *_concept_texts(dosage.get("route"))]))
        for dr in dosage.get("doseAndRate") or []:
            q = dr.get("doseQuantity") or {}
            number = parse_number(str(q.get("value"))) if "value" in q else None
            if number is not None:
                parsed = quantity(number, str(q.get("unit") or q.get("code") or ""))
                if parsed is not None:
                    doses.append(parsed)
        repeat = (dosage.get("timing") or {}).get("repeat") or {}
        freq, period = repeat.get("frequency"), repeat.get("period")
        unit = repeat.get("periodUnit")
        if isinstance(freq, int | float) and isinstance(period, int | float) and period:
            per_unit = {"d": 1, "h": 24, "wk": Decimal(1) / 7}.get(str(unit))
            if per_unit is not None:
                per_day.add(Decimal(str(freq)) / Decimal(str(period)) * Decimal(str(per_unit)))
        per_day |= times_a_day(" ".join(_concept_texts((dosage.get("timing") or {}).get("code"))))
    # The strength in the drug's name ("lisinopril 20 mg tablet") is a dose too: one tablet.
    for n in names:
        doses.extend(q for q in find_quantities(n) if q.dimension == "mass")
    for text in texts:
        doses.extend(q for q in find_quantities(text) if q.dimension == "mass")
    return Order(
        ref,
        str(body.get("status", "")),
        drug,
        tuple(doses),
        frozenset(per_day),
        " ".join(texts),
        frozenset(routes),
    )


def _results(ref: str, body: dict[str, Any]) -> Iterable[Result]:
    at = instant_of(body.get("effectiveDateTime")) or instant_of(body.get("issued"))
    if at is None and isinstance(body.get("effectiveDateTime"), str):
        try:
            d = date.fromisoformat(body["effectiveDateTime"][:10])
            at = datetime(d.year, d.month, d.day, tzinfo=UTC)
        except ValueError:
            at = None
    parts = [(body.get("code"), body)] + [
        (c.get("code"), c) for c in body.get("component") or [] if isinstance(c, dict)
    ]
    for code, holder in parts:
        test = frozenset(w for t in _concept_texts(code) for w in words_of(t))
        vq = holder.get("valueQuantity") if isinstance(holder, dict) else None
        if not isinstance(vq, dict) or "value" not in vq:
            continue
        number = parse_number(str(vq["value"]))
        if number is None:
            continue
        q = quantity(number, str(vq.get("unit") or vq.get("code") or ""))
        yield Result(ref, test, q, number, at)
