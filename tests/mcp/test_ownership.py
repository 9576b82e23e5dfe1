"""Run ownership over MCP: a run belongs to the client that started (or adopted) it: its
MCP session, or a stateless client's Mcp-Client-Id. Another client never acts on it
without naming it by run_id, even when it is the tenant's only live run."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.conftest import TenantHandle, make_tenant
from tests.mcp.client import call_error, call_ok, mcp_session
from tests.mcp.test_mcp import trace_of

SCENARIO = "scheduling.book-named-practitioner"


def _note_patient(family: str) -> dict[str, Any]:
    return {"resourceType": "Patient", "name": [{"family": family, "given": ["Owner"]}]}


async def _rest_start(tenant: TenantHandle) -> dict[str, Any]:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        r = await http.post(f"{tenant.server}/api/testing/runs", json={"scenarioId": SCENARIO})
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    return run


async def _rest_cancel(tenant: TenantHandle, run_id: str) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        await http.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel")


async def _families_in(tenant: TenantHandle, fhir_base: str, family: str) -> int:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        r = await http.get(f"{fhir_base}/Patient", params={"family:exact": family})
    assert r.status_code == 200, r.text
    total: int = r.json()["total"]
    return total


async def test_a_new_session_never_acts_on_another_sessions_run(
    tenant: TenantHandle, db: Any
) -> None:
    """Client A starts the tenant's only live run; client B (a new session) without
    run_id writes to the tenant base, says so, and is refused what needs a run; naming
    A's run works."""
    family = f"Owner{uuid.uuid4().hex[:8]}"
    async with (
        mcp_session(tenant.server, tenant.key) as a,
        mcp_session(tenant.server, tenant.key) as b,
    ):
        run = await call_ok(a, "start_test_run", {"scenario_id": SCENARIO})
        run_id = run["run_id"]

        created = await call_ok(b, "fhir_create", {"resource": _note_patient(family)})
        acted_on = created["acted_on"]
        assert acted_on["base"] == "tenant" and acted_on["run_id"] is None
        assert acted_on["fhir_base"] == tenant.fhir_base
        assert "no current run in this session" in acted_on["note"]
        assert "pass run_id" in acted_on["note"]
        assert [r["run_id"] for r in acted_on["live_runs"]] == [run_id]
        refused: list[tuple[str, dict[str, Any]]] = [
            ("get_test_run", {}),
            ("finish_test_run", {}),
            ("message_patient", {"text": "Hello"}),
            ("get_patient_messages", {"wait_seconds": 0}),
        ]
        for tool, args in refused:
            message = await call_error(b, tool, args)
            assert "no current run in this session" in message, (tool, message)
            assert run_id in message and "pass one as run_id" in message, (tool, message)
        for tool, args in [
            ("fhir_search", {"resource_type": "Patient"}),
            ("find_appointments", {"practitioner": "demo-canonical-prac-chen"}),
            ("check_eligibility", {"patient": run["fixture"]["patient"], "date": "2026-01-05"}),
        ]:
            answer = await call_ok(b, tool, args)
            assert answer["acted_on"]["base"] == "tenant", (tool, answer["acted_on"])
            assert answer["acted_on"]["live_runs"][0]["run_id"] == run_id, tool

        # A's run is untouched: still live, none of B's calls in its trace.
        state = await call_ok(a, "get_test_run", {})
        assert state["run_id"] == run_id and state["status"] == "live"
        mine = await call_ok(a, "fhir_search", {"resource_type": "Patient"})
        assert mine["acted_on"]["base"] == "run" and mine["acted_on"]["run_id"] == run_id

        # B naming A's run explicitly acts on it (and says so).
        named = await call_ok(
            b, "fhir_create", {"resource": _note_patient(family + "x"), "run_id": run_id}
        )
        assert named["acted_on"]["base"] == "run" and named["acted_on"]["run_id"] == run_id
        state = await call_ok(b, "get_test_run", {"run_id": run_id})
        assert state["status"] == "live"
        # ...without making it B's current run.
        after = await call_ok(b, "fhir_search", {"resource_type": "Patient"})
        assert after["acted_on"]["base"] == "tenant"
        final = await call_ok(a, "finish_test_run", {})
        assert final["run_id"] == run_id

    calls = await trace_of(tenant, run_id)
    writes = [c["path"] for c in calls if c["method"] == "POST" and c["path"].endswith("/Patient")]
    # B's named write went through the run's view; its unnamed one to the tenant base (which
    # the trace shows every live run as a shared call, as for REST clients).
    assert writes == ["/api/fhir/r4/Patient", f"/api/testing/runs/{run_id}/fhir/r4/Patient"]
    kept = await db.pool.fetch(
        "SELECT path, run_id FROM trace_call WHERE tenant_id = $1 AND method = 'POST' "
        "AND path LIKE '%/Patient' ORDER BY at",
        tenant.id,
    )
    assert [(r["path"], r["run_id"]) for r in kept] == [
        ("/api/fhir/r4/Patient", None),  # not A's run: a call of no run
        (f"/api/testing/runs/{run_id}/fhir/r4/Patient", run_id),
    ]
    assert await _families_in(tenant, tenant.fhir_base, family) == 1
    assert await _families_in(tenant, run["fhir_base"], family + "x") == 1


async def test_stateless_identities_do_not_cross(tenant: TenantHandle) -> None:
    """Stateless (2026) clients: each Mcp-Client-Id has its own current run, kept across
    connections; another id, or no id at all, never uses it."""
    x_id, y_id = f"x-{uuid.uuid4().hex}", f"y-{uuid.uuid4().hex}"
    async with mcp_session(tenant.server, tenant.key, mode="auto", client_id=x_id) as x:
        run = await call_ok(x, "start_test_run", {"scenario_id": SCENARIO})
    run_id = run["run_id"]
    async with mcp_session(tenant.server, tenant.key, mode="auto", client_id=x_id) as x_again:
        state = await call_ok(x_again, "get_test_run", {})
        assert state["run_id"] == run_id
    async with mcp_session(tenant.server, tenant.key, mode="auto", client_id=y_id) as y:
        searched = await call_ok(y, "fhir_search", {"resource_type": "Patient"})
        assert searched["acted_on"]["base"] == "tenant"
        assert "no current run for this client (Mcp-Client-Id)" in searched["acted_on"]["note"]
        message = await call_error(y, "get_test_run", {})
        assert "no current run for this client" in message and run_id in message
    async with mcp_session(tenant.server, tenant.key, mode="auto") as anonymous:
        searched = await call_ok(anonymous, "fhir_search", {"resource_type": "Patient"})
        assert searched["acted_on"]["base"] == "tenant"
        assert "no MCP session and sends no Mcp-Client-Id" in searched["acted_on"]["note"]
        message = await call_error(anonymous, "finish_test_run", {})
        assert "no Mcp-Client-Id" in message and run_id in message
        # Its own run is not its current run either: the hint says to pass run_id.
        own = await call_ok(anonymous, "start_test_run", {"scenario_id": SCENARIO})
        assert f"pass run_id='{own['run_id']}' to every tool" in own["hint"]
        searched = await call_ok(anonymous, "fhir_search", {"resource_type": "Patient"})
        assert searched["acted_on"]["base"] == "tenant"
        assert {r["run_id"] for r in searched["acted_on"]["live_runs"]} == {
            run_id,
            own["run_id"],
        }
        message = await call_error(anonymous, "start_test_run", {"run_id": own["run_id"]})
        assert "no current run to adopt into" in message
        named = await call_ok(anonymous, "get_test_run", {"run_id": own["run_id"]})
        assert named["status"] == "live"
        await call_ok(anonymous, "finish_test_run", {"run_id": own["run_id"]})
    # A session with the same id as a client id is someone else.
    async with mcp_session(tenant.server, tenant.key) as session:
        message = await call_error(session, "get_test_run", {})
        assert "no current run in this session" in message
    async with mcp_session(tenant.server, tenant.key, mode="auto", client_id=x_id) as x_last:
        final = await call_ok(x_last, "finish_test_run", {})
        assert final["run_id"] == run_id
        message = await call_error(x_last, "get_test_run", {})
        assert "no current run for this client" in message


async def test_a_run_started_over_rest_is_adopted(tenant: TenantHandle) -> None:
    rest = await _rest_start(tenant)
    async with (
        mcp_session(tenant.server, tenant.key) as adopter,
        mcp_session(tenant.server, tenant.key) as bystander,
    ):
        before = await call_ok(adopter, "fhir_search", {"resource_type": "Patient"})
        assert before["acted_on"]["base"] == "tenant"  # never adopted silently
        adopted = await call_ok(adopter, "start_test_run", {"run_id": rest["id"]})
        assert adopted["run_id"] == rest["id"] and adopted["status"] == "live"
        assert adopted["fixture"] == rest["fixture"] and adopted["brief"]
        assert "now act on the adopted run" in adopted["hint"]
        state = await call_ok(adopter, "get_test_run", {})
        assert state["run_id"] == rest["id"]
        patient_id = rest["fixture"]["patient"].split("/")[1]
        read = await call_ok(adopter, "fhir_read", {"resource_type": "Patient", "id": patient_id})
        assert read["acted_on"]["base"] == "run" and read["acted_on"]["run_id"] == rest["id"]
        assert read["acted_on"]["fhir_base"] == adopted["fhir_base"]
        other = await call_ok(bystander, "fhir_search", {"resource_type": "Patient"})
        assert other["acted_on"]["base"] == "tenant"

        # A stateless client adopts by its Mcp-Client-Id too.
        async with mcp_session(
            tenant.server, tenant.key, mode="auto", client_id=uuid.uuid4().hex
        ) as stateless:
            taken = await call_ok(stateless, "start_test_run", {"run_id": rest["id"]})
            assert taken["run_id"] == rest["id"]
            searched = await call_ok(stateless, "fhir_search", {"resource_type": "Patient"})
            assert searched["acted_on"]["run_id"] == rest["id"]

        final = await call_ok(adopter, "finish_test_run", {})
        assert final["run_id"] == rest["id"] and final["status"] != "live"
        message = await call_error(adopter, "get_test_run", {})
        assert "no current run in this session" in message
    calls = await trace_of(tenant, rest["id"])
    assert {c["transport"] for c in calls} == {"mcp"}


async def test_adopting_an_ended_unknown_or_foreign_run_is_an_error(
    tenant: TenantHandle, db: Any
) -> None:
    ended = await _rest_start(tenant)
    await _rest_cancel(tenant, ended["id"])
    other = await make_tenant(db, tenant.server, "mcp-owner")
    foreign = await _rest_start(other)
    try:
        async with mcp_session(tenant.server, tenant.key) as client:
            message = await call_error(client, "start_test_run", {"run_id": ended["id"]})
            assert f"run {ended['id']} has ended (cancelled) and cannot be adopted" in message
            message = await call_error(client, "start_test_run", {"run_id": "no-such-run"})
            assert message.startswith("404 not found"), message
            message = await call_error(client, "start_test_run", {"run_id": foreign["id"]})
            assert message.startswith("404 not found"), message
            message = await call_error(client, "start_test_run", {"run_id": "../etc"})
            assert "run_id '../etc' is not valid" in message
            message = await call_error(
                client, "start_test_run", {"run_id": foreign["id"], "scenario_id": SCENARIO}
            )
            assert "pass either run_id or scenario_id" in message
            message = await call_error(client, "start_test_run", {})
            assert "scenario_id: required" in message
            # Nothing was adopted: still no current run.
            message = await call_error(client, "get_test_run", {})
            assert "no current run in this session" in message
            assert foreign["id"] not in message  # another tenant's runs are never listed
    finally:
        await _rest_cancel(other, foreign["id"])


async def test_client_id_header_is_checked(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(
            tenant.server + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                **tenant.headers,
                "Accept": "application/json, text/event-stream",
                "Mcp-Client-Id": "x" * 200,
            },
        )
    assert r.status_code == 400 and "Mcp-Client-Id" in r.json()["detail"]
