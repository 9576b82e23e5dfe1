"""fhir-kit-client (Node), used unchanged, against the running server: create, read,
update, JSON Patch, a transaction with urn:uuid references, search walked page by page,
conditional update, conditional FHIRPath Patch and conditional delete, delete.

The Node project is tests/fhir/node_clients (package.json and package-lock.json are
committed; node_modules is not). Install it with
`npm ci --prefix tests/fhir/node_clients`; without it this test fails, never skips."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from tests.conftest import TenantHandle

PROJECT = Path(__file__).parent / "node_clients"
INSTALL = "npm ci --prefix tests/fhir/node_clients"


async def test_fhir_kit_client(tenant: TenantHandle) -> None:
    node = shutil.which("node")
    assert node is not None, "node (20 or later) is needed on PATH for the fhir-kit-client test"
    assert (PROJECT / "node_modules" / "fhir-kit-client").is_dir(), (
        f"fhir-kit-client is not installed: run `{INSTALL}`"
    )
    process = await asyncio.create_subprocess_exec(
        node,
        str(PROJECT / "run.mjs"),
        tenant.fhir_base,
        tenant.key,
        cwd=PROJECT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    seen = json.loads(stdout.decode().strip().splitlines()[-1])
    assert seen["created"]["version"] == "1"
    assert seen["read"]["id"] == seen["created"]["id"]
    assert seen["updated"] == {"version": "2", "active": True}
    assert seen["patched"] == {"version": "3", "gender": "other"}
    assert seen["transaction"] == {
        "type": "transaction-response",
        "statuses": ["201 Created"],
        "linkResolved": True,
    }
    assert seen["search"] == {"total": 25, "unique": 25, "pages": 3}
    assert seen["conditionalUpdate"] == {"sameId": True, "versions": ["1", "2"]}
    assert seen["conditionalPatch"]["active"] is True
    assert seen["conditionalPatch"]["version"] == "3"
    assert seen["conditionalDelete"] == "ok"
    assert seen["afterConditionalDelete"] == 410
    assert seen["deleted"] == "ok"
    assert seen["afterDelete"] == 410
    assert seen["missing"] == 404
