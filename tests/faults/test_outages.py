"""Faults survived: Redis stopped, PostgreSQL restarted, the worker killed mid-delivery,
the API killed mid-transaction, receivers that hang or reset. Each case runs its own
processes on the suite's own PostgreSQL and Redis (tests/faults/services.py), with a live
run, an eval whose runs are live and (where a worker sends them) a webhook subscription,
and is bounded: it fails rather than waits past its deadline."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.console.run_helpers import TASKS, staff_message, start, task_for
from tests.evals.test_evals import do_the_work
from tests.faults.conftest import connect
from tests.faults.services import (
    PrivatePostgres,
    PrivateRedis,
    Process,
    stop_all,
    understudy_env,
)
from tests.llm.fake_llm import FAKE_MODEL, FakeLlm, Reply
from tests.threaded_server import free_port
from tests.webhooks.receiver import Receiver

REDIS_AWAY_S = 10
# After a service is back: the worker's restart backoff (<= 5 s), a grading tick (2 s
# here) and a delivery sweep (5 s), with room for a loaded machine.
RECOVER_WITHIN_S = 25
# A process started and doing its first work, on a machine running other tests beside.
STARTED_WITHIN_S = 60


async def until(check: Callable[[], Awaitable[Any]], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {within:.0f} s"
        await asyncio.sleep(0.05)


def serve(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    *,
    worker: bool = True,
    env: dict[str, str] | None = None,
) -> Process:
    port = free_port()
    command = ["serve", "--port", str(port)] + ([] if worker else ["--no-worker"])
    process = Process(
        command,
        understudy_env(database_url, redis.url, data_dir, **(env or {})),
        data_dir.parent / f"serve-{port}.log",
        port=port,
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    process.start()
    return process


def worker_process(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    name: str,
    env: dict[str, str] | None = None,
) -> Process:
    process = Process(
        ["worker"],
        understudy_env(database_url, redis.url, data_dir, **(env or {})),
        data_dir.parent / f"{name}.log",
    )
    process.start()
    return process


async def tenant_on(process: Process, database_url: str, opened: list[Database]) -> TenantHandle:
    db = await connect(database_url, opened)
    return await make_tenant(db, process.url, prefix="faults")


async def deliveries_settled(
    tenant: TenantHandle, database_url: str, opened: list[Database]
) -> None:
    """Until no delivery of the tenant is pending. A delivered (or failed) one is never
    sent again, and an attempt in flight keeps its delivery pending, so from then on the
    receiver's log is final: a duplicate would be in it already."""
    db = await connect(database_url, opened)

    async def settled() -> bool:
        pending = await db.pool.fetchval(
            "SELECT count(*) FROM webhook_delivery WHERE tenant_id = $1 AND status = 'pending'",
            tenant.id,
        )
        return bool(pending == 0)

    await until(settled, RECOVER_WITHIN_S, "every delivery of the tenant delivered or failed")


async def subscribe(tenant: TenantHandle, url: str, events: list[str]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        answer = await client.post("/api/webhooks", json={"url": url, "events": events})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def progress(tenant: TenantHandle, run_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        answer = await client.get(f"/api/testing/runs/{run_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


EVAL_SCENARIO = "results.critical-lab"
SETTLE_SCENARIO = "scheduling.book-named-practitioner"


async def start_eval(tenant: TenantHandle) -> str:
    """A workflow eval of one scenario, two repeats: its runs start live."""
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        answer = await client.post(
            "/api/testing/evals",
            json={"mode": "workflow", "label": "faults", "scenarios": [EVAL_SCENARIO],
                  "repeats": 2},
        )  # fmt: skip
    assert answer.status_code == 201, answer.text
    eval_id: str = answer.json()["id"]
    return eval_id


async def eval_completes(tenant: TenantHandle, eval_id: str) -> None:
    """Finish the eval's live runs; it completes, every run with its one verdict."""
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=10
    ) as client:

        async def completed() -> bool:
            view = (await client.get(f"/evals/{eval_id}")).json()
            for item in view["runs"]:
                if item.get("runId") and item.get("status") == "live":
                    await client.post(f"/runs/{item['runId']}/finish")
            return bool(view["status"] == "completed")

        await until(completed, RECOVER_WITHIN_S, "the eval completing after the outage")
        view = (await client.get(f"/evals/{eval_id}")).json()
    assert len(view["runs"]) == 2 and all(r["status"] != "live" for r in view["runs"]), view


def task_events(receiver: Receiver) -> dict[str, list[str]]:
    """Task.created events received: resource id -> the webhook-ids it came with."""
    seen: dict[str, list[str]] = {}
    for got in receiver.received:
        payload = got.json()
        if payload.get("type") == "Task.created":
            seen.setdefault(payload["resource"]["id"], []).append(got.headers["webhook-id"])
    return seen


async def test_redis_away_for_ten_seconds_loses_nothing(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
    receiver: Receiver,
) -> None:
    api = serve(database_url, redis, data_dir)  # the worker in the same process
    try:
        tenant = await tenant_on(api, database_url, open_db)
        await subscribe(tenant, receiver.url, ["Task.created"])
        run = await start(tenant)
        eval_id = await start_eval(tenant)
        redis.stop()
        stopped = time.monotonic()
        created = []
        async with httpx.AsyncClient(
            base_url=run["fhirBase"], headers=tenant.headers, timeout=10
        ) as fhir:
            for _ in range(3):
                began = time.monotonic()
                answer = await fhir.post("/Task", json=task_for(run))
                # A committed write answers its success, promptly, with Redis away.
                assert answer.status_code == 201, answer.text
                assert time.monotonic() - began < 3, "a write waited on the dead Redis"
                created.append(answer.json()["id"])
        written_at = time.time()
        await asyncio.sleep(max(0.0, REDIS_AWAY_S - (time.monotonic() - stopped)))
        assert api.alive(), api.output()[-3000:]
        redis.start()

        async def all_delivered() -> bool:
            return set(task_events(receiver)) >= set(created)

        await until(all_delivered, RECOVER_WITHIN_S, "the Task events once Redis was back")

        async def graded_after_the_writes() -> bool:
            view = await progress(tenant, run["id"])
            graded = view["progress"].get("lastGradedAt")
            holding = view["progress"].get("requiredHolding") or 0
            return bool(graded) and holding >= 1 and _epoch(graded) > written_at

        await until(graded_after_the_writes, RECOVER_WITHIN_S, "the regrade once Redis was back")
        await eval_completes(tenant, eval_id)
        await deliveries_settled(tenant, database_url, open_db)
        events = task_events(receiver)
        for task_id in created:
            assert len(set(events[task_id])) == 1, f"Task/{task_id} delivered with two ids"
        assert api.alive()
        output = api.output()
        assert output.count("redis_unavailable") <= 2, output[-3000:]  # API and worker
        assert "Traceback" not in output, output[-3000:]
    finally:
        api.stop()


def _epoch(instant: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()


async def test_postgres_restart_answers_503_then_recovers(
    postgres: PrivatePostgres,
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
    receiver: Receiver,
) -> None:
    api = serve(database_url, redis, data_dir)
    try:
        tenant = await tenant_on(api, database_url, open_db)
        await subscribe(tenant, receiver.url, ["Task.created"])
        run = await start(tenant)
        eval_id = await start_eval(tenant)
        statuses: list[int] = []
        stop = asyncio.Event()

        async def keep_writing() -> None:
            async with httpx.AsyncClient(
                base_url=run["fhirBase"], headers=tenant.headers, timeout=10
            ) as fhir:
                while not stop.is_set():
                    try:
                        answer = await fhir.post("/Task", json=task_for(run))
                    except httpx.TimeoutException:
                        statuses.append(-1)  # a hang past the client's timeout
                        continue
                    except httpx.TransportError:
                        statuses.append(0)
                        continue
                    statuses.append(answer.status_code)
                    if answer.status_code == 503:
                        assert answer.headers.get("retry-after"), answer.headers
                        assert answer.json()["resourceType"] == "OperationOutcome"
                    await asyncio.sleep(0.1)

        writer = asyncio.create_task(keep_writing())
        await asyncio.sleep(1)
        await asyncio.to_thread(postgres.restart)
        await asyncio.sleep(2)
        stop.set()
        await writer
        assert -1 not in statuses, statuses
        assert 500 not in statuses, statuses
        assert set(statuses) <= {201, 503, 0}, statuses
        assert 503 in statuses, f"no request met the restart: {statuses}"
        assert api.alive(), api.output()[-3000:]

        # Recovered without a restart: a write commits, its event is delivered, it grades.
        async with httpx.AsyncClient(
            base_url=run["fhirBase"], headers=tenant.headers, timeout=10
        ) as fhir:

            async def writes() -> bool:
                return (await fhir.post("/Task", json=task_for(run))).status_code == 201

            await until(writes, RECOVER_WITHIN_S, "a write after the restart")
        marked = time.time()

        async def delivered_after() -> bool:
            return any(r.at > marked for r in receiver.received)

        await until(delivered_after, RECOVER_WITHIN_S, "a delivery after the restart")
        await eval_completes(tenant, eval_id)
        assert api.alive()
        assert "Traceback" not in api.output(), api.output()[-3000:]
    finally:
        api.stop()


async def test_worker_killed_mid_delivery_delivers_once_with_one_id(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
    receiver: Receiver,
) -> None:
    # The first attempt hangs 3 s at the receiver: the worker is killed meanwhile.
    receiver.script = [("sleep", 3)]
    api = serve(database_url, redis, data_dir, worker=False)
    first = worker_process(database_url, redis, data_dir, "worker-1")
    second: Process | None = None
    try:
        tenant = await tenant_on(api, database_url, open_db)
        await subscribe(tenant, receiver.url, ["Task.created"])
        run = await start(tenant)
        eval_id = await start_eval(tenant)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            answer = await fhir.post("/Task", json=task_for(run))
        assert answer.status_code == 201, answer.text
        task_id = answer.json()["id"]

        async def in_flight() -> bool:
            return bool(receiver.received)

        await until(in_flight, RECOVER_WITHIN_S, "the first delivery attempt")
        first.kill()
        second = worker_process(database_url, redis, data_dir, "worker-2")

        async def delivered() -> bool:
            return len(task_events(receiver).get(task_id, [])) >= 2

        # Killed mid-attempt, the delivery is retried by the new worker: same id.
        await until(delivered, RECOVER_WITHIN_S, "the delivery retried by the new worker")
        await deliveries_settled(tenant, database_url, open_db)
        ids = task_events(receiver)[task_id]
        assert len(set(ids)) == 1, ids
        await eval_completes(tenant, eval_id)
        assert second.alive(), second.output()[-3000:]
    finally:
        stop_all(second, first, api)


class ResettingReceiver:
    """Accepts a connection and resets it (RST) before any answer."""

    def __init__(self) -> None:
        self.port = free_port()
        self.accepted = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            sock = writer.get_extra_info("socket")
            # Linger 0: close sends RST, not FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

        self._server = await asyncio.start_server(reset, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def test_a_hanging_and_a_resetting_receiver_hold_up_no_one(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
    receiver: Receiver,
) -> None:
    hanging = Receiver(default_status=200)
    hanging.script = [("sleep", 30)] * 10
    hanging.start()
    resetting = ResettingReceiver()
    await resetting.start()
    api = serve(database_url, redis, data_dir)
    try:
        tenant = await tenant_on(api, database_url, open_db)
        await subscribe(tenant, hanging.url, ["Task.created"])
        await subscribe(tenant, f"http://127.0.0.1:{resetting.port}/hook", ["Task.created"])
        await subscribe(tenant, receiver.url, ["Task.created"])
        run = await start(tenant)
        eval_id = await start_eval(tenant)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            for _ in range(3):
                answer = await fhir.post("/Task", json=task_for(run))
                assert answer.status_code == 201, answer.text
                written = time.monotonic()
                task_id = answer.json()["id"]

                async def arrived(task_id: str = task_id) -> bool:
                    return task_id in task_events(receiver)

                # Each event reaches the healthy receiver promptly, whatever the others do.
                await until(arrived, 3, "the healthy receiver's delivery")
                assert time.monotonic() - written < 3
        assert hanging.received and resetting.accepted, "the bad receivers were not tried"
        await eval_completes(tenant, eval_id)
        assert api.alive()
    finally:
        api.stop()
        await resetting.stop()
        hanging.stop()


BUNDLE_ENTRIES = 1000


async def test_the_api_killed_mid_transaction_writes_all_or_nothing(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
) -> None:
    api = serve(database_url, redis, data_dir, worker=False)
    again: Process | None = None
    try:
        tenant = await tenant_on(api, database_url, open_db)
        eval_id = await start_eval(tenant)
        system = f"urn:faults:{time.time_ns()}"
        bundle = {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {
                    "resource": {
                        "resourceType": "Patient",
                        "identifier": [{"system": system, "value": str(i)}],
                        "name": [{"family": f"Fault{i}"}],
                    },
                    "request": {"method": "POST", "url": "Patient"},
                }
                for i in range(BUNDLE_ENTRIES)
            ],
        }
        db = await connect(database_url, open_db)

        async def writing() -> bool:
            # A transaction that has written (it holds an xid) and not yet committed.
            found = await db.pool.fetchval(
                """SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL
                AND datname = current_database() AND pid <> pg_backend_pid()"""
            )
            return bool(found)

        async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
            posting = asyncio.create_task(client.post(f"{tenant.fhir_base}/", json=bundle))
            await until(writing, 10, "the Bundle's transaction under way")
            answered = posting.done()
            api.kill()
            with contextlib.suppress(httpx.TransportError):
                await posting
        again = serve(database_url, redis, data_dir, worker=False)
        base = tenant.fhir_base.replace(tenant.server, again.url)
        async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
            found = await client.get(
                f"{base}/Patient", params={"identifier": f"{system}|", "_summary": "count"}
            )
        assert found.status_code == 200, found.text
        total = found.json()["total"]
        assert total in (0, BUNDLE_ENTRIES), f"{total} of {BUNDLE_ENTRIES} entries written"
        async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
            view = (await client.get(f"{again.url}/api/testing/evals/{eval_id}")).json()
        assert [r["status"] for r in view["runs"]] == ["live", "live"], view  # untouched
        assert not answered, "the transaction ended before the kill: make it bigger"
    finally:
        stop_all(again, api)


async def test_worker_killed_while_runs_wait_for_their_quiet_still_passes_them(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
) -> None:
    """The pass that ends a run after its quiet is a timer in the worker: kill the worker
    while two correct runs wait on it, and the next worker's grading tick still ends
    each of them passed (the run stores when its quiet ends), once."""
    # A quiet long enough that both runs wait on it at once even when the machine is
    # loaded (the suite runs its files three at a time): with 2 s, the first run could
    # pass before the second began waiting, and the two were never seen waiting together.
    settle = {"UNDERSTUDY_SETTLE_SECONDS": "8"}
    api = serve(database_url, redis, data_dir, worker=False, env=settle)
    first = worker_process(database_url, redis, data_dir, "worker-settle-1", settle)
    second: Process | None = None
    try:
        tenant = await tenant_on(api, database_url, open_db)
        db = await connect(database_url, open_db)
        eval_id = await start_eval(tenant)
        runs = []
        async with httpx.AsyncClient(
            base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
        ) as client:
            for _ in range(2):
                answer = await client.post("/runs", json={"scenarioId": SETTLE_SCENARIO})
                assert answer.status_code == 201, answer.text
                runs.append(answer.json())
        for run in runs:
            await do_the_work(tenant, {**run, "startedAtRun": run["startedAt"]})
        ids = [run["id"] for run in runs]

        async def all_settling() -> bool:
            waiting = await db.pool.fetchval(
                "SELECT count(*) FROM run WHERE id = ANY($1) AND status = 'live' "
                "AND settle_until IS NOT NULL",
                ids,
            )
            return bool(waiting == len(ids))

        # This includes the first worker's start and its first grading of both runs.
        await until(all_settling, STARTED_WITHIN_S, "every run waiting for its quiet")
        first.kill()  # its timers die with it
        second = worker_process(database_url, redis, data_dir, "worker-settle-2", settle)

        async def all_passed() -> bool:
            rows = await db.pool.fetch(
                "SELECT status, verdict IS NOT NULL AS judged FROM run WHERE id = ANY($1)", ids
            )
            return all(r["status"] == "passed" and r["judged"] for r in rows)

        # The next worker's start, the rest of the quiet (up to 8 s) and its tick.
        await until(all_passed, STARTED_WITHIN_S, "the runs passed by the next worker")
        await eval_completes(tenant, eval_id)
    finally:
        stop_all(second, first, api)


RUBRIC_SCENARIO: dict[str, Any] = {
    **copy.deepcopy(TASKS),
    "id": "custom.faults-judged",
    "expectations": [
        *copy.deepcopy(TASKS["expectations"]),
        {
            "id": "tone",
            "type": "rubric",
            "label": "A polite message",
            "rubric": "The message to the patient is polite.",
            "required": False,
        },
    ],
}


async def test_worker_killed_mid_grading_gives_one_verdict(
    database_url: str,
    redis: PrivateRedis,
    data_dir: Path,
    open_db: list[Database],
) -> None:
    """The pass that ends a run judges its rubric with a model before the verdict is
    written: the model hangs, the worker is killed in the middle of that pass, and the
    next worker grades the run again: one verdict, passed, nothing written by the pass
    that died."""
    judge = FakeLlm()
    judge.delay(30, Reply({"score": 1, "reason": "polite"}))  # the first pass: killed here
    judge.responder = lambda request: Reply({"score": 1, "reason": "polite"})
    judge.start()
    model = {
        "UNDERSTUDY_LLM_BASE_URL": judge.base_url,
        "UNDERSTUDY_LLM_MODEL": FAKE_MODEL,
        "UNDERSTUDY_SETTLE_SECONDS": "0",
    }
    api = serve(database_url, redis, data_dir, worker=False, env=model)
    first = worker_process(database_url, redis, data_dir, "worker-judge-1", model)
    second: Process | None = None
    try:
        tenant = await tenant_on(api, database_url, open_db)
        db = await connect(database_url, open_db)
        run = await start(tenant, RUBRIC_SCENARIO)
        async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as fhir:
            assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
            message = staff_message(run, "Dear Ms. Lindqvist, we will call you back today.")
            assert (await fhir.post("/Communication", json=message)).status_code == 201

        async def judging() -> bool:
            return bool(judge.requests)

        await until(judging, RECOVER_WITHIN_S, "the pass judging the rubric")
        first.kill()  # in the middle of the grading pass, before its verdict
        assert (
            await db.pool.fetchval("SELECT status FROM run WHERE id = $1", run["id"]) == "live"
        ), "the killed pass wrote a verdict"
        second = worker_process(database_url, redis, data_dir, "worker-judge-2", model)

        async def ended() -> Any:
            return await db.pool.fetchrow(
                "SELECT status, verdict FROM run WHERE id = $1 AND status <> 'live'", run["id"]
            )

        row = await until(ended, RECOVER_WITHIN_S, "the verdict from the next worker")
        assert row["status"] == "passed", row
        # The killed pass's call, then the next worker's: its start-up tick and a queued
        # regrade may both judge at once; one conditional UPDATE writes the one verdict.
        assert len(judge.requests) >= 2
    finally:
        stop_all(second, first, api)
        judge.stop()
