"""`understudy eval run` driving an agent-mode eval with a real command: a small Python
agent that reads the brief on stdin and books through the run's FHIR base."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

from tests.conftest import TenantHandle
from tests.evals.test_evals import api_client
from tests.threaded_server import free_port
from understudy_client import harness

SCENARIO = "scheduling.book-named-practitioner"
HARNESS_WAIT_SECONDS = 90

AGENT = '''
"""Books the patient named in the brief with Dr. Chen: a free Slot, then an Appointment."""
import os
import re
import sys
from datetime import UTC, datetime, timedelta

import httpx

brief = sys.stdin.read()
patient_id = re.search(r"patient id ([A-Za-z0-9.-]+)", brief).group(1)
print(f"booking Dr. Chen for Patient/{patient_id}", file=sys.stderr)
now = datetime.now(UTC)
headers = {"Authorization": "Bearer " + os.environ["UNDERSTUDY_API_KEY"]}
with httpx.Client(base_url=os.environ["UNDERSTUDY_FHIR_BASE"], headers=headers) as fhir:
    slots = fhir.get(
        "/Slot",
        params=[
            ("schedule", "Schedule/demo-canonical-sched-chen"),
            ("status", "free"),
            ("start", "ge" + (now + timedelta(hours=1)).isoformat(timespec="seconds")),
            ("start", "le" + (now + timedelta(days=13)).isoformat(timespec="seconds")),
            ("_sort", "start"),
            ("_count", "20"),
        ],
    )
    slots.raise_for_status()
    for entry in slots.json().get("entry", []):
        slot = entry["resource"]
        booked = fhir.post(
            "/Appointment",
            json={
                "resourceType": "Appointment",
                "status": "booked",
                "start": slot["start"],
                "end": slot["end"],
                "slot": [{"reference": "Slot/" + slot["id"]}],
                "serviceType": [{"text": "Annual physical"}],
                "participant": [
                    {"actor": {"reference": "Patient/" + patient_id}, "status": "accepted"},
                    {
                        "actor": {"reference": "Practitioner/demo-canonical-prac-chen"},
                        "status": "accepted",
                    },
                ],
            },
        )
        if booked.status_code < 300:
            print("booked Appointment/" + booked.json()["id"])
            break
    else:
        sys.exit("no free slot with Dr. Chen could be booked")
'''


async def eval_run(tenant: TenantHandle, *args: str) -> tuple[int, str, str]:
    """`understudy eval run …` as a subprocess; (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_SHA"}
    env |= {"UNDERSTUDY_URL": tenant.server, "UNDERSTUDY_API_KEY": tenant.key}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "eval",
        "run",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), HARNESS_WAIT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_agent_books_and_every_run_passes(tenant: TenantHandle, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}"
    code, out, err = await eval_run(
        tenant,
        "--label",
        "booking agent v1",
        "--agent-cmd",
        command,
        "--scenarios",
        SCENARIO,
        "--repeats",
        "2",
    )
    assert code == 0, out + err
    assert "pass rate: 2/2 = 100.0%" in out
    assert "pass^2: 1.00 · pass@2: 1.00" in out
    async with api_client(tenant) as client:
        listed = (await client.get("/evals", params={"labelPrefix": "booking agent"})).json()
        [listed_eval] = listed["evals"]
        view = (await client.get(f"/evals/{listed_eval['id']}")).json()
    assert view["status"] == "completed"
    assert view["mode"] == "agent"
    # No --revision, no GITHUB_SHA: the revision of the checkout it ran in, if any.
    assert listed_eval["revision"] == view["revision"] == harness.git_revision()
    assert [r["status"] for r in view["runs"]] == ["passed", "passed"]
    assert all(r["passed"] is True for r in view["runs"])
    for run in view["runs"]:  # the agent's stderr and stdout, prefixed with the run id
        patient = run["fixture"]["patient"]
        assert f"[{run['runId']}] booking Dr. Chen for {patient}" in err
        assert f"[{run['runId']}] booked Appointment/" in err


async def test_a_failing_command_still_gets_its_run_finished(
    tenant: TenantHandle, tmp_path: Path
) -> None:
    code, out, err = await eval_run(
        tenant,
        "--label",
        "crashing agent",
        "--agent-cmd",
        "cat > /dev/null; echo 'agent crashed' >&2; exit 3",
        "--scenarios",
        SCENARIO,
        "--repeats",
        "2",
        "--parallel",
        "1",
        "--revision",
        "crashy v2",
    )
    assert code == 0, out + err  # the eval completed; its runs failed on their merits
    assert "'crashing agent' of revision crashy v2: completed" in out
    assert "pass rate: 0/2 = 0.0%" in out
    assert "most-failed checks:" in out and f"2× {SCENARIO} booked:" in out
    assert err.count("] agent crashed") == 2
    assert err.count("command exited with status 3; finishing the run") == 2
    async with api_client(tenant) as client:
        [listed] = (await client.get("/evals", params={"labelPrefix": "crashing"})).json()["evals"]
    assert listed["status"] == "completed"
    assert listed["counts"] == {"failed": 2}
    assert listed["revision"] == "crashy v2"
    async with api_client(tenant) as client:
        runs = (await client.get("/runs", params={"revision": "crashy v2"})).json()["runs"]
    assert len(runs) == 2 and {r["revision"] for r in runs} == {"crashy v2"}


async def test_an_unreachable_service_exits_2(tenant: TenantHandle) -> None:
    tenant_elsewhere = TenantHandle(
        tenant.id, tenant.name, tenant.key, f"http://127.0.0.1:{free_port()}"
    )
    code, _, err = await eval_run(
        tenant_elsewhere, "--label", "x", "--agent-cmd", "true", "--scenarios", SCENARIO
    )
    assert code == 2
    assert "cannot reach Understudy" in err
