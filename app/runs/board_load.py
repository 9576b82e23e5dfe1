"""The scenario health board read from the database: the queries behind it
(`app/runs/repository.py`) turned into the inputs of its rules (`app.runs.board`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

import asyncpg
import orjson

from app.errors import Unprocessable
from app.kit.clock import utcnow
from app.runs import board as board_rules
from app.runs import repository
from app.scenarios import service as scenarios_service
from understudy_client.contract.board import (
    Board,
    BoardCheck,
    BoardHeadline,
    BoardRevision,
    BoardState,
)

BOARD_REVISIONS = 50  # revisions the picker offers, newest first


@dataclass(frozen=True, slots=True)
class BoardSummary:
    """What the console's home page shows of a mode's board on its default revision."""

    mode: str
    revision: str | None
    headline: BoardHeadline


def _refs(
    scenarios: Sequence[scenarios_service.LoadedScenario], mode: str
) -> list[board_rules.ScenarioRef]:
    return [
        board_rules.ScenarioRef(s.scenario.id, s.scenario.title, s.hash)
        for s in scenarios
        if mode in {str(m) for m in s.scenario.modes}
    ]


async def load_headline(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    scenarios: Sequence[scenarios_service.LoadedScenario],
    *,
    mode: str,
) -> BoardSummary:
    """The headline `load_board(mode=mode)` would show, from the states alone: the latest
    run's revision and one aggregate per scenario and hash (ix_run_mode, then
    ix_run_board_revision, both index-only), without the cards' runs, checks and charts.
    `scenarios` is the tenant's (`scenarios_service.list_scenarios`)."""
    refs = _refs(scenarios, mode)
    revision = await repository.latest_revision(pool, tenant_id=tenant_id, mode=mode)
    rows = await repository.board_states(
        pool, tenant_id=tenant_id, mode=mode, revision=revision, latest=board_rules.RECOVERED_AFTER
    )
    tallies = {(r["scenario_id"], r["scenario_hash"]): r for r in rows}
    states: list[BoardState] = []
    for ref in refs:
        row = tallies.get((ref.id, ref.hash))
        state = (
            board_rules.state_of_tally(row["verdicts"], row["passed"], row["latest_passed"])
            if row is not None
            else None
        )
        states.append(state or "no_results")
    return BoardSummary(mode, revision, board_rules.headline_of_states(states))


async def load_board(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, *, mode: str, revision: str | None = None
) -> Board:
    """The board of a mode on a revision (default: that of the tenant's latest run of the
    mode). Four indexed queries and one by primary key; the rules are app.runs.board's."""
    if mode not in ("agent", "workflow"):
        raise Unprocessable(f"mode must be agent or workflow, not '{mode}'")
    scenarios = _refs(await scenarios_service.list_scenarios(pool, tenant_id), mode)
    ids = [s.id for s in scenarios]
    hashes = [s.hash for s in scenarios]
    # Independent reads side by side, each on a connection of its own.
    revision_rows, tally_rows = await asyncio.gather(
        repository.board_revisions(pool, tenant_id=tenant_id, mode=mode, limit=BOARD_REVISIONS),
        repository.board_tallies(
            pool, tenant_id=tenant_id, mode=mode, scenario_ids=ids, hashes=hashes
        ),
    )
    revisions = [
        BoardRevision(revision=r["revision"], last_run_at=r["last_run_at"]) for r in revision_rows
    ]
    current = revisions[0].revision if revisions else None
    shown = revision if revision is not None else current
    run_rows, failure_rows = await asyncio.gather(
        repository.board_runs(pool, tenant_id=tenant_id, mode=mode, revision=shown),
        repository.board_failures(
            pool, tenant_id=tenant_id, mode=mode, revision=shown, scenario_ids=ids, hashes=hashes
        ),
    )
    fact = board_rules.RunFact
    runs = [
        fact(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in run_rows
    ]  # id, scenario_id, scenario_hash, status, started_at, deadline, note
    details = {
        r["id"]: r
        for r in await repository.board_details(
            pool, tenant_id=tenant_id, run_ids=board_rules.recent_ids(scenarios, runs)
        )
    }
    failures = [
        board_rules.CheckFailures(
            r["scenario_id"], r["scenario_hash"], r["check_id"], r["label"] or "", r["failures"]
        )
        for r in failure_rows
    ]
    tallies = [
        board_rules.RevisionTally(
            r["scenario_id"],
            r["scenario_hash"],
            r["revision"],
            r["first_run_at"],
            r["verdicts"],
            r["passed"],
        )
        for r in tally_rows
    ]
    for i, run in enumerate(runs):
        detail = details.get(run.id)
        if detail is not None:
            checks = [
                BoardCheck(id=c[0] or "", label=c[1] or "", passed=c[2])
                for c in orjson.loads(detail["checks"])
            ]
            runs[i] = replace(run, score=detail["score"], checks=checks)
    return board_rules.build_board(
        board_rules.BoardInput(
            mode="agent" if mode == "agent" else "workflow",
            revision=shown,
            current_revision=current,
            now=utcnow(),
            scenarios=scenarios,
            runs=runs,
            tallies=tallies,
            failures=failures,
            revisions=revisions,
        )
    )
