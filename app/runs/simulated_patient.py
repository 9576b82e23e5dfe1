"""The simulated patient at work: answers the staff's messages of a live run.

Runs in the worker alongside grading (a write attributed to a run triggers both). For
every Communication of the run addressed to the simulated patient and not yet answered,
it writes one reply — decided as on every channel (`patient_reply`: the configured model,
or the scripted stand-in when there is none, the allowance is used up, or the model
fails) — as an ordinary write (it fires `message.received` and belongs to the run) tagged
`simulated-patient`. `sim_reply` records each answer (engine, model, prompt version,
temperature, seed) and the fidelity audit's findings; its primary key makes a second
attempt at the same message a no-op.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from app.db import Scopes, Tx
from app.errors import Conflict
from app.fhir import service as fhir_service
from app.kit.clock import fhir_instant, utcnow
from app.llm.client import LlmClient
from app.patient_sim import engine, repository
from app.runs import patient_reply
from app.runs.errors import RunNotLive
from app.runs.fhir_writes import FHIR_WRITES
from app.runs.reads import get_run
from app.runs.row import PatientDriver, RunRow
from app.scenarios.schema import symbol_name
from app.webhooks import service as webhooks_service

log = logging.getLogger("understudy.patient_sim")


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


_Message = patient_reply.ThreadMessage[dict[str, Any]]  # the source: the Communication


def _thread_message(message_id: str, resource: dict[str, Any], patient_ref: str) -> _Message | None:
    """A Communication of the run as a message of the patient's conversation; None when it
    is neither from the patient nor to it."""
    sender = str((resource.get("sender") or {}).get("reference", ""))
    recipients = [str(r.get("reference", "")) for r in resource.get("recipient") or []]
    if sender != patient_ref and patient_ref not in recipients:
        return None
    return patient_reply.ThreadMessage(
        message_id, _text(resource), from_patient=sender == patient_ref, source=resource
    )


async def reply_to_messages(
    scopes: Scopes, llm: LlmClient | None, tenant_id: uuid.UUID, run_id: str
) -> SimOutcome:
    """Answer the run's unanswered messages to the simulated patient, one unit of work
    per reply (no transaction is held while the model thinks); each reply's webhook
    deliveries are sent once it commits."""
    outcome = SimOutcome()
    pool = scopes.pool
    patient = await patient_reply.get_simulated_patient(pool, tenant_id, run_id)
    if patient is None:
        return outcome
    rows = await fhir_service.communications_of(pool, tenant_id, run_id, patient.ref)
    messages = (_thread_message(row.id, orjson.loads(row.resource), patient.ref) for row in rows)
    conversation = [message for message in messages if message is not None]

    async def write(message: _Message, decided: patient_reply.DecidedReply) -> list[str] | None:
        return await _write_reply(
            scopes,
            patient.run,
            patient.ref,
            message.id,
            message.source,
            decided.text,
            decided.claim,
            decided.at,
        )

    for deliveries in await patient_reply.answer_thread(scopes, llm, patient, conversation, write):
        outcome.replies += 1
        outcome.deliveries.extend(deliveries)
    return outcome


async def _write_reply(
    scopes: Scopes,
    run: RunRow,
    patient_ref: str,
    message_id: str,
    message: dict[str, Any],
    text: str,
    claim: patient_reply.ReplyClaim,
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

    async def write(tx: Tx) -> patient_reply.WrittenReply:
        created = await fhir_service.create(ctx, tx.conn, "Communication", communication)
        tx.after.wrote(run.tenant_id, ctx.writes)
        if ctx.deliveries:
            tx.after.deliver(run.tenant_id)
        return patient_reply.WrittenReply(created.id, created.last_updated)

    written = await patient_reply.record_reply(scopes, run, message_id, claim, now, write)
    return None if written is None else ctx.deliveries


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
    found = await patient_reply.load_patient_sim(pool, run)
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
        patient_reply.ReplyClaim(
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
        message = _thread_message(row.id, orjson.loads(row.resource), patient_ref)
        if message is not None and not message.from_patient:
            latest = (message.id, message.source, message.text)
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
