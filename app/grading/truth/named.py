"""`medications` and `events` named, and `grounded`: a drug or an event a text names as
asserted is on the chart or in what the system was shown, and every concrete fact is
in what it was shown or in its own writes before the text (see
`app.grading.truth.grade`)."""

from __future__ import annotations

import re

from app.grading.message.facts import SourceIndex, grounded
from app.grading.message.grade import MESSAGE_SOURCES_EXCLUDED, _source_index
from app.grading.resource import ref_of
from app.grading.truth.check import CheckBase
from app.grading.truth.context import (
    ASSERTED,
)
from app.grading.truth.reader import Fact
from app.kit.phrases import fold

_ARRIVAL_RE = re.compile(
    r"\b(arrive|arrival|check[- ]in|be here|get here|llegue|llegar)\b[^.!?]{0,24}$"
)


class NamedCheck(CheckBase):
    """The `medications`, `events` and `grounded` checks."""

    # -- medications named ------------------------------------------------------------

    def medications(self, source_words: set[str]) -> None:
        chart_drugs = {w for o in self.chart.orders for w in o.drug}
        for i, _text in enumerate(self.texts):
            for fact in self.facts[i]:
                if fact.kind != "medication" or fact.context != ASSERTED:
                    continue
                drug = fact.value["drug"]
                if drug in chart_drugs or drug in source_words:
                    if not fact.check:
                        self.ok("medications", fact, "on the chart")
                    continue
                self.fail(
                    "medications", i, fact, "no such medicine on the chart or in what was shown"
                )

    # -- events named -----------------------------------------------------------------

    def events(self, source_words: set[str]) -> None:
        """A clinical event a text states ("a fall", "admitted", "seizure") happened in
        what the system was shown: a note must not invent one."""
        for i, _text in enumerate(self.texts):
            for fact in self.facts[i]:
                if fact.kind != "event" or fact.context != ASSERTED:
                    continue
                if set(fact.value["words"]) & source_words:
                    self.ok("events", fact, "in what was shown")
                else:
                    self.fail("events", i, fact, "no such event in the chart or what was shown")

    # -- grounded ---------------------------------------------------------------------

    def grounded(self) -> None:
        if not self.snapshot.shown:
            return
        zones = tuple(self.snapshot.zones)
        index = _source_index(self.snapshot.shown, zones)
        own: dict[tuple[str, ...], SourceIndex] = {}
        for i, text in enumerate(self.texts):
            facts = grounded(text.text, index, zones)
            if not facts:
                continue
            writes = [
                w
                for w in self.snapshot.changed
                if w.resource is not None
                and w.resource_type not in MESSAGE_SOURCES_EXCLUDED
                and (w.via_run or w.run_id is not None)
                and w.first_changed_at <= text.at
            ]
            # Also sources: the run's own writes before the text, the directory's names,
            # and what the reference solution's author vouches for.
            key = tuple(sorted(ref_of(w) for w in writes))
            if key not in own:
                own[key] = SourceIndex.build(
                    [*self.e.vouched, *[w.resource for w in writes], self.chart.names], zones
                )
            also = {(f.kind, f.start, f.end) for f in grounded(text.text, own[key], zones)}
            facts = [f for f in facts if (f.kind, f.start, f.end) in also]
            for f in facts:
                lead = fold(text.text[max(0, f.start - 40) : f.start]).text
                if f.kind == "time" and _ARRIVAL_RE.search(lead):
                    continue  # "arrive by 8:45": worked out from the booking, not a claim
                fact = Fact(f.kind, f.text, f.start, f.end, (f.start, f.end))
                self.facts[i].append(fact)
                self.fail("grounded", i, fact, f.detail)
