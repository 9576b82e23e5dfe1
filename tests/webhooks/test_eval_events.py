"""Eval events over real HTTP to a real receiver on 127.0.0.1: `eval.completed` once an
eval's runs have all ended, `eval.regressed` when its compare with its baseline (the CI
rule's, or its own `baseline_id`) has a regressed cell; signed, retried and redelivered
like every event, subscribed to by name, never filtered by resourceTypes, sent once per
eval however many callers race to complete it, and never for a cancelled eval.

The evals are workflow evals played by the evals tests' own automation (`run_eval`: the
reference solution, or broken), over one or two quick scenarios."""

from __future__ import annotations

import asyncio
from typing import Any

from app.db import Database, Scopes
from app.evals import events as eval_events
from app.evals import service as evals_service
from app.jobs import connect_jobs
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.evals.test_evals import api_client, run_eval
from tests.waiting import blocked_on_a_lock
from tests.webhooks.receiver import Received, Receiver
from tests.webhooks.test_webhooks import (
    api,
    deliveries,
    settled,
    subscribe,
    verify,
    wait_deliveries,
)

SCENARIOS = ["results.critical-lab", "scheduling.noshow-outreach"]
EVAL_TYPES = {"eval.completed", "eval.regressed"}
COMMON_FIELDS = {"id", "eventId", "type", "occurredAt", "tenant"}


def of_type(got: list[Received], secret: str, event: str) -> list[dict[str, Any]]:
    """The verified payloads of `event` among what arrived (each signature checked)."""
    return [p for p in (verify(secret, g) for g in got) if p["type"] == event]


async def wait_for_event(
    receiver: Receiver, path: str, secret: str, event: str, count: int = 1, within: float = 15
) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        found = of_type(receiver.on(path), secret, event)
        if len(found) >= count or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.05)


async def eval_event_rows(db: Database, tenant: TenantHandle, eval_id: str) -> list[str]:
    """The event types written about the eval, oldest first."""
    rows = await db.pool.fetch(
        """SELECT type FROM webhook_event
        WHERE tenant_id = $1 AND resource_type = 'Eval' AND resource_id = $2 ORDER BY seq""",
        tenant.id,
        eval_id,
    )
    return [r["type"] for r in rows]


async def test_completed_then_regressed_against_the_ci_baseline(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        every = await subscribe(client, receiver.url_for("every"), ["*"])
        completed_only = await subscribe(client, receiver.url_for("completed"), ["eval.completed"])
        regressed_only = await subscribe(client, receiver.url_for("regressed"), ["eval.regressed"])
        # resourceTypes filters resource events only: the eval events still come.
        patients = await subscribe(
            client,
            receiver.url_for("patients"),
            ["*", "eval.completed"],
            resourceTypes=["Patient"],
        )

        good = await run_eval(tenant, "hooks v1", correct=True, repeats=1, scenarios=SCENARIOS)
        [done] = await wait_for_event(receiver, "every", every["secret"], "eval.completed")
        assert set(done) == COMMON_FIELDS | {"eval"}
        assert done["tenant"] == str(tenant.id)
        part = done["eval"]
        assert part["id"] == good and part["label"] == "hooks v1" and part["mode"] == "workflow"
        assert part["revision"] is None and part["scheduleId"] is None
        assert part["counts"] == {
            "passed": 2,
            "failed": 0,
            "timedOut": 0,
            "errored": 0,
            "cancelled": 0,
            "total": 2,
        }
        async with api_client(tenant) as testing:
            view = (await testing.get(f"/evals/{good}")).json()
        rate = view["summary"]["passRate"]
        assert part["passRate"] == {
            "value": rate["rate"],
            "low": rate["ci95"][0],
            "high": rate["ci95"][1],
            "passes": 2,
            "runs": 2,
            "text": rate["text"],
        }
        assert part["passRate"]["value"] == 1.0 and part["passRate"]["high"] == 1.0
        assert part["url"] == f"{tenant.server}/api/testing/evals/{good}"
        assert part["consoleUrl"] == f"{tenant.server}/evals/{good}"
        assert part["createdAt"] == view["createdAt"]
        assert part["completedAt"] >= part["createdAt"]

        bad = await run_eval(tenant, "hooks v2", correct=False, repeats=1, scenarios=SCENARIOS)
        [regressed] = await wait_for_event(receiver, "every", every["secret"], "eval.regressed")
        both = await wait_for_event(receiver, "every", every["secret"], "eval.completed", count=2)
        [good_done, bad_done] = both
        assert good_done == done
        assert bad_done["eval"]["id"] == bad and bad_done["eval"]["passRate"]["value"] == 0.0
        assert set(regressed) == COMMON_FIELDS | {"eval", "compare"}
        assert regressed["eval"] == bad_done["eval"]
        compare = regressed["compare"]
        assert compare["baseline"] == {
            "id": good,
            "label": "hooks v1",
            "url": f"{tenant.server}/api/testing/evals/{good}",
        }
        assert compare["chosenBy"] == "ciRule"
        async with api_client(tenant) as testing:
            compared = (
                await testing.get(f"/evals/{bad}/compare", params={"baseline": good})
            ).json()
        # The regressed cells are the compare's own, as the compare endpoint sends them.
        assert compare["regressed"] == [c for c in compared["cells"] if c["label"] == "regressed"]
        assert {(c["scenarioId"], c["persona"]) for c in compare["regressed"]} == {
            (s, "baseline") for s in SCENARIOS
        }
        for cell in compare["regressed"]:
            assert cell["baseline"] == {"passes": 1, "runs": 1}
            assert cell["current"] == {"passes": 0, "runs": 1}
            assert cell["attribution"] == "agent"
        assert compare["significantRegression"] == compared["significantRegression"]
        assert compare["currentRate"] == compared["currentRate"]
        assert compare["flips"] == compared["flips"]
        assert compare["url"] == f"{tenant.server}/api/testing/evals/{bad}/compare?baseline={good}"
        # The first eval had no baseline: no eval.regressed for it.
        assert [
            p["eval"]["id"]
            for p in of_type(receiver.on("every"), every["secret"], "eval.regressed")
        ] == [bad]

        # By name: each subscription got only what it named.
        got_completed = await wait_for_event(
            receiver, "completed", completed_only["secret"], "eval.completed", count=2
        )
        assert [p["eval"]["id"] for p in got_completed] == [good, bad]
        assert of_type(receiver.on("completed"), completed_only["secret"], "eval.regressed") == []
        got_regressed = await wait_for_event(
            receiver, "regressed", regressed_only["secret"], "eval.regressed"
        )
        assert [p["eval"]["id"] for p in got_regressed] == [bad]
        assert {verify(regressed_only["secret"], g)["type"] for g in receiver.on("regressed")} == {
            "eval.regressed"
        }
        got_patients = await wait_for_event(
            receiver, "patients", patients["secret"], "eval.regressed"
        )
        assert [p["eval"]["id"] for p in got_patients] == [bad]
        assert [
            p["eval"]["id"]
            for p in of_type(receiver.on("patients"), patients["secret"], "eval.completed")
        ] == [good, bad]
        # Resource events there are Patient ones only (the filter still holds for them).
        assert {
            verify(patients["secret"], g)["type"].split(".")[0]
            for g in receiver.on("patients")
            if verify(patients["secret"], g)["type"] not in EVAL_TYPES
        } <= {"Patient"}

        listed = await wait_deliveries(client, every["id"], settled)
    evals_listed = [d for d in listed if d["event"] in EVAL_TYPES]
    assert sorted((d["event"], d["resource"]) for d in evals_listed) == sorted(
        [
            ("eval.completed", f"Eval/{good}"),
            ("eval.completed", f"Eval/{bad}"),
            ("eval.regressed", f"Eval/{bad}"),
        ]
    )
    assert all(d["status"] == "delivered" and d["runId"] is None for d in evals_listed)
    by_id = {d["id"]: d for d in evals_listed}
    assert by_id[regressed["id"]]["eventId"] == regressed["eventId"]
    # One eval's events arrive in the order written: completed, then regressed.
    arrived = [verify(every["secret"], g) for g in receiver.on("every")]
    bad_events = [p["type"] for p in arrived if p.get("eval", {}).get("id") == bad]
    assert bad_events == ["eval.completed", "eval.regressed"]


async def test_a_failing_receiver_gets_a_retry_and_a_redelivery_keeps_the_id(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    receiver.script = [500]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["eval.completed"])
        eval_id = await run_eval(
            tenant, "retry v1", correct=True, repeats=1, scenarios=SCENARIOS[:1]
        )
        found = await wait_deliveries(client, sub["id"], settled)
        [delivery] = found
        assert delivery["event"] == "eval.completed" and delivery["resource"] == f"Eval/{eval_id}"
        assert delivery["status"] == "delivered"
        assert [a["statusCode"] for a in delivery["attempts"]] == [500, 200]
        first, second = receiver.received
        assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery["id"]
        one, two = verify(sub["secret"], first), verify(sub["secret"], second)
        assert one == two and one["eval"]["id"] == eval_id

        r = await client.post(f"/api/webhooks/{sub['id']}/deliveries/{delivery['id']}/redeliver")
        assert r.status_code in (200, 202), r.text
        got = await receiver.wait_for(3)
    assert len(got) == 3
    assert verify(sub["secret"], got[2]) == one


async def test_concurrent_completers_write_one_event_per_eval(
    tenant: TenantHandle, receiver: Receiver, db: Database, settings: Settings
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["eval.completed"])
        eval_id = await run_eval(
            tenant, "race v1", correct=True, repeats=1, scenarios=SCENARIOS[:1]
        )
        await wait_deliveries(client, sub["id"], settled)
    assert await eval_event_rows(db, tenant, eval_id) == ["eval.completed"]
    scopes_a, scopes_b = Scopes(db.pool), Scopes(db.pool)

    # Two completers at once, on the eval unmarked again: one marks it, one event.
    await db.pool.execute(
        "UPDATE eval SET completed_at = NULL WHERE tenant_id = $1 AND id = $2", tenant.id, eval_id
    )
    a, b = await asyncio.gather(
        eval_events.complete_evals(scopes_a, tenant.id),
        eval_events.complete_evals(scopes_b, tenant.id),
    )
    # (The session's worker ticks too: it may be the one that wins.)
    assert len(a) + len(b) <= 1
    assert await eval_event_rows(db, tenant, eval_id) == ["eval.completed"] * 2

    # Interleaved for certain: the first marks it and holds the row, uncommitted, while
    # the second tries; the second waits for the first's commit, then finds it marked.
    # (Each unmarking makes one event, whoever wins; if the worker's tick marks it between
    # the unmarking and the first, unmark again.)
    unmarked = 1

    async def second() -> bool:
        async with scopes_b.transaction() as tx:
            return await eval_events.complete_eval(tx, tenant.id, eval_id)

    while True:
        await db.pool.execute(
            "UPDATE eval SET completed_at = NULL WHERE tenant_id = $1 AND id = $2",
            tenant.id,
            eval_id,
        )
        unmarked += 1
        async with scopes_a.transaction() as first:
            if not await eval_events.complete_eval(first, tenant.id, eval_id):
                continue
            waiting = asyncio.create_task(second())
            async with db.pool.acquire() as probe:  # blocked on the first's row lock
                await blocked_on_a_lock(probe, waiting)
        break
    assert await waiting is False
    assert await eval_event_rows(db, tenant, eval_id) == ["eval.completed"] * (unmarked + 1)
    # Every event went to the receiver (the sweeper sends what no job was enqueued for).
    assert settings.redis_url is not None
    jobs = await connect_jobs(settings.redis_url, settings.queue_name)
    try:
        await jobs.deliver_soon(tenant.id)
    finally:
        await jobs.close()
    got = await receiver.wait_for(unmarked + 1)
    assert len({g.headers["webhook-id"] for g in got}) == unmarked + 1
    assert {verify(sub["secret"], g)["eval"]["id"] for g in got} == {eval_id}


async def test_an_explicit_baseline_is_used_instead_of_the_ci_rule(
    tenant: TenantHandle, receiver: Receiver, db: Database, settings: Settings
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["eval.regressed"])
        good = await run_eval(tenant, "alpha", correct=True, repeats=1, scenarios=SCENARIOS[:1])
        # Another label prefix: the CI rule finds no baseline, so nothing regresses...
        bad = await run_eval(tenant, "beta", correct=False, repeats=1, scenarios=SCENARIOS[:1])
        assert await eval_event_rows(db, tenant, bad) == []  # nobody subscribed to completed
        # ...until the eval names its own (as a schedule does when it starts one).
        await db.pool.execute(
            """UPDATE eval SET completed_at = NULL, baseline_id = $3
            WHERE tenant_id = $1 AND id = $2""",
            tenant.id,
            bad,
            good,
        )
        assert settings.redis_url is not None
        jobs = await connect_jobs(settings.redis_url, settings.queue_name)
        try:
            await eval_events.complete_evals(Scopes(db.pool, jobs), tenant.id)
        finally:
            await jobs.close()
        [got] = await wait_for_event(receiver, "hook", sub["secret"], "eval.regressed")
        [listed] = await deliveries(client, sub["id"])
    assert listed["event"] == "eval.regressed" and listed["resource"] == f"Eval/{bad}"
    assert got["eval"]["baselineId"] == good
    assert got["compare"]["chosenBy"] == "baselineId"
    assert got["compare"]["baseline"]["id"] == good
    assert [c["scenarioId"] for c in got["compare"]["regressed"]] == SCENARIOS[:1]


async def test_a_cancelled_eval_sends_no_eval_completed(
    tenant: TenantHandle, receiver: Receiver, db: Database
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["eval.completed"])
    async with api_client(tenant) as testing:
        created = await testing.post(
            "/evals",
            json={"mode": "workflow", "label": "cancel v1", "scenarios": SCENARIOS, "repeats": 1},
        )
        assert created.status_code == 201, created.text
        eval_id = created.json()["id"]
        r = await testing.post(f"/evals/{eval_id}/cancel")
        assert r.status_code == 200, r.text
        view = r.json()
    assert view["status"] == "cancelled"
    assert all(run["status"] == "cancelled" for run in view["runs"])
    # Every run has ended, yet the eval is not completed: nothing marks it, nothing is sent.
    assert await eval_events.complete_evals(Scopes(db.pool), tenant.id) == []
    assert tenant.id not in await eval_events.tenants_with_unfinished(db.pool)
    row = await db.pool.fetchrow(
        "SELECT completed_at FROM eval WHERE tenant_id = $1 AND id = $2", tenant.id, eval_id
    )
    assert row is not None and row["completed_at"] is None
    assert await eval_event_rows(db, tenant, eval_id) == []
    async with api(tenant) as client:
        assert await deliveries(client, sub["id"]) == []
    # The summary of a cancelled eval is still there to read.
    summary = (await evals_service.eval_view(db.pool, tenant.id, eval_id, "")).summary
    assert summary is not None


async def test_eval_event_names_are_accepted_listed_and_checked(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, sorted(EVAL_TYPES))
        unknown = await client.post(
            "/api/webhooks", json={"url": receiver.url, "events": ["eval.started"]}
        )
        schema = (await client.get("/openapi.json")).json()
    assert sub["events"] == sorted(EVAL_TYPES)
    assert unknown.status_code == 422, unknown.text
    assert "events[0]" in [e["path"] for e in unknown.json()["errors"]]
    assert "eval.completed" in unknown.text  # the message lists the names it accepts
    body = schema["components"]["schemas"]["SubscriptionBody"]["properties"]
    assert set(body["events"]["items"]["enum"]) >= EVAL_TYPES
    assert "eval.completed" in body["resourceTypes"]["description"]
