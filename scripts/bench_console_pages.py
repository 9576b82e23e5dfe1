"""What the console's pages cost on a tenant with 2,000 runs: the runs and evals lists
(default page and filtered), the board page, and a finished run's page with 200 traced
calls and its end-state diff.

    python scripts/bench_console_pages.py [--requests N] [--database NAME] [--keep]

Set-up: `understudy serve --dev` (benchkit.server_env: a scratch database, default
understudy_bench_console_pages, created afresh and migrated by the server, and a Redis
queue of its own) serves on --port; the dev tenant gets 40 evals of 50 runs (2,000 run
rows, finished, the product's `Eval`, `EvalItem` and `Run` models written with COPY by
`bench_evals_list.seed`, so the eval pages render them). Then one real run: a scenario
whose reference solution files a Task, done by a "wrong agent" that files it, sends a
message and resolves an unrelated Condition (collateral), plus GETs up to 200 traced
calls, then finished (graded: its verdict holds the diff). Each page is timed N times (default 50,
after 3 warm-ups) one at a time over loopback, signed in.

Goals (issue 26): run page p95 <= 150 ms; runs and evals lists p95 <= 100 ms; board
p95 <= 200 ms. Reference, same run: the REST twins (GET /api/testing/runs?limit=50,
/api/testing/evals, /api/testing/board, /api/testing/runs/{id} + /trace): the same data
without rendering, so page / twin is what the console adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
from bench_console import sign_in
from bench_evals_list import agent_scenarios, seed
from benchkit import (
    HOST,
    add_scratch_arguments,
    check_scratch_arguments,
    check_services,
    database_url,
    figure,
    log,
    mark,
    percentile,
    print_rows,
    run_report,
    scratch_server,
)

TRACE_ROWS = 200
GOALS_MS = {"run page": 150.0, "runs list": 100.0, "evals list": 100.0, "board": 200.0}
CHEN = "Practitioner/demo-canonical-prac-chen"
TEXT = "I've booked you a visit on Monday at 9 am."
# The scenario the filtered evals list asks for: the first each seeded eval plans.
EVAL_SCENARIO = agent_scenarios()[0].scenario.id

SCENARIO: dict[str, Any] = {
    "id": "bench.console-diff",
    "title": "Console bench: a wrong agent's diff",
    "category": "messaging",
    "modes": ["agent"],
    "timeoutSeconds": 1800,
    "brief": "{{patient.name}} asked for a call back. File a Task.",
    "fixture": [
        {"resourceType": "Patient", "id": "@patient", "name": [{"family": "Bench"}]},
        {
            "resourceType": "Condition",
            "id": "@problem",
            "clinicalStatus": {"coding": [{"code": "active"}]},
            "code": {"text": "Seasonal allergic rhinitis"},
            "subject": {"reference": "@patient"},
        },
    ],
    "expectations": [
        {
            "id": "task",
            "type": "resource",
            "label": "A Task",
            "resourceType": "Task",
            "where": ["for.reference = 'Patient/' + %fixture.patient"],
        }
    ],
    "oracle": [
        {
            "method": "POST",
            "path": "/Task",
            "body": {
                "resourceType": "Task",
                "status": "requested",
                "intent": "order",
                "for": {"reference": "@patient"},
            },
        }
    ],
}


async def wrong_run(api: httpx.AsyncClient) -> str:
    assert (await api.post("/api/testing/scenarios", json=SCENARIO)).status_code in (200, 201)
    answer = await api.post("/api/testing/runs", json={"scenarioId": SCENARIO["id"]})
    assert answer.status_code == 201, answer.text
    run = answer.json()
    fhir, patient, problem = run["fhirBase"], run["fixture"]["patient"], run["fixture"]["problem"]
    task = {"resourceType": "Task", "status": "requested", "intent": "order",
            "for": {"reference": patient}, "description": "Call back"}  # fmt: skip
    assert (await api.post(f"{fhir}/Task", json=task)).status_code == 201
    message = {"resourceType": "Communication", "status": "completed",
               "subject": {"reference": patient}, "recipient": [{"reference": patient}],
               "sender": {"reference": CHEN},
               "payload": [{"contentString": TEXT}]}  # fmt: skip
    assert (await api.post(f"{fhir}/Communication", json=message)).status_code == 201
    body = (await api.get(f"{fhir}/{problem}")).json()
    body["clinicalStatus"]["coding"][0]["code"] = "resolved"
    assert (await api.put(f"{fhir}/{problem}", json=body)).status_code == 200
    for _ in range(TRACE_ROWS - 4):
        assert (await api.get(f"{fhir}/{patient}")).status_code == 200
    final = await api.post(f"/api/testing/runs/{run['id']}/finish")
    assert final.status_code == 200, final.text
    run_id: str = run["id"]
    return run_id


async def timed(client: httpx.AsyncClient, paths: Sequence[str], n: int) -> list[float]:
    for _ in range(3):
        for path in paths:
            (await client.get(path)).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        for path in paths:
            answer = await client.get(path)
            if answer.status_code != 200:
                raise AssertionError(f"{path}: HTTP {answer.status_code}")
        out.append(time.perf_counter() - t0)
    return out


async def measure(base: str, key: str, n: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as api:
        run_id = await wrong_run(api)
        console = await sign_in(base, key)
        try:
            page = await console.get(f"/runs/{run_id}")
            assert 'class="diff-entry collateral"' in page.text, "the run page shows no diff"
            pages = {
                "run page": [f"/runs/{run_id}"],
                "runs list": ["/runs"],
                "runs list, filtered": ["/runs?status=failed&label=bench-0"],
                "evals list": ["/evals"],
                "evals list, filtered": [
                    f"/evals?label=bench-0&status=completed&scenario={EVAL_SCENARIO}"
                ],
                "board": ["/board"],
            }
            twins = {
                "run page": [f"/api/testing/runs/{run_id}", f"/api/testing/runs/{run_id}/trace"],
                "runs list": ["/api/testing/runs?limit=50"],
                "runs list, filtered": ["/api/testing/runs?limit=50&status=failed"],
                "evals list": ["/api/testing/evals?limit=50"],
                "evals list, filtered": [
                    "/api/testing/evals?limit=50&labelPrefix=bench-0&status=completed"
                    f"&scenarioId={EVAL_SCENARIO}"
                ],
                "board": ["/api/testing/board"],
            }
            out: dict[str, Any] = {}
            for name, paths in pages.items():
                took = await timed(console, paths, n)
                ref = await timed(api, twins[name], n)
                out[name] = {
                    "p50_ms": round(percentile(took, 50) * 1000, 1),
                    "p95_ms": round(percentile(took, 95) * 1000, 1),
                    "twin_p95_ms": round(percentile(ref, 95) * 1000, 1),
                }
        finally:
            await console.aclose()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_scratch_arguments(parser, "understudy_bench_console_pages", 0)
    parser.add_argument("--requests", type=int, default=50, help="timed requests a page (50)")
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    if not 1 <= args.requests <= 10_000:
        parser.error("--requests must be 1..10000")
    os.environ.setdefault("TZ", "UTC")
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--dev", "--port", str(args.port)]
    queue = f"understudy:bench-console-pages:{os.getpid()}"
    report: dict[str, Any] = {"command": command, "database": args.database, "queue": queue}

    def serve_and_measure() -> None:
        with scratch_server(args, queue, "bench_console_pages_", command) as server:
            url = database_url(args.pg_port, args.database)
            written = asyncio.run(seed(url, 20, 50))
            log(f"seeded {written} runs")
            report["seeded_runs"] = written
            report["pages"] = asyncio.run(
                measure(f"http://{HOST}:{args.port}", server.key, args.requests)
            )

    def goal(name: str) -> float:
        return GOALS_MS[name.split(",")[0]]

    def table(r: dict[str, Any]) -> None:
        rows = []
        for name, m in r["pages"].items():
            rows.append(
                (
                    name,
                    f"p95 <= {goal(name):.0f} ms",
                    f"p50 {m['p50_ms']} ms, p95 {m['p95_ms']} ms (REST twin p95 "
                    f"{m['twin_p95_ms']} ms)",
                    mark(m["p95_ms"] <= goal(name)),
                )
            )
        print_rows(rows)

    def summary(r: dict[str, Any], error: str | None) -> str:
        if error is not None:
            return f"bench_console_pages: failed — {error}"
        met = sum(1 for n, m in r["pages"].items() if m["p95_ms"] <= goal(n))
        shown = ", ".join(f"{n} p95 {figure(m['p95_ms'])} ms" for n, m in r["pages"].items())
        return (
            f"bench_console_pages: {r['seeded_runs']} runs; {shown} — "
            f"{met} of {len(r['pages'])} goals met"
        )

    return run_report(report, args.json_out, serve_and_measure, table, summary)


if __name__ == "__main__":
    sys.exit(main())
