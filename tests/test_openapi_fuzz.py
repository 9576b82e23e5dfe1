"""Schemathesis over the whole OpenAPI document, statefully, against the live test server.

Sequences follow the document's links (a run's id from POST /api/testing/runs into its
finish, cancel, trace and data; a webhook's into its deliveries and test; an eval's; an
imported scenario's; a FHIR resource's), so most calls reach real objects. Every
response must be declared: no 5xx, its status code, content type and body schema in the
document. Failures are collected (no shrinking) and reported together at the end.

First every operation on its own (the whole surface, linked or not), then sequences
along the links. CI runs a fixed seed; UNDERSTUDY_FUZZ_SEED picks another and
UNDERSTUDY_FUZZ_EXAMPLES (examples per operation, 25 by default; sequences scale
with it) runs more, e.g. `UNDERSTUDY_FUZZ_SEED=$RANDOM UNDERSTUDY_FUZZ_EXAMPLES=100`.
"""

from __future__ import annotations

import collections
import itertools
import os
import time
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.db import Database
from tests.conftest import TenantHandle, make_tenant
from tests.threaded_server import free_port

SEED = int(os.environ.get("UNDERSTUDY_FUZZ_SEED", "20240612"))
# UNDERSTUDY_FUZZ_EXAMPLES scales both phases: examples per operation, and sequences.
SCALE = float(os.environ.get("UNDERSTUDY_FUZZ_EXAMPLES", "25")) / 25
PER_OPERATION = max(1, round(25 * SCALE))
SEQUENCES = max(1, round(120 * SCALE))
STEPS = 10
MIN_CASES = round(2000 * SCALE)
# Sequences share a few tenants, in turn: each tenant's live-run limit and write quota
# are reached more slowly, and a 429 is a declared answer when they are.
TENANTS = 4
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
async def tenants(db: Database, server_url: str) -> list[TenantHandle]:
    return [await make_tenant(db, server_url, "fuzz") for _ in range(TENANTS)]


def _cleanup(server: str, tenant: TenantHandle) -> None:
    """End what a sequence left live, so the next one on this tenant can start runs."""
    with httpx.Client(base_url=server, headers=tenant.headers, timeout=30) as http:
        for ev in http.get("/api/testing/evals", params={"limit": 200}).json()["evals"]:
            if ev.get("status") not in ("complete", "cancelled"):
                http.post(f"/api/testing/evals/{ev['id']}/cancel")
        runs = http.get("/api/testing/runs", params={"status": "live", "limit": 500})
        for run in runs.json()["runs"]:
            http.post(f"/api/testing/runs/{run['id']}/cancel")


class Ledger:
    """Every call made, every status seen, and the first failure of each kind."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[int] = collections.Counter()
        self.failures: dict[str, str] = {}
        self.by_status: collections.Counter[str] = collections.Counter()

    def check(self, case: Any, response: Any) -> None:
        self.calls[f"{case.method.upper()} {case.path}"] += 1
        self.statuses[response.status_code] += 1
        self.by_status[f"{case.method.upper()} {case.path} {response.status_code}"] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (FailureGroup, AssertionError) as exc:
            key = f"{case.method.upper()} {case.path} -> {response.status_code}"
            self.failures.setdefault(
                key, f"{exc}\n  request: {case.as_curl_command()}\n  body: {response.text[:400]}"
            )


def _settings(examples: int, **extra: Any) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
        **extra,
    )


def test_openapi_surface(server_url: str, tenants: list[TenantHandle]) -> None:
    schema = schemathesis.openapi.from_url(
        f"{server_url}/openapi.json", config=SchemathesisConfig()
    )
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the document itself must load
        operations.append(result.ok())
    # Deliveries go to a closed port on loopback: never anywhere else.
    sink = f"http://127.0.0.1:{free_port()}/hook"
    turn = itertools.cycle(tenants)
    ledger = Ledger()

    def call(case: Any, tenant: TenantHandle) -> Any:
        if case.path == "/api/webhooks" and isinstance(case.body, dict) and "url" in case.body:
            case.body["url"] = sink
        resource_type = (case.path_parameters or {}).get("resource_type")
        if isinstance(case.body, dict) and case.method in ("POST", "PUT") and resource_type:
            # A body about its path's type (a random pairing would almost never be).
            case.body["resourceType"] = resource_type
            if case.method == "PUT":
                case.body["id"] = case.path_parameters["resource_id"]
        if case.headers:  # the tenant's key, never a generated one
            case.headers = {k: v for k, v in case.headers.items() if k.lower() != "authorization"}
        return case.call(
            base_url=server_url,
            headers={"Authorization": f"Bearer {tenant.key}"},
            timeout=60,
        )

    started = time.monotonic()
    # Each operation on its own: the whole surface, links or not.
    for operation in operations:
        tenant = next(turn)

        @hypothesis.given(case=operation.as_strategy())
        @_settings(PER_OPERATION)
        def each(case: Any) -> None:
            ledger.check(case, call(case, tenant))  # noqa: B023 (run before the loop moves on)

        hypothesis.seed(SEED)(each)()
        _cleanup(server_url, tenant)

    # Sequences along the links, with the ids the earlier calls returned.
    class Sequence(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.tenant = next(turn)

        def teardown(self) -> None:
            _cleanup(server_url, self.tenant)

        def call(self, case: Any, **kwargs: Any) -> Any:
            return call(case, self.tenant)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            ledger.check(case, response)

    hypothesis.seed(SEED)(Sequence).run(settings=_settings(SEQUENCES, stateful_step_count=STEPS))
    elapsed = time.monotonic() - started
    total = sum(ledger.calls.values())
    summary = (
        f"{total} cases in {elapsed:.0f} s, statuses {dict(sorted(ledger.statuses.items()))}, "
        f"seed {SEED}"
    )
    print(summary)
    for key, count in sorted(ledger.by_status.items()):
        print(f"  {count:5d} {key}")
    failures = ledger.failures
    assert not failures, summary + "\n\n" + "\n\n".join(f"{k}: {v}" for k, v in failures.items())
    assert total >= MIN_CASES, summary
    never = {f"{op.method.upper()} {op.path}" for op in operations} - set(ledger.calls)
    assert not never, f"never called: {sorted(never)}"
