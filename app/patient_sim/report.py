"""What a verdict says about the simulated patient (no dependency on runs)."""

from __future__ import annotations

import uuid

import asyncpg

from app.contract.runs import SimulatedReply, SimulatorIssue
from app.patient_sim import repository


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
