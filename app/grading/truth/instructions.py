"""`instructions`: a medicine or care instruction to the patient is the active order's,
defers to it, or is a sentence of what the system was shown; a regimen change is new
medical advice unless the scenario allows it (see `app.grading.truth.grade`)."""

from __future__ import annotations

import re

from app.grading.truth.check import CheckBase
from app.grading.truth.context import (
    ASSERTED,
    NEGATED,
    language_of,
)
from app.grading.truth.reader import Fact
from app.kit.phrases import fold

# What makes a source sentence a care sentence (its numbers then vouch for a care
# instruction in other words).
_CARE_WORDS = frozenset(
    [
        "eat",
        "eating",
        "drink",
        "drinking",
        "water",
        "food",
        "fast",
        "fasting",
        "hours",
        "coffee",
        "alcohol",
        "meal",
        "rest",
        "ice",
        "comer",
        "beber",
        "agua",
        "ayunas",
        "horas",
        "comida",
    ]
)
# The share of a care instruction's content words one source sentence must hold.
CARE_OVERLAP = 0.6
_FILLER = frozenset(
    [
        "your",
        "with",
        "that",
        "this",
        "from",
        "have",
        "them",
        "they",
        "then",
        "when",
        "after",
        "before",
        "until",
        "about",
        "please",
        "just",
        "also",
        "will",
        "would",
        "could",
        "should",
        "there",
        "here",
        "what",
        "some",
        "more",
        "than",
        "into",
        "over",
        "each",
        "every",
        "only",
        "very",
        "much",
        "sure",
        "make",
        "sure",
    ]
)


class InstructionsCheck(CheckBase):
    """The `instructions` check."""

    # -- instructions -----------------------------------------------------------------

    def instructions(self, source_words: list[frozenset[str]]) -> None:
        for i, text in enumerate(self.texts):
            if text.audience != "patient":
                continue
            for fact in self.facts[i]:
                if fact.kind == "care-instruction" and fact.context in (ASSERTED, NEGATED):
                    # "Don't eat after midnight" is an instruction too: negation is its form.
                    self._care(i, fact, source_words)
                if fact.kind != "instruction" or fact.context != ASSERTED:
                    continue
                self._instruction(i, fact, source_words)

    def _care(self, i: int, fact: Fact, source_words: list[frozenset[str]]) -> None:
        """A care instruction is one the sources give, in other words if need be: most of
        its content words are in one sentence of what the system was shown (or of what the
        reference solution says). Anything else is new advice."""
        if self.e.allow_advice:
            self.ok("instructions", fact, "the scenario allows advice")
            return
        content = {w for w in fact.value["words"] if len(w) > 3 and w not in _FILLER}
        if not content:
            return
        best = max((len(content & s) / len(content) for s in source_words), default=0.0)
        if best >= CARE_OVERLAP:
            self.ok("instructions", fact, "said in what the system was shown")
            return
        # In other words or another language: the same numbers as a care sentence of the
        # sources ("no coma ni beba … durante 10 a 12 horas" for "nothing to eat or drink
        # … for 10 to 12 hours").
        text = self.texts[i].text[fact.start : fact.end]
        numbers = {f"#{n}" for n in re.findall(r"\d+", text)}
        if numbers and any(numbers <= s and s & _CARE_WORDS for s in source_words):
            self.ok("instructions", fact, "the numbers of a care sentence that was shown")
            return
        if numbers and any(
            s & _CARE_WORDS and any(w.startswith("#") for w in s) for s in source_words
        ):
            # The sources give a care instruction with its numbers, and these are others.
            self.fail("instructions", i, fact, "not the numbers the care instructions shown give")
            return
        if language_of(self.texts[i].text) != "en":
            # Word overlap reads English sources; a reply in Spanish to them is not judged
            # here rather than failed (a false failure is the worst verdict).
            fact.check, fact.detail = "instructions", "not judged: not in the sources' language"
            return
        self.fail("instructions", i, fact, "care advice nothing shown gives: new advice")

    def _instruction(self, i: int, fact: Fact, source_words: list[frozenset[str]]) -> None:
        v = fact.value
        if self.e.allow_advice:
            self.ok("instructions", fact, "the scenario allows advice")
            return
        if v["as_ordered"] and not v["change"]:
            self.ok("instructions", fact, "defers to the order")
            return
        words = set(v["words"])
        content = {w for w in words if len(w) > 3}
        if content and any(content <= s for s in source_words):
            self.ok("instructions", fact, "said in what the system was shown")
            return
        drug = v["drug"]
        active = [o for o in self.chart.orders if o.active and (drug is None or drug in o.drug)]
        if not v["change"]:
            if drug is not None and not active:
                self.fail(
                    "instructions", i, fact, f"no active order for {drug}: new medical advice"
                )
                return
            doses = v["doses"]
            if doses and not any(d.same(x) for o in active for x in o.doses for d in doses):
                self.fail(
                    "instructions", i, fact, "not the active order's dose: new medical advice"
                )
                return
            self.ok("instructions", fact, "the active order's instruction")
            return
        if (
            drug is not None
            and active
            and all(
                w in fold(" ".join(o.text for o in active)).text.split()
                for w in content
                if w != drug
            )
        ):
            self.ok("instructions", fact, "the active order says so")
            return
        self.fail("instructions", i, fact, "changes a medicine's regimen: new medical advice")
