"""The MCP server end to end: the official SDK client over real HTTP against the test
server (uvicorn on 127.0.0.1), driving runs of built-in scenarios to a verdict."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.scenarios.calls import capture_kind
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle, make_tenant
from tests.mcp.client import call_error, call_ok, mcp_session, replay_oracle

TOOLS = {
    "list_test_scenarios",
    "start_test_run",
    "get_test_run",
    "finish_test_run",
    "message_patient",
    "get_patient_messages",
    "send_sms",
    "send_email",
    "fhir_read",
    "fhir_search",
    "fhir_create",
    "fhir_update",
    "fhir_patch",
    "fhir_delete",
    "find_appointments",
    "check_eligibility",
}
# MCP has no tool for the outside services a scenario stubs (an agent calls those over
# HTTP, docs/capture.md): a reference that calls one is replayed over REST only.
AGENT_SCENARIOS = sorted(
    scenario_id
    for scenario_id, loaded in builtin_scenarios().items()
    if "agent" in [str(m) for m in loaded.scenario.modes]
    and not any(capture_kind(c.path) == "integration" for c in loaded.scenario.oracle)
)
CHEN = "Practitioner/demo-canonical-prac-chen"


async def trace_of(tenant: TenantHandle, run_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        r = await client.get(f"{tenant.server}/api/testing/runs/{run_id}/trace")
    assert r.status_code == 200, r.text
    calls: list[dict[str, Any]] = r.json()["calls"]
    return calls


def expectation(run: dict[str, Any], expectation_id: str) -> dict[str, Any]:
    def walk(items: list[dict[str, Any]]) -> dict[str, Any] | None:
        for item in items:
            if item["id"] == expectation_id:
                return item
            found = walk(item.get("children") or [])
            if found is not None:
                return found
        return None

    found = walk(run["expectations"])
    assert found is not None, expectation_id
    return found


async def test_tools_are_listed_with_descriptions(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.output_schema is not None, tool.name
        properties = tool.input_schema.get("properties", {})
        assert "ctx" not in properties
        for name, schema in properties.items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"


async def test_key_is_required(tenant: TenantHandle) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as client:
        for path in ("/mcp", "/mcp/"):
            r = await client.post(tenant.server + path, json=initialize, headers=headers)
            assert r.status_code == 401, r.text
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization" in r.json()["detail"]
        r = await client.post(
            tenant.server + "/mcp",
            json=initialize,
            headers={**headers, "Authorization": "Bearer not-a-key"},
        )
        assert r.status_code == 401
        assert "unknown or revoked" in r.json()["detail"]
        ok = await client.post(
            tenant.server + "/mcp", json=initialize, headers={**headers, **tenant.headers}
        )
        assert ok.status_code == 200, ok.text
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 its own way
        async with mcp_session(tenant.server, "not-a-key") as client:
            await client.list_tools()


async def test_host_header_is_checked(tenant: TenantHandle) -> None:
    """DNS-rebinding protection: a Host the settings don't allow is refused."""
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(
            tenant.server + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                **tenant.headers,
                "Host": "evil.example",
                "Accept": "application/json, text/event-stream",
            },
        )
    assert r.status_code == 421


async def test_list_scenarios_filters(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        everything = await call_ok(client, "list_test_scenarios", {})
        scheduling = await call_ok(client, "list_test_scenarios", {"category": "scheduling"})
        workflow = await call_ok(client, "list_test_scenarios", {"mode": "workflow"})
    ids = {s["id"] for s in everything["scenarios"]}
    assert set(builtin_scenarios()) <= ids
    assert scheduling["scenarios"]
    assert all(s["category"] == "scheduling" for s in scheduling["scenarios"])
    assert workflow["scenarios"]
    assert all("workflow" in s["modes"] for s in workflow["scenarios"])
    assert len(scheduling["scenarios"]) < len(everything["scenarios"])


@pytest.mark.parametrize("scenario_id", AGENT_SCENARIOS)
async def test_reference_solution_over_mcp_passes(tenant: TenantHandle, scenario_id: str) -> None:
    """Every agent scenario's reference solution, made through MCP tools only, passes:
    MCP calls count in grading exactly as the REST calls they stand for."""
    scenario = builtin_scenarios()[scenario_id].scenario
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(client, "start_test_run", {"scenario_id": scenario_id})
        assert run["status"] == "live"
        assert run["brief"] and run["fixture"]
        assert run["fhir_base"].endswith(f"/api/testing/runs/{run['run_id']}/fhir/r4")
        await replay_oracle(client, run, scenario)
        final = await call_ok(client, "finish_test_run", {})
    failing = [e for e in final["expectations"] if e["required"] and not e["passed"]]
    assert final["status"] == "passed", failing
    assert final["passed"] is True
    calls = await trace_of(tenant, run["run_id"])
    assert calls
    # Every call came over MCP (a send tool's row names its capture's transport).
    assert {c["transport"] for c in calls} <= {"mcp", "sms", "email"}
    assert all(c["path"] == "/mcp" for c in calls if c["transport"] != "mcp")


async def test_doing_nothing_over_mcp_fails(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        for _ in range(100):  # the worker grades a new run within about a second
            live = await call_ok(client, "get_test_run", {})
            if live["progress"]["required_total"] is not None:
                break
            await asyncio.sleep(0.1)
        assert live["status"] == "live"
        assert live["progress"]["required_holding"] < live["progress"]["required_total"]
        final = await call_ok(client, "finish_test_run", {})
    assert final["status"] == "failed"
    booked = expectation(final, "booked")
    assert booked["passed"] is False
    assert booked["detail"]


async def test_a_run_started_over_mcp_shows_its_label_and_revision(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        started = await call_ok(
            client,
            "start_test_run",
            {
                "scenario_id": "scheduling.book-named-practitioner",
                "label": "mcp agent",
                "revision": "agent v3",
            },
        )
        assert started["label"] == "mcp agent" and started["revision"] == "agent v3"
        live = await call_ok(client, "get_test_run", {})
        assert live["revision"] == "agent v3"
        final = await call_ok(client, "finish_test_run", {})
        assert final["revision"] == "agent v3"
        bare = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        assert bare["label"] is None and bare["revision"] is None
        message = await call_error(
            client,
            "start_test_run",
            {"scenario_id": "scheduling.book-named-practitioner", "revision": "x" * 101},
        )
        assert "revision" in message and "100 characters" in message, message
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        r = await http.get(f"{tenant.server}/api/testing/runs/{started['run_id']}")
    assert r.json()["revision"] == "agent v3"


async def _book_with_chen(
    client: Any, run: dict[str, Any], *, search_first: bool
) -> dict[str, Any]:
    patient = run["fixture"]["patient"]
    start = datetime.now(UTC) + timedelta(days=2)
    if search_first:
        schedules = await call_ok(
            client, "fhir_search", {"resource_type": "Schedule", "params": {"actor": CHEN}}
        )
        assert schedules["total"] >= 1
        page = await call_ok(
            client,
            "fhir_search",
            {
                "resource_type": "Slot",
                "params": {
                    "schedule": f"Schedule/{schedules['resources'][0]['id']}",
                    "status": "free",
                    "start": [f"ge{start.date().isoformat()}"],
                    "_sort": "start",
                    "_count": "50",
                },
            },
        )
        assert page["resources"], page
        slot = next(
            s
            for s in page["resources"]
            if datetime.fromisoformat(s["start"]).weekday() < 5
            and 14 <= datetime.fromisoformat(s["start"]).astimezone(UTC).hour < 16
        )
        begin, end, slots = slot["start"], slot["end"], [{"reference": f"Slot/{slot['id']}"}]
    else:
        free = await call_ok(
            client, "find_appointments", {"practitioner": CHEN, "duration_minutes": 30}
        )
        begin, end, slots = (
            free["proposals"][0]["start"],
            free["proposals"][0]["end"],
            free["proposals"][0]["slot"],
        )
    created = await call_ok(
        client,
        "fhir_create",
        {
            "resource": {
                "resourceType": "Appointment",
                "status": "booked",
                "description": "Annual physical",
                "start": begin,
                "end": end,
                "slot": slots,
                "participant": [
                    {"actor": {"reference": patient}, "status": "accepted"},
                    {"actor": {"reference": CHEN}, "status": "accepted"},
                ],
            }
        },
    )
    assert created["outcome"] == "created"
    assert created["reference"].startswith("Appointment/")
    return dict(created)


async def test_api_call_expectation_satisfied_by_mcp_search(tenant: TenantHandle, db: Any) -> None:
    """`checked-availability` wants a GET /Slot (or $find) before the booking: an MCP
    fhir_search of Slots is that call; booking without looking first leaves it unmet."""
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        await _book_with_chen(client, run, search_first=True)
        searched = await call_ok(client, "finish_test_run", {})

        run2 = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        blind = await _blind_booking(client, run2)
        unsearched = await call_ok(client, "finish_test_run", {})

    assert searched["status"] == "passed", searched["expectations"]
    # What the tool answered is kept as the REST answer it stands for (what `grounded`
    # reads): the Slot search's Bundle, under the run.
    await trace_of(tenant, run["run_id"])  # reading the trace flushes it
    kept = await db.pool.fetch(
        "SELECT path, response, transport FROM trace_call WHERE tenant_id = $1 "
        "AND run_id = $2 AND method = 'GET' AND response IS NOT NULL",
        tenant.id,
        run["run_id"],
    )
    slot_searches = [r for r in kept if r["path"].endswith("/Slot")]
    assert slot_searches and all(r["transport"] == "mcp" for r in slot_searches)
    assert '"resourceType":"Bundle"' in slot_searches[0]["response"].replace(" ", "")
    got = expectation(searched, "checked-availability-get")
    assert got["passed"] is True, got
    assert any("GET /Slot" in m and "via mcp" in m for m in got["evidence"]["matches"])
    assert blind["outcome"] == "created"
    assert expectation(unsearched, "checked-availability")["passed"] is False
    assert expectation(unsearched, "checked-availability-get")["passed"] is False


async def _blind_booking(client: Any, run: dict[str, Any]) -> dict[str, Any]:
    """A booking made without looking at free times (the times are guessed)."""
    day = datetime.now(UTC) + timedelta(days=3)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    begin = day.replace(hour=15, minute=0, second=0, microsecond=0)
    result: dict[str, Any] = await call_ok(
        client,
        "fhir_create",
        {
            "resource": {
                "resourceType": "Appointment",
                "status": "booked",
                "start": begin.isoformat().replace("+00:00", "Z"),
                "end": (begin + timedelta(minutes=30)).isoformat().replace("+00:00", "Z"),
                "participant": [
                    {"actor": {"reference": run["fixture"]["patient"]}, "status": "accepted"},
                    {"actor": {"reference": CHEN}, "status": "accepted"},
                ],
            }
        },
    )
    return result


async def test_patient_sim_scenario_over_mcp(tenant: TenantHandle) -> None:
    """Ask the simulated patient, read her answer, rebook to suit it, confirm: passed."""
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.reschedule-ask-day"}
        )
        fixture = run["fixture"]
        thread = await call_ok(client, "get_patient_messages", {"wait_seconds": 0})
        assert [m["direction"] for m in thread["messages"]] == ["from_patient"]
        assert thread["awaiting_reply"] is False
        opening = thread["messages"][0]

        sent = await call_ok(
            client,
            "message_patient",
            {
                "text": "Hi Elena, no problem, we can move your blood pressure follow-up "
                "with Dr. Chen. What day and time would work best for you?",
                "in_response_to": opening["id"],
                "sender": "Organization/demo-canonical-org",
            },
        )
        assert sent["patient"] == fixture["patient"]
        thread = await call_ok(client, "get_patient_messages", {"wait_seconds": 20})
        directions = [m["direction"] for m in thread["messages"]]
        assert directions == ["from_patient", "to_patient", "from_patient"], thread
        answer = thread["messages"][-1]
        assert "afternoon" in answer["text"]
        assert answer["in_response_to"] == [sent["reference"]]
        assert thread["awaiting_reply"] is False

        free = await call_ok(
            client,
            "find_appointments",
            {"practitioner": CHEN, "duration_minutes": 30, "end": _days_on(12)},
        )
        proposal = next(
            p
            for p in free["proposals"]
            if 14 <= datetime.fromisoformat(p["start"]).astimezone(UTC).hour < 16
        )
        new = await call_ok(
            client,
            "fhir_create",
            {
                "resource": {
                    "resourceType": "Appointment",
                    "status": "booked",
                    "description": "Blood pressure follow-up (rescheduled)",
                    "start": proposal["start"],
                    "end": proposal["end"],
                    "slot": proposal["slot"],
                    "participant": [
                        {"actor": {"reference": fixture["patient"]}, "status": "accepted"},
                        {"actor": {"reference": CHEN}, "status": "accepted"},
                    ],
                }
            },
        )
        old_type, old_id = fixture["appt"].split("/")
        cancelled = await call_ok(
            client,
            "fhir_patch",
            {"resource_type": old_type, "id": old_id, "patch": {"status": "cancelled"}},
        )
        assert cancelled["resource"]["status"] == "cancelled"
        await call_ok(
            client,
            "message_patient",
            {
                # The time it booked, as a person writes it (the message checks hold the
                # confirmation to the booked start).
                "text": "Thanks, Elena. To confirm: your new appointment with Dr. Chen is on "
                f"{_spoken(proposal['start'])}, an afternoon time after 2 pm as you asked. Your "
                "original appointment has been cancelled. Reply here if you need anything else.",
                "in_response_to": answer["id"],
            },
        )
        final = await call_ok(client, "finish_test_run", {})
    failing = [e for e in final["expectations"] if e["required"] and not e["passed"]]
    assert final["status"] == "passed", failing
    assert new["reference"] != fixture["appt"]
    asked = expectation(final, "asked")
    assert any("POST /Communication" in m and "via mcp" in m for m in asked["evidence"]["matches"])


def _spoken(instant: str) -> str:
    """ "Tuesday, December 8 at 02:30 PM" (UTC, the clinic's zone)."""
    moment = datetime.fromisoformat(instant).astimezone(UTC)
    return f"{moment:%A}, {moment:%B} {moment.day} at {moment:%I:%M %p}"


def _days_on(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


async def test_patient_sim_near_miss_over_mcp_fails(tenant: TenantHandle) -> None:
    """Rebooking without asking the patient first fails, over MCP as over REST."""
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.reschedule-ask-day"}
        )
        _, old_id = run["fixture"]["appt"].split("/")
        await call_ok(
            client,
            "fhir_patch",
            {"resource_type": "Appointment", "id": old_id, "patch": {"status": "cancelled"}},
        )
        final = await call_ok(client, "finish_test_run", {})
    assert final["status"] == "failed"
    assert expectation(final, "asked-patient")["passed"] is False


async def test_stateless_client_uses_its_run_when_it_names_itself(
    tenant: TenantHandle,
) -> None:
    """A client on the 2026 protocol has no MCP session: with an Mcp-Client-Id header the
    run it started last is its current run (as in a session); the run view hides the
    other run's copy of the same patient."""
    async with mcp_session(tenant.server, tenant.key, mode="auto", client_id="agent-1") as client:
        first = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        assert "now act on this run" in first["hint"]
        patient_type, patient_id = first["fixture"]["patient"].split("/")
        read = await call_ok(client, "fhir_read", {"resource_type": patient_type, "id": patient_id})
        assert read["reference"] == first["fixture"]["patient"]
        assert read["acted_on"]["run_id"] == first["run_id"]
        second = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        names = await call_ok(
            client, "fhir_search", {"resource_type": "Patient", "params": {"_count": "500"}}
        )
        assert names["acted_on"]["run_id"] == second["run_id"]
        ids = {r["id"] for r in names["resources"]}
        assert second["fixture"]["patient"].split("/")[1] in ids
        assert patient_id not in ids
        await call_ok(client, "finish_test_run", {"run_id": first["run_id"]})
        state = await call_ok(client, "get_test_run", {})
        assert state["run_id"] == second["run_id"]
        await call_ok(client, "finish_test_run", {})
        message = await call_error(client, "get_test_run", {})
        assert "no current run for this client (Mcp-Client-Id)" in message


async def test_tool_errors_are_readable(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        message = await call_error(client, "get_test_run", {})
        assert "no current run" in message and "start_test_run" in message
        message = await call_error(client, "start_test_run", {"scenario_id": "nope.nothing"})
        assert message.startswith("404 not found") and "nope.nothing" in message
        message = await call_error(
            client,
            "fhir_create",
            {"resource": {"resourceType": "Patient", "birthDate": "not-a-date"}},
        )
        assert message.startswith("400 bad request: Patient.birthDate: invalid date"), message
        message = await call_error(client, "fhir_create", {"resource": {"name": "x"}})
        assert message.startswith("resource.resourceType is missing")
        message = await call_error(client, "fhir_read", {"resource_type": "Patient", "id": "zz"})
        assert message.startswith("404 not found")
        message = await call_error(client, "fhir_read", {"resource_type": "../admin", "id": "zz"})
        assert "resource_type '../admin' is not valid" in message
        message = await call_error(
            client, "fhir_search", {"resource_type": "Patient", "params": {"shoe-size": "9"}}
        )
        assert "shoe-size" in message
        message = await call_error(
            client, "find_appointments", {"practitioner": CHEN, "duration_minutes": "long"}
        )
        assert "duration_minutes" in message and "valid integer" in message
        message = await call_error(
            client, "check_eligibility", {"patient": "Patient/x", "date": "tomorrow"}
        )
        assert (
            message.startswith("422 not valid") and "date: Input should be a valid date" in message
        )
        message = await call_error(
            client,
            "fhir_update",
            {
                "resource_type": "Patient",
                "id": "abc",
                "resource": {"resourceType": "Patient", "id": "abc"},
                "if_match": "7",
            },
        )
        assert message.startswith("412 version conflict (If-Match)"), message
        message = await call_error(client, "fhir_read", {"resource_type": "Patient"})
        assert "\nid\n" in message and "Field required" in message


async def test_runs_of_another_tenant_are_invisible(tenant: TenantHandle, db: Any) -> None:
    other = await make_tenant(db, tenant.server, "mcp-other")
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
    patient_type, patient_id = run["fixture"]["patient"].split("/")
    async with mcp_session(other.server, other.key) as client:
        message = await call_error(client, "get_test_run", {"run_id": run["run_id"]})
        assert message.startswith("404")
        message = await call_error(
            client,
            "fhir_read",
            {"resource_type": patient_type, "id": patient_id, "run_id": run["run_id"]},
        )
        assert message.startswith("404")
        message = await call_error(
            client, "fhir_read", {"resource_type": patient_type, "id": patient_id}
        )
        assert message.startswith("404")
        message = await call_error(client, "finish_test_run", {"run_id": run["run_id"]})
        assert message.startswith("404")


async def test_readme_demo_script_passes(tenant: TenantHandle) -> None:
    """scripts/mcp_demo.py (whose output is the README's transcript) passes its scenario."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).parents[2] / "scripts" / "mcp_demo.py"),
        tenant.server,
        tenant.key,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    text = output.decode()
    assert process.returncode == 0, text
    assert "→ start_test_run" in text and "← passed" in text


async def test_limits_come_back_as_tool_errors(tenant: TenantHandle) -> None:
    started: list[str] = []
    async with mcp_session(tenant.server, tenant.key) as client:
        try:
            for _ in range(20):
                run = await call_ok(
                    client, "start_test_run", {"scenario_id": "results.followup-task"}
                )
                started.append(run["run_id"])
            message = await call_error(
                client, "start_test_run", {"scenario_id": "results.followup-task"}
            )
        finally:
            async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
                for run_id in started:
                    await http.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel")
    assert message.startswith("429 limit reached"), message
    assert "20" in message


async def test_new_session_is_told_it_acts_on_the_tenant_and_which_runs_are_live(
    tenant: TenantHandle,
) -> None:
    """The Inspector case (one MCP session per CLI call): a run started in one session is
    not the current run of the next one; its tools say they act on the tenant base and
    list the live run, and passing its run_id acts on the run."""
    async with mcp_session(tenant.server, tenant.key) as first:
        run = await call_ok(
            first, "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
        )
        mine = await call_ok(first, "fhir_search", {"resource_type": "Patient"})
    assert mine["acted_on"]["base"] == "run"
    assert mine["acted_on"]["run_id"] == run["run_id"]
    assert mine["acted_on"]["fhir_base"] == run["fhir_base"]
    assert mine["acted_on"]["live_runs"] == []
    patient_id = run["fixture"]["patient"].split("/")[1]

    async with mcp_session(tenant.server, tenant.key) as second:
        tenant_wide = await call_ok(second, "fhir_search", {"resource_type": "Patient"})
        acted_on = tenant_wide["acted_on"]
        assert acted_on["base"] == "tenant"
        assert acted_on["run_id"] is None
        assert acted_on["fhir_base"] == tenant.fhir_base
        assert "no current run in this session" in acted_on["note"]
        assert "pass run_id" in acted_on["note"]
        assert [(r["run_id"], r["scenario_id"]) for r in acted_on["live_runs"]] == [
            (run["run_id"], "scheduling.book-named-practitioner")
        ]
        started = datetime.fromisoformat(acted_on["live_runs"][0]["started_at"])
        assert abs(started - datetime.fromisoformat(run["started_at"])) < timedelta(seconds=1)

        in_run = await call_ok(
            second, "fhir_search", {"resource_type": "Patient", "run_id": run["run_id"]}
        )
        assert in_run["acted_on"]["base"] == "run"
        assert in_run["acted_on"]["run_id"] == run["run_id"]
        assert in_run["acted_on"]["live_runs"] == []
        assert patient_id in {r["id"] for r in in_run["resources"]}
        # Every FHIR tool says where it acted, the tenant base included.
        read = await call_ok(second, "fhir_read", {"resource_type": "Patient", "id": patient_id})
        assert read["acted_on"]["base"] == "tenant"
        assert read["acted_on"]["live_runs"][0]["run_id"] == run["run_id"]
        free = await call_ok(
            second,
            "find_appointments",
            {"practitioner": CHEN, "duration_minutes": 30, "run_id": run["run_id"]},
        )
        assert free["acted_on"]["run_id"] == run["run_id"]
        eligibility = await call_ok(
            second,
            "check_eligibility",
            {"patient": run["fixture"]["patient"], "date": _days_on(1)},
        )
        assert eligibility["acted_on"]["base"] == "tenant"
        assert eligibility["acted_on"]["live_runs"][0]["run_id"] == run["run_id"]
        final = await call_ok(second, "finish_test_run", {"run_id": run["run_id"]})
        assert final["status"] == "failed"
        after = await call_ok(second, "fhir_search", {"resource_type": "Patient"})
        assert after["acted_on"]["live_runs"] == []
        assert "no current run" in after["acted_on"]["note"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_is_notified_in_both_protocols(tenant: TenantHandle, mode: str) -> None:
    """get_patient_messages reports progress while it waits for the reply, and
    finish_test_run while it grades, for 2025 (session) and 2026 (stateless) clients."""
    waited: list[tuple[float, float | None, str | None]] = []
    graded: list[tuple[float, float | None, str | None]] = []

    async def on_wait(progress: float, total: float | None, message: str | None) -> None:
        waited.append((progress, total, message))

    async def on_grade(progress: float, total: float | None, message: str | None) -> None:
        graded.append((progress, total, message))

    client_id = "progress-client" if mode == "auto" else None  # stateless: names itself
    async with mcp_session(tenant.server, tenant.key, mode=mode, client_id=client_id) as client:
        run = await call_ok(
            client, "start_test_run", {"scenario_id": "scheduling.reschedule-ask-day"}
        )
        await call_ok(
            client,
            "message_patient",
            {"text": "Hi Elena, what day and time would suit you for the follow-up?"},
        )
        asked_at = datetime.now(UTC)
        result = await client.call_tool(
            "get_patient_messages", {"wait_seconds": 20}, progress_callback=on_wait
        )
        assert not result.is_error
        thread = result.structured_content
        assert thread is not None
        assert thread["messages"][-1]["direction"] == "from_patient", thread
        replied = thread["messages"][-1]["sent"]
        done = await client.call_tool(
            "finish_test_run", {"run_id": run["run_id"]}, progress_callback=on_grade
        )
        assert not done.is_error
    # A reply written before the call began is returned at once (a loaded machine can be
    # slower than the patient): progress is owed for a wait, and said as a wait begins.
    already = replied is not None and datetime.fromisoformat(replied) <= asked_at
    assert waited or already, "no progress while waiting for the patient"
    assert all(m == "waiting for the patient's reply" and t == 20 for _, t, m in waited)
    assert graded == [(0, 1, "grading"), (1, 1, "graded")]


async def test_session_id_is_issued_and_ended_by_the_endpoint(tenant: TenantHandle) -> None:
    """The SDK runs stateless; the endpoint issues the session id on initialize (and only
    there), answers GET 405 (nothing is sent outside a request) and DELETE ends the
    session: its current run is forgotten."""
    headers = {**tenant.headers, "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    async with httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(tenant.server + "/mcp", json=initialize, headers=headers)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        again = await http.post(tenant.server + "/mcp", json=initialize, headers=headers)
        assert again.headers["mcp-session-id"] != session
        in_session = {**headers, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
        ping = await http.post(
            tenant.server + "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
            headers=in_session,
        )
        assert ping.status_code == 200 and "mcp-session-id" not in ping.headers
        started = await _rpc(
            http,
            tenant.server,
            in_session,
            "tools/call",
            {"name": "start_test_run", "arguments": {"scenario_id": "results.followup-task"}},
        )
        run_id = started["result"]["structuredContent"]["run_id"]
        state = await _rpc(
            http, tenant.server, in_session, "tools/call", {"name": "get_test_run", "arguments": {}}
        )
        assert state["result"]["structuredContent"]["run_id"] == run_id

        stream = await http.get(tenant.server + "/mcp", headers=in_session)
        assert stream.status_code == 405 and stream.headers["allow"] == "POST, DELETE"
        bad = await http.post(
            tenant.server + "/mcp",
            json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
            headers={**in_session, "Mcp-Session-Id": "x" * 200},
        )
        assert bad.status_code == 400 and "Mcp-Session-Id" in bad.json()["detail"]
        ended = await http.delete(tenant.server + "/mcp", headers=in_session)
        assert ended.status_code == 204
        state = await _rpc(
            http, tenant.server, in_session, "tools/call", {"name": "get_test_run", "arguments": {}}
        )
        assert state["result"]["isError"] is True
        assert "no current run" in state["result"]["content"][0]["text"]
        no_session = await http.delete(tenant.server + "/mcp", headers=headers)
        assert no_session.status_code == 400
        await http.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel", headers=tenant.headers)


async def _rpc(
    http: httpx.AsyncClient, server: str, headers: dict[str, str], method: str, params: Any
) -> dict[str, Any]:
    """One JSON-RPC request over streamable HTTP; the answer from its SSE stream."""
    r = await http.post(
        server + "/mcp",
        json={"jsonrpc": "2.0", "id": 9, "method": method, "params": params},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    for line in r.text.splitlines():
        if line.startswith("data: ") and '"id":9' in line.replace(" ", ""):
            answer: dict[str, Any] = orjson.loads(line.removeprefix("data: "))
            return answer
    raise AssertionError(f"no answer in {r.text!r}")
