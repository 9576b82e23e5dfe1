"""A scripted MCP session that passes a built-in scenario, printing a transcript.

    python scripts/mcp_demo.py [BASE_URL] [KEY]

BASE_URL defaults to http://127.0.0.1:8000 and KEY to the development key that
`./scripts/serve` keeps in .understudy/dev-key. It plays the part of an assistant:
lists the scenarios, starts `scheduling.book-named-practitioner`, looks up Dr. Chen's
free times, books one for the run's patient and finishes the run. Exit status 0 when
the verdict is a pass. The README's transcript is this script's output.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

SCENARIO = "scheduling.book-named-practitioner"
CHEN = "Practitioner/demo-canonical-prac-chen"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def run_demo(base_url: str, key: str, say: Callable[[str], None] = print) -> bool:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        transport = streamable_http_client(f"{base_url.rstrip('/')}/mcp", http_client=http)
        async with mcp.Client(transport, mode="legacy") as client:

            async def use(name: str, arguments: dict[str, Any]) -> Any:
                say(f"→ {name} {_short(arguments)}")
                result = await client.call_tool(name, arguments)
                if result.is_error:
                    text = " ".join(getattr(b, "text", "") for b in result.content)
                    raise SystemExit(f"  {name} failed: {text}")
                return result.structured_content

            listed = await use("list_test_scenarios", {"category": "scheduling", "mode": "agent"})
            say(
                f"← {len(listed['scenarios'])} scenarios: "
                + ", ".join(s["id"] for s in listed["scenarios"])
            )
            run = await use("start_test_run", {"scenario_id": SCENARIO})
            say(f"← run {run['run_id']} (live until {run['deadline']})")
            say(f"  brief: {run['brief']}")
            say(f"  fixture: {_short(run['fixture'])}")
            patient = run["fixture"]["patient"]
            _, patient_id = patient.split("/")
            chart = await use("fhir_read", {"resource_type": "Patient", "id": patient_id})
            name = chart["resource"]["name"][0]
            say(f"← {patient}: {' '.join(name.get('given', []))} {name.get('family', '')}")
            free = await use("find_appointments", {"practitioner": CHEN, "duration_minutes": 30})
            first = free["proposals"][0]
            say(f"← {free['total']} free times; first {first['start']} to {first['end']}")
            booked = await use(
                "fhir_create",
                {
                    "resource": {
                        "resourceType": "Appointment",
                        "status": "booked",
                        "description": "Annual physical with Dr. Chen",
                        "start": first["start"],
                        "end": first["end"],
                        "slot": first["slot"],
                        "participant": [
                            {"actor": {"reference": patient}, "status": "accepted"},
                            {"actor": {"reference": CHEN}, "status": "accepted"},
                        ],
                    }
                },
            )
            say(f"← {booked['outcome']} {booked['reference']}")
            final = await use("finish_test_run", {})
            say(f"← {final['status']} (score {final['score']})")
            for item in final["expectations"]:
                mark = {True: "✓", False: "✗", None: "·"}[item["passed"]]
                needed = "required" if item["required"] else "optional"
                say(f"  {mark} {item['label']} ({needed})")
            return bool(final["passed"])


def main() -> None:
    base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"
    if len(sys.argv) > 2:
        key = sys.argv[2]
    else:
        key_file = Path(".understudy/dev-key")
        if not key_file.exists():
            raise SystemExit("no key given and no .understudy/dev-key: run ./scripts/serve")
        key = key_file.read_text().strip()
    sys.exit(0 if asyncio.run(run_demo(base_url, key)) else 1)


if __name__ == "__main__":
    main()
