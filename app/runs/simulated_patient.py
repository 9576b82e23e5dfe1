"""The simulated patient at work: answers the staff's messages of a live run.

Runs in the worker alongside grading (a write attributed to a run triggers both). For
every Communication of the run addressed to the simulated patient and not yet answered,
it writes one reply — from the configured model, or the scripted stand-in when there is
none, the allowance is used up, or the model fails — as an ordinary write (it fires
`message.received` and belongs to the run) tagged `simulated-patient`. `sim_reply`
records each answer (engine, model, prompt version, temperature, seed) and the fidelity
audit's findings; its primary key makes a second attempt at the same message a no-op.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from app.db import Scopes
from app.errors import Conflict
from app.fhir import service as fhir_service
from app.kit.clock import fhir_instant, utcnow
from app.kit.consent import Decision
from app.llm.client import LlmClient, LlmUnavailable
from app.patient_sim import engine, repository
from app.runs.errors import RunNotLive
from app.runs.fhir_writes import FHIR_WRITES
from app.runs.reads import get_run
from app.runs.row import PatientDriver, RunRow
from app.scenarios import service as scenarios_service
from app.scenarios.schema import PatientSim, Scenario, Variant, symbol_name
from app.webhooks import service as webhooks_service

log = logging.getLogger("understudy.patient_sim")

TEMPERATURE = 0.3


@dataclass
class SimOutcome:
    replies: int = 0
    deliveries: list[str] = field(default_factory=list)


def _text(resource: dict[str, Any]) -> str:
    parts = [
        str(p.get("contentString"))
        for p in resource.get("payload") or []
        if isinstance(p, dict) and p.get("contentString")
    ]
    return "\n".join(parts)


def _seed(run_id: str, message_id: str) -> int:
    # Reproducible per message: the same run and message ask the model the same way.
    # 31 bits: providers (and our int column) take a signed 32-bit seed.
    return int(hashlib.sha256(f"{run_id}:{message_id}".encode()).hexdigest()[:8], 16) >> 1


async def _scenario_of(pool: asyncpg.Pool, run: RunRow) -> tuple[PatientSim, Variant | None] | None:
    loaded = await scenarios_service.get_scenario(pool, run.tenant_id, run.scenario_id)
    scenario: Scenario = loaded.scenario
    if scenario.patient_sim is None:
        return None
    persona = next((v for v in scenario.variants if v.persona == run.variant), None)
    return scenario.patient_sim, persona


async def reply_to_messages(
    scopes: Scopes, llm: LlmClient | None, tenant_id: uuid.UUID, run_id: str
) -> SimOutcome:
    """Answer the run's unanswered messages to the simulated patient, one unit of work
    per reply (no transaction is held while the model thinks); each reply's webhook
    deliveries are sent once it commits."""
    outcome = SimOutcome()
    pool = scopes.pool
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
    if run.status != "live" or run.patient_driver == PatientDriver.HUMAN:
        # A human-driven run's patient is a person on the run page (`human_reply`).
        return outcome
    found = await _scenario_of(pool, run)
    if found is None:
        return outcome
    sim, persona = found
    patient_ref = run.fixture.get(symbol_name(sim.patient))
    if patient_ref is None:
        return outcome
    rows = await fhir_service.communications_of(pool, tenant_id, run_id, patient_ref)
    answered = await repository.answered_messages(pool, tenant_id=tenant_id, run_id=run_id)
    thread: list[engine.Turn] = []
    replies_so_far = len(answered)
    for row in rows:
        resource = orjson.loads(row.resource)
        sender = str((resource.get("sender") or {}).get("reference", ""))
        recipients = [str(r.get("reference", "")) for r in resource.get("recipient") or []]
        text = _text(resource)
        if sender == patient_ref:
            thread.append(engine.Turn("patient", text))
            continue
        if patient_ref not in recipients:
            continue
        if row.id not in answered:
            written = await _answer(
                scopes,
                llm,
                run,
                sim,
                persona,
                patient_ref,
                row.id,
                resource,
                text,
                thread,
                replies_so_far,
            )
            if written is not None:
                replies_so_far += 1
                outcome.replies += 1
                outcome.deliveries.extend(written)
        thread.append(engine.Turn("staff", text))
    return outcome


async def _answer(
    scopes: Scopes,
    llm: LlmClient | None,
    run: RunRow,
    sim: PatientSim,
    persona: Variant | None,
    patient_ref: str,
    message_id: str,
    message: dict[str, Any],
    text: str,
    thread: list[engine.Turn],
    replies_so_far: int,
) -> list[str] | None:
    """Write one reply (or record that the turn cap silenced it); None when nothing was
    written."""
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
    seed = _seed(run.id, message_id)
    engine_name, model, note, prompt_version = "scripted", None, None, None
    reply = engine.scripted_reply(sim, persona, text, thread)
    asked = tuple(fact.topic for fact in engine.facts_asked(sim, text))
    if llm is not None and llm.configured:
        try:
            result = await llm.complete_json(
                tenant_id=run.tenant_id,
                run_id=run.id,
                purpose="patient-sim",
                messages=engine.llm_messages(sim, persona, thread, text),
                schema=engine.LlmSimReply,
                temperature=TEMPERATURE,
                seed=seed,
            )
            revealed = engine.revealed_by_model(
                sim, text, result.value.reply, result.value.revealed_topics
            )
            decided = engine.decided_by_model(text, result.value.reply)
            reply = engine.SimReply(result.value.reply, revealed, decided)
            asked = engine.asked_by_model(sim, text, result.value.revealed_topics)
            engine_name, model, prompt_version = "llm", result.model, engine.PROMPT_VERSION
        except LlmUnavailable as exc:
            note = f"scripted stand-in answered: {exc.reason}"
    issues = engine.audit_reply(sim, text, reply.text)
    return await _write_reply(
        scopes,
        run,
        patient_ref,
        message_id,
        message,
        reply.text,
        _Claim(
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
        ),
        now,
    )


@dataclass(frozen=True, slots=True)
class _Claim:
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


async def _write_reply(
    scopes: Scopes,
    run: RunRow,
    patient_ref: str,
    message_id: str,
    message: dict[str, Any],
    text: str,
    claim: _Claim,
    now: datetime,
) -> list[str] | None:
    """The one way a patient's reply is written, whoever wrote its text (the simulator or
    a person driving the run): a Communication from the patient, `inResponseTo` the staff
    message, to its sender, as an ordinary write of the run (tagged, fires
    `message.received`), with its `sim_reply` row claimed in the same transaction. Returns
    the webhook deliveries created; None when another writer answered the message first."""
    pool = scopes.pool
    sender = message.get("sender")
    communication: dict[str, Any] = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": patient_ref},
        "sender": {"reference": patient_ref},
        "inResponseTo": [{"reference": f"Communication/{message_id}"}],
        "sent": fhir_instant(now),
        "payload": [{"contentString": text}],
    }
    if isinstance(sender, dict) and sender.get("reference"):
        communication["recipient"] = [{"reference": sender["reference"]}]
    root = await webhooks_service.run_fhir_root(pool, run.tenant_id, run.id)
    ctx = fhir_service.FhirContext(
        tenant_id=run.tenant_id,
        base_url="",
        run_id=run.id,
        source="sim",
        root_url=root or "",
        write_statement=FHIR_WRITES,
    )
    async with scopes.transaction() as tx:
        conn = tx.conn
        claimed = await repository.claim_reply(
            conn,
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
            at=now,
            asked_topics=claim.asked,
            revealed_topics=claim.revealed,
            decisions=claim.decisions,
        )
        if not claimed:
            return None  # another worker answered it
        result_write = await fhir_service.create(ctx, conn, "Communication", communication)
        await repository.set_reply_id(
            conn,
            tenant_id=run.tenant_id,
            run_id=run.id,
            message_id=message_id,
            reply_id=result_write.id,
            replied_at=result_write.last_updated,
        )
        tx.after.wrote(run.tenant_id, ctx.writes)
        if ctx.deliveries:
            tx.after.deliver(run.tenant_id)
    return ctx.deliveries


class NothingToAnswer(Conflict):
    """A person's reply with no staff message waiting for one."""


class NotHumanDriven(Conflict):
    """A reply typed for a run whose patient is the simulator."""


@dataclass(frozen=True, slots=True)
class HumanReply:
    message_id: str  # the staff message answered
    turn: int


async def human_reply(scopes: Scopes, tenant_id: uuid.UUID, run_id: str, text: str) -> HumanReply:
    """A person driving the run answers the latest staff message to the patient: written
    exactly as a simulated reply (`_write_reply`), counted against `maxTurns`, recorded
    with engine `human` (its asked and revealed topics as the scripted patient would
    read them, so `asked` grades it the same)."""
    pool = scopes.pool
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
    if run.status != "live":
        raise RunNotLive(f"run '{run_id}' already ended as {run.status}")
    if run.patient_driver != PatientDriver.HUMAN:
        raise NotHumanDriven(f"run '{run_id}' is answered by the simulated patient")
    found = await _scenario_of(pool, run)
    patient_ref = run.fixture.get(symbol_name(found[0].patient)) if found else None
    if found is None or patient_ref is None:
        raise NotHumanDriven(f"run '{run_id}' has no patient to answer as")
    sim = found[0]
    latest = await _latest_staff_message(pool, tenant_id, run_id, patient_ref)
    if latest is None:
        raise NothingToAnswer("no message to the patient yet: wait for the system's message")
    message_id, message, staff_text = latest
    answered = await repository.answered_messages(pool, tenant_id=tenant_id, run_id=run_id)
    if message_id in answered:
        raise NothingToAnswer(
            f"Communication/{message_id} is answered already: wait for the next message"
        )
    if engine.turns_left(sim, len(answered)) <= 0:
        raise NothingToAnswer(f"the patient has used its {sim.max_turns} turns (maxTurns)")
    asked = [fact.topic for fact in engine.facts_asked(sim, staff_text)]
    turn = len(answered) + 1
    written = await _write_reply(
        scopes,
        run,
        patient_ref,
        message_id,
        message,
        text,
        _Claim(
            turn=turn,
            engine="human",
            model=None,
            prompt_version=None,
            temperature=None,
            seed=None,
            note="typed by a person on the run page",
            issues=None,
            asked=asked,
            revealed=list(engine.revealed_by_model(sim, staff_text, text, [])),
            decisions=engine.decided_by_model(staff_text, text),
        ),
        utcnow(),
    )
    if written is None:
        raise NothingToAnswer(f"Communication/{message_id} was answered meanwhile")
    return HumanReply(message_id, turn)


async def _latest_staff_message(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str, patient_ref: str
) -> tuple[str, dict[str, Any], str] | None:
    """The newest message of the run to the patient from someone else: id, body, text."""
    latest = None
    for row in await fhir_service.communications_of(pool, tenant_id, run_id, patient_ref):
        resource = orjson.loads(row.resource)
        sender = str((resource.get("sender") or {}).get("reference", ""))
        recipients = [str(r.get("reference", "")) for r in resource.get("recipient") or []]
        if sender != patient_ref and patient_ref in recipients:
            latest = (row.id, resource, _text(resource))
    return latest


async def answer_to(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str, message_id: str
) -> tuple[bool, str | None]:
    """Whether the simulated patient has dealt with a message, and the note of a turn it
    did not answer (None once it replied)."""
    row = await repository.reply_to(pool, tenant_id=tenant_id, run_id=run_id, message_id=message_id)
    if row is None:
        return False, None
    return True, None if row["reply_id"] is not None else row["note"]
