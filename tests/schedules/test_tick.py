"""The worker's tick on a controllable clock (due times in 2031: the test server's own
worker, ticking on the real clock, never reaches them): once per due time with two
workers ticking at once, skipped while the previous eval runs, labelled with its due
time, compared with the schedule's previous completed eval, missed due times recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from app.db import Database, Scopes, open_database
from app.evals import service as evals_service
from app.schedules import service
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.console.conftest import sign_in
from tests.evals.test_evals import api_client, drive_eval
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_eval_events import wait_for_event
from tests.webhooks.test_webhooks import api, subscribe

SCENARIO = "results.critical-lab"
START = datetime(2031, 1, 1, 0, 0, 30, tzinfo=UTC)


def at(hh_mm: str) -> datetime:
    hours, minutes = hh_mm.split(":")
    return datetime(2031, 1, 1, int(hours), int(minutes), tzinfo=UTC)


async def create(
    db: Database, tenant: TenantHandle, name: str = "nightly", *, repeats: int = 2
) -> str:
    async with Scopes(db.pool).transaction() as tx:
        return await service.create_schedule(
            tx,
            tenant.id,
            service.ScheduleRequest(
                name=name,
                cron="*/15 * * * *",
                mode="workflow",
                label_prefix=name,
                scenarios=[SCENARIO],
                personas="baseline",
                repeats=repeats,
            ),
            root_url=tenant.server,
            now=START,
        )


async def view(tenant: TenantHandle, schedule_id: str) -> dict[str, Any]:
    async with api_client(tenant) as client:
        r = await client.get(f"/schedules/{schedule_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def eval_row(db: Database, eval_id: str) -> Any:
    return await db.pool.fetchrow(
        "SELECT label, mode, schedule_id, baseline_id FROM eval WHERE id = $1", eval_id
    )


async def cancel(tenant: TenantHandle, eval_id: str) -> None:
    async with api_client(tenant) as client:
        assert (await client.post(f"/evals/{eval_id}/cancel")).status_code == 200


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real webhook receiver on 127.0.0.1 for the schedule's eval events."""
    r = Receiver()
    r.start()
    yield r
    r.stop()


@pytest.fixture
async def second_worker(settings: Settings) -> AsyncIterator[Scopes]:
    """Another worker's database connections: a pool of its own."""
    assert settings.database_url is not None
    other = await open_database(settings.database_url, pool_size=2)
    yield Scopes(other.pool)
    await other.close()


async def test_two_workers_start_each_due_time_once(
    tenant: TenantHandle, db: Database, second_worker: Scopes, caplog: pytest.LogCaptureFixture
) -> None:
    schedules = [await create(db, tenant, f"race{i}", repeats=1) for i in range(3)]
    ours = Scopes(db.pool)

    async def both_tick(now: datetime) -> list[service.Fired]:
        first, second = await asyncio.gather(
            service.tick(ours, now, tenant_id=tenant.id),
            service.tick(second_worker, now, tenant_id=tenant.id),
        )
        return first + second

    fired = await both_tick(at("00:15"))
    assert sorted((f.schedule_id, f.outcome) for f in fired) == sorted(
        (s, "started") for s in schedules
    )
    assert await both_tick(at("00:15")) == []  # taken: nothing left at that due time
    # The loser of each race matched nothing in the guarded update: it did not get as far
    # as the due time's key (which would refuse a second record, logged as a failure).
    assert not [r for r in caplog.records if r.name == "understudy.schedules"]
    rows = await db.pool.fetch(
        "SELECT id, schedule_id, label FROM eval WHERE tenant_id = $1", tenant.id
    )
    assert sorted(r["schedule_id"] for r in rows) == sorted(schedules)
    assert {r["label"] for r in rows} == {f"race{i} 2031-01-01T00:15Z" for i in range(3)}
    assert {r["id"] for r in rows} == {f.eval_id for f in fired}
    for eval_id in (r["id"] for r in rows):
        await cancel(tenant, eval_id)


async def test_once_per_due_time_skips_while_running_and_compares(
    tenant: TenantHandle, db: Database, second_worker: Scopes, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        hook = await subscribe(
            client, receiver.url_for("evals"), ["eval.completed", "eval.regressed"]
        )
    schedule_id = await create(db, tenant)
    ours = Scopes(db.pool)
    assert (await view(tenant, schedule_id))["nextDueAt"] == "2031-01-01T00:15:00+00:00"
    assert await service.tick(ours, at("00:14"), tenant_id=tenant.id) == []

    # Two workers tick at the due time: one eval starts.
    first, second = await asyncio.gather(
        service.tick(ours, at("00:15"), tenant_id=tenant.id),
        service.tick(second_worker, at("00:15"), tenant_id=tenant.id),
    )
    [started] = first + second
    assert started.outcome == "started" and started.due_at == at("00:15")
    e1 = started.eval_id
    assert e1 is not None
    row = await eval_row(db, e1)
    assert dict(row) == {
        "label": "nightly 2031-01-01T00:15Z",
        "mode": "workflow",
        "schedule_id": schedule_id,
        "baseline_id": None,
    }
    # The same due time again (a late worker): nothing.
    assert await service.tick(second_worker, at("00:16"), tenant_id=tenant.id) == []

    # Due again while the first eval still runs: skipped, with the reason.
    [skipped] = await service.tick(ours, at("00:30"), tenant_id=tenant.id)
    assert skipped.outcome == "skipped" and skipped.eval_id is None
    assert skipped.reason in (
        f"the previous eval {e1} is still running",
        f"the previous eval {e1} is still queued",
    )

    # The first completes (a correct automation); the next starts with it as baseline,
    # and a broken automation is swapped in.
    await drive_eval(tenant, e1, correct=True)
    [again] = await service.tick(ours, at("00:45"), tenant_id=tenant.id)
    e2 = again.eval_id
    assert again.outcome == "started" and e2 is not None
    assert (await eval_row(db, e2))["baseline_id"] == e1
    await drive_eval(tenant, e2, correct=False)

    compared = await evals_service.compare_evals(db.pool, tenant.id, e2, e1, alpha=0.05)
    assert [(c.scenario_id, c.label) for c in compared.cells] == [(SCENARIO, "regressed")]
    shown = await view(tenant, schedule_id)
    assert [(e["id"], e["status"], e["baselineId"]) for e in shown["evals"]] == [
        (e2, "completed", e1),
        (e1, "completed", None),
    ]
    assert shown["evals"][0]["passRate"]["passes"] == 0
    assert shown["evals"][1]["passRate"]["text"].startswith("2/2 = 100.0%")
    latest = shown["latestCompare"]
    assert (latest["evalId"], latest["baselineId"]) == (e2, e1)
    assert latest["regressedCells"] == [f"{SCENARIO} / baseline"]
    assert latest["delta"] == -1.0
    assert [(h["dueAt"], h["outcome"], h.get("evalId")) for h in shown["history"]] == [
        ("2031-01-01T00:45:00+00:00", "started", e2),
        ("2031-01-01T00:30:00+00:00", "skipped", None),
        ("2031-01-01T00:15:00+00:00", "started", e1),
    ]
    assert shown["history"][1]["reason"] == skipped.reason

    # The events: both evals completed, and the second regressed against the first (the
    # schedule's previous completed eval), delivered signed to the receiver.
    done = await wait_for_event(receiver, "evals", hook["secret"], "eval.completed", count=2)
    assert [(d["eval"]["id"], d["eval"]["scheduleId"]) for d in done] == [
        (e1, schedule_id),
        (e2, schedule_id),
    ]
    [regressed] = await wait_for_event(receiver, "evals", hook["secret"], "eval.regressed")
    assert regressed["eval"]["id"] == e2 and regressed["eval"]["baselineId"] == e1
    assert regressed["compare"]["baseline"]["id"] == e1
    assert regressed["compare"]["chosenBy"] == "baselineId"
    assert [(c["scenarioId"], c["label"]) for c in regressed["compare"]["regressed"]] == [
        (SCENARIO, "regressed")
    ]
    # The eval says which schedule started it and what it is compared with, in the API
    # and on its pages; its compare page defaults to that baseline and says why.
    async with api_client(tenant) as client:
        e2_view = (await client.get(f"/evals/{e2}")).json()
    assert (e2_view["scheduleId"], e2_view["baselineId"]) == (schedule_id, e1)
    assert e2_view["completedAt"] >= e2_view["createdAt"]
    console = await sign_in(tenant.server, tenant.key)
    try:
        page = (await console.get(f"/evals/{e2}")).text
        assert f"<code>{schedule_id}</code>" in page and f'href="/evals/{e1}"' in page
        listed = (await console.get("/evals")).text
        assert "<h2>Schedules</h2>" in listed and f"<code>{schedule_id}</code>" in listed
        compare = (await console.get(f"/evals/{e2}/compare")).text
        assert f'<option value="{e1}" selected>' in compare
        assert "the previous completed eval of the schedule that started it" in compare
    finally:
        await console.aclose()

    # No worker ran for an hour: the latest due time starts once, the missed ones are
    # recorded as one skip; the baseline is the newest completed eval.
    fired = await service.tick(ours, at("02:05"), tenant_id=tenant.id)
    assert [(f.due_at, f.outcome) for f in fired] == [
        (at("01:00"), "skipped"),
        (at("02:00"), "started"),
    ]
    assert fired[0].reason == (
        "4 due time(s) from 2031-01-01T01:00Z to 2031-01-01T01:45Z were missed while no "
        "worker ran; the schedule started once, for 2031-01-01T02:00Z"
    )
    e3 = fired[1].eval_id
    assert e3 is not None
    assert dict(await eval_row(db, e3))["label"] == "nightly 2031-01-01T02:00Z"
    assert (await eval_row(db, e3))["baseline_id"] == e2
    assert (await view(tenant, schedule_id))["nextDueAt"] == "2031-01-01T02:15:00+00:00"

    # A cancelled previous eval holds nothing up, and is no baseline.
    await cancel(tenant, e3)
    [after_cancel] = await service.tick(ours, at("02:15"), tenant_id=tenant.id)
    e4 = after_cancel.eval_id
    assert after_cancel.outcome == "started" and e4 is not None
    assert (await eval_row(db, e4))["baseline_id"] == e2
    await cancel(tenant, e4)


async def test_a_paused_schedule_starts_nothing_and_resumes_from_the_next_due_time(
    tenant: TenantHandle, db: Database
) -> None:
    schedule_id = await create(db, tenant)
    scopes = Scopes(db.pool)
    async with scopes.transaction() as tx:
        await service.set_paused(tx, tenant.id, schedule_id, True, now=START)
    assert await service.tick(scopes, at("01:00"), tenant_id=tenant.id) == []
    async with scopes.transaction() as tx:
        await service.set_paused(tx, tenant.id, schedule_id, False, now=at("01:07"))
    assert (await view(tenant, schedule_id))["nextDueAt"] == "2031-01-01T01:15:00+00:00"
    assert await service.tick(scopes, at("01:14"), tenant_id=tenant.id) == []
    [started] = await service.tick(scopes, at("01:15"), tenant_id=tenant.id)
    assert started.outcome == "started" and started.eval_id is not None
    assert (await view(tenant, schedule_id))["history"][0]["dueAt"].endswith("T01:15:00+00:00")
    await cancel(tenant, started.eval_id)


async def test_a_schedule_whose_eval_cannot_start_records_why(
    tenant: TenantHandle, db: Database
) -> None:
    from tests.evals.test_attribution import custom_scenario, import_scenario

    document = {**custom_scenario("ours"), "category": "ours"}
    await import_scenario(tenant, document)
    async with Scopes(db.pool).transaction() as tx:
        schedule_id = await service.create_schedule(
            tx,
            tenant.id,
            service.ScheduleRequest(
                name="ours",
                cron="0 * * * *",
                mode="workflow",
                label_prefix="ours",
                scenarios={"category": "ours"},
                personas="baseline",
                repeats=1,
            ),
            root_url=tenant.server,
            now=START,
        )
    # A new version moves the scenario out of the category: nothing is left to run.
    await import_scenario(tenant, {**document, "category": "theirs"})
    [skipped] = await service.tick(Scopes(db.pool), at("01:00"), tenant_id=tenant.id)
    assert skipped.outcome == "skipped"
    assert skipped.reason == (
        "the eval could not start: no scenario supports mode 'workflow' in that selection"
    )
    shown = await view(tenant, schedule_id)
    assert shown["evals"] == [] and shown["nextDueAt"] == "2031-01-01T02:00:00+00:00"
    assert shown["history"][0]["reason"] == skipped.reason


async def test_the_worker_ticks_schedules_under_its_queue_name(settings: Settings) -> None:
    """Async, so arq's Worker takes the running loop rather than making one of its own
    (a sync test leaks that loop's self-pipe socket until some later test collects it)."""
    from app.worker import build_worker

    worker = build_worker(settings, handle_signals=False)
    names = [job.name for job in worker.cron_jobs]
    assert f"cron:start_schedules:{settings.queue_name}" in names
