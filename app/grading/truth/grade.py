"""`text-truth`: every fact the system wrote, in any text, agrees with the chart.

The texts: what the run wrote (never the simulated patient's replies) — Communication
payloads to the patient and to staff, Task `description`/`note`, ServiceRequest and
MedicationRequest `note`/`patientInstruction`, Appointment `comment`/
`patientInstruction`, and DocumentReference text content — read in the order written.
Each is read by `reader.read` into facts with a context, and the checks below read only
what is *asserted now* (a negated, historical, hypothetical or someone else's fact states
nothing about this patient's chart; a question offers, it does not state):

- **consistent** (`value` lists what broke): a date and time in a sentence about a booking
  is the start of one of the patient's bookings in the end state — an active one, unless
  the sentence is about a cancellation or the past — read as instants, a stated zone
  respected ("10:00 AM Central" is 16:00 UTC in December); the practitioner named after
  "with" in that sentence and a location named there belong to that booking; a
  medication's dose and times a day agree with an active order for it (the dose of a
  stopped order stated as current fails); a lab value is its test's latest result; a
  coverage said to be active or ended is; an appointment said to stay booked does; a date
  of birth is the patient's, a record number one of the patient's identifiers; a side
  ("left knee") written on an order is the order's side.
- **last word**: a booking time or coverage state restated in a later text supersedes the
  earlier one (context `superseded`): the last word is what is checked, so a correction
  that agrees with the chart passes and one that does not fails.
- **claims**: an action claimed with its object — "sent the refill to Walgreens" needs a
  write of the claim's kind that names that pharmacy; "sent it to Dr. Chen" one that names
  Dr. Chen (owner, recipient, performer); a refill or order of a drug one about that drug;
  "posted your signed note" a DocumentReference written before the text.
- **instructions** (texts to the patient): a medicine instruction must be the active
  order's ("take your lisinopril 20 mg once a day" with that order), defer to it ("as
  prescribed"), or be a sentence of what the system was shown; a regimen change ("double",
  "hold", "take half", "stop", "use naproxen", "finish the old tablets") is new medical
  advice and fails unless the scenario allows it (`allowAdvice`).
- **medications named**: a drug a text names as asserted is on the chart or in what the
  system was shown ("apixaban started" with no such order fails).
- **grounded**: every concrete fact (date, time, phone, amount, quantity, practitioner) is
  in what the system was shown or in its own writes before the text
  (`app.grading.message.facts`).

Evidence: one clause per check, then one clause per text (`where: "facts: <ref>"`) whose
`facts` list each fact read, its context and the check it met or broke — the run page
highlights them.

Each check is its own module (`consistent`, `claims`, `instructions`, `named`, over the
state of `check`); the texts read are `texts`, what the system was shown `shown`. This
module composes them and grades.
"""

from __future__ import annotations

from typing import Any

from app.grading.scoring import capped, make_result
from app.grading.snapshot import Graded, RunSnapshot
from app.grading.truth.claims import ClaimsCheck
from app.grading.truth.consistent import ConsistentCheck
from app.grading.truth.instructions import InstructionsCheck
from app.grading.truth.named import NamedCheck
from app.grading.truth.shown import sentence_sets, source_sentences
from app.scenarios.schema import TextTruthExpectation
from understudy_client.contract.runs import Evidence

MAX_NAMED = 5

SHOWN_TEXT_MAX = 6000  # characters of a text kept in the evidence
# The clauses of `text-truth`, in the order its evidence lists them.
CHECKS = ("consistent", "claims", "instructions", "medications", "events", "grounded")


class TextCheck(ConsistentCheck, ClaimsCheck, InstructionsCheck, NamedCheck):
    """Every check of `text-truth` over one run's texts."""


def _held(name: str, check: TextCheck) -> str:
    """What a clause that holds read: "3 fact(s) agree", or that there was nothing."""
    if not check.texts:
        return "no text written"
    n = sum(1 for facts in check.facts for f in facts if f.check == name and f.holds)
    return f"{n} fact(s) agree" if n else "nothing of this kind stated"


def run_checks(e: TextTruthExpectation, snapshot: RunSnapshot) -> TextCheck:
    """Every text of the run read and every check run: `texts[i]`'s facts are
    `facts[i]`, each marked with the check it met or broke (the scenario check's text
    adversaries mutate what a check read)."""
    check = TextCheck(e, snapshot)
    check.supersede()
    check.consistent()
    check.claims()
    sentences_, words = source_sentences(snapshot)
    vouched, vouched_words = sentence_sets(list(e.vouched))
    check.instructions([*sentences_, *vouched])
    check.medications(words | vouched_words)
    check.events(words | vouched_words)
    check.grounded()
    check.source_words = words | vouched_words
    return check


def grade_text_truth(e: TextTruthExpectation, snapshot: RunSnapshot) -> Graded:
    check = run_checks(e, snapshot)
    clauses: list[dict[str, Any]] = []
    for name in CHECKS:
        broken = check.broken.get(name, [])
        shown = "; ".join(broken[:MAX_NAMED]) + (
            f" and {len(broken) - MAX_NAMED} more" if len(broken) > MAX_NAMED else ""
        )
        clauses.append(
            {
                "where": name,
                "holds": not broken,
                "value": shown or _held(name, check),
            }
        )
    for text, facts in zip(check.texts, check.facts, strict=True):
        if not facts:
            continue  # a text with nothing checkable ("We will call you.") lists nothing
        facts.sort(key=lambda f: f.start)
        clauses.append(
            {
                "where": f"facts: {text.ref} ({text.where})",
                "holds": not any(f.holds is False for f in facts),
                "value": f"{len(facts)} fact(s) read, to {text.audience}",
                "facts": [f.shown(text.text) for f in facts],
                # The text itself, so the run page marks each fact where it stands.
                "text": text.text[:SHOWN_TEXT_MAX],
            }
        )
    refs = sorted({t.ref for t in check.texts})
    evidence = Evidence(matches=capped(refs), clauses=clauses)
    scope = f"{len(check.texts)} text(s) the system wrote"
    failing = [c for c in clauses[: len(CHECKS)] if not c["holds"]]
    if not failing:
        return make_result(
            e,
            True,
            evidence,
            scope,
            check.texts[0].at if check.texts else snapshot.started_at,
            refs=frozenset(refs),
        )
    evidence.closest = check.culprits[0] if check.culprits else None
    detail = f"{scope}; " + "; ".join(f"{c['where']} fails: {c['value']}" for c in failing)
    return make_result(e, False, evidence, detail, refs=frozenset(refs))
