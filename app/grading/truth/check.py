"""The state one `text-truth` check keeps over a run's texts — the chart, the texts and
their facts, what broke and who broke it — its bookkeeping, and the last-word rule (a
booking time or coverage state restated later supersedes the earlier). Each group of
checks (`consistent`, `claims`, `instructions`, `named`) extends `CheckBase`; `grade.py`
composes them."""

from __future__ import annotations

import re
from datetime import datetime

from app.grading.resource import ref_of
from app.grading.snapshot import RunSnapshot
from app.grading.truth import lexicon
from app.grading.truth.chart import Chart, instant_of
from app.grading.truth.context import (
    ASSERTED,
    SUPERSEDED,
)
from app.grading.truth.reader import Fact, read_cached
from app.grading.truth.texts import texts_of
from app.kit.phrases import fold
from app.scenarios.schema import TextTruthExpectation

URGENT = frozenset({"urgent", "asap", "stat"})
PRACTITIONER_TYPES = ("Practitioner/", "PractitionerRole/")
BOOKING_RE = re.compile(rf"\b({lexicon.BOOKING_WORDS})")
CANCEL_RE = re.compile(rf"\b({lexicon.CANCEL_WORDS})")


class CheckBase:
    """What every group of checks reads and writes."""

    def __init__(self, e: TextTruthExpectation, snapshot: RunSnapshot) -> None:
        self.e = e
        self.snapshot = snapshot
        self.chart = Chart.of(snapshot)
        self.zones = tuple(z for z in snapshot.zones if z != "UTC")
        self.texts = texts_of(snapshot)
        self.facts: list[list[Fact]] = [
            read_cached(t.text, self.chart, self.zones, snapshot.now) for t in self.texts
        ]
        self.broken: dict[str, list[str]] = {}
        self.source_words: set[str] = set()
        self.culprits: list[str] = []
        self.bookings = [
            b
            for b in self.chart.bookings
            if b.patient is None or b.patient in snapshot.patient_refs
        ]
        # What the run marked urgent, as the end state has it (before a message or after).
        self.urgent: list[tuple[str, str]] = [
            (ref_of(c), str(c.resource["priority"]))
            for c in snapshot.changed
            if c.resource is not None
            and (c.via_run or c.run_id is not None)
            and c.resource.get("priority") in URGENT
        ]
        # Every start a booking of these patients had (before the run's move of it too).
        self.ever_starts: set[datetime] = {b.start for b in self.bookings if b.start}
        for changed in snapshot.changed:
            if changed.resource_type == "Appointment" and changed.before:
                start = instant_of(changed.before.get("start"))
                if start is not None:
                    self.ever_starts.add(start)

    # -- bookkeeping ------------------------------------------------------------------

    def fail(self, check: str, i: int, fact: Fact, detail: str) -> None:
        fact.check, fact.holds, fact.detail = check, False, detail
        text = self.texts[i]
        self.broken.setdefault(check, []).append(
            f"{fact.kind} “{fact.text}” in {text.ref} ({text.where}): {detail}"
        )
        if text.ref not in self.culprits:
            self.culprits.append(text.ref)

    def ok(self, check: str, fact: Fact, detail: str = "") -> None:
        fact.check, fact.holds = check, True
        if detail:
            fact.detail = detail

    def sentence(self, i: int, fact: Fact) -> str:
        a, b = fact.sentence
        return fold(self.texts[i].text[a:b]).text

    # -- last word --------------------------------------------------------------------

    def supersede(self) -> None:
        """A booking time or coverage state restated later: the earlier is superseded."""
        last: dict[str, int] = {}
        for i, facts in enumerate(self.facts):
            for fact in facts:
                topic = self._topic(i, fact)
                if topic:
                    last[topic] = i
        for i, facts in enumerate(self.facts):
            for fact in facts:
                topic = self._topic(i, fact)
                if topic and last[topic] > i:
                    fact.context = SUPERSEDED
                    fact.detail = f"restated in {self.texts[last[topic]].ref}"

    def _topic(self, i: int, fact: Fact) -> str | None:
        if fact.context != ASSERTED or self.texts[i].audience != "patient":
            return None
        if fact.kind == "datetime" and fact.value["has_time"]:
            sentence = self.sentence(i, fact)
            if BOOKING_RE.search(sentence) and not CANCEL_RE.search(sentence):
                return "booking-time"
        if fact.kind == "coverage-status":
            return "coverage"
        return None
