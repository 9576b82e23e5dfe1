"""The eval pages over plain HTTP: sign-in and CSRF, tenancy, the start preview's numbers
and refusals (the API's own reasons), escaping, the live endpoint's ETag, the eval page's
figures and the compare page's sentence."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from app.console import evals as console_evals
from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import csrf_of, sign_in
from tests.evals.test_evals import WORKFLOW, api_client, run_eval

PATHS = ("/evals", "/evals/new", "/evals/eval_x", "/evals/eval_x/live", "/evals/eval_x/compare")


async def _eval(tenant: TenantHandle, label: str = "ci 1", **body: object) -> str:
    async with api_client(tenant) as client:
        created = await client.post(
            "/evals",
            json={"mode": "workflow", "label": label, "scenarios": WORKFLOW[:1], **body},
        )
        assert created.status_code == 201, created.text
        eval_id: str = created.json()["id"]
        return eval_id


def _form(csrf: str, action: str = "preview", **fields: object) -> dict[str, object]:
    data: dict[str, object] = {
        "csrf": csrf,
        "action": action,
        "mode": "workflow",
        "scenario": WORKFLOW,
        "personas": "baseline",
        "repeats": "1",
        "label": "console eval",
    }
    data.update(fields)
    return data


async def test_without_a_session_every_eval_page_goes_to_sign_in(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url) as anonymous:
        for path in PATHS:
            answer = await anonymous.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/login?next="), path
        answer = await anonymous.post("/evals/new", data={"label": "x"})
        assert answer.status_code == 303 and answer.headers["location"] == "/login"


async def test_posts_need_the_sessions_csrf_token(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    eval_id = await _eval(tenant)
    for token in (None, "forged"):
        data = _form(token or "", action="start")
        if token is None:
            data.pop("csrf")
        answer = await console.post("/evals/new", data=data)
        assert answer.status_code == 403, answer.text
        answer = await console.post(f"/evals/{eval_id}/cancel", data={"csrf": token or ""})
        assert answer.status_code == 403
    async with api_client(tenant) as client:
        listed = (await client.get("/evals")).json()["evals"]
    assert [e["id"] for e in listed] == [eval_id]  # nothing started, nothing cancelled
    assert listed[0]["status"] == "running"


async def test_another_tenants_eval_is_404(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    other = await make_tenant(db, tenant.server, prefix="other")
    theirs = await _eval(other, label="secret-label x")
    ours = await _eval(tenant)
    token = csrf_of((await console.get("/evals")).text)
    for path in (
        f"/evals/{theirs}",
        f"/evals/{theirs}/live",
        f"/evals/{theirs}/compare",
        f"/evals/{ours}/compare?baseline={theirs}",
    ):
        answer = await console.get(path)
        assert answer.status_code == 404, (path, answer.status_code)
        assert "secret-label" not in answer.text
    answer = await console.post(f"/evals/{theirs}/cancel", data={"csrf": token})
    assert answer.status_code == 404
    assert "secret-label" not in (await console.get("/evals")).text
    async with api_client(other) as client:
        assert (await client.get(f"/evals/{theirs}")).json()["status"] == "running"


async def test_the_preview_counts_runs_and_the_queue_then_start_starts_them(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    token = csrf_of((await console.get("/evals/new")).text)
    # 3 scenarios × (baseline + 2 personas) × 5 repeats = 45 runs; 20 live at most.
    answer = await console.post("/evals/new", data=_form(token, personas="all", repeats="5"))
    assert answer.status_code == 200, answer.text
    text = re.sub(r"\s+", " ", answer.text)
    assert "This eval will start 45 runs</strong> (9 scenario × persona cells × 5 repeats)" in text
    assert "20 start at once; 25 will queue behind the live-run limit of 20" in text
    assert "Start 45 runs" in text
    async with api_client(tenant) as client:
        assert (await client.get("/evals")).json()["evals"] == []  # a preview writes nothing
    previewed = re.search(r'name="previewed" value="([^"]+)"', answer.text)
    assert previewed
    # Start with a different request than the one previewed: previewed again, not started.
    changed = _form(token, "start", personas="all", repeats="4", previewed=previewed.group(1))
    answer = await console.post("/evals/new", data=changed)
    assert answer.status_code == 200 and "This eval will start 36 runs" in answer.text
    started = _form(token, "start", personas="all", repeats="5", previewed=previewed.group(1))
    answer = await console.post("/evals/new", data=started)
    assert answer.status_code == 303, answer.text
    eval_id = answer.headers["location"].removeprefix("/evals/")
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{eval_id}")).json()
    assert view["total"] == 45 and view["counts"] == {"live": 20, "queued": 25}
    assert view["label"] == "console eval" and view["request"]["personas"] == "all"
    # Now every slot is taken and 25 wait: a new eval's runs all queue.
    answer = await console.post("/evals/new", data=_form(token))
    text = re.sub(r"\s+", " ", answer.text)
    assert "0 start at once; 3 will queue" in text and "25 queued by earlier evals" in text
    page = await console.get(f"/evals/{eval_id}")
    assert "0 of 45 done" in page.text and "20 live" in page.text and "25 queued" in page.text


async def test_the_preview_refuses_with_the_apis_own_reason(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    token = csrf_of((await console.get("/evals/new")).text)
    # Every workflow scenario, all personas, 5 repeats: well over 100 runs.
    data = _form(token, personas="all", repeats="5")
    data.pop("scenario")
    answer = await console.post("/evals/new", data=data)
    assert answer.status_code == 422
    async with api_client(tenant) as client:
        api = await client.post(
            "/evals", json={"mode": "workflow", "label": "x", "personas": "all", "repeats": 5}
        )
    assert api.status_code == 422
    reason = api.json()["detail"]
    assert "at most 100" in reason
    assert f"Not started: {reason}".replace("'", "&#39;") in answer.text
    # A scenario of the wrong mode, the category box, a missing label.
    wrong = _form(token, mode="agent", scenario=["results.critical-lab"])
    answer = await console.post("/evals/new", data=wrong)
    assert answer.status_code == 422 and "do not support mode" in answer.text
    category = _form(token, scenario=[], category="results")
    answer = await console.post("/evals/new", data=category)
    assert answer.status_code == 200 and "This eval will start" in answer.text
    answer = await console.post("/evals/new", data=_form(token, label=""))
    assert answer.status_code == 422 and "give the eval a label" in answer.text


async def test_text_is_escaped_on_the_eval_pages(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    label = "<script>alert(1)</script> v1"
    eval_id = await _eval(tenant, label=label, revision="<b>rev</b>")
    for path in ("/evals", f"/evals/{eval_id}", f"/evals/{eval_id}/compare"):
        answer = await console.get(path)
        assert answer.status_code == 200, path
        assert "<script>alert(1)" not in answer.text and "<b>rev" not in answer.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text, path
    token = csrf_of((await console.get("/evals/new")).text)
    answer = await console.post("/evals/new", data=_form(token, label=label, scenario=["<i>x"]))
    assert answer.status_code == 404 and "<i>x" not in answer.text and "&lt;i&gt;x" in answer.text


async def test_a_completed_eval_page_and_its_live_endpoint(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    eval_id = await run_eval(tenant, "main abc", correct=True, repeats=2)
    live = await console.get(f"/evals/{eval_id}/live")
    assert live.status_code == 200 and live.json()["final"] is True
    etag = live.headers["etag"]
    again = await console.get(f"/evals/{eval_id}/live", headers={"If-None-Match": etag})
    assert again.status_code == 304
    page = await console.get(f"/evals/{eval_id}")
    text = re.sub(r"\s+", " ", page.text)
    assert 'data-eval-live=""' in text  # complete: the page does not poll
    assert "<strong>6/6</strong> passed · <strong>100.0%</strong>" in text
    assert "95% interval 61.0% – 100.0%" in text
    assert "Indicative only" in text  # 6 valid runs
    assert "pass^2</dt><dd>100.0%" in text and "pass@2</dt><dd>100.0%" in text
    assert "Every valid run passed" in text
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{eval_id}")).json()
    for run in view["runs"]:
        assert f'href="/runs/{run["runId"]}"' in page.text
    assert "6/6 · 100%" in text  # the baseline persona's rate
    listed = re.sub(r"\s+", " ", (await console.get("/evals")).text)
    assert "main abc" in listed and "6/6 · 100.0%" in listed


async def test_compare_defaults_to_the_ci_baseline_and_says_bigger_than_the_noise(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    started = time.monotonic()
    unrelated = await run_eval(tenant, "nightly x", correct=True, repeats=1)
    good = await run_eval(tenant, "main v1", correct=True, repeats=3)
    bad = await run_eval(tenant, "main v2", correct=False, repeats=3)
    assert time.monotonic() - started < 30
    page = await console.get(f"/evals/{bad}/compare")
    assert page.status_code == 200
    text = re.sub(r"\s+", " ", page.text)
    assert f'<option value="{good}" selected>main v1 · {good} (default)</option>' in text
    assert f'<option value="{unrelated}">' in text
    assert "Worse, and the drop is bigger than the noise." in text
    assert "from 9/9 (100.0%) to 0/9 (0.0%), a change of -100.0 points" in text
    assert "The stratified exact test over the 3 cells" in text
    assert text.count('<tr class="cell-regressed">') == len(WORKFLOW)
    # Whose change flipped each cell: the agent's (nothing else changed), counted.
    assert text.count('<span class="label attribution-agent"') == len(WORKFLOW)
    assert f"Flips by whose change: agent {len(WORKFLOW)}." in text
    # Each regressed cell opens a passing baseline run beside a failing current one.
    pairs = re.findall(r'<a href="(/runs/(run_\w+)/vs/(run_\w+))" class="small">', text)
    assert len(pairs) == len(WORKFLOW), pairs
    side = await console.get(pairs[0][0])
    assert side.status_code == 200 and "differ" in side.text
    # The good eval has no earlier "main" eval: no default, and the page says so.
    first = await console.get(f"/evals/{good}/compare")
    assert "No baseline to compare with." in first.text
    # Compared the other way round it improved; the unrelated eval can be picked.
    chosen = await console.get(f"/evals/{good}/compare", params={"baseline": bad})
    assert "Better, and the rise is bigger than the noise." in chosen.text
    picked = await console.get(f"/evals/{bad}/compare", params={"baseline": unrelated})
    assert "Worse" in picked.text and "Underpowered comparison: " in picked.text
    bad_page = re.sub(r"\s+", " ", (await console.get(f"/evals/{bad}")).text)
    assert "Checks that failed most" in bad_page and "a run where it failed" in bad_page


async def test_sign_in_keeps_the_eval_page_as_next(tenant: TenantHandle) -> None:
    client = await sign_in(tenant.server, tenant.key)
    try:
        answer = await client.get("/evals/new")
        assert answer.status_code == 200 and "Start an eval" in answer.text
        assert 'href="/evals" aria-current="page"' in answer.text
    finally:
        await client.aclose()


async def _finish_all(tenant: TenantHandle, eval_id: str) -> None:
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{eval_id}")).json()
        for run in view["runs"]:
            await client.post(f"/runs/{run['runId']}/finish")


async def test_agent_briefs_and_a_changed_scenario_not_comparable(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    from tests.scenarios.test_import_api import SCENARIO

    async with api_client(tenant) as client:
        assert (await client.post("/scenarios", json=SCENARIO)).status_code == 201
    body = {"mode": "agent", "scenarios": [SCENARIO["id"]], "personas": "all"}
    first = await _eval(tenant, label="agent v1", **body)
    page = re.sub(r"\s+", " ", (await console.get(f"/evals/{first}")).text)
    assert "Briefs for the agent" in page
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{first}")).json()
    assert len(view["runs"]) == 2
    for run in view["runs"]:
        position = run["position"]
        assert re.sub(r"\s+", " ", run["brief"]).strip() in page
        assert f'data-copy-from="brief-text-{position}"' in page
        assert run["fhirBase"] in page
    assert 'data-eval-live="/evals/' in page  # running: the page polls
    await _finish_all(tenant, first)
    changed = {**SCENARIO, "title": "Ask Dr. Chen to call back today"}
    async with api_client(tenant) as client:
        assert (await client.post("/scenarios", json=changed)).status_code == 201
    second = await _eval(tenant, label="agent v2", **body)
    await _finish_all(tenant, second)
    compare = re.sub(r"\s+", " ", (await console.get(f"/evals/{second}/compare")).text)
    assert f'<option value="{first}" selected>' in compare
    assert compare.count('<tr class="cell-not-comparable">') == 2
    assert "the scenario changed between the evals" in compare
    # Both evals failed every run: the labels are `same`, so no cell is attributed.
    assert 'class="label attribution-' not in compare
    assert "No comparison yet" in compare  # nothing comparable is left to test


async def test_excluded_runs_are_listed_with_why(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    eval_id = await _eval(tenant, label="excluded 1", repeats=2)
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{eval_id}")).json()
        first, second = (r["runId"] for r in view["runs"])
        await client.post(f"/runs/{first}/cancel")
        await client.post(f"/runs/{second}/finish")
        view = (await client.get(f"/evals/{eval_id}")).json()
    page = re.sub(r"\s+", " ", (await console.get(f"/evals/{eval_id}")).text)
    assert "Excluded runs" in page and f'href="/runs/{first}"' in page
    cancelled = next(r for r in view["runs"] if r["runId"] == first)
    why = cancelled.get("note") or "cancelled before a verdict"
    assert why in page
    assert "<strong>0/1</strong> passed" in page
    assert "1 cancelled, 0 errored" in page


async def test_the_evals_list_filters_and_pages(
    tenant: TenantHandle, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_evals, "PAGE_SIZE", 2)
    fresh = await make_tenant(db, tenant.server, prefix="evlist")
    client = await sign_in(fresh.server, fresh.key)
    try:
        first = await _eval(fresh, label="nightly a", revision="r1")
        second = await _eval(fresh, label="nightly b", revision="r2")
        other = await _eval(fresh, label="other_1", scenarios=WORKFLOW[1:2])
        async with api_client(fresh) as api:
            assert (await api.post(f"/evals/{second}/cancel")).status_code == 200

        def ids(html: str) -> set[str]:
            return {e for e in (first, second, other) if f"/evals/{e}" in html}

        newest = (await client.get("/evals")).text
        assert ids(newest) == {other, second}  # newest first, two a page
        older = re.search(r'<a href="([^"]+)" rel="next">Older', newest)
        assert older, newest
        page2 = (await client.get(older.group(1).replace("&amp;", "&"))).text
        assert ids(page2) == {first} and "← Newest" in page2
        assert ids((await client.get("/evals?label=nightly")).text) == {first, second}
        # The label's LIKE characters are literal: "other_" is not "other" + any character.
        assert ids((await client.get("/evals?label=other_")).text) == {other}
        assert ids((await client.get("/evals?label=othe%25")).text) == set()
        assert ids((await client.get("/evals?revision=r1")).text) == {first}
        assert ids((await client.get("/evals?status=cancelled")).text) == {second}
        assert ids((await client.get("/evals?status=running")).text) == {first, other}
        assert ids((await client.get(f"/evals?scenario={WORKFLOW[1]}")).text) == {other}
        nothing = await client.get("/evals?status=completed")
        assert "No evals match these filters." in nothing.text
        bad = await client.get("/evals?status=done")
        assert bad.status_code == 400 and "&#39;status&#39; must be one of" in bad.text
        async with api_client(fresh) as api:
            listed = await api.get("/evals", params={"status": "cancelled"})
            assert [e["id"] for e in listed.json()["evals"]] == [second]
            assert (await api.get("/evals", params={"status": "done"})).status_code in (400, 422)
    finally:
        await client.aclose()
