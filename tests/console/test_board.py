"""The board page over plain HTTP: signed out → /login, CSRF refused → 403, the cards of
a crafted history in order, Run 3 times and Run all (with what it skips and refuses),
another tenant's runs unseen, text escaped."""

from __future__ import annotations

import re
from urllib.parse import unquote

import httpx

from app.db import Database
from app.runs import service as runs_service
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import csrf_of, sign_in
from tests.runs.board_history import insert_history, workflow_scenarios


async def test_signed_out_goes_to_login(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url) as client:
        r = await client.get("/board?mode=workflow")
        assert r.status_code == 303
        assert unquote(r.headers["location"]) == "/login?next=/board?mode=workflow"
        r = await client.post("/board/runs", data={"scenario": "x", "times": "1"})
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        assert (await client.get("/board/run-all")).status_code == 303


async def test_posts_without_the_csrf_token_are_403(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    [a, *_] = workflow_scenarios()
    form = {"mode": "workflow", "revision": "r", "scenario": a, "times": "1"}
    for path in ("/board/runs", "/board/run-all"):
        for token in (None, "forged"):
            data = form | ({"csrf": token} if token else {})
            r = await console.post(path, data=data)
            assert r.status_code == 403, (path, token)
    async with db.pool.acquire() as conn:
        assert await runs_service.count_live(conn, tenant.id) == 0


async def test_the_page_shows_cards_worst_first(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    a, b, c, d, *_ = workflow_scenarios()
    for sid, history in {a: "ppp", b: "ff", c: "pf", d: "e"}.items():
        await insert_history(db, tenant.id, sid, history, revision="rev2")
    r = await console.get("/board", params={"mode": "workflow"})
    assert r.status_code == 200
    assert r.headers["content-security-policy"].startswith("default-src 'self'")
    order = re.findall(r'data-scenario="([^"]+)" data-state="([^"]+)"', r.text)
    assert order[:2] == [(b, "failing"), (c, "flaky")]
    assert (d, "no_results") in order and order[-1] == (a, "passing")
    assert "2 of " in r.text and "need attention" in r.text
    assert "the grader crashed" in r.text
    assert "<svg" in r.text and "rev2: 3/3 passed (100%)" in r.text
    assert 'href="/board"' in r.text  # the nav link


async def test_run_3_times_starts_three_runs_on_the_revision(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    [a, *_] = workflow_scenarios()
    await insert_history(db, tenant.id, a, "f", revision="rev9")
    page = await console.get("/board", params={"mode": "workflow"})
    r = await console.post(
        "/board/runs",
        data={
            "csrf": csrf_of(page.text),
            "mode": "workflow",
            "revision": "rev9",
            "scenario": a,
            "times": "3",
        },
    )
    assert r.status_code == 200, r.text
    assert "Started 3 runs" in r.text
    runs = await runs_service.list_runs(
        db.pool, tenant.id, label=None, status="live", scenario_id=a, limit=10
    )
    assert len(runs) == 3 and {x.revision for x in runs} == {"rev9"}
    for bad in ("2", "x"):
        data = {"csrf": csrf_of(page.text), "mode": "workflow", "scenario": a, "times": bad}
        assert (await console.post("/board/runs", data=data)).status_code == 400


async def test_run_all_says_what_it_starts_and_skips(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    scenarios = workflow_scenarios()
    await insert_history(db, tenant.id, scenarios[0], "l", revision="rev3")
    confirm = await console.get("/board/run-all", params={"mode": "workflow", "revision": "rev3"})
    assert confirm.status_code == 200
    assert f"This starts {len(scenarios) - 1} runs" in confirm.text
    assert "still live on this revision" in confirm.text
    agent = await console.get("/board/run-all", params={"mode": "agent"})
    assert "need an agent to act on them" in agent.text
    done = await console.post(
        "/board/run-all",
        data={"csrf": csrf_of(confirm.text), "mode": "workflow", "revision": "rev3"},
    )
    assert done.status_code == 200
    started = int(re.search(r"Started (\d+) run", done.text).group(1))  # type: ignore[union-attr]
    refused = done.text.count("live run limit reached")
    assert started + refused == len(scenarios) - 1 and started > 0
    if refused:
        assert "Refused" in done.text


async def test_another_tenants_runs_are_unseen(
    db: Database, server_url: str, console: httpx.AsyncClient
) -> None:
    other = await make_tenant(db, server_url)
    [a, *_] = workflow_scenarios()
    await insert_history(db, other.id, a, "ff", revision="<script>x</script>")
    r = await console.get("/board", params={"mode": "workflow", "revision": "<script>x</script>"})
    assert r.status_code == 200
    assert "<script>x</script>" not in r.text and "&lt;script&gt;" in r.text
    assert 'data-state="failing"' not in r.text
    theirs = await sign_in(server_url, other.key)
    try:
        mine = await theirs.get("/board", params={"mode": "workflow"})
        assert 'data-state="failing"' in mine.text and "&lt;script&gt;" in mine.text
    finally:
        await theirs.aclose()


async def test_a_bad_mode_is_a_400_page(console: httpx.AsyncClient) -> None:
    r = await console.get("/board", params={"mode": "robot"})
    assert r.status_code == 400 and "mode must be agent or workflow" in r.text


async def test_home_shows_the_boards_headline(
    db: Database, tenant: TenantHandle, console: httpx.AsyncClient
) -> None:
    assert "board-headline" not in (await console.get("/")).text  # no run yet
    [a, *_] = workflow_scenarios()
    await insert_history(db, tenant.id, a, "ff", revision="r1")
    home = await console.get("/")
    assert 'data-testid="board-headline"' in home.text
    assert "1 of " in home.text and "needs attention" in home.text


async def test_home_lists_recent_evals(tenant: TenantHandle, console: httpx.AsyncClient) -> None:
    assert "No evals yet." in (await console.get("/")).text
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as api:
        body = {
            "mode": "agent",
            "label": "home <b>v1</b>",
            "revision": "abc1234",
            "scenarios": ["referrals.cardiology-referral"],
        }
        created = await api.post("/api/testing/evals", json=body)
        assert created.status_code == 201, created.text
    home = (await console.get("/")).text
    assert 'data-testid="recent-evals"' in home
    assert f'href="/evals/{created.json()["id"]}"' in home
    assert "home &lt;b&gt;v1&lt;/b&gt;" in home and "abc1234" in home
