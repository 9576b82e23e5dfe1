"""The CI gate installs alone: `understudy-client` (clients/python) goes into a clean venv
with httpx and pydantic and nothing of the server, and its `understudy-eval` gates a
baseline and a regressed eval against the test server, then compares the two."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.client.test_ci import REPEATS, eval_ci, workflow_args
from tests.conftest import TenantHandle
from tests.evals.test_evals import WORKFLOW

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
SERVER_ONLY = {"fastapi", "starlette", "uvicorn", "asyncpg", "sqlalchemy", "arq", "mcp", "redis"}


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the client distribution installed (not editable)."""
    where = tmp_path_factory.mktemp("client-venv")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    # From a copy: a build in place would leave build/ and *.egg-info in the checkout.
    source = shutil.copytree(
        CLIENT,
        tmp_path_factory.mktemp("client-source") / "python",
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    installed = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return where


def test_the_client_installs_without_the_server(client_venv: Path) -> None:
    python = client_venv / "bin" / "python"
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines()}
    assert {"understudy-client", "httpx", "pydantic"} <= names
    assert not names & SERVER_ONLY, names & SERVER_ONLY
    assert "understudy" not in names  # the server package
    # Nothing of the server is importable from there, and the gate starts.
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('app'))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=client_venv,
    )
    assert probe.stdout.strip() == "None"
    shown = subprocess.run(
        [str(client_venv / "bin" / "understudy-eval"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(command in shown for command in ("run", "ci", "compare"))
    assert sys.prefix != str(client_venv)


async def test_the_installed_gate_passes_fails_and_compares(
    tenant: TenantHandle, client_venv: Path, tmp_path: Path
) -> None:
    gate = [str(client_venv / "bin" / "understudy-eval"), "ci"]
    code, out, err = await eval_ci(
        tenant,
        *workflow_args("alone 1", "--baseline", "label:alone"),
        automate=True,
        command=gate,
        cwd=tmp_path,
    )
    assert code == 0, out + err
    baseline = re.search(r"eval (\S+) 'alone 1'", err)
    assert baseline is not None, err

    code, out, err = await eval_ci(
        tenant,
        *workflow_args("alone 2", "--baseline", "label:alone"),
        automate=False,  # the automation broke: every run fails
        command=gate,
        cwd=tmp_path,
    )
    assert code == 1, out + err
    assert "significant regression" in out, out
    current = re.search(r"eval (\S+) 'alone 2'", err)
    assert current is not None, err

    summary = tmp_path / "compare.md"
    compare = [str(client_venv / "bin" / "understudy-eval"), "compare"]
    code, out, err = await eval_ci(
        tenant,
        current.group(1),
        baseline.group(1),
        "--summary-file",
        str(summary),
        command=compare,
        cwd=tmp_path,
    )
    assert code == 1, out + err
    assert f"baseline: {baseline.group(1)}" in out, out
    assert "significant regression" in summary.read_text()
    # A baseline that does not exist cannot be judged: 2, never 1.
    code, out, err = await eval_ci(
        tenant, current.group(1), "ev_doesnotexist", command=compare, cwd=tmp_path
    )
    assert code == 2, out + err


ACTION = CLIENT.parents[1] / "action.yml"
INPUT = re.compile(r"^\$\{\{ inputs\.([\w-]+) \}\}$")


async def test_the_composite_action_installs_the_client_and_gates(
    tenant: TenantHandle, tmp_path: Path
) -> None:
    """action.yml's own steps, run by bash as a runner would run them: the install step
    makes the client's venv, the gate step runs the eval and writes the job summary."""
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    given = {
        "url": tenant.server,
        "api-key": tenant.key,
        "label": "action 1",
        "baseline": "label:action",
        "mode": "workflow",
        "scenarios": ",".join(WORKFLOW),
        "repeats": REPEATS,
        "min-pass-rate": "0.9",
    }
    assert set(given) <= set(action["inputs"])
    inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()} | given
    runner_temp, summary, output = tmp_path / "runner", tmp_path / "summary.md", tmp_path / "out"
    # The action as a runner checks it out (a copy: its pip build must not write here).
    action_path = tmp_path / "action"
    shutil.copytree(
        CLIENT,
        action_path / "clients" / "python",
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    shutil.copy(ACTION, action_path / "action.yml")
    runner_temp.mkdir()
    base_env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "GITHUB_ACTION_PATH": str(action_path),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_ACTIONS": "true",
    }
    install, gate = action["runs"]["steps"]

    def step_env(step: dict[str, Any]) -> dict[str, str]:
        env = dict(base_env)
        for name, value in step.get("env", {}).items():
            match = INPUT.match(str(value))
            assert match is not None, f"{name}: only inputs reach the steps ({value})"
            env[name] = str(inputs[match.group(1)])
        return env

    installed = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", install["run"]],
        env=step_env(install),
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    code, out, err = await eval_ci(
        tenant,
        automate=True,
        command=["bash", "-c", gate["run"]],
        env=step_env(gate),
        cwd=tmp_path,
        label="action 1",
    )
    assert code == 0, out + err
    assert "✅ Understudy eval `action 1`: passed (exit 0)" in summary.read_text()
    junit = runner_temp / "understudy-eval.xml"
    assert f"junit-file={junit}" in output.read_text()
    assert junit.exists()
