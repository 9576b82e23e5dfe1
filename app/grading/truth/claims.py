"""`claims`: an action claimed with its object needs a write of the claim's kind that
names it — the pharmacy, the person, the drug, the signed note (see
`app.grading.truth.grade`)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from app.grading.message.claims import Claim, Write, claims, unbacked
from app.grading.resource import ref_of
from app.grading.truth import lexicon
from app.grading.truth.chart import words_of
from app.grading.truth.check import PRACTITIONER_TYPES, CheckBase
from app.grading.truth.context import (
    ASSERTED,
    sentences,
)
from app.grading.truth.reader import Fact
from app.kit.phrases import fold


class ClaimsCheck(CheckBase):
    """The `claims` check."""

    # -- claims -----------------------------------------------------------------------

    def claims(self) -> None:
        for i, text in enumerate(self.texts):
            writes = [
                c
                for c in self.snapshot.changed
                if c.first_changed_at <= text.at
                and ref_of(c) != text.ref
                and (c.via_run or c.run_id)
            ]
            for claim in _claims_of(text.text):
                self._claim(i, claim, writes)
            for fact in self.facts[i]:
                if fact.kind == "document-claim" and fact.context == ASSERTED:
                    docs = [
                        c for c in writes if c.resource_type == "DocumentReference" and c.resource
                    ]
                    if docs:
                        self.ok("claims", fact, f"{ref_of(docs[0])} was written")
                    else:
                        self.fail("claims", i, fact, "no DocumentReference was written before it")

    def _claim(self, i: int, claim: Claim, writes: list[Any]) -> None:
        backing = [
            w for w in writes if not unbacked([claim], [Write(w.resource_type, 200, w.resource)])
        ]
        text = self.texts[i].text
        tail = text[claim.end : _sentence_end(text, claim.end)]
        fact = Fact(
            "claim", claim.text, claim.start, claim.end, (claim.start, claim.end + len(tail))
        )
        fact.value = {"action": claim.action}
        self.facts[i].append(fact)
        if not backing:
            self.fail("claims", i, fact, f"no {claim.action} write before the text")
            return
        folded_tail = fold(tail).text
        # The claim's own clause: "we have sent a refill; Dr. Chen will review your request"
        # sends a refill, whatever the next clause asks.
        clause = (
            fold(claim.text).text + re.split(r"[;,]| but | and then ", folded_tail, maxsplit=1)[0]
        )
        wants: list[tuple[str, set[str]]] = []
        for ref, names in self.chart.names.items():
            if not ref.startswith((*PRACTITIONER_TYPES, "Organization/")):
                continue
            if any(
                # "Dr. Chen's nurse" names someone else: a possessive is no object.
                re.search(rf"\b{re.escape(fold(n).text)}\b(?!'s)", folded_tail)
                for n in names
                if len(n) > 3
            ):
                wants.append((ref, {ref, self.snapshot.aliases.get(ref, ref)}))
        drugs = {
            w
            for w in words_of(fold(text[claim.start : claim.end] + tail).text)
            if w in lexicon.DRUGS or any(w in o.drug for o in self.chart.orders)
        }
        if re.search(r"\b(refill|prescription|receta|medicamento)", clause) and not re.search(
            r"\b(request|solicitud|pedido|approval|review|aprobaci)", clause
        ):
            # "sent your refill" says the prescription went out: a MedicationRequest does
            # that, not a Task asking a doctor to (which "sent your refill request" is).
            backing = [w for w in backing if w.resource_type == "MedicationRequest"]
            if not backing:
                self.fail("claims", i, fact, "no MedicationRequest was written before it")
                return
        for w in backing:
            if all(
                _names_target(w.resource, self.snapshot.aliases, refs) for _, refs in wants
            ) and (not drugs or _mentions_drug(w.resource, drugs)):
                self.ok("claims", fact, f"{ref_of(w)} backs it")
                return
        objects = [r for r, _ in wants] + sorted(drugs)
        self.fail(
            "claims",
            i,
            fact,
            f"no {claim.action} write names {', '.join(objects)}"
            if objects
            else "no write backs it",
        )


@lru_cache(maxsize=4096)
def _claims_of(text: str) -> tuple[Claim, ...]:
    return tuple(claims(text))


def _sentence_end(text: str, at: int) -> int:
    return next((b for a, b in sentences(text) if a <= at < b), len(text))


def _names_target(body: dict[str, Any] | None, aliases: dict[str, str], refs: set[str]) -> bool:
    if body is None:
        return False
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            ref = value.get("reference")
            if isinstance(ref, str) and key not in (
                "subject",
                "for",
                "requester",
                "sender",
                "patient",
            ):
                found.add(ref)
                found.add(aliases.get(ref, ref))
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)

    walk(body)
    return bool(found & refs)


def _mentions_drug(body: dict[str, Any] | None, drugs: set[str]) -> bool:
    if body is None:
        return False
    blob = fold(_strings(body)).text
    return any(re.search(rf"\b{re.escape(d)}\b", blob) for d in drugs)


def _strings(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join(_strings(v) for k, v in value.items() if k not in ("reference", "system"))
    if isinstance(value, list):
        return " ".join(_strings(v) for v in value)
    return ""
