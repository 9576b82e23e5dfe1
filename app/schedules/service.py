"""Scheduled evals: a cron expression (UTC) that starts a workflow-mode eval.

The worker's tick (`tick`, every 15 s, given the time so tests can drive it) takes each
schedule whose `next_due_at` has come in a guarded update (`… WHERE next_due_at = <the
due time read> AND NOT paused`), in the transaction that starts its eval and records the
due time in `eval_schedule_fire` (keyed by the due time): however many workers tick, one
of them moves the schedule on and the others match nothing, so each due time starts at
most one eval. Then, in that same transaction:

- while the schedule's previous eval is still queued or running, the due time is
  skipped with that reason (a cancelled previous eval does not hold it up);
- otherwise an eval labelled "{labelPrefix} {due time, e.g. 2026-12-01T03:00Z}" starts,
  with `schedule_id` set and `baseline_id` the schedule's newest completed eval (the
  evals feature compares with it when the eval completes and fires eval.completed /
  eval.regressed);
- due times missed while no worker ran (the tick found several past due) start once,
  for the latest; the earlier ones are recorded as one skip with the reason.

An eval that cannot start any more (a scenario of the schedule was deleted) is recorded
as a skip with the evals feature's reason, and the schedule moves on.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import orjson

from app.db import Conn, Scopes, Tx
from app.errors import AppError, Issue, NotFound, Unprocessable
from app.evals import service as evals_service
from app.kit.clock import utcnow
from app.kit.ids import new_resource_id
from app.schedules import cron, repository
from app.schedules.errors import ScheduleNotFound
from understudy_client.contract.evals import EvalListItem
from understudy_client.contract.schedules import (
    ScheduleCompare,
    ScheduledEval,
    ScheduledEvalSpec,
    ScheduleFire,
    ScheduleSummary,
    ScheduleView,
)

log = logging.getLogger("understudy.schedules")

MAX_SCHEDULES = 10
MODE = "workflow"  # agent mode needs an agent to hand each run's brief to
RECENT_EVALS = 5
HISTORY = 20
# How far back a schedule's evals are read for its previous and newest completed one.
LOOKBACK = 20


@dataclass
class ScheduleRequest:
    name: str
    cron: str
    mode: str
    label_prefix: str
    scenarios: list[str] | dict[str, str] | None
    personas: str | list[str]
    repeats: int
    timeout_seconds: int | None = None
    revision: str | None = None


def _label(prefix: str, due_at: datetime) -> str:
    return f"{prefix} {due_at:%Y-%m-%dT%H:%MZ}"


def _eval_request(
    spec: ScheduledEvalSpec,
    label: str,
    *,
    schedule_id: str | None = None,
    baseline_id: str | None = None,
) -> evals_service.EvalRequest:
    return evals_service.EvalRequest(
        spec.mode,
        label,
        spec.scenarios,
        spec.repeats,
        spec.personas,
        spec.timeout_seconds,
        revision=spec.revision,
        schedule_id=schedule_id,
        baseline_id=baseline_id,
    )


def _spec(row: asyncpg.Record) -> ScheduledEvalSpec:
    request = orjson.loads(row["request"])
    return ScheduledEvalSpec(
        mode=request["mode"],
        label_prefix=row["label_prefix"],
        scenarios=request["scenarios"],
        personas=request["personas"],
        repeats=request["repeats"],
        timeout_seconds=request.get("timeoutSeconds"),
        revision=row["revision"],
    )


def _under_eval(exc: AppError) -> AppError:
    """The evals feature's refusal of the schedule's eval, its issues named under `eval`
    (same status and message as POST /evals gives)."""
    issues = [
        dataclasses.replace(i, expression=f"eval.{i.expression}" if i.expression else "eval")
        for i in exc.issues
    ]
    return type(exc)(exc.message, issues, exc.headers)


async def create_schedule(
    tx: Tx,
    tenant_id: uuid.UUID,
    request: ScheduleRequest,
    *,
    root_url: str,
    now: datetime | None = None,
) -> str:
    """Check the schedule (422s naming the field and the rule; the eval is checked as
    POST /evals checks it) and write it, due at its cron's next time after `now`."""
    now = now or utcnow()
    conn = tx.conn
    if request.mode != MODE:
        message = (
            f"eval.mode must be '{MODE}' for a schedule, not '{request.mode}': agent mode "
            "needs an agent to hand each run's brief to"
        )
        raise Unprocessable(message, [Issue(message, expression="eval.mode")])
    expression = cron.check(request.cron, now=now)
    spec = ScheduledEvalSpec(
        mode=MODE,
        label_prefix=request.label_prefix,
        scenarios=request.scenarios,
        personas=request.personas,
        repeats=request.repeats,
        timeout_seconds=request.timeout_seconds,
        revision=request.revision,
    )
    try:
        await evals_service.plan_eval(conn, tenant_id, _eval_request(spec, request.label_prefix))
    except AppError as exc:
        raise _under_eval(exc) from exc
    await repository.lock_tenant(conn, tenant_id=tenant_id)
    if await repository.count(conn, tenant_id=tenant_id) >= MAX_SCHEDULES:
        message = f"a tenant may have at most {MAX_SCHEDULES} schedules: delete or reuse one first"
        raise Unprocessable(message, [Issue(message, expression="schedules")])
    schedule_id = "sched_" + new_resource_id()[:12]
    await repository.insert(
        conn,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        name=request.name,
        cron=expression,
        # The eval's request as the wire spells it; its label prefix and revision are
        # columns of their own.
        request_json=spec.model_dump_json(by_alias=True, exclude={"label_prefix", "revision"}),
        label_prefix=request.label_prefix,
        revision=request.revision,
        root_url=root_url,
        next_due_at=cron.next_due(expression, now),
        at=now,
    )
    return schedule_id


async def _row(conn: repository.Reader, tenant_id: uuid.UUID, schedule_id: str) -> asyncpg.Record:
    row = await repository.get(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    if row is None:
        raise ScheduleNotFound(f"no schedule '{schedule_id}'")
    return row


def _summary(row: asyncpg.Record) -> ScheduleSummary:
    return ScheduleSummary(
        id=row["id"],
        name=row["name"],
        cron=row["cron"],
        description=cron.explain(row["cron"]),
        eval=_spec(row),
        paused=row["paused"],
        next_due_at=None if row["paused"] else row["next_due_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


async def list_schedules(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[ScheduleSummary]:
    return [_summary(r) for r in await repository.all_of(pool, tenant_id=tenant_id)]


async def schedule_view(pool: asyncpg.Pool, tenant_id: uuid.UUID, schedule_id: str) -> ScheduleView:
    """The schedule, its last five evals (status, pass rate so far, baseline), the compare
    of its newest completed eval with its baseline, and its recent due times."""
    row = await _row(pool, tenant_id, schedule_id)
    recent = await evals_service.list_evals(
        pool, tenant_id, None, RECENT_EVALS, schedule_id=schedule_id
    )
    evals = [
        ScheduledEval(
            id=e.id,
            label=e.label,
            status=e.status,
            created_at=e.created_at,
            pass_rate=evals_service.pass_rate(e.counts),
            baseline_id=e.baseline_id,
        )
        for e in recent
    ]
    fires = await repository.fires(
        pool, tenant_id=tenant_id, schedule_id=schedule_id, limit=HISTORY
    )
    return ScheduleView(
        **_summary(row).model_dump(),
        evals=evals,
        latest_compare=await _latest_compare(pool, tenant_id, evals),
        history=[
            ScheduleFire(
                due_at=f["due_at"], outcome=f["outcome"], reason=f["reason"], eval_id=f["eval_id"]
            )
            for f in fires
        ],
    )


async def _latest_compare(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, evals: list[ScheduledEval]
) -> ScheduleCompare | None:
    latest = next((e for e in evals if e.status == "completed"), None)
    if latest is None or latest.baseline_id is None:
        return None
    try:
        compared = await evals_service.compare_evals(
            pool, tenant_id, latest.id, latest.baseline_id, alpha=0.05
        )
    except NotFound:
        return None
    return ScheduleCompare(
        eval_id=latest.id,
        baseline_id=latest.baseline_id,
        current_rate=compared.current_rate,
        baseline_rate=compared.baseline_rate,
        delta=compared.delta,
        regressed_cells=[
            f"{c.scenario_id} / {c.persona}" for c in compared.cells if c.label == "regressed"
        ],
        improved_cells=[
            f"{c.scenario_id} / {c.persona}" for c in compared.cells if c.label == "improved"
        ],
        significant_regression=compared.significant_regression,
    )


async def set_paused(
    tx: Tx, tenant_id: uuid.UUID, schedule_id: str, paused: bool, *, now: datetime | None = None
) -> None:
    """Pause; or resume, due next at the cron's first time after `now` (the times passed
    while paused are not made up for)."""
    now = now or utcnow()
    row = await _row(tx.conn, tenant_id, schedule_id)
    next_due_at = cron.next_due(row["cron"], now) if row["paused"] and not paused else None
    await repository.set_paused(
        tx.conn,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        paused=paused,
        next_due_at=next_due_at,
        at=now,
    )


async def delete_schedule(tx: Tx, tenant_id: uuid.UUID, schedule_id: str) -> None:
    """Delete the schedule and its history; the evals it started stay."""
    if not await repository.delete(tx.conn, tenant_id=tenant_id, schedule_id=schedule_id):
        raise ScheduleNotFound(f"no schedule '{schedule_id}'")


# --- the worker's tick ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fired:
    tenant_id: uuid.UUID
    schedule_id: str
    due_at: datetime
    outcome: str  # started | skipped
    eval_id: str | None
    reason: str | None


async def tick(scopes: Scopes, now: datetime, *, tenant_id: uuid.UUID | None = None) -> list[Fired]:
    """Start (or skip) every schedule due at `now` (of every tenant, or of `tenant_id`
    only), each in a transaction of its own; a failure in one is logged and does not
    stop the others. Returns what this caller did (a due time another worker took is
    not in it)."""
    out: list[Fired] = []
    for row in await repository.due(scopes.pool, now=now, tenant_id=tenant_id):
        try:
            async with scopes.transaction() as tx:
                out.extend(
                    await _fire(
                        tx, row["tenant_id"], row["id"], row["cron"], row["next_due_at"], now
                    )
                )
        except Exception:
            log.exception("schedule_failed schedule=%s", row["id"])
    return out


async def _fire(
    tx: Tx, tenant_id: uuid.UUID, schedule_id: str, expression: str, seen: datetime, now: datetime
) -> list[Fired]:
    conn = tx.conn
    due_times = cron.due_between(expression, seen, now)
    due_at = due_times[-1]
    taken = await repository.take_due(
        conn,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        seen=seen,
        next_due_at=cron.next_due(expression, now),
        at=now,
    )
    if taken is None:
        return []  # another worker took this due time, or it was paused or deleted
    fired: list[Fired] = []

    async def record(
        at: datetime,
        outcome: str,
        reason: str | None,
        eval_id: str | None = None,
    ) -> None:
        await repository.insert_fire(
            conn,
            tenant_id=tenant_id,
            schedule_id=schedule_id,
            due_at=at,
            outcome=outcome,
            reason=reason,
            eval_id=eval_id,
            at=now,
        )
        fired.append(Fired(tenant_id, schedule_id, at, outcome, eval_id, reason))

    if len(due_times) > 1:
        missed = due_times[:-1]
        await record(
            missed[0],
            "skipped",
            f"{len(missed)} due time(s) from {_label('', missed[0]).strip()} to "
            f"{_label('', missed[-1]).strip()} were missed while no worker ran; "
            f"the schedule started once, for {_label('', due_at).strip()}",
        )
    previous, baseline = await _previous_and_baseline(conn, tenant_id, schedule_id)
    if previous is not None and previous.status in ("queued", "running"):
        reason = f"the previous eval {previous.id} is still {previous.status}"
        await record(due_at, "skipped", reason)
        return fired
    spec = _spec(taken)
    request = _eval_request(
        spec,
        _label(spec.label_prefix, due_at),
        schedule_id=schedule_id,
        baseline_id=None if baseline is None else baseline.id,
    )
    try:
        async with conn.transaction():  # a savepoint: a refused start writes nothing
            eval_id = await evals_service.create_eval(
                tx, tenant_id, request, root_url=taken["root_url"]
            )
    except AppError as exc:
        await record(due_at, "skipped", f"the eval could not start: {exc.message}")
        return fired
    await record(due_at, "started", None, eval_id)
    return fired


async def _previous_and_baseline(
    conn: Conn, tenant_id: uuid.UUID, schedule_id: str
) -> tuple[EvalListItem | None, EvalListItem | None]:
    """The schedule's newest eval, and its newest completed one (all its runs ended, by
    the evals feature's status: the same condition that sets `eval.completed_at`)."""
    evals = await evals_service.list_evals(conn, tenant_id, None, LOOKBACK, schedule_id=schedule_id)
    previous = evals[0] if evals else None
    return previous, next((e for e in evals if e.status == "completed"), None)
