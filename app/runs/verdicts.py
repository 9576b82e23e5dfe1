"""Grading a run: `grade_run` grades a live run on its snapshot and ends it (passed,
failed, timed out) or records its progress; `live_checks` shows a live run's checks
without storing anything.

A run leaves `live` exactly once: every transition out of it is
`UPDATE run … WHERE status = 'live'` with the row count checked, so when `finish`, the
worker's tick and the deadline race, one of them writes the verdict and the others read
it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from app.capture import service as capture_service
from app.db import Scopes
from app.grading.engine import grade
from app.grading.fhirpath import ClauseMemo
from app.grading.scoring import progress
from app.grading.snapshot import RunSnapshot
from app.judges.service import judge_rubrics
from app.kit import jsontext
from app.llm.client import LlmClient
from app.patient_sim.report import simulator_report
from app.runs import provenance, repository
from app.runs.ending import slot_freed
from app.runs.reads import get_run
from app.runs.row import RunRow, RunStatus
from app.runs.snapshot import build_snapshot, expectations_of
from app.scenarios.schema import Expectation, walk_expectations
from understudy_client.contract.runs import ExpectationResult, Verdict


async def grade_run(
    scopes: Scopes,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    final: bool = False,
    llm: LlmClient | None = None,
    settle_seconds: float = 0.0,
    unless_graded_since: datetime | None = None,
) -> RunRow:
    """Grade a live run; end it when it passed, when `final` (finish), or at its deadline.
    With `unless_graded_since`, a run whose last grading was taken at or after that moment
    and saw its latest change is returned as it is: that grading saw every change
    committed before the moment (a regrade job names when its changes had all committed),
    and nothing changed since. A change it did not see is graded now rather than left to
    the later job that change enqueued (which may wait behind a backlog).
    A pass waits until the system under test has been quiet `settle_seconds` (no traced
    call, no write): until then the run stays live and is graded again when the quiet
    would be over, so extra work right after the job still counts against it.
    A run that already ended is returned as it is. Holds at most one connection at a
    time and no transaction across the judging (which may call a model and uses the pool
    itself); the verdict is one conditional UPDATE, and a run it ends frees a live slot
    (the live-run cache is dropped and queued eval items promoted after it commits)."""
    async with scopes.pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
        if run.status != RunStatus.LIVE or _already_graded(run, unless_graded_since):
            return run
        seen_change = run.changed_at
        expectations = expectations_of(run)
        snapshot = await build_snapshot(conn, run, expectations, final=final)
    verdict = grade(expectations, snapshot, GRADING_MEMO)
    outcome = _outcome(run, verdict, snapshot, final=final, settle_seconds=settle_seconds)
    if outcome.status is not None:
        return await _end(scopes, llm, run, expectations, verdict, snapshot, outcome, seen_change)
    return await _record_progress(scopes, run, verdict, snapshot.now, outcome, seen_change)


def _already_graded(run: RunRow, unless_graded_since: datetime | None) -> bool:
    """Whether the run's last grading was taken at or after `unless_graded_since` and saw
    its latest change."""
    return (
        unless_graded_since is not None
        and run.graded_at is not None
        and run.graded_at >= unless_graded_since
        and run.graded_change_at is not None
        and run.changed_at <= run.graded_change_at
    )


@dataclass(frozen=True)
class _Outcome:
    """What a grading pass does with the run: end it as `status` (None: it stays live),
    with `note`; `settling`: seconds a pass still waits for the quiet."""

    status: RunStatus | None
    note: str | None = None
    settling: float = 0.0


def _outcome(
    run: RunRow,
    verdict: Verdict,
    snapshot: RunSnapshot,
    *,
    final: bool,
    settle_seconds: float,
) -> _Outcome:
    now = snapshot.now
    settling = 0.0
    if verdict.passed and not final and now < run.deadline:
        settling = settle_seconds - (now - _last_activity(run, snapshot)).total_seconds()
    if verdict.passed and settling <= 0:
        return _Outcome(RunStatus.PASSED, settling=settling)
    if final:
        return _Outcome(RunStatus.FAILED, settling=settling)
    if now >= run.deadline:
        note = "the deadline passed before every required expectation held"
        return _Outcome(RunStatus.TIMED_OUT, note, settling)
    return _Outcome(None, settling=settling)


# Clause outcomes shared by this process's grading passes (a live run is graded after
# every write, most of its resources reading the same as the pass before): about a
# thousand resources' worth of clauses, a few megabytes.
GRADING_MEMO = ClauseMemo(max_entries=8192)


async def _sent_texts(
    pool: asyncpg.Pool, run: RunRow, expectations: list[Expectation], snapshot: RunSnapshot
) -> list[str]:
    """What a rubric reads of the SMS and e-mail the run sent: the snapshot's when it read
    them, else read now (once, as the run ends), only when a rubric is there to read."""
    if not any(e.type == "rubric" for e in walk_expectations(expectations)):
        return []
    if snapshot.sent:
        return [t.body for t in snapshot.sent]
    return [e.body or "" for e in await capture_service.sent_texts(pool, run.tenant_id, run.id)]


async def _end(
    scopes: Scopes,
    llm: LlmClient | None,
    run: RunRow,
    expectations: list[Expectation],
    verdict: Verdict,
    snapshot: RunSnapshot,
    outcome: _Outcome,
    seen_change: datetime,
) -> RunRow:
    """Judge the rubrics, add the simulated patient's report and the provenance, and end
    the run with its verdict unless another grader ended it first."""
    pool, tenant_id, run_id, now = scopes.pool, run.tenant_id, run.id, snapshot.now
    # Rubrics are judged once, as the run ends (bonus: the status stands).
    judges_used: list[tuple[str, str | None, str]] = []
    verdict = await judge_rubrics(
        pool,
        llm,
        tenant_id,
        run_id,
        expectations,
        verdict,
        snapshot.patient_refs,
        used=judges_used,
        sent=await _sent_texts(pool, run, expectations, snapshot),
    )
    verdict.score = round(verdict.score, 4)
    verdict.note = outcome.note
    replies, issues = await simulator_report(pool, tenant_id, run_id)
    if replies:
        verdict.simulated_patient = replies
        verdict.simulator_issues = issues
    judged_provenance = provenance.judged(
        run.provenance,
        patient_used=[(r.engine, r.model, r.prompt_version) for r in replies],
        judge_used=judges_used,
        at=now,
    )
    async with scopes.transaction(autocommit=True) as tx:
        ended = await repository.end_live_run(
            tx.conn,
            tenant_id=tenant_id,
            run_id=run_id,
            status=str(outcome.status),
            verdict_json=jsontext.dumps(verdict.wire()),
            at=now,
            seen_change=seen_change,
            provenance_json=(
                None if judged_provenance is None else jsontext.dumps(judged_provenance)
            ),
        )
        if ended is not None:
            slot_freed(tx, tenant_id)
            return RunRow.from_record(ended)
        return await get_run(tx.conn, tenant_id, run_id)  # another grader ended it first


async def _record_progress(
    scopes: Scopes,
    run: RunRow,
    verdict: Verdict,
    now: datetime,
    outcome: _Outcome,
    seen_change: datetime,
) -> RunRow:
    """The run stays live: store its progress, and when a pass waits for the quiet, grade
    it again once the quiet would be over."""
    tenant_id, run_id, settling = run.tenant_id, run.id, outcome.settling
    async with scopes.transaction(autocommit=True) as tx:
        updated = await repository.set_progress(
            tx.conn,
            tenant_id=tenant_id,
            run_id=run_id,
            progress_json=jsontext.dumps(progress(verdict, now).wire()),
            at=now,
            seen_change=seen_change,
            settle_until=now + timedelta(seconds=settling) if settling > 0 else None,
        )
        if updated is None:
            return await get_run(tx.conn, tenant_id, run_id)
        if settling > 0:
            tx.after.grade(tenant_id, run_id, delay=settling)
        return RunRow.from_record(updated)


async def live_checks(pool: asyncpg.Pool, run: RunRow) -> list[ExpectationResult]:
    """Each expectation of a live run graded on its snapshot now, by the same grader as
    `grade_run`, read-only: nothing is stored, no rubric is judged (pending), the run does
    not end. The console shows this to the signed-in person; the REST view of a live run
    keeps showing progress only (an agent holding the key must not read the answers)."""
    expectations = expectations_of(run)
    async with pool.acquire() as conn:
        snapshot = await build_snapshot(conn, run, expectations, final=False)
    return grade(expectations, snapshot, GRADING_MEMO).expectations


def _last_activity(run: RunRow, snapshot: RunSnapshot) -> datetime:
    """When the system under test last did something the run can see: a traced call, or
    a write it made."""
    moments = [run.started_at, *(c.at for c in snapshot.calls)]
    moments += [c.last_changed_at for c in snapshot.changed]
    return max(moments)
