"""The workflow a low-code platform builds (webhook trigger → HTTP GET the lab order →
HTTP POST a Task), the way such a platform behaves: its webhook node checks a static
header token (it cannot verify a signature without custom code), and its HTTP node parses
a body only when it is labelled `application/json`. The run passes with the Task owned by
the ordering clinician."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.conftest import TenantHandle
from tests.fhir.test_negotiation import json_only
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_workflow_runs import (
    OKAFOR,
    api,
    expectation,
    route_critical_result,
    start_workflow,
    wait_for_run,
)

TOKEN = "lowcode-7d1e5f0a9c3b42e8"


async def test_a_header_auth_json_only_workflow_routes_the_critical_result(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    handled: list[dict[str, Any]] = []
    refused = 0
    errors: list[BaseException] = []

    async with api(tenant) as client, json_only(tenant) as http_node:

        async def workflow() -> None:
            nonlocal refused
            index = 0
            while True:
                while index < len(receiver.received):
                    got = receiver.received[index]
                    index += 1
                    # The webhook node's header auth: the token, nothing else.
                    if got.headers.get("authorization") != f"Bearer {TOKEN}":
                        refused += 1
                        continue
                    event = got.json()
                    try:
                        await route_critical_result(http_node, event)
                    except Exception as exc:  # surfaced below, not lost in the task
                        errors.append(exc)
                    handled.append(event)
                await asyncio.sleep(0.02)

        sub = await client.post(
            "/api/webhooks",
            json={
                "url": receiver.url,
                "events": ["result.final"],
                "headers": {"Authorization": f"Bearer {TOKEN}"},
            },
        )
        assert sub.status_code == 201, sub.text
        task = asyncio.create_task(workflow())
        try:
            began = time.monotonic()
            run = await start_workflow(client, "results.critical-lab")
            final = await wait_for_run(client, run["id"], {"passed", "failed", "timed_out"})
            took = time.monotonic() - began
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        tasks = (await http_node.get(f"{run['fhirBase']}/Task")).json()

    assert errors == [] and refused == 0
    assert len(handled) == 3  # two Observations and the report
    assert final["status"] == "passed", final
    assert expectation(final, "urgent-task")["passed"] is True
    assert took < 8
    [created] = [e["resource"] for e in tasks["entry"]]
    assert created["owner"]["reference"] == OKAFOR
    assert created["focus"]["reference"] == run["fixture"]["report"]
