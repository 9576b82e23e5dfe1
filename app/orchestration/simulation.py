"""The scenario check's replays: `app.grading.replay` with the simulated patient answering.

A near-miss solution can be graded without a server: start from the snapshot of a real
run taken before its oracle and replay the calls in memory, through the same write
functions as the FHIR API. The scheduling rules (which read the directory's Slots) are
not applied, so the mutants they refuse are graded with real runs.
`app.orchestration.check` proves the two agree for each scenario by replaying the
unmutated oracle both ways and comparing the verdicts; where they differ it grades the
mutants with real runs instead.

In a `patientSim` scenario the simulated patient answers too, as the scripted stand-in
would (the real replays use it): each message written to the patient gets a reply just
after it, revealing the facts the message asks about, up to `maxTurns` replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.grading.replay import STEP, Replay
from app.grading.snapshot import Decision, Revealed, RunSnapshot
from app.patient_sim import engine as patient_engine
from app.scenarios.schema import OracleCall, PatientSim, Scenario, Variant, symbol_name


@dataclass(frozen=True)
class Patient:
    """The simulated patient of a scenario, in one persona."""

    sim: PatientSim
    persona: Variant | None


def patient_of(scenario: Scenario, persona: str | None) -> Patient | None:
    if scenario.patient_sim is None:
        return None
    variant = next((v for v in scenario.variants if v.persona == persona), None)
    return Patient(scenario.patient_sim, variant)


class Simulation(Replay):
    """One replay with the simulated patient answering each message written to them."""

    def __init__(self, before: RunSnapshot, patient: Patient | None = None) -> None:
        super().__init__(before)
        self.patient = patient
        self.patient_ref = (
            before.fixture.get(symbol_name(patient.sim.patient)) if patient is not None else None
        )
        self.answered: set[str] = set()  # messages the patient dealt with
        self.thread: list[patient_engine.Turn] = []
        self.replies = 0
        self.revealed: list[Revealed] = []
        self.decisions: list[Decision] = []  # the patient's word on proposed actions

    def after_call(self, ref: str | None) -> None:
        if ref is not None and ref.startswith("Communication/"):
            self._answer(ref)

    def _answer(self, ref: str) -> None:
        """The simulated patient's reply to a message written to them, just after it
        (before the next call), as the real replay waits for it."""
        message = self.state.get(ref)
        if self.patient is None or message is None or ref in self.answered:
            return
        sender = str((message.get("sender") or {}).get("reference", ""))
        recipients = [str(r.get("reference", "")) for r in message.get("recipient") or []]
        if self.patient_ref is None or sender == self.patient_ref:
            return
        if self.patient_ref not in recipients:
            return
        text = "\n".join(
            str(p["contentString"])
            for p in message.get("payload") or []
            if isinstance(p, dict) and p.get("contentString")
        )
        turns_so_far = len(self.answered)
        self.answered.add(ref)
        if patient_engine.turns_left(self.patient.sim, turns_so_far) <= 0:
            return
        sim, persona = self.patient.sim, self.patient.persona
        reply = patient_engine.scripted_reply(sim, persona, text, self.thread)
        asked = {fact.topic for fact in patient_engine.facts_asked(sim, text)}
        self.replies += 1
        at = self.at + STEP / 2
        for topic in reply.revealed:
            self.revealed.append(
                Revealed(at, topic, f"Communication/reply{self.replies}", ref, topic in asked)
            )
        reply_ref = f"Communication/reply{self.replies}"
        self.decisions += [
            Decision(at, d.action, d.agreed, reply_ref, ref) for d in reply.decisions
        ]
        self.thread += [
            patient_engine.Turn("staff", text),
            patient_engine.Turn("patient", reply.text),
        ]

    def snapshot(self) -> RunSnapshot:
        out = super().snapshot()
        return replace(
            out,
            revealed=[*self.before.revealed, *self.revealed],
            patient_replies=self.before.patient_replies + self.replies,
            decisions=[*self.before.decisions, *self.decisions],
        )


def simulate(
    before: RunSnapshot, calls: Sequence[OracleCall], patient: Patient | None = None
) -> RunSnapshot:
    return Simulation(before, patient).run(calls)
