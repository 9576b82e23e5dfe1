"""GET /api/testing/board over HTTP: the states of a crafted history, the hash reset by a
scenario edit, the default revision, the per-revision chart, another tenant's runs
unseen, and its bad inputs."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from app.db import Database
from app.kit.clock import utcnow
from app.openapi import SCENARIO_EXAMPLE
from tests.conftest import TenantHandle, make_tenant
from tests.runs.board_history import insert_history, workflow_scenarios
from tests.runs.test_run_flow import api


async def _board(tenant: TenantHandle, **params: str) -> dict[str, Any]:
    async with api(tenant) as client:
        r = await client.get("/board", params=params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _cards(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["scenarioId"]: c for c in board["cards"]}


async def test_states_of_a_crafted_history(db: Database, tenant: TenantHandle) -> None:
    a, b, c, d, e, f, *rest = workflow_scenarios()
    histories = {a: "ff", b: "pfp", c: "fppp", d: "ppp", e: "pl", f: "ce"}
    for sid, history in histories.items():
        await insert_history(db, tenant.id, sid, history, revision="rev2")
    # Another revision's failures do not count on rev2.
    await insert_history(
        db, tenant.id, d, "fff", revision="rev1", start=utcnow() - timedelta(days=1)
    )
    board = await _board(tenant, mode="workflow", revision="rev2")
    cards = _cards(board)
    assert board["mode"] == "workflow" and board["revision"] == "rev2"
    assert cards[a]["state"] == "failing"
    assert cards[b]["state"] == "flaky"
    assert cards[c]["state"] == "passing"  # the last 3 passed
    assert cards[d]["state"] == "passing"
    assert cards[e]["state"] == "passing"
    assert cards[f]["state"] == "no_results" and cards[f]["reason"] == "errored"
    assert [r["note"] for r in cards[f]["erroredRuns"]] == ["the grader crashed"]
    for sid in rest:
        assert cards[sid]["state"] == "no_results" and cards[sid]["reason"] == "not_run"
    order = [card["scenarioId"] for card in board["cards"]]
    assert order[:2] == [a, b]
    assert order[-3:] == sorted([c, d, e])
    counts = board["headline"]["counts"]
    assert counts == {"failing": 1, "flaky": 1, "noResults": 1 + len(rest), "passing": 3}
    assert board["headline"]["attention"] == 2
    assert board["headline"]["text"].startswith("2 of ")
    assert cards[a]["mostFailed"]["id"] == "notified"
    assert cards[a]["mostFailed"]["failures"] == 2
    recent = cards[b]["recent"]
    assert [r["status"] for r in recent] == ["passed", "failed", "passed"]
    assert recent[1]["score"] == 0.5
    assert [(k["id"], k["passed"]) for k in recent[1]["checks"]] == [
        ("booked", True),
        ("notified", False),
    ]
    # The chart: rev1 (older) then rev2 for d.
    assert [(p["revision"], p["rate"]) for p in cards[d]["chart"]] == [("rev1", 0.0), ("rev2", 1.0)]


async def test_a_live_run_is_the_reason(db: Database, tenant: TenantHandle) -> None:
    [a, *_] = workflow_scenarios()
    await insert_history(db, tenant.id, a, "cl", revision="r")
    card = _cards(await _board(tenant, mode="workflow", revision="r"))[a]
    assert (card["state"], card["reason"], card["live"]) == ("no_results", "live", 1)
    assert card["reasonText"] == "a run is still live"


async def test_default_revision_is_the_latest_runs(db: Database, tenant: TenantHandle) -> None:
    a, b, *_ = workflow_scenarios()
    now = utcnow()
    await insert_history(db, tenant.id, a, "f", revision="old", start=now - timedelta(hours=3))
    await insert_history(db, tenant.id, b, "p", revision="new", start=now - timedelta(hours=2))
    await insert_history(db, tenant.id, a, "p", revision="agent-rev", mode="agent", start=now)
    board = await _board(tenant, mode="workflow")
    assert board["revision"] == "new" and board["currentRevision"] == "new"
    assert [r["revision"] for r in board["revisions"]] == ["new", "old"]
    assert _cards(board)[b]["state"] == "passing"
    older = await _board(tenant, mode="workflow", revision="old")
    assert older["revision"] == "old" and older["currentRevision"] == "new"
    assert _cards(older)[a]["state"] == "failing"


async def test_an_empty_tenant(tenant: TenantHandle) -> None:
    board = await _board(tenant, mode="workflow")
    assert board["revision"] is None and board["revisions"] == []
    assert board["headline"]["text"] == "No results yet"
    assert all(c["reason"] == "not_run" for c in board["cards"])


async def test_a_scenario_edit_resets_its_card(db: Database, tenant: TenantHandle) -> None:
    scenario = SCENARIO_EXAMPLE
    async with api(tenant) as client:
        first = (await client.post("/scenarios", json=scenario)).json()
        changed = copy.deepcopy(scenario)
        changed["title"] = "Ask Dr. Chen to call the patient back"
        second = (await client.post("/scenarios", json=changed)).json()
    now = utcnow()
    sid = scenario["id"]
    await insert_history(
        db, tenant.id, sid, "fff", revision="r", mode="agent",
        scenario_hash=first["hash"], start=now - timedelta(hours=2),
    )  # fmt: skip
    card = _cards(await _board(tenant, mode="agent", revision="r"))[sid]
    assert (card["state"], card["reason"], card["counted"]) == ("no_results", "not_run", 0)
    await insert_history(
        db, tenant.id, sid, "p", revision="r", mode="agent", scenario_hash=second["hash"]
    )
    card = _cards(await _board(tenant, mode="agent", revision="r"))[sid]
    assert (card["state"], card["counted"], card["scenarioHash"]) == ("passing", 1, second["hash"])


async def test_another_tenants_runs_are_unseen(
    db: Database, tenant: TenantHandle, server_url: str
) -> None:
    other = await make_tenant(db, server_url)
    [a, *_] = workflow_scenarios()
    await insert_history(db, other.id, a, "ff", revision="theirs")
    board = await _board(tenant, mode="workflow")
    assert board["revision"] is None and board["revisions"] == []
    mine = await _board(tenant, mode="workflow", revision="theirs")
    assert _cards(mine)[a]["state"] == "no_results"
    assert _cards(await _board(other, mode="workflow"))[a]["state"] == "failing"


async def test_bad_inputs(tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        assert (await client.get("/board", params={"mode": "robot"})).status_code == 422
        assert (await client.get("/board", params={"revision": "x" * 101})).status_code == 422
        assert (await client.get("/board", params={"revision": ""})).status_code == 422
        client.headers.pop("Authorization")
        assert (await client.get("/board")).status_code == 401
