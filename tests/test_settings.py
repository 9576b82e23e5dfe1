"""Settings are checked against their bounds, from the environment and in clone()."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from app.settings import Settings


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("grade_interval_seconds", 0),  # crashed the worker's cron table before
        ("grade_interval_seconds", 61),
        ("max_live_runs", 0),
        ("db_pool_size", 1),
        ("webhook_timeout_seconds", 0),
        ("webhook_retry_seconds", [0]),
        ("webhook_retry_seconds", [1.0] * 21),
        ("port", 70000),
        ("log_level", "chatty"),
        ("secret_key", "short"),  # signs console sessions: a guessable one forges them
    ],
)
def test_out_of_bounds_is_refused(name: str, value: object) -> None:
    with pytest.raises(ValidationError, match=name):
        Settings.model_validate({name: value})
    with pytest.raises(ValidationError, match=name):
        Settings().clone(**{name: value})


def test_clone_keeps_the_environment_and_applies_changes() -> None:
    base = Settings(port=9001, slot_weeks=3)
    copy = base.clone(host="0.0.0.0")
    assert (copy.port, copy.slot_weeks, copy.host) == (9001, 3, "0.0.0.0")


def test_the_cli_names_a_bad_variable_without_a_traceback() -> None:
    env = {**os.environ, "UNDERSTUDY_GRADE_INTERVAL_SECONDS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "UNDERSTUDY_GRADE_INTERVAL_SECONDS" in done.stderr
    assert "Traceback" not in done.stderr
