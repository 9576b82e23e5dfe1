"""The scenario format's `integrations`: each bad stub refused on import with a 4xx that
names its field; good ones import, and a scenario without them hashes as before."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.scenarios.schema import Scenario
from app.scenarios.service import builtin_scenarios
from app.scenarios.validation import content_hash, validate_scenario
from tests.capture.helpers import SCENARIO, api_client
from tests.conftest import TenantHandle

SCENARIO_PLAIN = {k: v for k, v in SCENARIO.items() if k != "integrations"}
GOOD = {"name": "pharmacy", "method": "POST", "path": "/orders", "answer": {"ok": True}}


@pytest.mark.parametrize(
    ("stub", "path", "fragment"),
    [
        ({**GOOD, "name": "Pharmacy"}, "/integrations/0/name", "slug"),
        ({**GOOD, "name": "a b"}, "/integrations/0/name", "slug"),
        ({**GOOD, "method": "FETCH"}, "/integrations/0/method", "'GET'"),
        ({**GOOD, "path": "orders"}, "/integrations/0/path", "start with '/'"),
        ({**GOOD, "path": "/orders/*/items"}, "/integrations/0/path", "last character"),
        ({**GOOD, "path": "/orders?x=1"}, "/integrations/0/path", "query"),
        ({**GOOD, "status": 99}, "/integrations/0/status", "200"),
        ({**GOOD, "status": 600}, "/integrations/0/status", "599"),
        ({**GOOD, "status": "ok"}, "/integrations/0/status", "integer"),
        ({"method": "GET"}, "/integrations/0/name", "required"),
        ({**GOOD, "headers": {}}, "/integrations/0/headers", "unknown field"),
    ],
)
async def test_bad_stubs_are_named(
    tenant: TenantHandle, stub: dict[str, Any], path: str, fragment: str
) -> None:
    broken = {**copy.deepcopy(SCENARIO), "id": "custom.bad-stub", "integrations": [stub]}
    async with api_client(tenant) as client:
        r = await client.post("/scenarios", json=broken, params={"dryRun": "true"})
    assert r.status_code == 422, r.text
    errors = r.json()["errors"]
    assert any(e["path"] == path and fragment in e["message"] for e in errors), errors


def test_a_repeated_stub_is_a_problem() -> None:
    document = {**copy.deepcopy(SCENARIO), "integrations": [GOOD, {**GOOD, "status": 500}]}
    _, problems, _ = validate_scenario(document)
    assert [(p.path, "never answer" in p.message) for p in problems] == [("/integrations/1", True)]


def test_integrations_not_a_list_is_a_shape_problem() -> None:
    _, problems, _ = validate_scenario({**copy.deepcopy(SCENARIO), "integrations": {"a": 1}})
    assert any(p.path == "/integrations" for p in problems), problems


def test_defaults_and_any_json_answer() -> None:
    scenario = Scenario.model_validate(
        {**copy.deepcopy(SCENARIO), "integrations": [{"name": "fax", "answer": [1, "two", None]}]}
    )
    assert scenario.integrations is not None
    stub = scenario.integrations[0]
    assert (stub.method, stub.path, stub.status, stub.answer) == ("*", "/*", 200, [1, "two", None])


def test_scenarios_without_integrations_hash_as_before() -> None:
    # The built-in scenarios that declare none: their content hash must not move (the
    # board groups runs by it).
    plain = [s for s in builtin_scenarios().values() if s.scenario.integrations is None]
    assert len(plain) >= 29
    for loaded in plain:
        hashed = loaded.scenario.model_dump(by_alias=True, exclude_none=True)
        assert "integrations" not in hashed  # what content_hash reads
    with_stub = Scenario.model_validate({**copy.deepcopy(SCENARIO), "integrations": [GOOD]})
    assert content_hash(with_stub) != content_hash(Scenario.model_validate(SCENARIO_PLAIN))
