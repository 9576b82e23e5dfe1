"""The simulated patient answers SMS: a text the run's system sends to the patient's phone
is answered by the same patient that answers portal messages (`patient_reply` decides
both; docs/capture.md "Inbound SMS"), and the answer is posted to the run's reply URL as
Twilio posts an incoming text.

Runs where the portal replies run — the worker's grading pass (`app/worker.py`
`_simulate`, after `simulated_patient.reply_to_messages`) and the oracle replay — since a
captured SMS marks its run changed. The patient's phone is the patientSim patient's
`telecom` (system phone or sms), compared by its last ten digits. The thread the patient
sees is the SMS conversation with that number, oldest first; its turns count against
`maxTurns` with the portal's. Each answer is claimed in `sim_reply` (message id: the
SMS's SID), so a second attempt at the same text is a no-op; it is kept as an inbound
capture (from the patient's number to the number the text came from, status `received`)
in the same transaction, which queues its delivery (`app.capture.inbound`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

import asyncpg
import httpx
import orjson

from app.capture import credentials
from app.capture import inbound as capture_inbound
from app.capture.service import Effect
from app.db import Scopes, Tx
from app.fhir import service as fhir_service
from app.llm.client import LlmClient
from app.runs import patient_reply
from app.runs import repository as runs_repository
from app.runs.changes import mark_runs_changed
from app.runs.errors import RunNotFound
from app.runs.reads import get_run
from app.runs.row import RunRow, RunStatus
from app.runs.start import check_sms_reply_url
from app.settings import Settings
from app.trace import service as trace_service

log = logging.getLogger("understudy.patient_sim")

# A phone number by its last ten digits (+1 555-0100 and 5550100 alike), as text truth
# reads a captured SMS's recipient (app/grading/truth/texts.py).
PHONE_DIGITS = 10
PHONE_SYSTEMS = ("phone", "sms")


def phone_digits(number: str | None) -> str:
    return "".join(c for c in number or "" if c.isdigit())[-PHONE_DIGITS:]


def patient_phones(patient: Mapping[str, object]) -> dict[str, str]:
    """The patient's phone numbers: by their digits, the number as the chart writes it."""
    found: dict[str, str] = {}
    telecoms = patient.get("telecom")
    for telecom in telecoms if isinstance(telecoms, list) else []:
        if not isinstance(telecom, dict) or telecom.get("system") not in PHONE_SYSTEMS:
            continue
        value = str(telecom.get("value") or "")
        if phone_digits(value):
            found.setdefault(phone_digits(value), value)
    return found


async def _phones_of(pool: asyncpg.Pool, tenant_id: uuid.UUID, ref: str) -> dict[str, str]:
    rtype, _, rid = ref.partition("/")
    async with pool.acquire() as conn:
        stored = await fhir_service.current_version(conn, tenant_id, rtype, rid)
    if stored is None or stored.deleted or stored.json is None:
        return {}
    resource = orjson.loads(stored.json)
    return patient_phones(resource) if isinstance(resource, dict) else {}


def _e164(number: str, digits: str) -> str:
    """The patient's number as Twilio writes a From: E.164 (+1 and ten digits for a North
    American number, else + and the digits the chart gives)."""
    if number.strip().startswith("+"):
        return "+" + "".join(c for c in number if c.isdigit())
    whole = "".join(c for c in number if c.isdigit())
    return "+1" + digits if len(whole) == PHONE_DIGITS else "+" + whole


async def answer_texts(
    scopes: Scopes, llm: LlmClient | None, tenant_id: uuid.UUID, run_id: str
) -> list[str]:
    """Answer the run's unanswered texts to the simulated patient's phone, one unit of
    work per reply (no transaction is held while the model thinks); returns the inbound
    captures written (their deliveries are queued as each commits)."""
    pool = scopes.pool
    patient = await patient_reply.get_simulated_patient(pool, tenant_id, run_id)
    if patient is None:
        return []
    phones = await _phones_of(pool, tenant_id, patient.ref)
    if not phones:
        return []
    texts = await capture_inbound.sms_in_order(pool, tenant_id, run_id)
    if not any(t.direction == "outbound" and phone_digits(t.to_address) in phones for t in texts):
        return []
    messages = (_thread_message(text, phones) for text in texts)
    conversation = [message for message in messages if message is not None]

    async def write(
        message: patient_reply.ThreadMessage[Effect], decided: patient_reply.DecidedReply
    ) -> str | None:
        return await _write_reply(scopes, patient.run, message.source, phones, decided)

    return await patient_reply.answer_thread(scopes, llm, patient, conversation, write)


def _thread_message(
    text: Effect, phones: Mapping[str, str]
) -> patient_reply.ThreadMessage[Effect] | None:
    """A captured text as a message of the patient's conversation; None when it is neither
    from one of the patient's phones nor to one."""
    inbound = text.direction == "inbound"
    if phone_digits(text.from_address if inbound else text.to_address) not in phones:
        return None
    return patient_reply.ThreadMessage(text.id, text.body or "", from_patient=inbound, source=text)


async def _write_reply(
    scopes: Scopes,
    run: RunRow,
    text: Effect,
    phones: Mapping[str, str],
    decided: patient_reply.DecidedReply,
) -> str | None:
    """Keep the patient's reply to a text as an inbound capture, from the patient's number
    the text went to back to the number it came from, with its `sim_reply` row claimed in
    the same transaction; the capture's id, None when another writer answered first."""
    digits = phone_digits(text.to_address)
    patient_number = _e164(phones[digits], digits)
    params = text.data.get("params") or {}

    async def write(tx: Tx) -> patient_reply.WrittenReply:
        effect = await capture_inbound.record_inbound_sms(
            tx,
            run.tenant_id,
            run.id,
            to=text.from_address or "",
            from_=patient_number,
            body=decided.text,
            in_reply_to=text.id,
            messaging_service_sid=params.get("MessagingServiceSid")
            if isinstance(params, dict)
            else None,
            reply_url=run.sms_reply_url,
        )
        await mark_runs_changed(tx, run.tenant_id, {run.id})
        return patient_reply.WrittenReply(effect.id, effect.at)

    written = await patient_reply.record_reply(
        scopes, run, text.id, decided.claim, decided.at, write
    )
    return None if written is None else written.id


async def set_reply_url(tx: Tx, tenant_id: uuid.UUID, run_id: str, url: str | None) -> bool:
    """Change where a live run's SMS replies go (Twilio's `SmsUrl` of the run's number):
    replies written from now on; False when the run is not live. A URL is checked as the
    start's `smsReplyUrl` is (a 422 naming it)."""
    if url is not None:
        check_sms_reply_url(url)
    return await runs_repository.set_sms_reply_url(
        tx.conn, tenant_id=tenant_id, run_id=run_id, url=url
    )


async def deliver_reply(
    scopes: Scopes,
    client: httpx.AsyncClient,
    settings: Settings,
    tenant_id: uuid.UUID,
    run_id: str,
    effect_id: str,
) -> str:
    """One delivery attempt of an SMS reply to the run's reply URL (the worker's
    `deliver_sms_reply` job), traced on the run while it is live. Returns its outcome."""
    attempt = await capture_inbound.deliver_inbound_sms(
        scopes,
        client,
        credentials.secret_for(settings),
        tenant_id,
        run_id,
        effect_id,
        retry_seconds=settings.webhook_retry_seconds,
        attempt_timeout=settings.webhook_timeout_seconds,
    )
    if attempt.trace is not None:
        async with scopes.pool.acquire() as conn:
            try:
                run = await get_run(conn, tenant_id, run_id)
            except RunNotFound:
                return attempt.status  # its data was deleted meanwhile
            if run.status == RunStatus.LIVE:
                await trace_service.record_calls(conn, [attempt.trace])
    return attempt.status


async def sweep_replies(scopes: Scopes) -> int:
    """Queue again the reply deliveries whose job was lost (a crash between commit and
    enqueue, Redis away); the job id dedupes against one still queued."""
    due = await capture_inbound.due_inbound_deliveries(scopes.pool)
    async with scopes.transaction(autocommit=True) as tx:
        for tenant_id, run_id, effect_id, attempts in due:
            tx.after.deliver_sms_reply(tenant_id, run_id, effect_id, attempts)
    return len(due)
