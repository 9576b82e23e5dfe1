"""Scale-out behind a real load balancer: HAProxy (Debian's package) round-robin in
front of several `understudy serve --no-worker` processes, with several `understudy
worker`s, on one PostgreSQL and Redis. Used by tests/faults/test_scale_out.py and by
scripts/scale_out.py (which also measures throughput at 1, 2 and 3 API processes).

`exercise` runs T tenants × R live runs through the balancer: every run replays its
scenario's reference solution over REST and is finished twice at once (two processes
race for its verdict), one MCP session per tenant plays the same scenario, and each
tenant's webhook subscription receives every event. `Report.problems` lists what broke:
a run without exactly one verdict, an event delivered twice or not at all, an MCP
session that failed, a console page that did not answer."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.db import Database
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle, make_tenant
from tests.console.conftest import sign_in
from tests.evals.test_evals import do_the_work
from tests.faults.services import Process, _wait_port, understudy_env
from tests.mcp.client import call_ok, mcp_session, replay_oracle
from tests.threaded_server import free_port
from tests.webhooks.receiver import Receiver

SCENARIO = "scheduling.book-named-practitioner"
# What each run's own writes raise (its patient, its booking): a few hundred events, which
# one receiver in the test's own process can take while the load runs beside it.
WEBHOOK_EVENTS = ["Patient.created", "Appointment.created", "Appointment.updated"]
DELIVERED_WITHIN_S = 60


@dataclass
class Stack:
    balancer: str
    apis: list[Process]
    workers: list[Process]
    haproxy: subprocess.Popen[bytes]

    def alive(self) -> list[str]:
        """The processes that died (empty when all live)."""
        dead = [p.log.name for p in [*self.apis, *self.workers] if not p.alive()]
        return dead + (["haproxy"] if self.haproxy.poll() is not None else [])


def haproxy_config(port: int, backends: list[int]) -> str:
    servers = "\n".join(
        f"    server api{i} 127.0.0.1:{p} check inter 1s fall 5 rise 1"
        for i, p in enumerate(backends)
    )
    return f"""global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    # A health check may wait as a request does on a loaded machine: a backend is taken
    # out after five checks of 5 s fail, not after three slow answers in a row.
    timeout check 5s
    timeout client 120s
    timeout server 120s
    option forwardfor
frontend understudy
    bind 127.0.0.1:{port}
    default_backend apis
backend apis
    balance roundrobin
    option httpchk GET /health
{servers}
"""


@contextmanager
def stack(
    database_url: str, redis_url: str, work_dir: Path, *, apis: int = 3, workers: int = 2
) -> Iterator[Stack]:
    """Migrations first (the first API process applies them), then the rest; all
    stopped on exit."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    work_dir.mkdir(parents=True, exist_ok=True)
    env = understudy_env(
        database_url,
        redis_url,
        work_dir / "data",
        UNDERSTUDY_MAX_LIVE_RUNS="40",
        UNDERSTUDY_SECRET_KEY="scale-out-shared-console-secret",
    )
    (work_dir / "data").mkdir(exist_ok=True)
    started: list[Process] = []
    haproxy: subprocess.Popen[bytes] | None = None
    try:
        api_processes = []
        for i in range(apis):
            port = free_port()
            api = Process(
                ["serve", "--no-worker", "--port", str(port)],
                env,
                work_dir / f"api{i}.log",
                port=port,
            )
            api.start()
            started.append(api)
            api_processes.append(api)
        worker_processes = []
        for i in range(workers):
            worker = Process(["worker"], env, work_dir / f"worker{i}.log")
            worker.start()
            started.append(worker)
            worker_processes.append(worker)
        port = free_port()
        config = work_dir / "haproxy.cfg"
        config.write_text(haproxy_config(port, [p.port or 0 for p in api_processes]))
        with (work_dir / "haproxy.log").open("wb") as out:
            haproxy = subprocess.Popen(
                [binary, "-f", str(config), "-db"], stdout=out, stderr=subprocess.STDOUT
            )
        _wait_port(port, "haproxy", 10)
        balancer = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while httpx.get(f"{balancer}/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "haproxy never found a healthy backend"
            time.sleep(0.2)
        yield Stack(balancer, api_processes, worker_processes, haproxy)
    finally:
        if haproxy is not None:
            haproxy.terminate()
            haproxy.wait(timeout=10)
        for process in reversed(started):
            process.stop()


@dataclass
class Report:
    tenants: int
    runs: int
    verdicts: Counter[str] = field(default_factory=Counter)
    finish_answers: Counter[int] = field(default_factory=Counter)
    events: int = 0
    deliveries: int = 0
    mcp_sessions: int = 0
    retries: int = 0
    # Why the attempts that were retried failed (a slow answer under load times out).
    retried_because: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.tenants} tenants × {self.runs} live runs + {self.mcp_sessions} MCP "
            f"sessions in {self.seconds:.1f} s: verdicts {dict(self.verdicts)}, finish "
            f"answers {dict(self.finish_answers)}, {self.events} events, "
            f"{self.deliveries} deliveries received ({self.retries} retries"
            + (f": {dict(self.retried_because)}" if self.retried_because else "")
            + "); "
            + ("no problems" if not self.problems else f"{len(self.problems)} problems")
        )


async def _tenant_work(
    tenant: TenantHandle, receiver: Receiver, runs: int, report: Report
) -> list[str]:
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    ) as api:
        hooked = await api.post(
            f"{tenant.server}/api/webhooks",
            json={"url": receiver.url_for(str(tenant.id)), "events": WEBHOOK_EVENTS},
        )
        assert hooked.status_code == 201, hooked.text
        started = []
        for _ in range(runs):
            answer = await api.post("/runs", json={"scenarioId": SCENARIO})
            assert answer.status_code == 201, answer.text
            started.append(answer.json())
        # The reference solution of each run (do_the_work reads an eval item's names).
        await asyncio.gather(
            *(do_the_work(tenant, {**run, "startedAtRun": run["startedAt"]}) for run in started)
        )

        async def finish_twice(run: dict[str, Any]) -> None:
            # Two finishes at once, through the balancer: two processes race.
            first, second = await asyncio.gather(
                api.post(f"/runs/{run['id']}/finish"), api.post(f"/runs/{run['id']}/finish")
            )
            report.finish_answers.update([first.status_code, second.status_code])
            answered = [a.json() for a in (first, second) if a.status_code == 200]
            if not answered:
                report.problems.append(f"{run['id']}: no finish answered 200")
            # One verdict: a second finish answers the same one (never a second grading).
            verdicts = {(v["status"], v.get("score"), v.get("finishedAt")) for v in answered}
            if len(verdicts) > 1:
                report.problems.append(f"{run['id']}: two verdicts {sorted(map(str, verdicts))}")

        await asyncio.gather(*(finish_twice(run) for run in started))
        ids: list[str] = [run["id"] for run in started]
        return ids


async def _mcp_session(tenant: TenantHandle, report: Report) -> str | None:
    scenario = builtin_scenarios()[SCENARIO].scenario
    try:
        async with mcp_session(tenant.server, tenant.key, mode="legacy") as client:
            run = await call_ok(client, "start_test_run", {"scenario_id": SCENARIO})
            await replay_oracle(client, run, scenario)
            final = await call_ok(client, "finish_test_run", {})
    except Exception as exc:
        report.problems.append(f"MCP session of {tenant.name}: {type(exc).__name__}: {exc}")
        return None
    report.mcp_sessions += 1
    if final["status"] != "passed":
        report.problems.append(f"MCP run {run['run_id']}: {final['status']}")
    run_id: str = run["run_id"]
    return run_id


async def idle_connection_survives(api: str, idle_s: float) -> bool:
    """Whether one client connection to `api` still answers after sitting idle `idle_s`
    (a balancer reuses idle connections to its backends; uvicorn's own default closes
    them after 5 s, and a request sent on a closing connection is reset)."""
    opened: list[object] = []

    async def note(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            opened.append(info)

    # httpx itself drops a connection idle for 5 s unless told otherwise.
    limits = httpx.Limits(keepalive_expiry=idle_s * 2)
    async with httpx.AsyncClient(base_url=api, timeout=10, limits=limits) as client:
        first = await client.get("/health", extensions={"trace": note})
        await asyncio.sleep(idle_s)
        second = await client.get("/health", extensions={"trace": note})
    return first.status_code == second.status_code == 200 and len(opened) == 1


async def exercise(
    balancer: str, db: Database, receiver: Receiver, *, tenants: int = 5, runs: int = 20
) -> Report:
    report = Report(tenants, runs)
    began = time.monotonic()
    handles = [await make_tenant(db, balancer, prefix="scale") for _ in range(tenants)]
    rest, mcp = await asyncio.gather(
        asyncio.gather(*(_tenant_work(t, receiver, runs, report) for t in handles)),
        asyncio.gather(*(_mcp_session(t, report) for t in handles)),
    )
    run_ids = [i for ids in rest for i in ids] + [i for i in mcp if i is not None]
    rows = await db.pool.fetch(
        "SELECT id, status, verdict IS NOT NULL AS judged FROM run WHERE id = ANY($1)", run_ids
    )
    for row in rows:
        report.verdicts[row["status"]] += 1
        if not row["judged"] or row["status"] != "passed":
            report.problems.append(f"{row['id']}: {row['status']}, verdict {row['judged']}")
    if len(rows) != len(run_ids):
        report.problems.append(f"{len(run_ids) - len(rows)} runs missing")

    # Every event delivered, each exactly once (the receiver always answers 200).
    tenant_ids = [t.id for t in handles]
    deadline = time.monotonic() + DELIVERED_WITHIN_S
    while True:
        pending = await db.pool.fetchval(
            "SELECT count(*) FROM webhook_delivery WHERE tenant_id = ANY($1) "
            "AND status = 'pending'",
            tenant_ids,
        )
        if not pending or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    report.events = await db.pool.fetchval(
        "SELECT count(*) FROM webhook_delivery WHERE tenant_id = ANY($1)", tenant_ids
    )
    ids = Counter(got.headers["webhook-id"] for got in receiver.received)
    report.deliveries = sum(ids.values())
    # A copy the receiver got beyond the attempts recorded for it is a duplicate (two
    # workers sending one attempt); a retry after a failed attempt keeps its id and is
    # an attempt of its own.
    attempts = {
        row["delivery_id"]: row["n"]
        for row in await db.pool.fetch(
            "SELECT delivery_id, count(*) AS n FROM webhook_attempt WHERE tenant_id = ANY($1) "
            "GROUP BY delivery_id",
            tenant_ids,
        )
    }
    twice = [i for i, n in ids.items() if n > attempts.get(i, 0)]
    if twice:
        report.problems.append(
            f"{len(twice)} deliveries received beyond their attempts: {twice[:5]}"
        )
    if pending:
        report.problems.append(f"{pending} deliveries still pending after {DELIVERED_WITHIN_S} s")
    delivered = await db.pool.fetchval(
        "SELECT count(*) FROM webhook_delivery WHERE tenant_id = ANY($1) AND status = 'delivered'",
        tenant_ids,
    )
    if delivered != report.events or len(ids) != report.events:
        report.problems.append(
            f"{report.events} events, {delivered} delivered, {len(ids)} distinct received"
        )
    report.retries = sum(attempts.values()) - len(attempts)
    report.retried_because = Counter(
        row["why"]
        for row in await db.pool.fetch(
            "SELECT coalesce(error, 'HTTP ' || status_code::text) AS why FROM webhook_attempt "
            "WHERE tenant_id = ANY($1) AND (error IS NOT NULL OR status_code >= 300)",
            tenant_ids,
        )
    )

    # The console through the balancer: sign in, list runs, open one.
    console = await sign_in(balancer, handles[0].key)
    try:
        for path in ("/runs", f"/runs/{run_ids[0]}", "/evals", "/board"):
            answer = await console.get(path)
            if answer.status_code != 200:
                report.problems.append(f"console {path}: {answer.status_code}")
    finally:
        await console.aclose()
    report.seconds = time.monotonic() - began
    return report
