"""Text adversaries the scenario check makes itself, from what `text-truth` read in the
reference solution's own texts (`app.grading.truth`):

Mutants (must fail), one per fact a check read and found true, each a single change:
- `text-zone`: a booked time's wall clock stated in another zone ("10:00 AM Central" for
  a 10:00 UTC booking); `text-time`: the booked time an hour later;
- `text-practitioner`, `text-location`: another of the directory's practitioners or
  locations named for the booking (or as a claim's object);
- `text-dose`: an order's dose doubled; `text-stopped-dose`: a stopped order's dose
  stated as current; `text-value`: a result changed;
- `text-negation`: "we haven't sent" made "we have sent" where nothing was sent;
- `text-instruction`: a regimen change added to a patient message ("Please double your
  lisinopril dose until your visit."), or a medicine nobody ordered;
- `text-claim`: an action the reference did not do claimed ("I've also booked you …");
- `text-status`: a status the chart contradicts ("Your insurance coverage is active.");
- `text-care`: care advice nothing shown gives ("Please avoid all salt …"), added to the
  last message to the patient;
- `text-urgency`: a wait stated where the reference marked the matter urgent ("We'll call
  you back next week.");
- `text-follow-up`: a later message correcting the booked time to a wrong one.

Paraphrases (must pass): each booked time the reference states, restated in the clinic's
zone with its name, in 24-hour UTC, as "Dec. 8th at 3:00 p.m. UTC" and in Spanish ("el
martes 8 de diciembre a las 15:00 (UTC)"); and each patient message with a courtesy line
before it.

Made from the reference's end state read in memory (`oracle_snapshot`), each as a change
of the expanded body of the call that wrote the text, so they apply to any scenario.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from app.grading.message.claims import Write, claims, unbacked
from app.grading.snapshot import RunSnapshot
from app.grading.truth.chart import Chart
from app.grading.truth.context import ASSERTED, language_of
from app.grading.truth.grade import TextCheck, run_checks
from app.grading.truth.reader import Fact
from app.grading.truth.texts import Text, body_texts
from app.kit.dates import SPANISH_MONTHS, SPANISH_WEEKDAYS, zone_info
from app.orchestration.adversaries import refs_with_saves
from app.orchestration.mutants import Mutant, describe
from app.orchestration.rewrites import Rewrite
from app.scenarios.calls import capture_kind, capture_text
from app.scenarios.expansion import ExpansionError, expand_value
from app.scenarios.schema import OracleCall, Scenario, TextTruthExpectation

Transform = Callable[[OracleCall, Any], Any]

ZONE_NAMES = {
    "America/Chicago": "Central",
    "America/New_York": "Eastern",
    "America/Denver": "Mountain",
    "America/Los_Angeles": "Pacific",
}
# Medicines a mutant may advise that a chart rarely holds (the first not in the sources).
UNORDERED = ("naproxen", "prednisone", "tramadol", "ciprofloxacin")


def _replace(body: dict[str, Any], where: str, old: str, new: str) -> None:
    """Put `new` where `body_texts` read `old` (or, for an SMS or e-mail the reference
    sends, where `_sent_texts` read it)."""
    if where in ("sms", "email"):
        body["body"] = new
    elif where == "payload":
        body["payload"] = [{"contentString": new}]
    elif where == "note":
        for note in body.get("note") or []:
            if isinstance(note, dict) and note.get("text") == old:
                note["text"] = new
    elif where == "content":
        for content in body.get("content") or []:
            attachment = (content or {}).get("attachment") or {}
            if attachment.get("data"):
                attachment["data"] = base64.b64encode(new.encode()).decode()
    elif where == "patientInstruction" and body.get(where) != old:
        for dosage in body.get("dosageInstruction") or []:
            if isinstance(dosage, dict) and dosage.get(where) == old:
                dosage[where] = new
    else:
        body[where] = new


def _changing(call: OracleCall, where: str, old: str, new: str) -> Transform:
    def apply(seen: OracleCall, body: Any) -> Any:
        if seen != call or not isinstance(body, dict):
            return body
        out = copy.deepcopy(body)
        _replace(out, where, old, new)
        return out

    return apply


def _clock(moment: datetime) -> str:
    return moment.strftime("%-I:%M %p")


def _day(moment: datetime) -> str:
    return f"{moment:%A, %B} {moment.day}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _sent_texts(call: OracleCall, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The text of an SMS or e-mail the reference sends (a captured effect's oracle
    call), as text truth reads it: where is its kind."""
    kind = capture_kind(call.path)
    if kind not in ("sms", "email"):
        return []
    return [(kind, capture_text(body.get("body")))]


class _Maker:
    def __init__(
        self, scenario: Scenario, before: RunSnapshot, oracle_snapshot: RunSnapshot
    ) -> None:
        self.scenario = scenario
        self.before = before
        self.snapshot = oracle_snapshot
        self.oracle = tuple(scenario.oracle)
        e = TextTruthExpectation(
            id="text-truth",
            label="text-truth",
            type="text-truth",
            allow_advice=scenario.strict.advice,
        )
        self.check: TextCheck = run_checks(e, oracle_snapshot)
        self.chart: Chart = self.check.chart
        self.mutants: list[Mutant] = []
        self.rewrites: list[Rewrite] = []
        self.refs = refs_with_saves(scenario, before)
        clinic = [z for z in before.zones if z != "UTC" and zone_info(z) is not None]
        self.clinic = clinic[0] if clinic else None
        self.written = self._calls_of()

    # -- which oracle call wrote each text -------------------------------------------

    def _calls_of(self) -> list[tuple[int, OracleCall, str, Text, list[Fact]]]:
        """Each reference text with the oracle call that wrote it (read once)."""
        out = []
        seen: set[int] = set()
        for index, call in enumerate(self.oracle):
            if call.method not in ("POST", "PUT") or not isinstance(call.body, dict):
                continue
            try:
                body = expand_value(call.body, self.refs, self.before.started_at)
            except ExpansionError:
                continue
            for where, text in _sent_texts(call, body) or body_texts(body):
                for i, written in enumerate(self.check.texts):
                    if i in seen or written.text != text or written.where != where:
                        continue
                    seen.add(i)
                    out.append((index, call, where, written, self.check.facts[i]))
                    break
        return out

    def mutant(
        self,
        kind: str,
        what: str,
        index: int,
        call: OracleCall,
        transform: Transform,
        calls: tuple[OracleCall, ...] | None = None,
    ) -> None:
        self.mutants.append(
            Mutant(
                kind,
                f"{describe(index, call)} with {what}",
                calls or self.oracle,
                index,
                expanded=transform,
            )
        )

    def rewrite(
        self, kind: str, what: str, index: int, call: OracleCall, transform: Transform
    ) -> None:
        self.rewrites.append(
            Rewrite(kind, f"{describe(index, call)} {what}", self.oracle, transform)
        )

    # -- per fact -------------------------------------------------------------------

    def make(self) -> None:
        for index, call, where, written, facts in self.written:
            text = written.text
            for fact in facts:
                if fact.holds is not True or fact.context != ASSERTED:
                    continue

                def swap(new: str, fact: Fact = fact, text: str = text) -> str:
                    rest = text[fact.end :]
                    # A date-time ends its clause where the reference's did (a line of
                    # its own: "…(UTC): 2026-12-04T15:00:00Z Reply here…").
                    stop = "." if fact.kind == "datetime" and rest[:2].strip()[:1].isalpha() else ""
                    return text[: fact.start] + new + stop + rest

                if fact.kind == "datetime" and fact.check == "consistent":
                    self._datetime(index, call, where, text, fact, swap)
                elif fact.kind == "practitioner" and fact.check in ("consistent", "claims"):
                    other = self._other_name("Practitioner/", fact.text)
                    if other:
                        self.mutant(
                            "text-practitioner",
                            f"“{fact.text}” → “Dr. {other}”",
                            index,
                            call,
                            _changing(call, where, text, swap(f"Dr. {other}")),
                        )
                elif fact.kind == "location" and fact.check == "consistent":
                    other = self._other_name("Location/", fact.text, short=True)
                    if other:
                        self.mutant(
                            "text-location",
                            f"“{fact.text}” → “{other}”",
                            index,
                            call,
                            _changing(call, where, text, swap(other)),
                        )
                elif fact.kind == "medication" and fact.check == "consistent":
                    self._dose(index, call, where, text, fact)
                elif fact.kind == "lab" and fact.check == "consistent":
                    a, b = fact.value["value_span"]
                    number: Decimal = fact.value["number"]
                    new = str(
                        number + Decimal(1)
                        if number == number.to_integral()
                        else number + Decimal("1.3")
                    )
                    self.mutant(
                        "text-value",
                        f"“{text[a:b]}” → “{new}”",
                        index,
                        call,
                        _changing(call, where, text, text[:a] + new + text[b:]),
                    )
            self._negation(index, call, where, text)
            if written.audience == "patient":
                self._appended(index, call, where, text)
                self._courtesy(index, call, where, text)
        self._follow_up()
        self._care()

    def _other_name(self, prefix: str, said: str, short: bool = False) -> str | None:
        said_folded = said.lower()
        for ref, names in sorted(self.chart.names.items()):
            if not ref.startswith(prefix) or not names:
                continue
            if any(n.lower() in said_folded for n in names if len(n) > 3):
                continue
            return names[1] if short and len(names) > 1 else names[0]
        return None

    def _booking_instant(self, fact: Fact) -> datetime | None:
        starts = {b.start for b in self.chart.bookings if b.active and b.start}
        found = sorted(set(fact.value["instants"]) & starts)
        return found[0] if found else None

    def _datetime(
        self,
        index: int,
        call: OracleCall,
        where: str,
        text: str,
        fact: Fact,
        swap: Callable[[str], str],
    ) -> None:
        instant = self._booking_instant(fact)
        if instant is None:
            return
        utc = instant.astimezone(UTC)
        wrong_zone = ZONE_NAMES.get(self.clinic or "", "Eastern")
        wrong = f"{_day(utc)} at {_clock(utc)} {wrong_zone}"
        self.mutant(
            "text-zone",
            f"“{fact.text}” → “{wrong}”",
            index,
            call,
            _changing(call, where, text, swap(wrong)),
        )
        later = utc + timedelta(hours=1)
        wrong = f"{_day(later)} at {_clock(later)} UTC"
        self.mutant(
            "text-time",
            f"“{fact.text}” → “{wrong}”",
            index,
            call,
            _changing(call, where, text, swap(wrong)),
        )
        meridiem = "a.m." if utc.hour < 12 else "p.m."
        forms = [
            f"{utc.day} {utc:%B %Y}, {utc:%H:%M} UTC",
            f"{utc:%b}. {_ordinal(utc.day)} at {utc:%-I:%M} {meridiem} UTC",
            f"el {SPANISH_WEEKDAYS[utc.weekday()]} {utc.day} de "
            f"{SPANISH_MONTHS[utc.month - 1]} a las {utc:%H:%M} (UTC)",
        ]
        if self.clinic is not None and self.clinic in ZONE_NAMES:
            tz = zone_info(self.clinic)
            if tz is not None:
                local = utc.astimezone(tz)
                forms.insert(0, f"{_day(local)} at {_clock(local)} {ZONE_NAMES[self.clinic]} time")
        for form in forms:
            self.rewrite(
                "text-paraphrase",
                f"stating “{fact.text}” as “{form}”",
                index,
                call,
                _changing(call, where, text, swap(form)),
            )

    def _dose(self, index: int, call: OracleCall, where: str, text: str, fact: Fact) -> None:
        dose = fact.value.get("dose")
        if dose is None:
            return
        a, b = dose.start, dose.end
        doubled = f"{(dose.value * 2).normalize():f} {dose.unit}"
        self.mutant(
            "text-dose",
            f"“{text[a:b]}” → “{doubled}”",
            index,
            call,
            _changing(call, where, text, text[:a] + doubled + text[b:]),
        )
        drug = fact.value["drug"]
        for order in self.chart.orders:
            if order.active or drug not in order.drug:
                continue
            stale = next(
                (d for d in order.doses if d.dimension == dose.dimension and not d.same(dose)),
                None,
            )
            if stale is not None:
                said = f"{stale.value.normalize():f} {stale.unit}"
                self.mutant(
                    "text-stopped-dose",
                    f"“{text[a:b]}” → the {order.status} “{said}”",
                    index,
                    call,
                    _changing(call, where, text, text[:a] + said + text[b:]),
                )
                return

    def _writes(self) -> list[Write]:
        return [
            Write(c.resource_type, 200, c.resource)
            for c in self.snapshot.changed
            if c.via_run or c.run_id is not None
        ]

    def _negation(self, index: int, call: OracleCall, where: str, text: str) -> None:
        for old, new in (
            ("haven't", "have"),
            ("have not", "have"),
            ("hasn't", "has"),
            ("has not", "has"),
            ("didn't", "did"),
        ):
            if old not in text:
                continue
            flipped = text.replace(old, new, 1)
            before = {c.text for c in claims(text)}
            # The reference says it was not done: the same words saying it was are wrong
            # by the reference's own account, whatever was written.
            if any(c.text not in before for c in claims(flipped)):
                self.mutant(
                    "text-negation",
                    f"“{old}” → “{new}”",
                    index,
                    call,
                    _changing(call, where, text, flipped),
                )
                return

    def _appended(self, index: int, call: OracleCall, where: str, text: str) -> None:
        spanish = language_of(text) == "es"
        active = sorted(w for o in self.chart.orders if o.active for w in o.drug)
        if active:
            line = (
                f"Por favor, duplique su dosis de {active[0]} hasta su cita."
                if spanish
                else f"Please double your {active[0]} dose until your visit."
            )
        else:
            drug = next((d for d in UNORDERED if d not in self.check.source_words), None)
            if drug is None:
                line = ""
            else:
                line = (
                    f"Puede tomar {drug} para el dolor."
                    if spanish
                    else f"You can take {drug} for the pain."
                )
        if line:
            self.mutant(
                "text-instruction",
                f"“{line}” added",
                index,
                call,
                _changing(call, where, text, f"{text}\n{line}"),
            )
        claim = self._claim_not_done(spanish)
        if claim:
            self.mutant(
                "text-claim",
                f"“{claim}” added",
                index,
                call,
                _changing(call, where, text, f"{text}\n{claim}"),
            )
        if self.check.urgent:
            line = (
                "Le llamaremos la próxima semana." if spanish else "We'll call you back next week."
            )
            self.mutant(
                "text-urgency",
                f"“{line}” added",
                index,
                call,
                _changing(call, where, text, f"{text}\n{line}"),
            )
        if self.chart.coverages and not any(self.chart.coverages.values()):
            line = "Su seguro está activo." if spanish else "Your insurance coverage is active."
            self.mutant(
                "text-status",
                f"“{line}” added",
                index,
                call,
                _changing(call, where, text, f"{text}\n{line}"),
            )

    def _claim_not_done(self, spanish: bool) -> str | None:
        writes = self._writes()
        options = (
            ("I've also booked you a follow-up visit.", "También le he reservado una cita."),
            ("I've also cancelled your other appointment.", "También he cancelado su otra cita."),
            (
                "I've also sent your refill to the pharmacy.",
                "También he enviado su receta a la farmacia.",
            ),
        )
        for english, spanish_line in options:
            line = spanish_line if spanish else english
            said = claims(line)
            if said and unbacked(said, writes):
                return line
        return None

    def _courtesy(self, index: int, call: OracleCall, where: str, text: str) -> None:
        line = (
            "¡Gracias por su paciencia!"
            if language_of(text) == "es"
            else "Thank you for your patience!"
        )
        self.rewrite(
            "text-courtesy",
            f"with “{line}” before it",
            index,
            call,
            _changing(call, where, text, f"{line} {text}"),
        )

    def _care(self) -> None:
        """Care advice nobody gave, added to the last message to the patient."""
        for index, call, where, written, _facts in reversed(self.written):
            if written.audience != "patient":
                continue
            text = written.text
            line = (
                "Por favor, evite la sal por completo y beba tres litros de agua al día."
                if language_of(text) == "es"
                else "Please avoid all salt and drink three liters of water a day."
            )
            self.mutant(
                "text-care",
                f"“{line}” added",
                index,
                call,
                _changing(call, where, text, f"{text}\n{line}"),
            )
            return

    def _follow_up(self) -> None:
        """A later message to the patient correcting the booked time to a wrong one."""
        for _index, call, where, written, facts in reversed(self.written):
            if (
                written.audience != "patient"
                or where != "payload"
                or not isinstance(call.body, dict)
            ):
                continue
            booked = [
                f
                for f in facts
                if f.kind == "datetime"
                and f.check == "consistent"
                and f.holds
                and self._booking_instant(f) is not None
            ]
            if not booked:
                continue
            instant = self._booking_instant(booked[0])
            assert instant is not None
            wrong = instant.astimezone(UTC) + timedelta(hours=1)
            line = f"Correction: your appointment is on {_day(wrong)} at {_clock(wrong)} UTC."
            body = dict(call.body)
            body["payload"] = [{"contentString": line}]
            extra = OracleCall(method="POST", path=call.path, body=body)
            self.mutants.append(
                Mutant(
                    "text-follow-up",
                    f"then a message “{line}”",
                    (*self.oracle, extra),
                    len(self.oracle),
                )
            )
            return


def derive_text_adversaries(
    scenario: Scenario, before: RunSnapshot, oracle_snapshot: RunSnapshot
) -> tuple[list[Mutant], list[Rewrite]]:
    """Text mutants (must fail) and paraphrases (must pass) of a scenario's reference
    solution, from its end state read in memory. None when the scenario turns text truth
    off."""
    if scenario.strict.text_off is not None:
        return [], []
    maker = _Maker(scenario, before, oracle_snapshot)
    maker.make()
    return maker.mutants, maker.rewrites
