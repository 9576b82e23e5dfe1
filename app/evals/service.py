"""Evals: plan the runs, start them as live slots free, summarise and compare.

An eval is planned as `eval_item` rows (scenario × persona × repeat, in order). Items
start as runs while the tenant has free live slots; the rest wait `queued` and are
promoted, oldest eval first, by the worker every few seconds and right away when a run
ends. Each item starts in one transaction with its run (`SELECT … FOR UPDATE SKIP
LOCKED`, the run's writes, the item marked started), so two promoters never start it
twice and a crash leaves it queued; a cancel locks the eval row, so it is ordered before
or after each start, never between. A queued item not started within 24 hours is
cancelled.
"""

from __future__ import annotations

import secrets
import string
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import get_args

import asyncpg
import orjson

from app.db import Conn, Scopes, Tx, like_prefix
from app.errors import AppError, BadRequest, Issue, Unprocessable
from app.evals import attribution, repository
from app.evals.errors import EvalNotFound
from app.evals.repository import Reader
from app.fhir.errors import VersionConflict
from app.kit.clock import utcnow
from app.kit.urls import run_view_base
from app.runs import service as runs_service
from app.runs.errors import LiveRunLimit
from app.scenarios import service as scenarios_service
from app.scenarios.errors import ScenarioNotFound
from app.scenarios.schema import TIMEOUT_MAX, TIMEOUT_MIN
from app.tenants.quota import RunLimits
from understudy_client import ci
from understudy_client import statistics as stats
from understudy_client.contract.evals import (
    CellCounts,
    CompareCell,
    Comparison,
    EvalListItem,
    EvalRequestEcho,
    EvalRun,
    EvalStatus,
    EvalSummary,
    EvalView,
    Excluded,
    FailedCheck,
    FlakyCell,
    OverallTest,
    Rate,
)
from understudy_client.contract.runs import Provenance

MAX_RUNS = 100
MAX_REPEATS = 5
QUEUE_EXPIRY = timedelta(hours=24)
CLAIM_EXPIRY = timedelta(minutes=1)
BASELINE = "baseline"
VALID = ("passed", "failed", "timed_out")
_ALPHABET = string.ascii_lowercase + string.digits


@dataclass
class EvalRequest:
    mode: str
    label: str
    scenarios: list[str] | dict[str, str] | None
    repeats: int
    personas: str | list[str]
    timeout_seconds: int | None
    revision: str | None = None  # the system under test's version; its runs carry it
    schedule_id: str | None = None  # the schedule that starts it
    baseline_id: str | None = None  # the eval it is compared with (a schedule's previous)


async def plan_eval(
    conn: Conn, tenant_id: uuid.UUID, request: EvalRequest
) -> list[tuple[str, str | None]]:
    """The eval's cells (scenario, persona or None for the baseline), in order, after every
    check of the request (422 with the reason, 404 for an unknown scenario); each is run
    `request.repeats` times. Writes nothing: the console's preview asks it too."""
    if request.mode not in ("agent", "workflow"):
        raise Unprocessable(f"mode must be 'agent' or 'workflow', not '{request.mode}'")
    if not 1 <= request.repeats <= MAX_REPEATS:
        raise Unprocessable(f"repeats must be 1 to {MAX_REPEATS}, not {request.repeats}")
    timeout = request.timeout_seconds
    if timeout and not TIMEOUT_MIN <= timeout <= TIMEOUT_MAX:
        # Checked here, not at each run's start: every item would be refused alike.
        message = f"timeoutSeconds must be {TIMEOUT_MIN} to {TIMEOUT_MAX}, not {timeout}"
        raise Unprocessable(message, [Issue(message, expression="timeoutSeconds")])
    available = await scenarios_service.list_scenarios(conn, tenant_id)
    by_id = {s.scenario.id: s for s in available}
    if request.scenarios is None:
        chosen = [s for s in available if request.mode in [str(m) for m in s.scenario.modes]]
    elif isinstance(request.scenarios, dict):
        category = request.scenarios.get("category")
        if not category:
            raise Unprocessable('scenarios must be a list of ids or {"category": "…"}')
        chosen = [
            s
            for s in available
            if s.scenario.category == category
            and request.mode in [str(m) for m in s.scenario.modes]
        ]
    else:
        unknown = [i for i in request.scenarios if i not in by_id]
        if unknown:
            raise ScenarioNotFound(f"unknown scenario(s): {', '.join(unknown)}")
        chosen = [by_id[i] for i in request.scenarios]
        wrong_mode = [
            s.scenario.id for s in chosen if request.mode not in [str(m) for m in s.scenario.modes]
        ]
        if wrong_mode:
            raise Unprocessable(
                f"scenario(s) {', '.join(wrong_mode)} do not support mode '{request.mode}'"
            )
    if not chosen:
        raise Unprocessable(f"no scenario supports mode '{request.mode}' in that selection")
    plan: list[tuple[str, str | None]] = []
    for loaded in chosen:
        names = [v.persona for v in loaded.scenario.variants]
        if request.personas == BASELINE:
            personas: list[str | None] = [None]
        elif request.personas == "all":
            personas = [None, *names]
        elif isinstance(request.personas, list):
            personas = [
                None if p == BASELINE else p
                for p in request.personas
                if p == BASELINE or p in names
            ]
            if not personas:
                continue
        else:
            raise Unprocessable("personas must be 'baseline', 'all' or a list of persona names")
        plan.extend((loaded.scenario.id, p) for p in personas)
    total = len(plan) * request.repeats
    if total == 0:
        raise Unprocessable("no scenario has the requested personas")
    if total > MAX_RUNS:
        raise Unprocessable(
            f"this eval would make {total} runs; an eval may have at most {MAX_RUNS} "
            "(fewer scenarios, personas or repeats)"
        )
    return plan


@dataclass(frozen=True, slots=True)
class Preview:
    """What starting an eval would do now: its runs, how many start at once and how many
    wait behind the live-run limit (and behind other evals' queued runs, which start
    first)."""

    cells: int
    total: int
    start_now: int
    queued: int
    live: int
    waiting: int
    max_live: int


async def preview_eval(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, request: EvalRequest, *, limits: RunLimits
) -> Preview:
    """The checks `create_eval` makes (raising as it does), and the numbers, writing
    nothing."""
    async with pool.acquire() as conn:
        plan = await plan_eval(conn, tenant_id, request)
        total = len(plan) * request.repeats
        live = await runs_service.count_live(conn, tenant_id)
        waiting = await repository.count_queued(conn, tenant_id=tenant_id)
    free = max(0, limits.max_live - live - waiting)
    start_now = min(total, free)
    return Preview(len(plan), total, start_now, total - start_now, live, waiting, limits.max_live)


async def create_eval(tx: Tx, tenant_id: uuid.UUID, request: EvalRequest, *, root_url: str) -> str:
    """Plan the eval's items, queued, in the caller's transaction; once committed, what
    fits starts at once (a promotion noted in `tx.after`)."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("create_eval runs inside the caller's transaction")
    plan = await plan_eval(conn, tenant_id, request)
    eval_id = "eval_" + "".join(secrets.choice(_ALPHABET) for _ in range(12))
    now = utcnow()
    rows = [
        (tenant_id, eval_id, position, scenario_id, persona, repeat, "queued", now)
        for position, (repeat, (scenario_id, persona)) in enumerate(
            (r, item) for r in range(request.repeats) for item in plan
        )
    ]
    await repository.insert_eval(
        conn,
        tenant_id=tenant_id,
        eval_id=eval_id,
        label=request.label,
        mode=request.mode,
        repeats=request.repeats,
        request_json=orjson.dumps(
            {
                "scenarios": request.scenarios,
                "personas": request.personas,
                "repeats": request.repeats,
                "timeoutSeconds": request.timeout_seconds,
            }
        ).decode(),
        timeout_seconds=request.timeout_seconds,
        root_url=root_url,
        created_at=now,
        revision=request.revision,
        schedule_id=request.schedule_id,
        baseline_id=request.baseline_id,
    )
    await repository.insert_items(conn, rows)
    tx.after.promote(tenant_id)
    return eval_id


async def promote(scopes: Scopes, tenant_id: uuid.UUID, *, limits: RunLimits) -> list[str]:
    """Start queued items while live slots are free, each in a unit of work of its own
    (its run is graded and its deliveries sent once that commits). Returns the runs
    started."""
    now = utcnow()
    async with scopes.transaction() as tx:
        await repository.expire_queued(
            tx.conn, tenant_id=tenant_id, queued_before=now - QUEUE_EXPIRY
        )
        # Items claimed as 'starting' by an earlier version of this code and left behind.
        await repository.release_stale_claims(
            tx.conn, tenant_id=tenant_id, claimed_before=now - CLAIM_EXPIRY
        )
    started: list[str] = []
    while True:
        async with scopes.transaction() as tx:
            outcome = await _start_next(tx, tenant_id, limits=limits)
        if outcome is None:
            return started
        if outcome:  # "" is a start that failed for good: look at the next item
            started.append(outcome)


async def _start_next(tx: Tx, tenant_id: uuid.UUID, *, limits: RunLimits) -> str | None:
    """Start the next queued item as a run, in the caller's transaction with the item
    marked started, so no crash can leave a run without its item or start an item twice.
    The item is locked, and its eval share-locked (a cancelling eval's items are skipped),
    until then: a cancel (which locks the eval row) either comes first, and the item is
    not picked, or waits for this commit and then sees the run live and cancels it. Returns
    the run started; "" when this item can never start (cancelled with the reason); None
    when nothing (more) can start now."""
    conn = tx.conn
    # Promoters of one tenant take turns, so items start in eval and position order:
    # with SKIP LOCKED alone, two promoters racing for the last free slot could start a
    # later item and leave an earlier one queued.
    await runs_service.lock_starts(conn, tenant_id)
    if await runs_service.count_live(conn, tenant_id) >= limits.max_live:
        return None
    item = await repository.lock_next_queued(conn, tenant_id=tenant_id)
    if item is None:
        return None
    try:
        run = await runs_service.start_run(
            tx,
            tenant_id,
            runs_service.StartRequest(
                item["scenario_id"],
                item["mode"],
                item["persona"],
                item["label"],
                item["timeout_seconds"],
                revision=item["revision"],
            ),
            limits=limits,
            root_url=item["root_url"],
        )
    except LiveRunLimit:
        return None  # no free slot: the item stays queued
    except VersionConflict:
        return None  # a concurrent write won a race: transient, the next promotion retries
    except AppError as exc:
        # The start failed for good (the scenario changed, the write quota is used up):
        # its writes rolled back to start_run's savepoint; the item is cancelled with the
        # reason in this same transaction.
        await repository.cancel_queued_item(
            conn,
            tenant_id=tenant_id,
            eval_id=item["eval_id"],
            position=item["position"],
            note=exc.message,
        )
        return ""  # the item is cancelled with its reason; nothing started
    await _set_item(conn, tenant_id, item, "started", run.id, None)
    return run.id


async def _set_item(
    conn: Conn,
    tenant_id: uuid.UUID,
    item: asyncpg.Record,
    state: str,
    run_id: str | None,
    note: str | None,
) -> None:
    await repository.set_item(
        conn,
        tenant_id=tenant_id,
        eval_id=item["eval_id"],
        position=item["position"],
        state=state,
        run_id=run_id,
        note=note,
    )


async def tenants_with_queued(pool: asyncpg.Pool) -> list[uuid.UUID]:
    return await repository.tenants_with_queued(pool)


async def cancel_eval(tx: Tx, tenant_id: uuid.UUID, eval_id: str) -> list[str]:
    """Cancel the eval's queued items and live runs, in the caller's transaction, which
    then holds the eval row: a promoter starting one of its items finishes first (and its
    run is cancelled here) or sees the eval cancelled. Returns the runs cancelled."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("cancel_eval runs inside the caller's transaction")
    if not await repository.lock_eval(conn, tenant_id=tenant_id, eval_id=eval_id):
        raise EvalNotFound(f"no eval '{eval_id}'")
    run_ids = await repository.mark_cancelled(
        conn, tenant_id=tenant_id, eval_id=eval_id, at=utcnow()
    )
    return await runs_service.cancel_live_runs(tx, tenant_id, run_ids)


async def _eval_row(pool: Reader, tenant_id: uuid.UUID, eval_id: str) -> asyncpg.Record:
    row = await repository.eval_row(pool, tenant_id=tenant_id, eval_id=eval_id)
    if row is None:
        raise EvalNotFound(f"no eval '{eval_id}'")
    return row


# --- reading ----------------------------------------------------------------------------


@dataclass
class Item:
    position: int
    scenario_id: str
    persona: str | None
    repeat_index: int
    state: str
    note: str | None
    run: runs_service.RunRow | None

    @property
    def status(self) -> str:
        if self.run is not None:
            return self.run.status
        return "cancelled" if self.state == "cancelled" else "queued"

    @property
    def cell(self) -> tuple[str, str]:
        return (self.scenario_id, self.persona or BASELINE)


async def _items(pool: Reader, tenant_id: uuid.UUID, eval_id: str) -> list[Item]:
    rows = await repository.items(pool, tenant_id=tenant_id, eval_id=eval_id)
    runs = await runs_service.runs_by_id(
        pool, tenant_id, [r["run_id"] for r in rows if r["run_id"] is not None]
    )
    return [
        Item(
            r["position"],
            r["scenario_id"],
            r["persona"],
            r["repeat_index"],
            r["state"],
            r["note"],
            runs.get(r["run_id"]) if r["run_id"] is not None else None,
        )
        for r in rows
    ]


def _status(row: asyncpg.Record, items: list[Item]) -> str:
    return _status_of(row, Counter(i.status for i in items))


def _status_of(row: asyncpg.Record, counts: Counter[str]) -> str:
    """The eval's status from its items' statuses (counted)."""
    if row["cancelled_at"] is not None:
        return "cancelled"
    if not any(counts[s] for s in ("queued", "live")):
        return "completed"
    if all(s == "queued" for s in counts if counts[s]):
        return "queued"
    return "running"


def _cells(items: list[Item]) -> dict[tuple[str, str], stats.Cell]:
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for item in items:
        if item.status in VALID:
            counts[item.cell][0] += 1
            counts[item.cell][1] += item.status == "passed"
    return {key: stats.Cell(key, n, c) for key, (n, c) in counts.items()}


def _hashes(items: list[Item]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for item in items:
        if item.run is not None:
            out.setdefault(item.cell, item.run.scenario_hash)
    return out


def _rate(c: int, n: int) -> Rate:
    result = stats.wilson(c, n)
    if result is None:
        return Rate(passes=c, runs=n, rate=None, ci95=None, text=f"{c}/{n}")
    rate, interval = result
    return Rate(
        passes=c,
        runs=n,
        rate=round(rate, 4),
        ci95=(round(interval.low, 4), round(interval.high, 4)),
        text=f"{c}/{n} = {rate:.1%} (95% CI {interval.low:.1%}–{interval.high:.1%})",
    )


def pass_rate(counts: dict[str, int]) -> Rate:
    """The pass rate of runs counted by status (an eval list item's counts): timeouts
    count as failures, cancelled and errored runs are left out."""
    return _rate(counts.get("passed", 0), sum(counts.get(s, 0) for s in VALID))


def summarise(items: list[Item], k: int) -> EvalSummary:
    counts = Counter(i.status for i in items)
    outcomes = stats.Outcomes(
        passed=counts["passed"],
        failed=counts["failed"],
        timed_out=counts["timed_out"],
        cancelled=counts["cancelled"],
        errored=counts["errored"],
    )
    cells = _cells(items)
    c = sum(cell.c for cell in cells.values())
    n = sum(cell.n for cell in cells.values())
    pass_at, left_at = stats.eval_pass_at_k(list(cells.values()), k)
    pass_hat, left_hat = stats.eval_pass_hat_k(list(cells.values()), k)
    personas: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for cell in cells.values():
        personas[cell.key[1]][0] += cell.c
        personas[cell.key[1]][1] += cell.n
    failed_checks: Counter[tuple[str, str, str]] = Counter()
    failed_in: dict[tuple[str, str, str], str] = {}
    for item in items:
        if item.run is None or item.run.status not in ("failed", "timed_out"):
            continue
        for e in item.run.final_verdict().expectations:
            if e.passed is False:
                failed_checks[(item.scenario_id, e.id, e.label)] += 1
                failed_in.setdefault((item.scenario_id, e.id, e.label), item.run.id)
    return EvalSummary(
        pass_rate=_rate(c, n),
        k=k,
        pass_at_k=None if pass_at is None else round(pass_at, 4),
        pass_hat_k=None if pass_hat is None else round(pass_hat, 4),
        cells_left_out=max(left_at, left_hat),
        flaky_cells=[
            FlakyCell(scenario_id=cell.key[0], persona=cell.key[1], passes=cell.c, runs=cell.n)
            for cell in cells.values()
            if stats.is_flaky(cell)
        ],
        personas={p: _rate(pc, pn) for p, (pc, pn) in sorted(personas.items())},
        most_failed_checks=[
            FailedCheck(
                scenario_id=s,
                expectation_id=e,
                label=label,
                count=count,
                run_id=failed_in[(s, e, label)],
            )
            for (s, e, label), count in failed_checks.most_common(10)
        ],
        excluded=Excluded(cancelled=outcomes.cancelled, errored=outcomes.errored),
        incomplete=outcomes.incomplete,
    )


def _item_view(item: Item, root: str, mode: str) -> EvalRun:
    view = EvalRun(
        position=item.position,
        scenario_id=item.scenario_id,
        persona=item.persona or BASELINE,
        repeat=item.repeat_index,
        status=item.status,
        note=item.note,
    )
    run = item.run
    if run is not None:
        view.run_id = run.id
        view.fhir_base = run_view_base(root, run.id)
        view.fixture = run.fixture
        if run.provenance is not None:
            view.provenance = Provenance.model_validate(run.provenance)
        if mode == "agent":
            view.brief = run.brief
        if run.status != "live":
            verdict = run.final_verdict()
            view.passed, view.score = verdict.passed, verdict.score
            if run.status in ("cancelled", "errored") and not view.note:
                view.note = verdict.note  # why it was excluded from the rates
    return view


async def eval_view(pool: Reader, tenant_id: uuid.UUID, eval_id: str, root: str) -> EvalView:
    row = await _eval_row(pool, tenant_id, eval_id)
    items = await _items(pool, tenant_id, eval_id)
    status = _status(row, items)
    return EvalView(
        id=row["id"],
        label=row["label"],
        revision=row["revision"],
        mode=row["mode"],
        repeats=row["repeats"],
        request=EvalRequestEcho.model_validate_json(row["request"]),
        status=status,
        created_at=row["created_at"],
        counts=dict(Counter(i.status for i in items)),
        total=len(items),
        runs=[_item_view(i, root, row["mode"]) for i in items],
        summary=summarise(items, row["repeats"]) if status in ("completed", "cancelled") else None,
        completed_at=row["completed_at"],
        schedule_id=row["schedule_id"],
        baseline_id=row["baseline_id"],
    )


EVAL_STATUSES: tuple[str, ...] = get_args(EvalStatus)


async def list_evals(
    pool: Reader,
    tenant_id: uuid.UUID,
    label_prefix: str | None,
    limit: int,
    revision: str | None = None,
    schedule_id: str | None = None,
    *,
    status: str | None = None,
    scenario_id: str | None = None,
    before: tuple[datetime, str] | None = None,
) -> list[EvalListItem]:
    """Newest first. `status` one of EVAL_STATUSES; `scenario_id`: evals that run it;
    `before`: the (created_at, id) of the last eval of the previous page."""
    if status is not None and status not in EVAL_STATUSES:
        raise BadRequest(f"'status' must be one of {', '.join(EVAL_STATUSES)}")
    rows = await repository.evals(
        pool,
        tenant_id=tenant_id,
        label_like=like_prefix(label_prefix) if label_prefix else None,
        limit=limit,
        revision=revision,
        schedule_id=schedule_id,
        status=status,
        scenario_id=scenario_id,
        before=before,
    )
    # Two statements whatever the page size: the evals, then every item's status counted
    # in SQL from the item rows alone (their run_status, kept by triggers): a page of fifty
    # 100-run evals used to read 5,000 run rows.
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for c in await repository.status_counts(
        pool, tenant_id=tenant_id, eval_ids=[row["id"] for row in rows]
    ):
        counts[c["eval_id"]][c["status"]] += c["n"]
    return [
        EvalListItem(
            id=row["id"],
            label=row["label"],
            revision=row["revision"],
            mode=row["mode"],
            status=_status_of(row, counts[row["id"]]),
            created_at=row["created_at"],
            total=sum(counts[row["id"]].values()),
            counts=dict(counts[row["id"]]),
            schedule_id=row["schedule_id"],
            baseline_id=row["baseline_id"],
        )
        for row in rows
    ]


async def compare_evals(
    pool: Reader, tenant_id: uuid.UUID, eval_id: str, baseline_id: str, *, alpha: float
) -> Comparison:
    current_row = await _eval_row(pool, tenant_id, eval_id)
    baseline_row = await _eval_row(pool, tenant_id, baseline_id)
    current = await _items(pool, tenant_id, eval_id)
    baseline = await _items(pool, tenant_id, baseline_id)
    comparison = stats.compare(
        _cells(baseline),
        _cells(current),
        alpha=alpha,
        hashes_a=_hashes(baseline),
        hashes_b=_hashes(current),
    )
    overall = comparison.overall
    interval = comparison.delta_interval
    attributions = _attributions(baseline, current, comparison.cells)
    flips = dict.fromkeys(attribution.ATTRIBUTIONS, 0)
    for found in attributions.values():
        flips[found] += 1
    return Comparison(
        id=eval_id,
        baseline=baseline_id,
        label=current_row["label"],
        baseline_label=baseline_row["label"],
        complete=_status(current_row, current) == "completed"
        and _status(baseline_row, baseline) == "completed",
        cells=[
            CompareCell(
                scenario_id=v["key"][0],
                persona=v["key"][1],
                label=v["label"],
                baseline=_cell_counts(v["a"]),
                current=_cell_counts(v["b"]),
                fisher_p_worse=None if v["fisher_p"] is None else round(v["fisher_p"], 4),
                comparable=v["comparable"],
                attribution=attributions.get(v["key"]),
            )
            for v in comparison.cells
        ],
        baseline_rate=_rate(comparison.a_c, comparison.a_n),
        current_rate=_rate(comparison.b_c, comparison.b_n),
        test=OverallTest(
            statistic=overall.t,
            expected=round(overall.expected, 4),
            p_two_sided=round(overall.p_two, 4),
            p_regress=round(overall.p_regress, 4),
            p_improve=round(overall.p_improve, 4),
            p_regress_plain=round(overall.p_regress_plain, 4),
            informative_cells=overall.informative_cells,
            reason=overall.reason,
        ),
        delta=None if comparison.delta is None else round(comparison.delta, 4),
        delta_ci95=None if interval is None else (round(interval.low, 4), round(interval.high, 4)),
        mde=None if comparison.mde is None else round(comparison.mde, 4),
        underpowered=comparison.underpowered,
        exceeds_noise=comparison.exceeds_noise,
        significant_regression=comparison.significant_regression,
        alpha=comparison.alpha,
        mde_note=None
        if comparison.mde is None
        else (
            f"changes smaller than {comparison.mde:.1%} in pass rate cannot be told from "
            "noise with these run counts"
        ),
        flips=flips,
    )


def _attributions(
    baseline: list[Item], current: list[Item], cells: list[stats.CellVerdict]
) -> dict[tuple[str, str], attribution.Attribution]:
    """The attribution of every cell whose label is not `same`."""

    def runs_by_cell(items: list[Item]) -> dict[tuple[str, str], list[runs_service.RunRow]]:
        out: dict[tuple[str, str], list[runs_service.RunRow]] = defaultdict(list)
        for item in items:
            if item.run is not None and item.status in VALID:
                out[item.cell].append(item.run)
        return out

    a, b = runs_by_cell(baseline), runs_by_cell(current)
    return {
        v["key"]: attribution.attribute(a.get(v["key"], []), b.get(v["key"], []))
        for v in cells
        if v["label"] != "same"
    }


async def baseline_choices(
    pool: Reader, tenant_id: uuid.UUID, eval_id: str, *, limit: int = 50
) -> tuple[list[EvalListItem], str | None]:
    """The completed evals other than this one (newest first), and its default baseline
    (`default_baseline`)."""
    row = await _eval_row(pool, tenant_id, eval_id)
    listed = await list_evals(pool, tenant_id, None, limit, status="completed")
    choices = [e for e in listed if e.id != eval_id]
    default, _ = await default_baseline(pool, tenant_id, row, limit=limit)
    return choices, default


async def default_baseline(
    pool: Reader, tenant_id: uuid.UUID, row: asyncpg.Record, *, limit: int = 50
) -> tuple[str | None, str]:
    """The eval it is compared with by default, and by which rule: its own `baseline_id`
    when set (a schedule's previous completed eval: "baselineId"), else the CI rule's
    (`understudy_client.ci`: "ciRule"), the newest completed eval created before it whose label
    starts with its label's prefix before the first space; None when there is none."""
    if row["baseline_id"] is not None:
        return row["baseline_id"], "baselineId"
    prefix = ci.label_prefix(row["label"])
    same_prefix = await list_evals(pool, tenant_id, prefix, limit)
    found = ci.newest_completed(same_prefix, exclude=row["id"], before=row["created_at"])
    return (None if found is None else found.id), "ciRule"


def _cell_counts(cell: stats.Cell | None) -> CellCounts | None:
    return None if cell is None else CellCounts(passes=cell.c, runs=cell.n)
