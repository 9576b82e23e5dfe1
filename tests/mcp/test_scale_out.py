"""MCP behind a round-robin load balancer: two API processes (separate uvicorn
processes, so separate memory) on one database and Redis, and a 2025-protocol client
whose consecutive requests alternate between them through a proxy with no affinity."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.scenarios.service import builtin_scenarios
from app.settings import Settings
from tests.conftest import REDIS_URL, TenantHandle
from tests.mcp.client import call_ok, mcp_session, replay_oracle
from tests.mcp.proxy import RoundRobinProxy, served_by
from tests.threaded_server import ThreadedServer, free_port

SCENARIO = "scheduling.book-named-practitioner"
START_TIMEOUT_S = 60


def _api_process(settings: Settings, port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    assert settings.database_url is not None
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "UNDERSTUDY_DATABASE_URL": settings.database_url,
        "UNDERSTUDY_REDIS_URL": REDIS_URL,
        "UNDERSTUDY_QUEUE_NAME": settings.queue_name,  # the test server's worker grades
        "UNDERSTUDY_DATA_DIR": str(data_dir),
        "UNDERSTUDY_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "app.cli", "serve", "--no-worker", "--port", str(port)]
    data_dir.mkdir(parents=True)
    with (data_dir / "serve.log").open("wb") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"API process exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"API process at {url} did not start")


@pytest.fixture
def two_processes(settings: Settings, tmp_path: Path) -> Iterator[list[str]]:
    ports = [free_port(), free_port()]
    dirs = [tmp_path / f"api{i}" for i in range(len(ports))]
    processes = [_api_process(settings, p, d) for p, d in zip(ports, dirs, strict=True)]
    try:
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for url, process, data_dir in zip(urls, processes, dirs, strict=True):
            _wait_healthy(url, process, data_dir / "serve.log")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def test_scenario_passes_with_requests_alternating_between_processes(
    tenant: TenantHandle, two_processes: list[str]
) -> None:
    proxy = RoundRobinProxy(two_processes)
    port = free_port()
    server = ThreadedServer(proxy, port, "round-robin proxy")
    server.start()
    try:
        scenario = builtin_scenarios()[SCENARIO].scenario
        async with mcp_session(f"http://127.0.0.1:{port}", tenant.key, mode="legacy") as client:
            run = await call_ok(client, "start_test_run", {"scenario_id": SCENARIO})
            await replay_oracle(client, run, scenario)
            patient_type, patient_id = run["fixture"]["patient"].split("/")
            read = await call_ok(
                client, "fhir_read", {"resource_type": patient_type, "id": patient_id}
            )
            final = await call_ok(client, "finish_test_run", {})
    finally:
        server.stop()
    failing = [e for e in final["expectations"] if e["required"] and not e["passed"]]
    assert final["status"] == "passed", failing
    assert read["acted_on"]["base"] == "run"
    assert read["acted_on"]["run_id"] == run["run_id"]

    # One MCP session, issued on the initialize answer and sent on every later request.
    opening = proxy.log[0]
    assert opening.method == "POST" and opening.session is None and opening.status == 200
    sessions = {f.session for f in proxy.log[1:]}
    assert len(sessions) == 1 and None not in sessions, proxy.log
    (session,) = sessions
    assert session is not None
    order = served_by(proxy.log, session)
    # Every request answered by the other process than the one before it.
    assert len(order) >= 8, order
    assert set(order) == {0, 1}
    assert all(a != b for a, b in itertools.pairwise(order)), order
    assert all(f.status < 400 for f in proxy.log if f.method == "POST"), proxy.log


async def test_owners_stay_apart_across_processes(
    tenant: TenantHandle, two_processes: list[str]
) -> None:
    """Through the round-robin proxy (every request to the other process): a stateless
    client's Mcp-Client-Id keeps its run whichever process answers, a second session
    never sees a run another session started, and adopting by run_id works."""
    proxy = RoundRobinProxy(two_processes)
    port = free_port()
    server = ThreadedServer(proxy, port, "round-robin proxy")
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        async with (
            mcp_session(url, tenant.key, mode="auto", client_id="agent-x") as stateless,
            mcp_session(url, tenant.key, mode="legacy") as session,
        ):
            run = await call_ok(stateless, "start_test_run", {"scenario_id": SCENARIO})
            for _ in range(3):  # each answered by the other process than the one before
                state = await call_ok(stateless, "get_test_run", {})
                assert state["run_id"] == run["run_id"]
                other = await call_ok(session, "fhir_search", {"resource_type": "Patient"})
                assert other["acted_on"]["base"] == "tenant"
                assert other["acted_on"]["live_runs"][0]["run_id"] == run["run_id"]
            adopted = await call_ok(session, "start_test_run", {"run_id": run["run_id"]})
            assert adopted["run_id"] == run["run_id"]
            for _ in range(2):
                mine = await call_ok(session, "fhir_search", {"resource_type": "Patient"})
                assert mine["acted_on"]["run_id"] == run["run_id"]
            await call_ok(session, "finish_test_run", {})
    finally:
        server.stop()
    assert {f.upstream for f in proxy.log} == {0, 1}
    assert all(f.status < 400 for f in proxy.log if f.method == "POST"), proxy.log
