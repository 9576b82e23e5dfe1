"""The CI gate (`scripts/eval_ci.py`) as CI runs it: a subprocess against the test server,
while an in-test automation (subscribed to nothing, it polls) does — or fails to do —
the work of each run the eval starts."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import TenantHandle
from tests.console.conftest import sign_in
from tests.evals.test_evals import WORKFLOW, api_client, do_the_work, started_runs
from tests.threaded_server import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "eval_ci.py"
REPEATS = "2"
CI_WAIT_SECONDS = 90
SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


async def automation(tenant: TenantHandle, label: str, *, correct: bool) -> None:
    """Find the eval labelled `label` once the script has started it, then handle every
    run it starts (doing the work or not) and finish it, until the eval has ended."""
    handled: set[str] = set()
    eval_id: str | None = None
    async with api_client(tenant) as client:
        while True:
            if eval_id is None:
                listed = (await client.get("/evals", params={"labelPrefix": label})).json()
                eval_id = next((e["id"] for e in listed["evals"] if e["label"] == label), None)
            if eval_id is not None:
                view = (await client.get(f"/evals/{eval_id}")).json()
                if view["status"] in ("completed", "cancelled"):
                    return
                for item in await started_runs(client, eval_id):
                    if item["runId"] in handled or item["status"] != "live":
                        continue
                    handled.add(item["runId"])
                    if correct:
                        await do_the_work(tenant, item)
                    await client.post(f"/runs/{item['runId']}/finish")
            await asyncio.sleep(0.1)


async def eval_ci(
    tenant: TenantHandle,
    *args: str,
    automate: bool | None = None,
    url: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    command: list[str] | None = None,
    label: str | None = None,
) -> tuple[int, str, str]:
    """Run the script (or `command`, e.g. an installed `understudy-eval ci`); with
    `automate` set, the automation (correct or broken) runs alongside for the eval
    labelled `label` (default: by `--label`). Returns (exit code, stdout, stderr)."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS", "GITHUB_SHA")
    }
    environ |= {"UNDERSTUDY_URL": url or tenant.server, "UNDERSTUDY_API_KEY": tenant.key}
    environ |= env or {}
    process = await asyncio.create_subprocess_exec(
        *(command or [sys.executable, str(SCRIPT)]),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environ,
        cwd=cwd,
    )
    worker: asyncio.Task[None] | None = None
    if automate is not None:
        label = label or args[args.index("--label") + 1]
        worker = asyncio.create_task(automation(tenant, label, correct=automate))
    try:
        out, err = await asyncio.wait_for(process.communicate(), CI_WAIT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def workflow_args(label: str, *extra: str) -> list[str]:
    return [
        "--mode",
        "workflow",
        "--scenarios",
        ",".join(WORKFLOW),
        "--label",
        label,
        "--repeats",
        REPEATS,
        *extra,
    ]


def junit_cases(path: Path) -> list[ET.Element]:
    return list(ET.parse(path).getroot().iter("testcase"))


async def test_first_run_without_baseline_then_unchanged(
    tenant: TenantHandle, tmp_path: Path
) -> None:
    step_summary = tmp_path / "step-summary.md"
    first_md, first_xml = tmp_path / "first.md", tmp_path / "first.xml"
    code, out, err = await eval_ci(
        tenant,
        *workflow_args(
            "main 1",
            "--baseline",
            "label:main",
            "--summary-file",
            str(first_md),
            "--junit-file",
            str(first_xml),
        ),
        automate=True,
        env={"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_SHA": SHA},
    )
    assert code == 0, out + err
    assert f"'main 1' of revision {SHA} (workflow)" in err
    assert "no completed eval with a label starting 'main'" in out
    assert "gating on the pass rate alone" in out
    summary = first_md.read_text()
    assert f"revision `{SHA}`" in summary
    assert "No baseline" in summary and "gated on the pass rate alone" in summary
    runs = len(WORKFLOW) * int(REPEATS)
    assert f"{runs}/{runs} = 100.0%" in summary
    assert "/api/testing" not in summary  # links land on the console's pages
    assert f"{tenant.server}/runs/run_" in summary
    await _links_open_in_the_console(tenant, summary)
    assert step_summary.read_text() == summary  # appended to the (empty) step summary
    cases = junit_cases(first_xml)
    assert len(cases) == runs
    assert not [c for c in cases if c.find("failure") is not None]
    assert "runs done" in err  # progress on stderr

    # Run outside any git checkout, without GITHUB_SHA: no revision.
    second_md, outside = tmp_path / "second.md", tmp_path / "outside"
    outside.mkdir()
    code, out, err = await eval_ci(
        tenant,
        *workflow_args("main 2", "--baseline", "label:main", "--summary-file", str(second_md)),
        automate=True,
        env={"GITHUB_STEP_SUMMARY": str(step_summary), "GIT_CEILING_DIRECTORIES": str(tmp_path)},
        cwd=outside,
    )
    assert code == 0, out + err
    assert "no significant regression" in out
    async with api_client(tenant) as client:
        listed = (await client.get("/evals", params={"labelPrefix": "main"})).json()["evals"]
    assert [e["label"] for e in listed] == ["main 2", "main 1"]
    assert [e["revision"] for e in listed] == [None, SHA]
    summary = second_md.read_text()
    assert f"Baseline: [`{listed[1]['id']}`]" in summary
    assert "no discordant evidence" in summary
    compare = f"{tenant.server}/evals/{listed[0]['id']}/compare?baseline={listed[1]['id']}"
    assert compare in summary
    await _links_open_in_the_console(tenant, summary)
    for scenario in WORKFLOW:
        assert f"| {scenario} | baseline | same |" in summary
    assert step_summary.read_text().count("## ✅ Understudy eval") == 2


async def _links_open_in_the_console(tenant: TenantHandle, summary: str) -> None:
    """Every link of the summary answers 200 to a signed-in browser (not 401)."""
    links = sorted(set(re.findall(r"\]\((http[^)\s]+)\)", summary)))
    assert links
    console = await sign_in(tenant.server, tenant.key)
    try:
        for link in links:
            answer = await console.get(link)
            assert answer.status_code == 200, (link, answer.status_code)
    finally:
        await console.aclose()


async def test_broken_automation_regresses(tenant: TenantHandle, tmp_path: Path) -> None:
    code, out, err = await eval_ci(
        tenant, *workflow_args("main 1", "--baseline", "label:main"), automate=True
    )
    assert code == 0, out + err
    summary_md, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    code, out, err = await eval_ci(
        tenant,
        *workflow_args(
            "pr-7 abc",
            "--baseline",
            "label:main",
            "--require-baseline",
            "--summary-file",
            str(summary_md),
            "--junit-file",
            str(junit),
        ),
        automate=False,
    )
    assert code == 1, out + err
    assert "rule: significant regression" in out
    for scenario in WORKFLOW:
        assert f"warning: cell {scenario} × baseline regressed: 2/2 → 0/2" in out
    summary = summary_md.read_text()
    assert "❌ Understudy eval `pr-7 abc`: failed (exit 1)" in summary
    assert "**significant regression**" in summary
    assert "cannot be told from noise" in summary  # the MDE sentence
    # Underpowered says what is short and that the regression stands regardless.
    runs = len(WORKFLOW) * int(REPEATS)
    assert (
        f"underpowered comparison: {runs} valid baseline runs (20 wanted), {runs} valid "
        "current runs (20 wanted); the significant regression stands"
    ) in summary
    for scenario in WORKFLOW:
        assert f"| {scenario} | baseline | 🔻 regressed | 2/2 (100%) | 0/2 (0%) |" in summary
    assert "### Most-failed checks" in summary
    cases = junit_cases(junit)
    assert len(cases) == len(WORKFLOW) * int(REPEATS)
    failures = [c.find("failure") for c in cases]
    assert all(f is not None and f.get("message", "").startswith("failed: ") for f in failures)
    assert all(f is not None and f.text for f in failures)  # the failed checks, listed


async def test_min_pass_rate_with_failures(tenant: TenantHandle) -> None:
    code, out, err = await eval_ci(
        tenant, *workflow_args("nightly", "--min-pass-rate", "0.99"), automate=False
    )
    assert code == 1, out + err
    assert "rule: pass rate 0.000 is under --min-pass-rate 0.990" in out
    assert "no --baseline given" in out


async def test_require_baseline_with_an_unknown_prefix(tenant: TenantHandle) -> None:
    code, out, err = await eval_ci(
        tenant,
        *workflow_args("pr-1", "--baseline", "label:no-such-prefix", "--require-baseline"),
    )
    assert code == 2, out + err
    assert "rule: no baseline found and --require-baseline is set" in out
    assert "no completed eval with a label starting 'no-such-prefix'" in out
    async with api_client(tenant) as client:
        listed = (await client.get("/evals")).json()["evals"]
    assert listed == []  # judged unjudgeable before spending any runs


async def test_service_unreachable(tenant: TenantHandle, tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    summary = tmp_path / "summary.md"
    code, out, err = await eval_ci(
        tenant, *workflow_args("main 1", "--summary-file", str(summary)), url=closed
    )
    assert code == 2, out + err
    assert f"cannot reach Understudy at {closed}" in out
    assert "could not be judged (exit 2)" in summary.read_text()


async def test_agent_mode_needs_a_command(tenant: TenantHandle) -> None:
    code, _, err = await eval_ci(tenant, "--mode", "agent", "--label", "x")
    assert code == 2
    assert "agent mode needs --agent-cmd" in err


async def test_an_unknown_baseline_id_is_not_judged(tenant: TenantHandle) -> None:
    code, out, err = await eval_ci(tenant, *workflow_args("pr-2", "--baseline", "eval_nope"))
    assert code == 2, out + err
    assert "rule: --baseline eval_nope: no eval 'eval_nope'" in out


async def test_an_eval_that_outlasts_the_timeout_is_cancelled(tenant: TenantHandle) -> None:
    code, out, err = await eval_ci(tenant, *workflow_args("slow", "--timeout", "1"))
    assert code == 2, out + err
    assert "did not complete within --timeout 1 s; it was cancelled" in out
    async with api_client(tenant) as client:
        [listed] = (await client.get("/evals", params={"labelPrefix": "slow"})).json()["evals"]
    assert listed["status"] == "cancelled"
    assert set(listed["counts"]) == {"cancelled"}  # no run left live
