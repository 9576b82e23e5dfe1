"""`consistent`: a date and time in a sentence about a booking is one of the patient's
bookings (with its practitioner and location), a dose an active order's, a lab value its
test's latest result, a coverage, a kept appointment, a date of birth, a record number,
a duration, an end time, a delay and a side the chart's (see `app.grading.truth.grade`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from app.grading.resource import ref_of
from app.grading.truth.chart import Booking, Order, words_of
from app.grading.truth.check import BOOKING_RE, CANCEL_RE, PRACTITIONER_TYPES, CheckBase
from app.grading.truth.context import (
    ASSERTED,
    HISTORICAL,
)
from app.grading.truth.reader import Fact, number_equal
from app.kit.dates import zone_info, zone_of
from app.kit.phrases import fold

_OFFER_RE = re.compile(
    r"\b(available|availability|openings?|open (?:slots?|times?)|options?|choose|pick|prefer"
    r"|would (?:you like|.{0,20}work)|works? (?:best |better )?for you|disponibles?"
    r"|opciones|prefiere|le conviene)\b"
)
# "You'll be done by 10:30", "the visit ends at 10:30": a claim of when it ends (not a
# patient's constraint written on a booking, "out by 11:00").
_END_RE = re.compile(
    r"\b(?:you(?:'ll| will)? be (?:done|finished|out)|(?:visit|appointment|it) (?:ends?|will end"
    r"|is over|should end)|(?:la cita|la consulta) (?:termina|terminará|terminara))"
    r"\s+(?:by|at|around|a las|hacia las)\s*$"
)

_NOT_START_RE = re.compile(
    r"\b(by|until|before|after|arrive|arrival|check[- ]in|ends?|done|finish(?:es)?|through"
    r"|hasta|antes de|llegue)\s*(?:at\s*)?$"
)
_WITH_RE = re.compile(r"\b(with|con|see|sees|ver a|verá a)(?:\s+(?:la|el))?\s*$")
_AT_RE = re.compile(r"\b(at|in|en|a)(?:\s+(?:our|the|la|el|nuestra|nuestro))?\s*$")


class ConsistentCheck(CheckBase):
    """The `consistent` check."""

    # -- consistent -------------------------------------------------------------------

    def consistent(self) -> None:
        for i, facts in enumerate(self.facts):
            for fact in facts:
                if fact.kind == "datetime":
                    self._datetime(i, fact, facts)
                elif fact.kind == "appointment-status" and fact.context in (ASSERTED, HISTORICAL):
                    # "keeping your original appointment": "original" names which one,
                    # the statement is about now.
                    self._kept(i, fact, facts)
                elif fact.context != ASSERTED:
                    continue
                elif fact.kind == "medication":
                    self._medication(i, fact)
                elif fact.kind == "lab":
                    self._lab(i, fact)
                elif fact.kind == "coverage-status":
                    self._coverage(i, fact)
                elif fact.kind == "mrn":
                    self._mrn(i, fact)
                elif fact.kind == "side":
                    self._side(i, fact)
                elif fact.kind == "delay":
                    self._delay(i, fact)
                elif fact.kind == "duration":
                    self._duration(i, fact)

    def _datetime(self, i: int, fact: Fact, facts: list[Fact]) -> None:
        if fact.value.get("dob"):
            if fact.context == ASSERTED:
                self._dob(i, fact)
            return
        if fact.context not in (ASSERTED, HISTORICAL) or not fact.value["has_time"]:
            return
        lead = fold(self.texts[i].text[max(fact.sentence[0], fact.start - 20) : fact.start]).text
        if (
            fact.context == ASSERTED
            and self.texts[i].audience == "patient"
            and _END_RE.search(lead)
        ):
            self._end_time(i, fact)
            return
        if not (fact.value["has_date"] or fact.value["instants"]):
            return
        sentence = self.sentence(i, fact)
        if not BOOKING_RE.search(sentence) or not self.bookings:
            return
        if _OFFER_RE.search(sentence):
            return  # times offered ("available: … or …") state no booking
        lead = fold(self.texts[i].text[max(fact.sentence[0], fact.start - 16) : fact.start]).text
        if _NOT_START_RE.search(lead):
            return  # "arrive by 8:45", "done by 10:30": not when it starts
        instants = set(fact.value["instants"])
        starts = {b.start for b in self.bookings if b.start}
        others = [
            f
            for f in facts
            if f is not fact
            and f.kind == "datetime"
            and fact.sentence == f.sentence
            and set(f.value["instants"]) & starts
        ]
        if others and not instants & starts:
            return  # another time of the sentence is the booking's ("… at 9:00 (check in 8:45)")
        cancel = CANCEL_RE.search(sentence) is not None
        if fact.context == HISTORICAL or cancel:
            pool = [b for b in self.bookings if b.start in instants]
            if pool or instants & self.ever_starts:
                self.ok("consistent", fact, "a start this booking had")
                return
            detail = "no booking of the patient ever started at this time"
        else:
            pool = [b for b in self.bookings if b.active and b.start in instants]
            if pool:
                self.ok("consistent", fact, f"the start of {pool[0].ref}")
                self._booking_names(i, fact, facts, pool)
                return
            active = sorted(
                (b for b in self.bookings if b.active and b.start), key=lambda b: str(b.start)
            )
            if not active:
                return  # nothing booked to contradict: what was said is `grounded`'s
            shown = ", ".join(f"{b.ref} at {b.start:%Y-%m-%d %H:%M} UTC" for b in active[:3])
            zone = fact.value.get("zone")
            detail = f"the booking is {shown}" + (f" (read in {zone})" if zone else "")
        self.fail("consistent", i, fact, detail)

    def _booking_names(self, i: int, fact: Fact, facts: list[Fact], pool: list[Booking]) -> None:
        text = self.texts[i].text
        a, b = fact.sentence
        actors = {actor for booking in pool for actor in booking.actors}
        for other in facts:
            if not (a <= other.start < b) or other.context != ASSERTED:
                continue
            lead = fold(text[max(a, other.start - 24) : other.start]).text
            if other.kind == "practitioner" and _WITH_RE.search(
                lead.removesuffix("dr. ").removesuffix("dr ")
            ):
                refs = self._practitioners(other.value["name"])
                if refs and not refs & actors:
                    self.fail("consistent", i, other, "not a practitioner of the booking it names")
                elif refs:
                    self.ok("consistent", other, "a practitioner of the booking")
            elif other.kind == "location" and _AT_RE.search(lead):
                places = {x for x in actors if x.startswith("Location/")}
                if places and other.value["ref"] not in places:
                    self.fail("consistent", i, other, "not the location of the booking it names")
                elif places:
                    self.ok("consistent", other, "the booking's location")

    def _practitioners(self, name: str) -> set[str]:
        words = {w for w in words_of(name) if w not in ("de", "del", "la")}
        out = set()
        for ref, names in self.chart.names.items():
            if not ref.startswith(PRACTITIONER_TYPES):
                continue
            for n in names:
                if words and words <= set(words_of(n)):
                    out.add(self.snapshot.aliases.get(ref, ref))
        return out

    def _orders_for(self, drug: str) -> list[Order]:
        return [o for o in self.chart.orders if drug in o.drug]

    def _medication(self, i: int, fact: Fact) -> None:
        orders = self._orders_for(fact.value["drug"])
        active = [o for o in orders if o.active]
        dose = fact.value["dose"]
        routes = fact.value.get("routes") or set()
        known_routes = {r for o in active for r in o.routes}
        if active and routes and known_routes and not routes & known_routes:
            self.fail(
                "consistent",
                i,
                fact,
                f"the active order is {', '.join(sorted(known_routes))}, "
                f"not {', '.join(sorted(routes))}",
            )
            return
        if not active or dose is None:
            return
        same = [o for o in active if any(dose.same(d) for d in o.doses)]
        if not same:
            if not any(o.doses for o in active):
                return
            stopped = [o for o in orders if not o.active and any(dose.same(d) for d in o.doses)]
            said = ", ".join(
                sorted({d.text or f"{d.value} {d.unit}" for o in active for d in o.doses})
            )
            if stopped:
                old = stopped[0]
                detail = (
                    f"the dose of {old.ref}, which is {old.status}; the active order says {said}"
                )
            else:
                detail = f"the active order says {said}"
            self.fail("consistent", i, fact, detail)
            return
        per_day = fact.value["per_day"]
        known = {p for o in same for p in o.per_day}
        if per_day and known and not per_day & known:
            self.fail(
                "consistent",
                i,
                fact,
                f"the active order is {_per_day(known)}, not {_per_day(per_day)}",
            )
            return
        self.ok("consistent", fact, f"the dose of {same[0].ref}")

    def _lab(self, i: int, fact: Fact) -> None:
        tests = {t for t in fact.value["test"] if not t.startswith("-")}
        excluded = {t[1:] for t in fact.value["test"] if t.startswith("-")}
        results = [
            r
            for r in self.chart.results
            if r.test & tests and not r.test & excluded and r.number is not None
        ]
        if not results:
            return
        latest = max((r.at for r in results if r.at), default=None)
        current = [r for r in results if r.at == latest] if latest else results
        if any(
            r.number is not None and number_equal(r.number, fact.value["number"]) for r in current
        ):
            self.ok("consistent", fact, f"the result of {current[0].ref}")
            return
        shown = ", ".join(f"{r.number} ({r.ref})" for r in current[:3])
        self.fail("consistent", i, fact, f"the latest result is {shown}")

    def _coverage(self, i: int, fact: Fact) -> None:
        if not self.chart.coverages:
            return
        in_force = any(self.chart.coverages.values())
        state = fact.value["state"]
        if state == "active" and not in_force:
            self.fail("consistent", i, fact, "no coverage on file is in force")
        elif state == "ended" and in_force and all(self.chart.coverages.values()):
            self.fail("consistent", i, fact, "the coverage on file is in force")
        else:
            self.ok("consistent", fact)

    def _kept(self, i: int, fact: Fact, facts: list[Fact]) -> None:
        sentence = fact.value.get("sentence_text", "")
        a, b = fact.sentence
        days = {
            d for f in facts if f.kind == "datetime" and a <= f.start < b for d in f.value["dates"]
        }
        named = set()
        for ref, names in self.chart.names.items():
            if ref.startswith(PRACTITIONER_TYPES) and any(
                re.search(rf"\b{re.escape(fold(n).text)}\b", sentence) for n in names
            ):
                named.add(self.snapshot.aliases.get(ref, ref))
        pool = [b for b in self.bookings if not named or b.actors & named]
        if days:
            pool = [b for b in pool if b.start and _local_days(b.start, self.zones) & days]
        if re.search(r"\b(original|current|existing|same)\b", sentence):
            created = {ref_of(c) for c in self.snapshot.changed if c.created}
            pool = [b for b in pool if b.ref not in created]
        if not pool:
            return
        if any(b.active for b in pool):
            self.ok("consistent", fact)
        else:
            self.fail(
                "consistent",
                i,
                fact,
                "that booking is " + ", ".join(f"{b.ref} {b.status}" for b in pool[:3]),
            )

    def _own_patients(self) -> list[dict[str, Any]]:
        return [p for ref, p in self.chart.patients.items() if ref in self.snapshot.patient_refs]

    def _dob(self, i: int, fact: Fact) -> None:
        births = {
            str(p.get("birthDate", ""))[:10] for p in self._own_patients() if p.get("birthDate")
        }
        if not births:
            return
        said = {d.isoformat() for d in fact.value["dates"]}
        if said & births:
            self.ok("consistent", fact, "the patient's date of birth")
        elif said:
            self.fail("consistent", i, fact, f"the patient was born {', '.join(sorted(births))}")

    def _mrn(self, i: int, fact: Fact) -> None:
        ids = {
            str(x.get("value", "")).lower()
            for p in self._own_patients()
            for x in p.get("identifier") or []
            if isinstance(x, dict)
        }
        if not ids:
            return
        if fact.value["value"].lower() in ids:
            self.ok("consistent", fact, "the patient's identifier")
        else:
            self.fail("consistent", i, fact, "not an identifier of the patient")

    def _timed_bookings(self) -> list[Booking]:
        return [b for b in self.bookings if b.active and b.start and b.end]

    def _duration(self, i: int, fact: Fact) -> None:
        """ "a 30-minute visit": the length of a booking of the patient."""
        timed = self._timed_bookings()
        if not timed:
            return
        lengths = {int((b.end - b.start).total_seconds() // 60) for b in timed if b.end and b.start}
        if fact.value["minutes"] in lengths:
            self.ok("consistent", fact, "the booking's length")
        else:
            said = ", ".join(f"{n} minutes" for n in sorted(lengths))
            self.fail("consistent", i, fact, f"the booking lasts {said}")

    def _end_time(self, i: int, fact: Fact) -> None:
        """ "You'll be done by 10:30": the end of a booking, read in UTC or a clinic zone
        (or the zone the text states)."""
        timed = self._timed_bookings()
        if not timed:
            return
        ends: set[tuple[int, int]] = set()
        for b in timed:
            assert b.end is not None
            ends.add((b.end.astimezone(UTC).hour, b.end.astimezone(UTC).minute))
            for name in self.zones:
                tz = zone_info(name)
                if tz is not None:
                    local = b.end.astimezone(tz)
                    ends.add((local.hour, local.minute))
        for hours, minute, zone in fact.value["times"]:
            if zone is not None:
                stated = zone_of(zone)
                if stated is None:
                    continue
                zoned = {
                    (b.end.astimezone(stated).hour, b.end.astimezone(stated).minute)
                    for b in timed
                    if b.end
                }
                if any((h, minute) in zoned for h in hours):
                    continue
            elif any((h, minute) in ends for h in hours):
                continue
            self.fail("consistent", i, fact, "not when the booking ends")
            return
        self.ok("consistent", fact, "the booking's end")

    def _delay(self, i: int, fact: Fact) -> None:
        """ "We'll call you next week" after the run itself marked the matter urgent."""
        if self.urgent:
            ref, priority = self.urgent[0]
            self.fail("consistent", i, fact, f"{ref} is {priority}")
        else:
            self.ok("consistent", fact)

    def _side(self, i: int, fact: Fact) -> None:
        text = self.texts[i]
        sides = self.chart.sides.get(text.ref) if text.ref.startswith("ServiceRequest/") else None
        if not sides:
            return
        if fact.value["side"] in sides:
            self.ok("consistent", fact, "the order's side")
        else:
            self.fail(
                "consistent", i, fact, f"the order is for the {', '.join(sorted(sides))} side"
            )


def _local_days(instant: datetime, zones: tuple[str, ...]) -> set[Any]:
    out = {instant.astimezone(UTC).date()}
    for name in zones:
        tz = zone_info(name)
        if tz is not None:
            out.add(instant.astimezone(tz).date())
    return out


def _per_day(values: set[Any]) -> str:
    return " or ".join(f"{v.normalize()} a day" for v in sorted(values))
