"""The board's headline as the home page reads it (`load_headline`: the states alone, one
aggregate) is the headline of the whole board (`load_board`) on the default revision: a
table of crafted histories, a scenario edit, another mode and revision, no revision, and
a tally's state beside the statuses' (tests/console/test_home_headline.py: the pages)."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from app.db import Database
from app.kit.clock import utcnow
from app.openapi import SCENARIO_EXAMPLE
from app.runs import board as board_rules
from app.runs import service as runs_service
from app.scenarios import service as scenarios_service
from tests.conftest import TenantHandle
from tests.runs.board_history import insert_history, workflow_scenarios
from tests.runs.test_run_flow import api


async def _both(db: Database, tenant: TenantHandle, mode: str = "workflow") -> None:
    """The headline read both ways is the same, on the same revision."""
    scenarios = await scenarios_service.list_scenarios(db.pool, tenant.id)
    summary = await runs_service.load_headline(db.pool, tenant.id, scenarios, mode=mode)
    board = await runs_service.load_board(db.pool, tenant.id, mode=mode)
    assert (summary.mode, summary.revision) == (board.mode, board.revision)
    assert summary.headline == board.headline


@pytest.mark.parametrize(
    "histories",
    [
        {},  # no run in the mode: no results, no revision
        {0: "ff", 1: "pfp", 2: "fppp", 3: "ppp", 4: "pl", 5: "ce"},
        {0: "pppfpp", 1: "fpppp", 2: "pppp", 3: "tpp", 4: "ptppp"},  # recovered or not
        {0: "ppp", 1: "pp"},  # all passing
        {0: "p", 1: "c", 2: "e", 3: "l", 4: "w"},  # nothing needs attention, some no results
        {0: "ffffff", 1: "t"},
    ],
)
async def test_the_headline_is_the_boards(
    db: Database, tenant: TenantHandle, histories: dict[int, str]
) -> None:
    ids = workflow_scenarios()
    for i, history in histories.items():
        await insert_history(db, tenant.id, ids[i], history, revision="rev2")
    await _both(db, tenant)


async def test_only_the_default_revision_and_mode_count(db: Database, tenant: TenantHandle) -> None:
    a, b, c, *_ = workflow_scenarios()
    now = utcnow()
    await insert_history(db, tenant.id, a, "ppp", revision="old", start=now - timedelta(hours=5))
    await insert_history(db, tenant.id, b, "fff", revision="new", start=now - timedelta(hours=3))
    await insert_history(db, tenant.id, a, "f", revision="agent-rev", mode="agent", start=now)
    await _both(db, tenant)
    await _both(db, tenant, "agent")
    # Runs without a revision, latest: the board's "(no revision)".
    await insert_history(db, tenant.id, c, "pf", revision=None, start=now - timedelta(hours=1))
    await _both(db, tenant)
    scenarios = await scenarios_service.list_scenarios(db.pool, tenant.id)
    summary = await runs_service.load_headline(db.pool, tenant.id, scenarios, mode="workflow")
    assert summary.revision is None and summary.headline.counts.flaky == 1


async def test_runs_at_an_earlier_hash_do_not_count(db: Database, tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        first = (await client.post("/scenarios", json=SCENARIO_EXAMPLE)).json()
        changed = copy.deepcopy(SCENARIO_EXAMPLE)
        changed["title"] = "Ask Dr. Chen to call the patient back"
        await client.post("/scenarios", json=changed)
    await insert_history(
        db, tenant.id, SCENARIO_EXAMPLE["id"], "fff", revision="r", mode="agent",
        scenario_hash=first["hash"],
    )  # fmt: skip
    await _both(db, tenant, "agent")


@pytest.mark.parametrize(
    "statuses",
    [[], ["cancelled"], ["failed"], ["passed"], ["passed", "failed"], ["failed"] + ["passed"] * 3,
     ["passed"] * 3 + ["timed_out"], ["failed", "passed", "errored", "passed", "passed"]],
)  # fmt: skip
def test_state_of_a_tally_is_state_of_the_statuses(statuses: list[str]) -> None:
    verdicts = [s for s in statuses if s in board_rules.VERDICTS]
    latest = verdicts[-board_rules.RECOVERED_AFTER :]
    tally = (len(verdicts), verdicts.count("passed"), latest.count("passed"))
    assert board_rules.state_of_tally(*tally) == board_rules.state_of(statuses)
