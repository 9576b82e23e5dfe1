"""What the run tools answer, dumped the way the SDK dumps a tool's result (by alias): the
contract's models nested in it (RunProgress, ExpectationResult with its Evidence) keep
the snake_case keys MCP clients read, not the REST API's camelCase, and the published
output schema names the same keys. No server needed: the SDK's own conversion is used."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import func_metadata

from app.mcp.run_tools import get_test_run
from app.mcp.schemas import TestRun
from understudy_client.contract.runs import Evidence, ExpectationResult, RunProgress

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def _run(**changes: Any) -> TestRun:
    fields: dict[str, Any] = {
        "run_id": "r1",
        "status": "live",
        "scenario_id": "s1",
        "mode": "agent",
        "variant": None,
        "fixture": {"patient": "Patient/p1"},
        "fhir_base": "http://x/api/testing/runs/r1/fhir/r4",
        "started_at": AT.isoformat(),
        "deadline": AT.isoformat(),
    }
    return TestRun(**(fields | changes))


def _expectation(id: str, children: list[ExpectationResult]) -> ExpectationResult:
    return ExpectationResult(
        id=id,
        label="booked",
        type="resource",
        required=True,
        weight=1.0,
        passed=False,
        score=0.0,
        evidence=Evidence(matches=[], closest="Appointment/a", clauses=[{"where": "x"}]),
        detail="no booked Appointment",
        children=children,
    )


def _structured(run: TestRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result as the SDK sends it (structuredContent) and the tool's output schema."""
    meta = func_metadata(get_test_run, skip_names=["ctx"])
    assert meta.output_schema is not None
    result = meta.convert_result(run)
    structured = getattr(result, "structured_content", None)
    assert isinstance(structured, dict)
    return structured, meta.output_schema


def _properties(schema: dict[str, Any], node: dict[str, Any]) -> set[str]:
    """The property names of a schema node, following a $ref (or a nullable anyOf)."""
    for option in node.get("anyOf", []):
        if option.get("type") != "null":
            node = option
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return set(node["properties"])


def test_progress_answers_snake_case_as_the_schema_says() -> None:
    progress = RunProgress(required_total=3, required_holding=1, last_graded_at=AT)
    structured, schema = _structured(_run(progress=progress))
    assert structured["progress"] == {
        "required_total": 3,
        "required_holding": 1,
        "last_graded_at": AT.isoformat(),
    }
    assert _properties(schema, schema["properties"]["progress"]) == set(structured["progress"])


def test_expectations_answer_their_keys_children_included() -> None:
    any_of = _expectation("any", [_expectation("one", []), _expectation("two", [])])
    structured, schema = _structured(_run(status="failed", expectations=[any_of]))
    [answered] = structured["expectations"]
    old_keys = {"id", "label", "type", "required", "passed", "detail", "evidence", "children"}
    assert old_keys | {"weight", "score"} == set(answered)
    assert [c["id"] for c in answered["children"]] == ["one", "two"]
    assert all(c["children"] == [] for c in answered["children"])  # REST leaves it out
    assert answered["evidence"] == {
        "matches": [],
        "closest": "Appointment/a",
        "clauses": [{"where": "x"}],
    }
    items = schema["properties"]["expectations"]["items"]
    assert set(answered) == _properties(schema, items)
    assert set(answered["evidence"]) <= _properties(
        schema, schema["$defs"]["ExpectationResult"]["properties"]["evidence"]
    )
