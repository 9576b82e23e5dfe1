"""Crafted run histories for the board's HTTP and browser tests: rows written straight
into `run` (a history of weeks takes milliseconds), each with a verdict like grading's."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

import orjson

from app.db import Database
from app.kit.clock import utcnow
from app.scenarios import service as scenarios_service

STATUS = {
    "p": "passed",
    "f": "failed",
    "t": "timed_out",
    "c": "cancelled",
    "e": "errored",
    "l": "live",
    "w": "live",
}
CHECKS = [("booked", "An appointment is booked"), ("notified", "The patient is told")]


def builtin_hash(scenario_id: str) -> str:
    return scenarios_service.builtin_scenarios()[scenario_id].hash


def workflow_scenarios() -> list[str]:
    return sorted(
        s.scenario.id
        for s in scenarios_service.builtin_scenarios().values()
        if "workflow" in {str(m) for m in s.scenario.modes}
    )


def verdict_of(status: str) -> dict[str, Any] | None:
    if status == "live":
        return None
    if status == "errored":
        return {"passed": False, "score": 0, "expectations": [], "note": "the grader crashed"}
    passed = status == "passed"
    return {
        "passed": passed,
        "score": 1.0 if passed else 0.5,
        "expectations": [
            {
                "id": cid,
                "label": label,
                "type": "resource",
                "required": True,
                "weight": 1,
                "passed": passed or i == 0,
                "score": 1.0 if passed or i == 0 else 0.0,
                "evidence": {"matches": []},
                "detail": "",
            }
            for i, (cid, label) in enumerate(CHECKS)
        ],
    }


async def insert_history(
    db: Database,
    tenant_id: uuid.UUID,
    scenario_id: str,
    history: str,
    *,
    revision: str | None,
    mode: str = "workflow",
    scenario_hash: str | None = None,
    start: datetime | None = None,
) -> list[str]:
    """One run per letter of `history` (p passed, f failed, t timed out, c cancelled,
    e errored, l live, w live past its deadline), a minute apart, oldest first. A live
    run is written as already graded with no news since, so the worker's tick leaves it
    live; a `w` run is due, and the tick soon ends it timed out."""
    now = utcnow()
    at = start or now - timedelta(hours=2)
    hash_ = scenario_hash or builtin_hash(scenario_id)
    ids = []
    async with db.pool.acquire() as conn:
        for letter in history:
            status = STATUS[letter]
            run_id = "run_" + secrets.token_hex(6)
            deadline = now - timedelta(minutes=1) if letter == "w" else now + timedelta(hours=1)
            if status != "live":
                deadline = at + timedelta(minutes=5)
            verdict = verdict_of(status)
            await conn.execute(
                """INSERT INTO run (tenant_id, id, scenario_id, scenario_version, scenario_hash,
                    builtin, mode, status, fixture, expectations, started_at, deadline,
                    finished_at, changed_at, graded_change_at, verdict, revision)
                VALUES ($1, $2, $3, 0, $4, true, $5, $6, '{}', '[]', $7, $8, $9, $7,
                    $7, $10::jsonb, $11)""",
                tenant_id,
                run_id,
                scenario_id,
                hash_,
                mode,
                status,
                at,
                deadline,
                None if status == "live" else at + timedelta(seconds=30),
                None if verdict is None else orjson.dumps(verdict).decode(),
                revision,
            )
            ids.append(run_id)
            at += timedelta(minutes=1)
    return ids
