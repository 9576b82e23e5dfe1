"""The scenario pages over plain HTTP: list and filters, details, import (errors at
their paths), Run, reference run and check, tenancy and escaping."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import httpx

from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import csrf_of, sign_in
from tests.scenarios.test_import_api import SCENARIO

BOOKING = "scheduling.book-named-practitioner"


def custom(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(SCENARIO)
    document.update(changes)
    return document


async def import_json(console: httpx.AsyncClient, document: Any, action: str) -> httpx.Response:
    token = csrf_of((await console.get("/scenarios/import")).text)
    text = document if isinstance(document, str) else json.dumps(document)
    return await console.post(
        "/scenarios/import", data={"csrf": token, "document": text, "action": action}
    )


def _rows(html: str) -> list[str]:
    return re.findall(r'<code class="id">([^<]+)</code>', html)


async def test_the_list_shows_every_scenario_and_filters(console: httpx.AsyncClient) -> None:
    every = (await console.get("/scenarios")).text
    assert BOOKING in _rows(every)
    assert "built-in" in every
    workflow = (await console.get("/scenarios", params={"mode": "workflow"})).text
    assert 0 < len(_rows(workflow)) < len(_rows(every))
    scheduling = _rows((await console.get("/scenarios", params={"category": "scheduling"})).text)
    assert scheduling and all(s.startswith("scheduling.") for s in scheduling)
    found = _rows(
        (await console.get("/scenarios", params={"q": "atrial fibrillation referral"})).text
    )
    assert found == ["referrals.cardiology-referral"]
    none = (await console.get("/scenarios", params={"q": "no-such-words-anywhere"})).text
    assert "No scenario matches" in none


async def test_details_show_what_a_run_will_hold(console: httpx.AsyncClient) -> None:
    html = (await console.get("/scenarios/referrals.cardiology-referral")).text
    assert '<mark class="token">{{patient.name}}</mark>' in html
    assert "Run reference solution" in html and "Check this scenario" in html
    assert 'aria-label="Run baseline"' in html and 'aria-label="Run spanish"' in html
    assert "required" in html and "ServiceRequest" in html
    assert "Fixture resources" in html and "Gregory Alan Lindqvist" in html
    assert '<select id="mode-baseline"' not in html  # one mode: no picker


async def test_a_scenario_of_two_modes_has_a_mode_picker(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    html = (await console.get("/scenarios/inbox.message-triage-urgent")).text
    assert '<select id="mode-baseline" name="mode">' in html
    assert "Workflow note" in html
    answer = await console.post(
        "/scenarios/inbox.message-triage-urgent/runs",
        data={"csrf": csrf_of(html), "mode": "workflow"},
    )
    run_id = answer.headers["location"].removeprefix("/runs/")
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as api:
        assert (await api.get(f"/api/testing/runs/{run_id}")).json()["mode"] == "workflow"
        await api.post(f"/api/testing/runs/{run_id}/cancel")


async def test_an_invalid_import_shows_each_error_at_its_path(
    console: httpx.AsyncClient,
) -> None:
    broken = custom(id="custom.console-broken")
    broken["expectations"][0]["where"].append("status = = 'requested'")
    del broken["title"]
    answer = await import_json(console, broken, "validate")
    assert answer.status_code == 422
    paths = re.findall(r'<code class="path">([^<]*)</code>', answer.text)
    assert "/title" in paths
    assert any(p.startswith("/expectations/0/where") for p in paths), paths
    # Nothing was saved, and the document is kept in the form to fix.
    assert (await console.get("/scenarios/custom.console-broken")).status_code == 404
    assert "custom.console-broken" in answer.text


async def test_malformed_json_is_an_error_of_the_document(console: httpx.AsyncClient) -> None:
    answer = await import_json(console, '{"id": ', "validate")
    assert answer.status_code == 422
    assert "(document)" in answer.text and "malformed JSON" in answer.text


async def test_validate_then_save_opens_the_scenario(console: httpx.AsyncClient) -> None:
    document = custom(id="custom.console-saved")
    dry = await import_json(console, document, "validate")
    assert dry.status_code == 200 and "Valid" in dry.text
    assert (await console.get("/scenarios/custom.console-saved")).status_code == 404
    saved = await import_json(console, document, "save")
    assert saved.status_code == 303
    assert saved.headers["location"] == "/scenarios/custom.console-saved?imported=1"
    page = await console.get(saved.headers["location"])
    assert "Imported as version 1" in page.text and "custom v1" in page.text
    again = await import_json(console, document, "save")
    assert again.headers["location"].endswith("imported=2")


async def test_a_built_in_id_is_refused_at_its_path(console: httpx.AsyncClient) -> None:
    answer = await import_json(console, custom(id=BOOKING), "save")
    assert answer.status_code == 409
    assert '<code class="path">/id</code>' in answer.text


async def test_an_uploaded_file_imports(console: httpx.AsyncClient) -> None:
    token = csrf_of((await console.get("/scenarios/import")).text)
    body = json.dumps(custom(id="custom.console-upload")).encode()
    answer = await console.post(
        "/scenarios/import",
        data={"csrf": token, "action": "save", "document": ""},
        files={"file": ("scenario.json", body, "application/json")},
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].startswith("/scenarios/custom.console-upload")


async def test_run_buttons_start_runs_as_the_api_does(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    token = csrf_of((await console.get(f"/scenarios/{BOOKING}")).text)
    answer = await console.post(
        f"/scenarios/{BOOKING}/runs", data={"csrf": token, "mode": "agent", "variant": "terse"}
    )
    assert answer.status_code == 303
    run_id = answer.headers["location"].removeprefix("/runs/")
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as api:
        run = (await api.get(f"/api/testing/runs/{run_id}")).json()
        assert run["scenarioId"] == BOOKING and run["variant"] == "terse"
        assert run["status"] == "live"
        await api.post(f"/api/testing/runs/{run_id}/cancel")


async def test_reference_run_and_check_of_an_imported_scenario(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    await import_json(console, custom(id="custom.console-checked"), "save")
    page = (await console.get("/scenarios/custom.console-checked")).text
    token = csrf_of(page)
    ran = await console.post(
        "/scenarios/custom.console-checked/reference-run", data={"csrf": token, "variant": ""}
    )
    assert ran.status_code == 303, ran.text
    run_id = ran.headers["location"].removeprefix("/runs/")
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as api:
        run = (await api.get(f"/api/testing/runs/{run_id}")).json()
    assert run["status"] == "passed", run
    assert run["label"] == "reference-run"

    checked = await console.post("/scenarios/custom.console-checked/check", data={"csrf": token})
    assert checked.status_code == 200, checked.text
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=60) as api:
        report = (await api.post("/api/testing/scenarios/custom.console-checked/check")).json()
    # The page says what the REST check says: every survivor and every caught near miss.
    assert ("A fair test" in checked.text) is report["ok"]
    survivors = sum(len(v["survivors"]) for v in report["variants"])
    caught = sum(len(v["caught"]) for v in report["variants"])
    assert survivors + caught > 0
    assert checked.text.count('<span aria-hidden="true">✗</span> survived') == survivors
    assert checked.text.count('<span aria-hidden="true">✓</span> caught') == caught
    # The key the replays used existed only for them: the tenant keeps its one key.
    keys = await db.pool.fetchval("SELECT count(*) FROM api_key WHERE tenant_id = $1", tenant.id)
    assert keys == 1


async def test_another_tenants_scenario_is_a_404(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    other = await make_tenant(db, tenant.server, prefix="other")
    theirs = await sign_in(other.server, other.key)
    try:
        saved = await import_json(theirs, custom(id="custom.console-theirs"), "save")
        assert saved.status_code == 303
    finally:
        await theirs.aclose()
    page = await console.get("/scenarios/custom.console-theirs")
    assert page.status_code == 404
    assert "no scenario" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    token = csrf_of((await console.get("/")).text)
    run = await console.post("/scenarios/custom.console-theirs/runs", data={"csrf": token})
    assert run.status_code == 404


async def test_script_in_a_scenario_is_escaped(console: httpx.AsyncClient) -> None:
    evil = "<script>alert('x')</script>"
    document = custom(id="custom.console-escaped", title=f"Title {evil}", summary=evil)
    document["expectations"][0]["label"] = evil
    saved = await import_json(console, document, "save")
    assert saved.status_code == 303, saved.text
    for path in ("/scenarios", "/scenarios/custom.console-escaped"):
        html = (await console.get(path)).text
        assert evil not in html
        assert "&lt;script&gt;" in html
    dry = await import_json(console, document, "validate")
    assert evil not in dry.text


async def test_every_built_in_scenario_page_answers(console: httpx.AsyncClient) -> None:
    """Five of them answered 500: their fixtures' decimals (a lab value) reached `tojson`
    as Decimal. Each page shows the fixture as stored and what every run gets besides."""
    from app.scenarios.service import builtin_scenarios

    for scenario_id in sorted(builtin_scenarios()):
        r = await console.get(f"/scenarios/{scenario_id}")
        assert r.status_code == 200, (scenario_id, r.text[:300])
        assert "matches-reference" in r.text, scenario_id
    lab = (await console.get("/scenarios/results.critical-lab")).text
    assert re.search(r"&#34;value&#34;: \d+\.\d", lab) or re.search(r'"value": \d+\.\d', lab)
