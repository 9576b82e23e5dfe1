"""Two runs of one scenario side by side (`/runs/{a}/vs/{b}`): their headers, their
expectations aligned by id (the rows where they differ first), and their change sets
aligned (fixture resources by symbol, created ones by type and order), so "why did
repeat 2 fail when repeat 1 passed" is one page. Reads what the run page reads: the
verdict (or the live checks) and what clients wrote in each run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg
from fastapi import Request
from fastapi.responses import Response

from app.console import run_views as rv
from app.console.web import SignedIn, console_router, render
from app.errors import BadRequest
from app.fhir import service as fhir_service
from app.request_state import pool_of
from app.runs import service as runs_service
from app.runs.service import RunRow
from understudy_client.contract.runs import ExpectationResult

router = console_router()


@dataclass(frozen=True, slots=True)
class Side:
    """One run's cell of an expectation row."""

    state: str  # a key of views.STATES ("absent": the run has no such expectation)
    detail: str
    closest: str | None


@dataclass(frozen=True, slots=True)
class CheckRow:
    id: str
    label: str
    a: Side
    b: Side
    differs: bool


@dataclass(frozen=True, slots=True)
class Change:
    """A resource one run wrote: created, updated or deleted."""

    ref: str
    what: str  # created | updated | deleted
    summary: str
    chart: str | None


@dataclass(frozen=True, slots=True)
class ChangeRow:
    key: str  # "@symbol" for a fixture resource, "Type #n" for a created one
    a: Change | None
    b: Change | None
    differs: bool


@dataclass(frozen=True, slots=True)
class DiffSide:
    kind: str
    title: str
    reasons: list[str]
    paths: list[str]


@dataclass(frozen=True, slots=True)
class DiffRow:
    key: str
    a: DiffSide | None
    b: DiffSide | None
    differs: bool


def _state(result: ExpectationResult | None, live: bool) -> str:
    if result is None:
        return "absent"
    return rv.check_of(result, live=live).state


def _side(result: ExpectationResult | None, live: bool) -> Side:
    if result is None:
        return Side("absent", "not in this run's expectations", None)
    return Side(_state(result, live), result.detail, result.evidence.closest)


def check_rows(
    a: list[ExpectationResult], b: list[ExpectationResult], *, a_live: bool, b_live: bool
) -> list[CheckRow]:
    """One row per expectation id (in the first run's order, then the second's), the
    rows whose states differ first."""
    by_a = {r.id: r for r in a}
    by_b = {r.id: r for r in b}
    ids = list(dict.fromkeys([*by_a, *by_b]))
    rows = []
    for i in ids:
        ra, rb = by_a.get(i), by_b.get(i)
        label = (ra or rb).label if (ra or rb) else i  # type: ignore[union-attr]
        sa, sb = _side(ra, a_live), _side(rb, b_live)
        rows.append(CheckRow(i, label, sa, sb, sa.state != sb.state))
    return sorted(rows, key=lambda r: not r.differs)


def _changes(run: RunRow, rows: list[fhir_service.ChangedByRun]) -> dict[str, Change]:
    """The run's writes keyed for alignment: a fixture resource by its symbol, a created
    one by its type and its order among the run's creations of that type."""
    symbols = {ref: symbol for symbol, ref in run.fixture.items()}
    out: dict[str, Change] = {}
    counts: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: (r.first_at, r.resource_type, r.id)):
        ref = f"{r.resource_type}/{r.id}"
        resource = None if r.deleted else rv.loads(r.resource)
        what = "deleted" if r.deleted else "created" if r.created else "updated"
        change = Change(
            ref, what, rv.summary_of(resource), None if r.deleted else rv.chart_url(ref, run.id)
        )
        if ref in symbols:
            out[f"@{symbols[ref]}"] = change
        else:
            counts[r.resource_type] = counts.get(r.resource_type, 0) + 1
            out[f"{r.resource_type} #{counts[r.resource_type]}"] = change
    return out


def change_rows(a: dict[str, Change], b: dict[str, Change]) -> list[ChangeRow]:
    keys = sorted(set(a) | set(b), key=lambda k: (not k.startswith("@"), k))
    rows = []
    for k in keys:
        ca, cb = a.get(k), b.get(k)
        differs = (ca is None) != (cb is None) or (
            ca is not None and cb is not None and (ca.what, ca.summary) != (cb.what, cb.summary)
        )
        rows.append(ChangeRow(k, ca, cb, differs))
    return sorted(rows, key=lambda r: not r.differs)


def _diff_of(results: list[ExpectationResult]) -> dict[str, DiffSide] | None:
    """`matches-reference`'s `evidence.diff` entries keyed by type and title (None: the
    evidence carries no diff)."""
    for r in results:
        if r.id != "matches-reference":
            continue
        raw = r.evidence.model_dump().get("diff")
        if not isinstance(raw, list):
            return None
        out: dict[str, DiffSide] = {}
        for e in raw:
            if not isinstance(e, dict):
                continue
            key = f"{e.get('resourceType') or ''} · {e.get('title') or e.get('ref') or ''}"
            out[key] = DiffSide(
                str(e.get("kind") or ""),
                str(e.get("title") or e.get("ref") or ""),
                [str(x) for x in e.get("reasons") or []],
                [str(x) for x in e.get("paths") or []],
            )
        return out
    return None


def diff_rows(a: list[ExpectationResult], b: list[ExpectationResult]) -> list[DiffRow]:
    da, db = _diff_of(a), _diff_of(b)
    if da is None and db is None:
        return []
    da, db = da or {}, db or {}
    rows = []
    for k in dict.fromkeys([*da, *db]):
        sa, sb = da.get(k), db.get(k)
        differs = (sa.kind if sa else None) != (sb.kind if sb else None)
        rows.append(DiffRow(k, sa, sb, differs))
    return sorted(rows, key=lambda r: not r.differs)


async def _results(pool: asyncpg.Pool, run: RunRow) -> list[ExpectationResult]:
    if run.status == "live":
        return await runs_service.live_checks(pool, run)
    return run.final_verdict().expectations


async def _written(pool: asyncpg.Pool, run: RunRow) -> dict[str, Change]:
    async with pool.acquire() as conn:
        rows = await fhir_service.resources_changed_by_run(
            conn, run.tenant_id, run.id, own_types=None, tenant_types=[], since=run.started_at
        )
    return _changes(run, list(rows))


@router.get("/runs/{a_id}/vs/{b_id}")
async def run_vs(request: Request, viewer: SignedIn, a_id: str, b_id: str) -> Response:
    pool = pool_of(request)
    async with pool.acquire() as conn:
        a = await runs_service.get_run(conn, viewer.tenant.id, a_id)  # another tenant's: 404
        b = await runs_service.get_run(conn, viewer.tenant.id, b_id)
    if a.scenario_id != b.scenario_id:
        raise BadRequest(
            f"{a.id} is a run of {a.scenario_id} and {b.id} one of {b.scenario_id}: "
            "only two runs of the same scenario compare side by side"
        )
    ra, rb, wa, wb = await asyncio.gather(
        _results(pool, a), _results(pool, b), _written(pool, a), _written(pool, b)
    )
    checks = check_rows(ra, rb, a_live=a.status == "live", b_live=b.status == "live")
    changes = change_rows(wa, wb)
    return render(
        request,
        "run_vs.html",
        a=a,
        b=b,
        verdicts={
            a.id: None if a.status == "live" else a.final_verdict(),
            b.id: None if b.status == "live" else b.final_verdict(),
        },
        checks=checks,
        checks_differ=sum(1 for r in checks if r.differs),
        changes=changes,
        changes_differ=sum(1 for r in changes if r.differs),
        diff=diff_rows(ra, rb),
        chart_url=rv.chart_url,
    )
