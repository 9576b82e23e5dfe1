"""The home page shows the board page's headline for the mode and revision of the latest
run (the home page reads it from the states alone: app.runs.board_load.load_headline)."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx

from app.db import Database
from app.kit.clock import utcnow
from tests.conftest import TenantHandle
from tests.runs.board_history import insert_history, workflow_scenarios


def _home_headline(page: str) -> str:
    line = page.split('data-testid="board-headline"', 1)[1].split("</p>", 1)[0]
    found = re.search(r'<a href="/board\?mode=(\w+)">([^<]+)</a>', line)
    assert found, line
    return f"{found.group(1)}: {found.group(2)}"


def _board_headline(page: str) -> str:
    found = re.search(r'data-testid="headline">\s*<strong>([^<]+)</strong>', page)
    assert found, page[:3000]
    return found.group(1)


async def test_home_shows_the_board_pages_headline(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    a, b, c, d, *_ = workflow_scenarios()
    now = utcnow()
    await insert_history(db, tenant.id, d, "fff", revision="rev6", start=now - timedelta(hours=6))
    for sid, history in {a: "ff", b: "pfp", c: "fppp"}.items():
        await insert_history(db, tenant.id, sid, history, revision="rev7")
    home = (await console.get("/")).text
    board = (await console.get("/board", params={"mode": "workflow"})).text
    assert "Board, workflow mode, revision <code>rev7</code>" in home
    assert _home_headline(home) == "workflow: " + _board_headline(board)
    assert _board_headline(board).startswith("2 of ")
    # A later run of the other mode: its board's headline, of its revision.
    await insert_history(db, tenant.id, a, "ppp", revision="agent-1", mode="agent", start=now)
    home = (await console.get("/")).text
    board = (await console.get("/board", params={"mode": "agent"})).text
    assert "Board, agent mode, revision <code>agent-1</code>" in home
    assert _home_headline(home) == "agent: " + _board_headline(board)
