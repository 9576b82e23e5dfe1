"""The run page, runs list and chart over plain HTTP: tenancy, CSRF, the live endpoint's
ETag, the human driver's API field, escaping."""

from __future__ import annotations

import re

import httpx
import pytest

from app.console import runs as console_runs
from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import csrf_of, sign_in
from tests.console.run_helpers import SIM, TASKS, api, staff_message, start


async def test_another_tenants_run_and_chart_are_404(
    console: httpx.AsyncClient, tenant: TenantHandle, db: Database
) -> None:
    other = await make_tenant(db, tenant.server, prefix="other")
    theirs = await start(other)
    patient = theirs["fixture"]["patient"]
    token = csrf_of((await console.get("/runs")).text)
    for path in (
        f"/runs/{theirs['id']}",
        f"/runs/{theirs['id']}/live",
        f"/chart/{patient}",
        f"/chart/{patient}?run={theirs['id']}",
    ):
        answer = await console.get(path)
        assert answer.status_code == 404, (path, answer.status_code)
        assert "Lindqvist" not in answer.text
    for action in ("finish", "cancel", "delete-data", "reply"):
        answer = await console.post(
            f"/runs/{theirs['id']}/{action}", data={"csrf": token, "text": "hi"}
        )
        assert answer.status_code == 404, (action, answer.text)
    async with api(other) as client:
        assert (await client.get(f"/api/testing/runs/{theirs['id']}")).json()["status"] == "live"
    # Our own run's chart does not open theirs either.
    ours = await start(tenant)
    answer = await console.get(f"/chart/{patient}?run={ours['id']}")
    assert answer.status_code == 404


async def test_run_actions_need_the_sessions_csrf_token(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant)
    for action in ("finish", "cancel", "delete-data", "reply"):
        assert (await console.post(f"/runs/{run['id']}/{action}")).status_code == 403
        wrong = await console.post(f"/runs/{run['id']}/{action}", data={"csrf": "nope"})
        assert wrong.status_code == 403
    async with api(tenant) as client:
        assert (await client.get(f"/api/testing/runs/{run['id']}")).json()["status"] == "live"


async def test_run_pages_without_a_session_go_to_login(
    server_url: str, tenant: TenantHandle
) -> None:
    run = await start(tenant)
    async with httpx.AsyncClient(base_url=server_url) as anonymous:
        for path in (f"/runs/{run['id']}", "/runs", f"/chart/{run['fixture']['patient']}"):
            answer = await anonymous.get(path)
            assert answer.status_code == 303
            assert answer.headers["location"].startswith("/login?next=")


async def test_the_live_endpoint_answers_304_until_the_run_changes(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant)
    first = await console.get(f"/runs/{run['id']}/live")
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert first.json()["final"] is False
    assert "not yet" in first.json()["sections"]["checks"]
    same = await console.get(f"/runs/{run['id']}/live", headers={"If-None-Match": etag})
    assert same.status_code == 304
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        task = {
            "resourceType": "Task",
            "status": "requested",
            "intent": "order",
            "for": {"reference": run["fixture"]["patient"]},
        }
        assert (await fhir.post("/Task", json=task)).status_code == 201
    changed = await console.get(f"/runs/{run['id']}/live", headers={"If-None-Match": etag})
    assert changed.status_code == 200
    checks = changed.json()["sections"]["checks"]
    assert 'data-check="task"' in checks
    task_row = checks.split('data-check="task"')[1].split("</tr>")[0]
    assert "holding" in task_row
    # The REST view of the live run still shows progress only.
    async with api(tenant) as client:
        view = (await client.get(f"/api/testing/runs/{run['id']}")).json()
    assert "expectations" not in view and set(view["progress"]) <= {
        "requiredTotal",
        "requiredHolding",
        "lastGradedAt",
    }


async def test_human_driver_is_a_start_field_returned_in_the_view(tenant: TenantHandle) -> None:
    human = await start(tenant, SIM, patientDriver="human")
    assert human["patientDriver"] == "human"
    simulated = await start(tenant, SIM)
    assert simulated["patientDriver"] == "sim"
    await start(tenant, TASKS)
    async with api(tenant) as client:
        refused = await client.post(
            "/api/testing/runs", json={"scenarioId": TASKS["id"], "patientDriver": "human"}
        )
        assert refused.status_code == 422, refused.text
        assert "patientSim" in refused.text
        bad = await client.post(
            "/api/testing/runs", json={"scenarioId": SIM["id"], "patientDriver": "robot"}
        )
        assert bad.status_code == 422


async def test_a_reply_needs_a_human_driven_run_and_a_message_to_answer(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    simulated = await start(tenant, SIM)
    token = csrf_of((await console.get(f"/runs/{simulated['id']}")).text)
    refused = await console.post(
        f"/runs/{simulated['id']}/reply", data={"csrf": token, "text": "hello"}
    )
    assert refused.status_code == 409
    human = await start(tenant, SIM, patientDriver="human")
    early = await console.post(f"/runs/{human['id']}/reply", data={"csrf": token, "text": "hi"})
    assert early.status_code == 409
    assert "no message to the patient yet" in early.text


async def test_text_from_resources_and_messages_is_escaped(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    evil = "<script>alert(1)</script>"
    run = await start(tenant, SIM, label=evil)
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
        assert (await fhir.post("/Communication", json=staff_message(run, evil))).status_code == 201
        patient = run["fixture"]["patient"]
        current = (await fhir.get(f"/{patient}")).json()
        current["name"] = [{"family": evil}]
        assert (await fhir.put(f"/{patient}", json=current)).status_code == 200
    for path in (f"/runs/{run['id']}", f"/chart/{patient}?run={run['id']}", "/runs"):
        html = (await console.get(path)).text
        assert evil not in html, path
        assert "&lt;script&gt;" in html or "\\u003cscript" in html, path


async def test_the_runs_list_filters_and_pages(
    tenant: TenantHandle, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test server runs in this process: a page of 2 makes 3 runs two pages.
    monkeypatch.setattr(console_runs, "PAGE_SIZE", 2)
    fresh = await make_tenant(db, tenant.server, prefix="list")
    client = await sign_in(fresh.server, fresh.key)
    try:
        empty = await client.get("/runs")
        assert "No runs yet — start one from a scenario." in empty.text
        ids = [(await start(fresh, label="batch"))["id"] for _ in range(3)]
        other = await start(fresh, label="other")
        listed = (await client.get("/runs?label=batch")).text
        assert other["id"] not in listed
        assert listed.index(ids[2]) < listed.index(ids[1])  # newest first
        assert (await client.get("/runs?status=passed")).text.count("/runs/run_") == 0
        none = await client.get("/runs?scenario=nothing.like.this")
        assert "No runs match these filters." in none.text
        first = (await client.get("/runs?label=batch")).text
        assert ids[2] in first and ids[1] in first and ids[0] not in first
        older = re.search(r'<a href="([^"]+)" rel="next">Older', first)
        assert older, first
        second = (await client.get(older.group(1).replace("&amp;", "&"))).text
        assert ids[0] in second and ids[1] not in second and ids[2] not in second
        assert "← Newest" in second and "Older →" not in second
        # The label matches from its start, its LIKE characters literally; revision exactly.
        odd = await start(fresh, label="b%_x nightly", revision="abc123")
        assert odd["id"] in (await client.get("/runs?label=b%25_")).text
        assert ids[0] not in (await client.get("/runs?label=b%25_")).text
        by_prefix = (await client.get("/runs?label=bat")).text
        assert ids[2] in by_prefix and odd["id"] not in by_prefix
        revised = (await client.get("/runs?revision=abc123")).text
        assert odd["id"] in revised and ids[2] not in revised
        assert "No runs match" in (await client.get("/runs?revision=abc")).text
        bad = await client.get("/runs?status=nonsense")
        assert bad.status_code == 400
        assert "&#39;status&#39; must be one of" in bad.text
        assert (await client.get("/runs?before=not-a-cursor")).status_code == 400
    finally:
        await client.aclose()


async def test_cancel_and_delete_from_the_page_call_the_run_services(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    run = await start(tenant)
    token = csrf_of((await console.get(f"/runs/{run['id']}")).text)
    live = await console.post(f"/runs/{run['id']}/delete-data", data={"csrf": token})
    assert live.status_code == 409
    assert "finish or cancel it" in live.text
    cancelled = await console.post(f"/runs/{run['id']}/cancel", data={"csrf": token})
    assert cancelled.status_code == 303
    async with api(tenant) as client:
        assert (await client.get(f"/api/testing/runs/{run['id']}")).json()["status"] == "cancelled"
    page = (await console.get(f"/runs/{run['id']}")).text
    assert "This run ended without a verdict." in page
    again = await console.post(f"/runs/{run['id']}/cancel", data={"csrf": token})
    assert again.status_code == 409
    deleted = await console.post(f"/runs/{run['id']}/delete-data", data={"csrf": token})
    assert deleted.headers["location"] == f"/runs/{run['id']}?removed=1"
    assert (await console.get(f"/chart/{run['fixture']['patient']}")).status_code == 404


async def test_a_human_driven_run_starts_from_the_scenario_page(
    console: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    await start(tenant, SIM)  # imports the scenario
    details = await console.get(f"/scenarios/{SIM['id']}")
    assert 'name="patient_driver"' in details.text
    token = csrf_of(details.text)
    started = await console.post(
        f"/scenarios/{SIM['id']}/runs",
        data={"csrf": token, "mode": "agent", "patient_driver": "human"},
    )
    assert started.status_code == 303, started.text
    run_id = started.headers["location"].rsplit("/", 1)[1]
    async with api(tenant) as client:
        view = (await client.get(f"/api/testing/runs/{run_id}")).json()
    assert view["patientDriver"] == "human"
    page = (await console.get(f"/runs/{run_id}")).text
    assert "Reply as the patient" in page and "No message to the patient yet" in page
    plain = await console.get("/scenarios/scheduling.book-named-practitioner")
    assert plain.status_code == 200
    assert 'name="patient_driver"' not in plain.text
