"""The simulated patient's answer to one staff message, whichever channel it came by.

The portal (`simulated_patient`: Communications) and SMS (`sms_patient`: captured texts)
read their own conversation and write their own reply; what the patient says and what
`sim_reply` records of it is decided here, once for both. `answer_thread` walks a
channel's conversation, oldest first, and answers each staff message not yet answered;
`decide_reply` answers one — the turn cap first (a silenced turn is recorded), then the
configured model, or the scripted stand-in when there is none, the allowance is used up
or the model fails, then the fidelity audit — and `record_reply` claims the message in
`sim_reply` and links the channel's written reply in the same transaction; its primary
key makes a second attempt at the same message a no-op. The turns of every channel count
against the one `maxTurns`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

import asyncpg

from app.db import Scopes, Tx
from app.kit.clock import utcnow
from app.kit.consent import Decision
from app.llm.client import LlmClient, LlmUnavailable
from app.patient_sim import engine, repository
from app.runs.reads import get_run
from app.runs.row import PatientDriver, RunRow, RunStatus
from app.scenarios import service as scenarios_service
from app.scenarios.schema import PatientSim, Scenario, Variant, symbol_name

TEMPERATURE = 0.3

Source = TypeVar("Source")
Written = TypeVar("Written")


@dataclass(frozen=True, slots=True)
class SimPatient:
    """The simulated patient of a live run, as its scenario's patientSim gives it."""

    run: RunRow
    sim: PatientSim
    persona: Variant | None  # the run's variant, when it names a persona
    ref: str  # the patient in the run's fixture (`Patient/…`)


@dataclass(frozen=True, slots=True)
class ReplyClaim:
    """What `sim_reply` records of one answer."""

    turn: int
    engine: str  # scripted | llm | human
    model: str | None
    prompt_version: str | None
    temperature: float | None
    seed: int | None
    note: str | None
    issues: str | None
    asked: list[str]
    revealed: list[str]
    # The patient's agreement or refusal of each action (the `consent` expectation).
    decisions: tuple[Decision, ...] = ()


@dataclass(frozen=True, slots=True)
class DecidedReply:
    """The patient's answer to a staff message, not yet written: its text, what
    `sim_reply` will record of it, and when it was answered."""

    text: str
    claim: ReplyClaim
    at: datetime


@dataclass(frozen=True, slots=True)
class WrittenReply:
    """The reply as its channel wrote it: its id and when it was stored."""

    id: str
    at: datetime


# Writes the reply on its channel inside the transaction that claims it.
ReplyWriter = Callable[[Tx], Awaitable[WrittenReply]]


@dataclass(frozen=True, slots=True)
class ThreadMessage(Generic[Source]):
    """One message of the patient's conversation on a channel: from the patient, or from
    the staff to the patient."""

    id: str
    text: str
    from_patient: bool
    source: Source  # the channel's own record of it (a Communication, a captured text)


def reply_seed(run_id: str, message_id: str) -> int:
    """The model's seed for one message, reproducible: the same run and message ask the
    model the same way."""
    # 31 bits: providers (and our int column) take a signed 32-bit seed.
    return int(hashlib.sha256(f"{run_id}:{message_id}".encode()).hexdigest()[:8], 16) >> 1


async def load_patient_sim(
    pool: asyncpg.Pool, run: RunRow
) -> tuple[PatientSim, Variant | None] | None:
    """The run's scenario's patientSim and the persona of the run's variant; None when the
    scenario has no simulated patient."""
    loaded = await scenarios_service.get_scenario(pool, run.tenant_id, run.scenario_id)
    scenario: Scenario = loaded.scenario
    if scenario.patient_sim is None:
        return None
    persona = next((v for v in scenario.variants if v.persona == run.variant), None)
    return scenario.patient_sim, persona


async def get_simulated_patient(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str
) -> SimPatient | None:
    """The patient the simulator answers as on this run; None when there is nothing for it
    to answer: the run is not live, a person drives its patient (they answer on the run
    page: `simulated_patient.human_reply`), its scenario has no patientSim or its fixture
    no such patient."""
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
    if run.status != RunStatus.LIVE or run.patient_driver == PatientDriver.HUMAN:
        return None
    found = await load_patient_sim(pool, run)
    if found is None:
        return None
    sim, persona = found
    patient_ref = run.fixture.get(symbol_name(sim.patient))
    if patient_ref is None:
        return None
    return SimPatient(run, sim, persona, patient_ref)


async def answer_thread(
    scopes: Scopes,
    llm: LlmClient | None,
    patient: SimPatient,
    messages: Sequence[ThreadMessage[Source]],
    write: Callable[[ThreadMessage[Source], DecidedReply], Awaitable[Written | None]],
) -> list[Written]:
    """Answer the staff messages of a conversation (`messages`, oldest first) that are not
    answered yet, one unit of work per reply (no transaction is held while the model
    thinks): each is decided with the conversation before it as the thread, then the
    channel's `write` writes it (None: nothing written, another writer answered first).
    Returns what `write` wrote."""
    run = patient.run
    answered = await repository.answered_messages(
        scopes.pool, tenant_id=run.tenant_id, run_id=run.id
    )
    thread: list[engine.Turn] = []
    replies_so_far = len(answered)
    written: list[Written] = []
    for message in messages:
        if message.from_patient:
            thread.append(engine.Turn("patient", message.text))
            continue
        if message.id not in answered:
            decided = await decide_reply(
                scopes, llm, patient, message.id, message.text, thread, replies_so_far
            )
            reply = None if decided is None else await write(message, decided)
            if reply is not None:
                replies_so_far += 1
                written.append(reply)
        thread.append(engine.Turn("staff", message.text))
    return written


async def decide_reply(
    scopes: Scopes,
    llm: LlmClient | None,
    patient: SimPatient,
    message_id: str,
    staff_text: str,
    thread: list[engine.Turn],
    replies_so_far: int,
) -> DecidedReply | None:
    """The patient's answer to one staff message (`thread`: the conversation before it,
    oldest first; `replies_so_far`: the run's answered turns, all channels). None when the
    turn cap silences it, which is recorded in `sim_reply` at once."""
    run, sim, persona = patient.run, patient.sim, patient.persona
    now = utcnow()
    if engine.turns_left(sim, replies_so_far) <= 0:
        async with scopes.transaction(autocommit=True) as tx:
            await repository.insert_silenced(
                tx.conn,
                tenant_id=run.tenant_id,
                run_id=run.id,
                message_id=message_id,
                turn=replies_so_far + 1,
                at=now,
            )
        return None
    seed = reply_seed(run.id, message_id)
    engine_name, model, note, prompt_version = "scripted", None, None, None
    reply = engine.scripted_reply(sim, persona, staff_text, thread)
    asked = tuple(fact.topic for fact in engine.facts_asked(sim, staff_text))
    if llm is not None and llm.configured:
        try:
            result = await llm.complete_json(
                tenant_id=run.tenant_id,
                run_id=run.id,
                purpose="patient-sim",
                messages=engine.llm_messages(sim, persona, thread, staff_text),
                schema=engine.LlmSimReply,
                temperature=TEMPERATURE,
                seed=seed,
            )
            revealed = engine.revealed_by_model(
                sim, staff_text, result.value.reply, result.value.revealed_topics
            )
            decided = engine.decided_by_model(staff_text, result.value.reply)
            reply = engine.SimReply(result.value.reply, revealed, decided)
            asked = engine.asked_by_model(sim, staff_text, result.value.revealed_topics)
            engine_name, model, prompt_version = "llm", result.model, engine.PROMPT_VERSION
        except LlmUnavailable as exc:
            note = f"scripted stand-in answered: {exc.reason}"
    issues = engine.audit_reply(sim, staff_text, reply.text)
    claim = ReplyClaim(
        turn=replies_so_far + 1,
        engine=engine_name,
        model=model,
        prompt_version=prompt_version,
        temperature=TEMPERATURE if engine_name == "llm" else None,
        seed=seed if engine_name == "llm" else None,
        note=note,
        issues="\n".join(issues) or None,
        asked=list(asked),
        revealed=list(reply.revealed),
        decisions=reply.decisions,
    )
    return DecidedReply(reply.text, claim, now)


async def record_reply(
    scopes: Scopes,
    run: RunRow,
    message_id: str,
    claim: ReplyClaim,
    at: datetime,
    write: ReplyWriter,
) -> WrittenReply | None:
    """Claim the message in `sim_reply`, have the channel `write` its reply and link the
    two, in one transaction (whoever wrote the text: the simulator or a person driving the
    run). None when another writer answered the message first: nothing is written."""
    async with scopes.transaction() as tx:
        claimed = await repository.claim_reply(
            tx.conn,
            tenant_id=run.tenant_id,
            run_id=run.id,
            message_id=message_id,
            turn=claim.turn,
            engine=claim.engine,
            model=claim.model,
            prompt_version=claim.prompt_version,
            temperature=claim.temperature,
            seed=claim.seed,
            note=claim.note,
            issues=claim.issues,
            at=at,
            asked_topics=claim.asked,
            revealed_topics=claim.revealed,
            decisions=claim.decisions,
        )
        if not claimed:
            return None  # another worker answered it
        written = await write(tx)
        await repository.set_reply_id(
            tx.conn,
            tenant_id=run.tenant_id,
            run_id=run.id,
            message_id=message_id,
            reply_id=written.id,
            replied_at=written.at,
        )
    return written
