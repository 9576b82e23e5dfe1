"""Runs over real HTTP with a scripted agent: pass, near miss, no-op, races, cancel,
data deletion, run views, limits and tenant isolation."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fhirpy import AsyncFHIRClient

from app.db import Database, Scopes
from app.runs import repository as runs_repository
from app.runs import service as runs_service
from app.tenants.quota import QuotaGuard, RunLimits
from tests.conftest import TenantHandle, make_tenant

SCENARIO = "scheduling.book-named-practitioner"
CHEN = "Practitioner/demo-canonical-prac-chen"
PATEL = "Practitioner/demo-canonical-prac-patel"


def api(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    )


async def start(tenant: TenantHandle, **body: Any) -> dict[str, Any]:
    async with api(tenant) as client:
        r = await client.post("/runs", json={"scenarioId": SCENARIO, **body})
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    return run


async def wait_for(
    tenant: TenantHandle, run_id: str, statuses: set[str], within: float = 15
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    async with api(tenant) as client:
        while True:
            view: dict[str, Any] = (await client.get(f"/runs/{run_id}")).json()
            if view["status"] in statuses or time.monotonic() > deadline:
                return view
            await asyncio.sleep(0.1)


async def book(run: dict[str, Any], tenant: TenantHandle, practitioner: str) -> str:
    """The scripted agent: looks up free slots with fhirpy on the run's base and books."""
    fhir = AsyncFHIRClient(run["fhirBase"], authorization=f"Bearer {tenant.key}")
    patient_ref = run["fixture"]["patient"]
    schedule = "Schedule/demo-canonical-sched-" + practitioner.rsplit("-", 1)[1]
    slots = await fhir.resources("Slot").search(schedule=schedule, status="free").limit(50).fetch()
    start = datetime.now(UTC) + timedelta(hours=1)
    slot = next(s for s in slots if datetime.fromisoformat(s["start"]) > start)
    appointment = fhir.resource(
        "Appointment",
        status="booked",
        start=slot["start"],
        end=slot["end"],
        slot=[{"reference": f"Slot/{slot['id']}"}],
        serviceType=[{"text": "Annual physical"}],
        participant=[
            {"actor": {"reference": patient_ref}, "status": "accepted"},
            {"actor": {"reference": practitioner}, "status": "accepted"},
        ],
    )
    await appointment.save()
    return str(appointment.id)


async def test_start_returns_the_contract_and_no_expectations(tenant: TenantHandle) -> None:
    run = await start(tenant)
    assert run["id"].startswith("run_")
    assert run["status"] == "live"
    assert run["mode"] == "agent"
    assert "Rivera" in run["brief"]
    assert run["fixture"]["patient"].startswith("Patient/")
    assert run["fhirBase"].endswith(f"/api/testing/runs/{run['id']}/fhir/r4")
    assert datetime.fromisoformat(run["deadline"]) > datetime.fromisoformat(run["startedAt"])
    assert "expectations" not in run
    pid = run["fixture"]["patient"].split("/")[1]
    assert pid in run["brief"]
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        patient = (await client.get(f"{run['fhirBase']}/{run['fixture']['patient']}")).json()
    assert patient["name"][0]["family"] == "Rivera"
    assert {"system": "urn:understudy:source", "code": "test-run"} in [
        {"system": t.get("system"), "code": t.get("code")} for t in patient["meta"].get("tag", [])
    ]


async def test_scripted_agent_passes_quickly(tenant: TenantHandle) -> None:
    run = await start(tenant)
    live = await wait_for(tenant, run["id"], {"live"})
    assert "expectations" not in live and "passed" not in live
    began = time.monotonic()
    await book(run, tenant, CHEN)
    final = await wait_for(tenant, run["id"], {"passed", "failed", "timed_out"})
    assert final["status"] == "passed", final
    assert time.monotonic() - began < 5
    booked = next(e for e in final["expectations"] if e["id"] == "booked")
    assert booked["passed"] is True
    assert booked["evidence"]["matches"][0].startswith("Appointment/")
    assert final["score"] > 0


async def test_wrong_practitioner_fails_naming_the_clause(tenant: TenantHandle) -> None:
    run = await start(tenant)
    await book(run, tenant, PATEL)
    async with api(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed"
    assert final["passed"] is False
    booked = next(e for e in final["expectations"] if e["id"] == "booked")
    assert booked["passed"] is False
    assert booked["evidence"]["closest"].startswith("Appointment/")
    failing = [c for c in booked["evidence"]["clauses"] if not c["holds"]]
    assert any("demo-canonical-prac-chen" in c["where"] for c in failing)
    guard = next(e for e in final["expectations"] if e["id"] == "no-other-practitioner")
    assert guard["passed"] is False


async def test_a_collateral_change_fails_naming_what_changed(tenant: TenantHandle) -> None:
    """Right booking, plus the patient's phone number rewritten "while I was at it"."""
    run = await start(tenant)
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        ref = f"{run['fhirBase']}/{run['fixture']['patient']}"
        patient = (await client.get(ref)).json()
        patient["telecom"] = [{"system": "phone", "value": "555-0199"}]
        assert (await client.put(ref, json=patient)).status_code == 200
    await book(run, tenant, CHEN)
    async with api(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed"
    guard = next(e for e in final["expectations"] if e["type"] == "changes")
    assert guard["passed"] is False
    assert f"updated {run['fixture']['patient']} (telecom" in guard["detail"]
    booked = next(e for e in final["expectations"] if e["id"] == "booked")
    assert booked["passed"] is True
    assert any("(by booked)" in m for m in guard["evidence"]["matches"])


async def test_extra_work_right_after_the_job_is_still_graded(tenant: TenantHandle) -> None:
    """A pass waits for the agent to go quiet: a collateral edit made after the worker saw
    every check hold (within the settle window) still fails the run."""
    run = await start(tenant)
    await book(run, tenant, CHEN)
    # Until a pass saw every required check hold (a condition, not a fixed wait: the edit
    # must land inside the 1 s quiet that follows, however loaded the machine is).
    deadline = time.monotonic() + 15
    async with api(tenant) as client:
        while True:
            holding = (await client.get(f"/runs/{run['id']}")).json()
            progress = holding.get("progress") or {}
            if holding["status"] != "live" or time.monotonic() > deadline:
                break
            if progress.get("requiredTotal") and (
                progress.get("requiredHolding") == progress["requiredTotal"]
            ):
                break
            await asyncio.sleep(0.02)
    assert holding["status"] == "live"  # every check holds, but the agent may not be done
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        ref = f"{run['fhirBase']}/{run['fixture']['patient']}"
        patient = (await client.get(ref)).json()
        patient["telecom"] = [{"system": "phone", "value": "555-0199"}]  # "while I was at it"
        assert (await client.put(ref, json=patient)).status_code == 200
    final = await wait_for(tenant, run["id"], {"passed", "failed", "timed_out"}, within=2)
    assert final["status"] == "live", "a failing check keeps the run live"
    async with api(tenant) as client:
        final = (await client.post(f"/runs/{run['id']}/finish")).json()
    assert final["status"] == "failed"
    failing = {e["id"] for e in final["expectations"] if e["passed"] is False}
    # Both guards see the collateral edit: the hand-written one and the comparison with the
    # reference solution's end state.
    assert failing == {"nothing-else-changed", "matches-reference"}


async def test_a_quiet_agent_passes_once_the_settle_window_is_over(tenant: TenantHandle) -> None:
    run = await start(tenant)
    began = time.monotonic()
    await book(run, tenant, CHEN)
    final = await wait_for(tenant, run["id"], {"passed", "failed", "timed_out"})
    assert final["status"] == "passed"
    assert time.monotonic() - began >= 1.0  # the test settings' settle_seconds


async def test_doing_nothing_times_out(tenant: TenantHandle, db: Database) -> None:
    run = await start(tenant, timeoutSeconds=30)
    # Let the deadline pass without waiting for it: the worker's tick ends the run.
    await db.pool.execute(
        "UPDATE run SET deadline = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2",
        tenant.id,
        run["id"],
    )
    final = await wait_for(tenant, run["id"], {"timed_out", "passed", "failed"}, within=20)
    assert final["status"] == "timed_out"
    assert final["passed"] is False


async def test_finish_and_tick_race_to_one_verdict(tenant: TenantHandle, db: Database) -> None:
    run = await start(tenant)
    await book(run, tenant, CHEN)
    async with api(tenant) as client:
        finishes, ticks = await asyncio.gather(
            asyncio.gather(*(client.post(f"/runs/{run['id']}/finish") for _ in range(4))),
            asyncio.gather(
                *(runs_service.grade_run(Scopes(db.pool), tenant.id, run["id"]) for _ in range(4))
            ),
        )
    statuses = {r.json()["status"] for r in finishes} | {r.status for r in ticks}
    assert statuses == {"passed"}
    rows = await db.pool.fetch(
        "SELECT status, finished_at FROM run WHERE tenant_id = $1 AND id = $2",
        tenant.id,
        run["id"],
    )
    assert len(rows) == 1 and rows[0]["status"] == "passed"


async def test_a_regrade_job_is_skipped_when_a_later_grading_saw_its_changes(
    tenant: TenantHandle, db: Database
) -> None:
    """A regrade job names when its changes had all committed (`unless_graded_since`): a
    grading taken at or after that moment, with no change since, covers them, so the job
    grades nothing; one taken before it does not, nor one a later change came after.
    (Started, changed and graded without jobs: nothing else grades it.)"""
    scopes = Scopes(db.pool)
    limits = RunLimits(20, QuotaGuard(db.pool, 10_000))
    async with scopes.transaction() as tx:
        run = await runs_service.start_run(
            tx, tenant.id, runs_service.StartRequest(SCENARIO, None, None, None, 600), limits=limits
        )
    await runs_service.grade_run(scopes, tenant.id, run.id)

    async def graded_at() -> datetime:
        value: datetime = await db.pool.fetchval(
            "SELECT graded_at FROM run WHERE tenant_id = $1 AND id = $2", tenant.id, run.id
        )
        return value

    last = await graded_at()
    skipped = await runs_service.grade_run(scopes, tenant.id, run.id, unless_graded_since=last)
    assert skipped.graded_at == last == await graded_at()
    regraded = await runs_service.grade_run(
        scopes, tenant.id, run.id, unless_graded_since=last + timedelta(milliseconds=1)
    )
    assert regraded.status == "live" and regraded.graded_at is not None
    assert regraded.graded_at > last and await graded_at() == regraded.graded_at
    last = regraded.graded_at
    async with scopes.transaction() as tx:
        await runs_service.mark_runs_changed(tx, tenant.id, {run.id})
    changed = await runs_service.grade_run(scopes, tenant.id, run.id, unless_graded_since=last)
    assert changed.graded_at is not None and changed.graded_at > last
    async with api(tenant) as client:
        assert (await client.post(f"/runs/{run.id}/cancel")).status_code == 200


async def test_cancel(tenant: TenantHandle) -> None:
    run = await start(tenant)
    async with api(tenant) as client:
        r = await client.post(f"/runs/{run['id']}/cancel")
        assert r.json()["status"] == "cancelled"
        again = await client.post(f"/runs/{run['id']}/cancel")
        assert again.status_code == 409
        finish = await client.post(f"/runs/{run['id']}/finish")
        assert finish.json()["status"] == "cancelled"


async def test_delete_data_removes_the_run_resources(tenant: TenantHandle) -> None:
    run = await start(tenant)
    async with api(tenant) as client:
        live_delete = await client.delete(f"/runs/{run['id']}/data")
        assert live_delete.status_code == 409
    appointment = await book(run, tenant, CHEN)
    async with api(tenant) as client:
        await client.post(f"/runs/{run['id']}/finish")
        removed = (await client.delete(f"/runs/{run['id']}/data")).json()
    assert removed["resourcesRemoved"] >= 2
    async with httpx.AsyncClient(base_url=tenant.fhir_base, headers=tenant.headers) as fhir:
        assert (await fhir.get(f"/{run['fixture']['patient']}")).status_code == 404
        assert (await fhir.get(f"/Appointment/{appointment}")).status_code == 404
        assert (await fhir.get(f"/Appointment/{appointment}/_history")).status_code == 404
        # The canonical directory the run used is untouched.
        assert (await fhir.get("/Practitioner/demo-canonical-prac-chen")).status_code == 200


async def test_run_views_hide_other_runs(tenant: TenantHandle) -> None:
    runs = await asyncio.gather(*(start(tenant) for _ in range(3)))
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        for run in runs:
            found = (await client.get(f"{run['fhirBase']}/Patient?name=Alex Rivera")).json()
            assert found["total"] == 1
            assert f"Patient/{found['entry'][0]['resource']['id']}" == run["fixture"]["patient"]
            other = runs[0] if run is not runs[0] else runs[1]
            hidden = await client.get(f"{run['fhirBase']}/{other['fixture']['patient']}")
            assert hidden.status_code == 404
            # Shared data (the canonical directory) is visible in every view.
            chen = await client.get(f"{run['fhirBase']}/{CHEN}")
            assert chen.status_code == 200
        everyone = (await client.get(f"{tenant.fhir_base}/Patient?name=Alex Rivera")).json()
        assert everyone["total"] == 3


async def test_live_run_limit(tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        for _ in range(20):
            r = await client.post("/runs", json={"scenarioId": SCENARIO})
            assert r.status_code == 201, r.text
        over = await client.post("/runs", json={"scenarioId": SCENARIO})
    assert over.status_code == 429
    assert "live run limit" in over.json()["detail"]


async def test_bad_start_requests(tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        assert (await client.post("/runs", json={"scenarioId": "nope"})).status_code == 404
        bad_mode = await client.post("/runs", json={"scenarioId": SCENARIO, "mode": "workflow"})
        assert bad_mode.status_code == 422
        assert "workflow" in bad_mode.json()["detail"]
        bad_variant = await client.post("/runs", json={"scenarioId": SCENARIO, "variant": "nope"})
        assert bad_variant.status_code == 422
        short = await client.post("/runs", json={"scenarioId": SCENARIO, "timeoutSeconds": 5})
        assert short.status_code == 422
        assert (await client.post("/runs", json={})).status_code == 422
        assert (await client.get("/runs/run_nope")).status_code == 404


async def test_runs_are_invisible_to_other_tenants(
    tenant: TenantHandle, db: Database, server_url: str
) -> None:
    run = await start(tenant)
    other = await make_tenant(db, server_url)
    async with api(other) as client:
        assert (await client.get(f"/runs/{run['id']}")).status_code == 404
        assert (await client.post(f"/runs/{run['id']}/finish")).status_code == 404
        assert (await client.post(f"/runs/{run['id']}/cancel")).status_code == 404
        assert (await client.delete(f"/runs/{run['id']}/data")).status_code == 404
        assert (await client.get(f"/runs/{run['id']}/trace")).status_code == 404
        assert (await client.get("/runs")).json()["runs"] == []
    async with httpx.AsyncClient(headers=other.headers) as client:
        view = await client.get(f"{run['fhirBase']}/Patient")
        assert view.status_code == 404


async def test_list_filters(tenant: TenantHandle) -> None:
    first = await start(tenant, label="nightly-1")
    second = await start(tenant, label="nightly-2")
    async with api(tenant) as client:
        await client.post(f"/runs/{second['id']}/cancel")
        by_label = (await client.get("/runs", params={"label": "nightly-1"})).json()["runs"]
        assert [r["id"] for r in by_label] == [first["id"]]
        cancelled = (await client.get("/runs", params={"status": "cancelled"})).json()["runs"]
        assert [r["id"] for r in cancelled] == [second["id"]]
        by_scenario = (await client.get("/runs", params={"scenarioId": SCENARIO})).json()
        assert {r["id"] for r in by_scenario["runs"]} == {first["id"], second["id"]}
        assert (await client.get("/runs", params={"limit": 0})).status_code == 422


async def test_a_settling_run_is_the_ticks_to_end_if_its_job_is_lost(
    tenant: TenantHandle, db: Database
) -> None:
    """Every check holds and the pass waits for the quiet: the wait's end is stored on the
    run, so the grading tick ends it even when the deferred job was lost (Redis away, a
    worker killed): the run would otherwise stay live until its deadline and time out."""
    run = await start(tenant)
    await book(run, tenant, CHEN)

    async def settling() -> Any:
        return await db.pool.fetchval(
            "SELECT settle_until FROM run WHERE tenant_id = $1 AND id = $2 AND status = 'live'",
            tenant.id,
            run["id"],
        )

    deadline = time.monotonic() + 5
    while (until := await settling()) is None:
        assert time.monotonic() < deadline, "no pass waited for the quiet"
        await asyncio.sleep(0.05)
    due = {r["id"] for r in await runs_repository.runs_due_grading(db.pool, now=until)}
    assert run["id"] in due  # nothing changed since the pass: only the wait's end is news
    final = await wait_for(tenant, run["id"], {"passed", "failed", "timed_out"})
    assert final["status"] == "passed"
    assert (
        await db.pool.fetchval(
            "SELECT settle_until FROM run WHERE tenant_id = $1 AND id = $2", tenant.id, run["id"]
        )
        == until
    )  # the ended run keeps what its last pass stored; the tick skips ended runs
