"""What an MCP tool call costs next to the REST call it stands for.

    python scripts/bench_mcp.py [BASE_URL] [KEY] [--calls N]

Starts a run of scheduling.book-named-practitioner over MCP, then reads the run's
patient N times with the `fhir_read` tool and N times with GET on the run's FHIR base,
one call at a time, and prints p50/p99 of each, then a one-line summary last. Defaults:
http://127.0.0.1:8000, the key in .understudy/dev-key, 300 calls. It talks to BASE_URL
only and keeps nothing of its own in Redis (the run it starts is finished at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import httpx
import mcp
from benchkit import figure, summarize
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def bench(base: str, key: str, calls: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with mcp.Client(transport, mode="legacy") as client:
            started = await client.call_tool(
                "start_test_run", {"scenario_id": "scheduling.book-named-practitioner"}
            )
            run = started.structured_content
            assert run is not None, started.content
            _, patient_id = run["fixture"]["patient"].split("/")
            tool: list[float] = []
            for _ in range(calls):
                t0 = time.perf_counter()
                result = await client.call_tool(
                    "fhir_read", {"resource_type": "Patient", "id": patient_id}
                )
                tool.append(time.perf_counter() - t0)
                assert not result.is_error
            rest: list[float] = []
            async with httpx.AsyncClient(headers=headers) as client_rest:
                url = f"{run['fhir_base']}/Patient/{patient_id}"
                for _ in range(calls):
                    t0 = time.perf_counter()
                    response = await client_rest.get(url)
                    rest.append(time.perf_counter() - t0)
                    assert response.status_code == 200
            await client.call_tool("finish_test_run", {})
    stats = {"MCP fhir_read": summarize(tool), "REST GET Patient/{id}": summarize(rest)}
    for name, figures in stats.items():
        print(
            f"{name:<24} {calls} calls: p50 {figures['p50_ms']:.1f} ms, "
            f"p99 {figures['p99_ms']:.1f} ms"
        )
    mcp_p50, rest_p50 = (f["p50_ms"] for f in stats.values())
    print(
        f"bench_mcp: fhir_read p50 {figure(mcp_p50)} ms, REST p50 {figure(rest_p50)} ms "
        f"(MCP +{figure(mcp_p50 - rest_p50)} ms a call), {calls} calls each",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", default="http://127.0.0.1:8000")
    parser.add_argument("key", nargs="?")
    parser.add_argument("--calls", type=int, default=300, help="calls of each kind (300)")
    args = parser.parse_args()
    if not 1 <= args.calls <= 100_000:
        parser.error("--calls must be 1..100000")
    key = args.key or Path(".understudy/dev-key").read_text().strip()
    asyncio.run(bench(args.base.rstrip("/"), key, args.calls))


if __name__ == "__main__":
    main()
