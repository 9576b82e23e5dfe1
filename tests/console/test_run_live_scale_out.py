"""The run page's live poll with two API processes on one database (separate memory):
a write through one is seen by a poll answered by the other, both ways, since the ETag
comes from the run's row and not from anything a process remembers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.console import session as sessions
from app.settings import Settings
from tests.conftest import REDIS_URL, TenantHandle
from tests.console.conftest import sign_in
from tests.console.run_helpers import start, task_for
from tests.threaded_server import free_port

START_TIMEOUT_S = 60
SHOWN_WITHIN_S = 3.0


@pytest.fixture
def second_process(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """Another API process (no worker) sharing the test server's database, queue and
    console secret (so a session signed by one is valid on the other)."""
    assert settings.database_url is not None
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "UNDERSTUDY_DATABASE_URL": settings.database_url,
        "UNDERSTUDY_REDIS_URL": REDIS_URL,
        "UNDERSTUDY_QUEUE_NAME": settings.queue_name,
        "UNDERSTUDY_DATA_DIR": str(tmp_path),
        "UNDERSTUDY_SECRET_KEY": sessions.signing_secret(settings).decode(),
        "UNDERSTUDY_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "app.cli", "serve", "--no-worker", "--port", str(port)]
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the second API process did not start"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _shown_holding(console: httpx.AsyncClient, run_id: str, etag: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < SHOWN_WITHIN_S:
        answer = await console.get(f"/runs/{run_id}/live", headers={"If-None-Match": etag})
        if answer.status_code == 200:
            etag = answer.headers["etag"]
            row = answer.json()["sections"]["checks"].split('data-check="task"')[1]
            if "holding" in row.split("</tr>")[0]:
                return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError("the check never showed holding on the other process")


async def test_a_write_on_one_process_shows_on_a_poll_of_the_other(
    tenant: TenantHandle, second_process: str
) -> None:
    first = await sign_in(tenant.server, tenant.key)
    # The same session cookie, sent to the second process.
    second = httpx.AsyncClient(base_url=second_process, cookies=first.cookies, timeout=30)
    try:
        for writer, poller, writer_url in (
            (first, second, tenant.server),
            (second, first, second_process),
        ):
            run = await start(tenant)
            etag = (await poller.get(f"/runs/{run['id']}/live")).headers["etag"]
            fhir_base = run["fhirBase"].replace(tenant.server, writer_url)
            async with httpx.AsyncClient(base_url=fhir_base, headers=tenant.headers) as fhir:
                assert (await fhir.post("/Task", json=task_for(run))).status_code == 201
            await _shown_holding(poller, run["id"], etag)
            assert (await writer.get(f"/runs/{run['id']}")).status_code == 200
    finally:
        await second.aclose()
        await first.aclose()
