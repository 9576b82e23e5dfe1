"""What a verdict says about the simulated patient (no dependency on runs)."""

from __future__ import annotations

import uuid

import asyncpg

from app.grading.snapshot import Revealed
from app.patient_sim import repository
from understudy_client.contract.runs import SimulatedReply, SimulatorIssue


async def simulator_report(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str
) -> tuple[list[SimulatedReply], list[SimulatorIssue]]:
    """What the verdict says about the simulator: engines used and fidelity issues."""
    rows = await repository.replies_of_run(pool, tenant_id=tenant_id, run_id=run_id)
    issues = [
        SimulatorIssue(message=f"Communication/{r['message_id']}", issue=issue)
        for r in rows
        for issue in (r["issues"] or "").split("\n")
        if issue
    ]
    replies = [
        SimulatedReply(
            message=f"Communication/{r['message_id']}",
            reply=f"Communication/{r['reply_id']}" if r["reply_id"] else None,
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
            reply_ref=f"Communication/{r['reply_id']}",
            asked_ref=f"Communication/{r['message_id']}",
            asked=topic in (r["asked_topics"] or ()),
        )
        for r in rows
        for topic in r["revealed_topics"] or ()
    ]
    return revealed, len(rows)
