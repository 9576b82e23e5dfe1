"""The expectations every run gets without its scenario asking (strict by default).

- `matches-reference` (`app.grading.reference`): for a scenario with an oracle that
  writes or sends a captured effect (an SMS, an e-mail, an integration call), unless
  `strict.off` gives the reason not to.
- `text-truth` (`app.grading.truth`): on every scenario, unless `strict.textOff` gives the
  reason not to; `strict.advice` lets the system give medical instructions of its own.
- a default `asked` per hidden fact of a `patientSim` scenario: the reference solution
  shows the order of things (it asks, the patient answers, then it writes), so the
  system's first write of each kind the oracle makes only after asking about a fact
  must come after the patient revealed that fact. A scenario that writes its own `asked`
  for a fact keeps its own.
- `consent` (`app.grading.consent`), opt-out only (`actions: []`): for a scenario whose
  fixture holds a Consent resource and that has no consent expectation of its own — a
  patient's recorded "no texts" binds every run.
"""

from __future__ import annotations

import re

from app.patient_sim.engine import facts_asked
from app.scenarios.calls import capture_kind, is_write
from app.scenarios.free import free_choices
from app.scenarios.schema import (
    AskedExpectation,
    ConsentExpectation,
    Expectation,
    ReferenceExpectation,
    Scenario,
    TextTruthExpectation,
    walk_expectations,
)

REFERENCE_ID = "matches-reference"
CONSENT_ID = "consent-opt-out"
CONSENT_LABEL = (
    "No SMS to a patient whose record says no texts (an active Consent, or their preference)"
)
TEXT_TRUTH_ID = "text-truth"
TEXT_TRUTH_LABEL = (
    "Every fact the system wrote, in any text, agrees with the chart: booked times, "
    "doses, results, statuses, actions claimed, instructions, names"
)
REFERENCE_LABEL = (
    "The end state matches the reference solution's: every consequential element of "
    "what was created, updated or deleted, nothing else changed, nothing missing"
)


def default_expectations(scenario: Scenario) -> list[Expectation]:
    taken = {e.id for e in walk_expectations(scenario.expectations)}
    out: list[Expectation] = []
    # A captured SMS, e-mail or integration call is part of the end state too.
    writes = any(is_write(c) or capture_kind(c.path) is not None for c in scenario.oracle)
    if scenario.strict.off is None and writes and REFERENCE_ID not in taken:
        out.append(
            ReferenceExpectation(
                id=REFERENCE_ID,
                type="reference",
                label=REFERENCE_LABEL,
                oracle=list(scenario.oracle),
                free=free_choices(scenario)[0],
                messages=scenario.strict.messages,
            )
        )
    if scenario.strict.text_off is None and TEXT_TRUTH_ID not in taken:
        out.append(
            TextTruthExpectation(
                id=TEXT_TRUTH_ID,
                type="text-truth",
                label=TEXT_TRUTH_LABEL,
                allow_advice=scenario.strict.advice,
                vouched=_oracle_texts(scenario),
            )
        )
    out += _default_asked(scenario, taken)
    own_consent = any(e.type == "consent" for e in walk_expectations(scenario.expectations))
    has_consent = any(r.get("resourceType") == "Consent" for r in scenario.fixture)
    if has_consent and not own_consent and CONSENT_ID not in taken:
        out.append(
            ConsentExpectation(
                id=CONSENT_ID, type="consent", label=CONSENT_LABEL, actions=[], opt_out=True
            )
        )
    return out


def _oracle_texts(scenario: Scenario) -> list[str]:
    """Every string the reference solution writes (its messages, Task texts, notes)."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            if " " in value:
                out.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("reference", "system", "url", "id"):
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for call in scenario.oracle:
        walk(call.body)
    return out


def _message_text(body: object) -> str:
    if not isinstance(body, dict):
        return ""
    return "\n".join(
        str(p["contentString"])
        for p in body.get("payload") or []
        if isinstance(p, dict) and isinstance(p.get("contentString"), str)
    )


def _default_asked(scenario: Scenario, taken: set[str]) -> list[Expectation]:
    sim = scenario.patient_sim
    if sim is None or not sim.facts:
        return []
    own = {e.fact for e in walk_expectations(scenario.expectations) if e.type == "asked"}
    patient = "@" + sim.patient.removeprefix("@")
    learned_at: dict[str, int] = {}  # fact -> index of the oracle call that asked it
    written_at: dict[str, list[int]] = {}  # resource type -> indexes of its writes
    for index, call in enumerate(scenario.oracle):
        if not is_write(call):
            continue
        kind = call.path.strip("/").split("/", 1)[0]
        written_at.setdefault(kind, []).append(index)
        body = call.body
        if kind == "Communication" and isinstance(body, dict):
            to = [r.get("reference") for r in body.get("recipient") or [] if isinstance(r, dict)]
            if patient in to:
                for fact in facts_asked(sim, _message_text(body)):
                    learned_at.setdefault(fact.topic, index)
    out: list[Expectation] = []
    for fact in sim.facts:
        asked = learned_at.get(fact.topic)
        if asked is None or fact.topic in own:
            continue
        for kind, indexes in sorted(written_at.items()):
            if min(indexes) <= asked:
                continue  # written before the question too: not waiting on the answer
            slug = re.sub(r"[^a-z0-9]+", "-", fact.topic.lower()).strip("-")[:30]
            expectation_id = f"asked-{slug}-before-{kind.lower()}"[:64]
            if expectation_id in taken:
                continue
            out.append(
                AskedExpectation(
                    id=expectation_id,
                    type="asked",
                    label=(
                        f"The patient said {fact.topic!r} in answer to a question before the "
                        f"first {kind} was written (the reference solution asks first)"
                    ),
                    fact=fact.topic,
                    before_write=kind,
                )
            )
    return out
