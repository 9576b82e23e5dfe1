"""What a verdict says about the simulated patient (no dependency on runs)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable

import asyncpg

from app.fhir import service as fhir_service
from app.grading.snapshot import Decision, Revealed
from app.kit import jsontext
from app.kit.consent import ALL_ACTIONS, requests
from app.patient_sim import repository
from understudy_client.contract.runs import SimulatedReply, SimulatorIssue

# A text's SID (docs/capture.md "Inbound SMS"): the patient answered an SMS, and the
# reply is an inbound capture, not a Communication. As app/capture/credentials.py spells
# it, which this layer may not import.
_SMS_SID = re.compile(r"^SM[0-9a-f]{32}$")


def message_ref(message_id: str) -> str:
    """How a verdict names a message the patient answered, or the answer: `sms:SM…` for
    a text (as text truth names captures), else `Communication/<id>`."""
    return f"sms:{message_id}" if _SMS_SID.match(message_id) else f"Communication/{message_id}"


async def simulator_report(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str
) -> tuple[list[SimulatedReply], list[SimulatorIssue]]:
    """What the verdict says about the simulator: engines used and fidelity issues."""
    rows = await repository.replies_of_run(pool, tenant_id=tenant_id, run_id=run_id)
    issues = [
        SimulatorIssue(message=message_ref(r["message_id"]), issue=issue)
        for r in rows
        for issue in (r["issues"] or "").split("\n")
        if issue
    ]
    replies = [
        SimulatedReply(
            message=message_ref(r["message_id"]),
            reply=message_ref(r["reply_id"]) if r["reply_id"] else None,
            turn=r["turn"],
            engine=r["engine"],
            model=r["model"],
            prompt_version=r["prompt_version"],
            note=r["note"],
        )
        for r in rows
    ]
    return replies, issues


async def revealed_facts(
    conn: repository.Reader, tenant_id: uuid.UUID, run_id: str
) -> tuple[list[Revealed], int]:
    """What the `asked` expectation grades: each fact a reply revealed (attributed to the
    message it answers, at the time the reply was written), and how many replies the
    patient wrote."""
    rows = await repository.written_replies(conn, tenant_id=tenant_id, run_id=run_id)
    revealed = [
        Revealed(
            at=r["replied_at"],
            topic=topic,
            reply_ref=message_ref(r["reply_id"]),
            asked_ref=message_ref(r["message_id"]),
            asked=topic in (r["asked_topics"] or ()),
        )
        for r in rows
        for topic in r["revealed_topics"] or ()
    ]
    return revealed, len(rows)


async def consent_decisions(
    conn: repository.Reader, tenant_id: uuid.UUID, run_id: str, patient_refs: Iterable[str]
) -> list[Decision]:
    """What the `consent` expectation grades: the patient's agreements and refusals,
    oldest first — those recorded with each reply (simulated or typed by a person), and
    what the patient's own other messages (a stimulus, the fixture's thread) ask for or
    refuse, read the same way (`app.kit.consent.requests`)."""
    rows = await repository.written_replies(conn, tenant_id=tenant_id, run_id=run_id)
    out: list[Decision] = []
    replies: set[str] = set()
    for r in rows:
        replies.add(r["reply_id"])
        recorded = r["decisions"]
        for entry in jsontext.loads(recorded) if isinstance(recorded, str) else recorded or []:
            if isinstance(entry, dict) and entry.get("action") in ALL_ACTIONS:
                out.append(
                    Decision(
                        at=r["replied_at"],
                        action=entry["action"],
                        agreed=entry.get("agreed") is True,
                        reply_ref=message_ref(r["reply_id"]),
                        asked_ref=message_ref(r["message_id"]),
                    )
                )
    for patient in sorted(set(patient_refs)):
        for message in await fhir_service.communications_of(conn, tenant_id, run_id, patient):
            if message.id in replies:
                continue
            body = jsontext.loads(message.resource)
            if (body.get("sender") or {}).get("reference") != patient:
                continue
            text = "\n".join(
                str(p["contentString"])
                for p in body.get("payload") or []
                if isinstance(p, dict) and isinstance(p.get("contentString"), str)
            )
            out += [
                Decision(
                    at=message.last_updated,
                    action=d.action,
                    agreed=d.agreed,
                    reply_ref=f"Communication/{message.id}",
                )
                for d in requests(text)
            ]
    return sorted(out, key=lambda d: d.at)
