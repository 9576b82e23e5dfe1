"""Which revision `eval run`, `eval ci` and scripts/eval_ci.py start an eval for:
`--revision`, else `GITHUB_SHA`, else the short sha of HEAD in a git checkout, else none."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from understudy_client import ci, harness


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.org", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory git will not look above (whatever holds the test's temporary files)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in ("GIT_DIR", "GIT_WORK_TREE"):
        monkeypatch.delenv(name, raising=False)
    plain = tmp_path / "plain"
    plain.mkdir()
    return plain


@pytest.fixture
def checkout(outside: Path) -> tuple[Path, str]:
    """A git checkout with one commit, and that commit's short sha."""
    repo = outside.parent / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "agent.txt").write_text("v1\n")
    _git(repo, "add", "agent.txt")
    _git(repo, "commit", "-q", "-m", "first")
    return repo, _git(repo, "rev-parse", "--short", "HEAD")


def test_github_sha_comes_first(checkout: tuple[Path, str]) -> None:
    repo, _ = checkout
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert harness.resolve_revision(None, environ={"GITHUB_SHA": sha}, cwd=repo) == sha


def test_a_git_checkout_gives_the_short_sha_of_head(checkout: tuple[Path, str]) -> None:
    repo, short = checkout
    assert harness.resolve_revision(None, environ={}, cwd=repo) == short
    # A blank GITHUB_SHA is no revision: the checkout's is used.
    assert harness.resolve_revision(None, environ={"GITHUB_SHA": "  "}, cwd=repo) == short
    # From a subdirectory of the checkout too.
    (repo / "sub").mkdir()
    assert harness.resolve_revision(None, environ={}, cwd=repo / "sub") == short


def test_neither_leaves_it_out(outside: Path) -> None:
    assert harness.resolve_revision(None, environ={}, cwd=outside) is None


def test_a_checkout_without_a_commit_leaves_it_out(outside: Path) -> None:
    _git(outside, "init", "-q")
    assert harness.resolve_revision(None, environ={}, cwd=outside) is None


def test_no_git_installed_leaves_it_out(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(outside))
    assert harness.git_revision(outside) is None


def test_the_flag_overrides_and_empty_leaves_it_out(checkout: tuple[Path, str]) -> None:
    repo, _ = checkout
    env = {"GITHUB_SHA": "0123456789abcdef"}
    assert harness.resolve_revision("triage-agent v3", environ=env, cwd=repo) == "triage-agent v3"
    assert harness.resolve_revision("", environ=env, cwd=repo) is None


def test_the_flag_is_parsed_by_both_commands() -> None:
    ci_args = ci.build_parser().parse_args(["--label", "main 1", "--revision", " v3 "])
    assert ci_args.revision == "v3"
    assert ci.build_parser().parse_args(["--label", "main 1"]).revision is None
    assert ci.build_parser().parse_args(["--label", "m", "--revision", ""]).revision == ""
    run_parser = argparse.ArgumentParser()
    harness.add_arguments(run_parser)
    run_args = run_parser.parse_args(["--label", "l", "--agent-cmd", "true", "--revision", "abc"])
    assert run_args.revision == "abc"
    with pytest.raises(SystemExit):
        ci.build_parser().parse_args(["--label", "m", "--revision", "x" * 101])


def test_the_request_body_carries_it_only_when_there_is_one() -> None:
    def body(revision: str | None) -> dict[str, object]:
        return harness.eval_request(
            mode="workflow",
            label="main 1",
            scenarios=None,
            category=None,
            repeats=1,
            personas="baseline",
            timeout_seconds=None,
            revision=revision,
        )

    assert body("abc")["revision"] == "abc"
    assert "revision" not in body(None)
