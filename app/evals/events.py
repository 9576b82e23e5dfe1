"""Eval events: `eval.completed` once an eval's runs have all ended, and `eval.regressed`
when its compare with its baseline has a regressed cell.

Each eval completes exactly once: one transaction sets its `completed_at` with a guarded
`UPDATE … WHERE completed_at IS NULL` (a second caller waits for the first's row lock,
then finds it set and goes no further), reads its summary and compare, and writes the
events with their deliveries (app/webhooks), sent once it commits. The baseline is the
eval's default (`service.default_baseline`: its own `baseline_id`, else the CI rule's).

It runs when a live slot frees (a run ended: `settle`, the in-process hook of the API and
the worker) and on the worker's tick, for every tenant with an eval not yet marked (the
partial index `ix_eval_unfinished`), which catches what a crash or a cancelled hook left.
A cancelled eval is never marked completed and sends nothing.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from app.db import Conn, Scopes, Tx
from app.evals import repository, service
from app.evals.errors import EvalNotFound
from app.kit.clock import utcnow
from app.kit.urls import eval_page_url, eval_url
from app.tenants.quota import RunLimits
from app.webhooks import service as webhooks_service
from app.webhooks.service import EVAL_COMPLETED, EVAL_REGRESSED
from understudy_client import statistics as stats
from understudy_client.contract.evals import Comparison, EvalView

log = logging.getLogger("understudy.evals")

# What the compare part of `eval.regressed` carries from the compare's answer, besides
# the baseline and the regressed cells.
_COMPARE_FIELDS = (
    "complete",
    "significantRegression",
    "baselineRate",
    "currentRate",
    "delta",
    "deltaCi95",
    "test",
    "mde",
    "underpowered",
    "exceedsNoise",
    "alpha",
    "flips",
)


async def settle(scopes: Scopes, tenant_id: uuid.UUID, *, limits: RunLimits) -> None:
    """A live slot freed or an eval was queued: start what fits, then mark completed the
    evals whose runs have all ended (with their events)."""
    await service.promote(scopes, tenant_id, limits=limits)
    await complete_evals(scopes, tenant_id)


async def tenants_with_unfinished(pool: asyncpg.Pool) -> list[uuid.UUID]:
    return await repository.tenants_with_unfinished(pool)


async def complete_evals(
    scopes: Scopes, tenant_id: uuid.UUID, *, alpha: float = stats.DEFAULT_ALPHA
) -> list[str]:
    """Mark completed every finished eval of the tenant not yet marked, each in a unit of
    work of its own with its events; returns the evals this call marked (one that fails
    is logged and left for the next call)."""
    marked: list[str] = []
    for eval_id in await repository.finished_unmarked(scopes.pool, tenant_id=tenant_id):
        try:
            async with scopes.transaction() as tx:
                if await complete_eval(tx, tenant_id, eval_id, alpha=alpha):
                    marked.append(eval_id)
        except Exception:
            log.exception("eval_complete_failed tenant=%s eval=%s", tenant_id, eval_id)
    return marked


async def complete_eval(
    tx: Tx, tenant_id: uuid.UUID, eval_id: str, *, alpha: float = stats.DEFAULT_ALPHA
) -> bool:
    """In the caller's transaction: mark the eval completed if it is finished, not
    cancelled and not marked yet, and write `eval.completed` (and `eval.regressed` when
    its compare with its baseline has a regressed cell). False when another caller
    marked it first, or it is not finished: nothing is written."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("complete_eval runs inside the caller's transaction")
    row = await repository.mark_completed(conn, tenant_id=tenant_id, eval_id=eval_id, at=utcnow())
    if row is None:
        return False
    root: str = row["root_url"]
    completed_at: datetime = row["completed_at"]
    view = await service.eval_view(conn, tenant_id, eval_id, root)
    body = {"eval": _eval_part(view, row)}
    about = ("Eval", eval_id)
    await webhooks_service.write_event(
        tx, tenant_id, EVAL_COMPLETED, about=about, root=root, body=body, at=completed_at
    )
    found = await _compare(conn, tenant_id, row, alpha=alpha)
    if found is not None:
        compared, chosen_by = found
        regressed = [c for c in compared.cells if c.label == "regressed" and c.comparable]
        if regressed:
            wire = compared.wire()
            compare: dict[str, Any] = {
                "baseline": {
                    "id": compared.baseline,
                    "label": compared.baseline_label,
                    "url": eval_url(root, compared.baseline),
                },
                "chosenBy": chosen_by,
                "regressed": [c.wire() for c in regressed],
                **{name: wire[name] for name in _COMPARE_FIELDS},
                "url": f"{eval_url(root, eval_id)}/compare?baseline={compared.baseline}",
            }
            await webhooks_service.write_event(
                tx,
                tenant_id,
                EVAL_REGRESSED,
                about=about,
                root=root,
                body={**body, "compare": compare},
                at=completed_at,
            )
    return True


async def _compare(
    conn: Conn, tenant_id: uuid.UUID, row: asyncpg.Record, *, alpha: float
) -> tuple[Comparison, str] | None:
    """The compare with the eval's baseline and how it was chosen (`baselineId`: the
    eval's own, `ciRule`: the CI rule's default); None without one (or when the eval's
    own baseline no longer exists)."""
    eval_id: str = row["id"]
    baseline_id, chosen_by = await service.default_baseline(conn, tenant_id, row)
    if baseline_id is None or baseline_id == eval_id:
        return None
    try:
        compared = await service.compare_evals(conn, tenant_id, eval_id, baseline_id, alpha=alpha)
    except EvalNotFound:
        return None
    return compared, chosen_by


def _eval_part(view: EvalView, row: asyncpg.Record) -> dict[str, Any]:
    """The `eval` object of both events: who it is, its run counts and pass rate (the
    Wilson interval of the eval's summary), where to read it."""
    counts = view.counts
    summary = view.summary
    if summary is None:  # the view has one once no run is queued or live
        raise RuntimeError(f"eval '{view.id}' has no summary: it is {view.status}")
    rate = summary.pass_rate
    root: str = row["root_url"]
    return {
        "id": view.id,
        "label": view.label,
        "revision": view.revision,
        "mode": view.mode,
        "scheduleId": view.schedule_id,
        "baselineId": view.baseline_id,
        "createdAt": view.created_at.isoformat(),
        "completedAt": row["completed_at"].isoformat(),
        "counts": {
            "passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0),
            "timedOut": counts.get("timed_out", 0),
            "errored": counts.get("errored", 0),
            "cancelled": counts.get("cancelled", 0),
            "total": view.total,
        },
        # The rate over the valid runs (passed, failed, timed out) and its 95% Wilson
        # interval; value, low and high are null when no run was valid.
        "passRate": {
            "value": rate.rate,
            "low": None if rate.ci95 is None else rate.ci95[0],
            "high": None if rate.ci95 is None else rate.ci95[1],
            "passes": rate.passes,
            "runs": rate.runs,
            "text": rate.text,
        },
        "passAtK": summary.pass_at_k,
        "passHatK": summary.pass_hat_k,
        "k": view.repeats,
        "incomplete": summary.incomplete,
        "url": eval_url(root, view.id),
        "consoleUrl": eval_page_url(root, view.id),
    }
