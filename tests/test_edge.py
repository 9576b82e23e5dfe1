"""NUL and the other control characters FHIR forbids, lone surrogates and invalid UTF-8
are answered 400 at the edge, naming the field, on every surface (the API's own
middleware, app/edge.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.edge import check_json_body, find_bad_json
from app.kit.text import BadText, check_form
from tests.conftest import TenantHandle

JSON = {"Content-Type": "application/json"}


def _problem_paths(response: httpx.Response) -> list[str]:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 400
    return [e["path"] for e in problem["errors"]]


@pytest.fixture
async def api(tenant: TenantHandle) -> Any:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=30) as c:
        yield c


async def test_run_with_nul_in_scenario_id(api: httpx.AsyncClient) -> None:
    body = b'{"scenarioId": "scheduling.book\\u0000"}'
    response = await api.post("/api/testing/runs", content=body, headers=JSON)
    assert _problem_paths(response) == ["scenarioId"]
    assert "NUL" in response.json()["detail"]


async def test_run_with_raw_nul_in_scenario_id(api: httpx.AsyncClient) -> None:
    body = b'{"scenarioId": "scheduling\x00book"}'
    response = await api.post("/api/testing/runs", content=body, headers=JSON)
    assert _problem_paths(response) == ["scenarioId"]


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\uDFFF", b"\\udbff"])
async def test_run_with_lone_surrogate_in_scenario_id(
    api: httpx.AsyncClient, escape: bytes
) -> None:
    body = b'{"scenarioId": "x' + escape + b'", "label": "fine"}'
    response = await api.post("/api/testing/runs", content=body, headers=JSON)
    assert _problem_paths(response) == ["scenarioId"]
    assert "surrogate" in response.json()["detail"]


async def test_a_surrogate_pair_and_an_escaped_backslash_pass(api: httpx.AsyncClient) -> None:
    # "\ud83d\ude00" is one emoji; "\\u0000" is a backslash and five letters: both fine,
    # so the route itself answers (the scenario does not exist).
    for text in (b"x\\ud83d\\ude00", b"x\\\\u0000"):
        body = b'{"scenarioId": "' + text + b'"}'
        response = await api.post("/api/testing/runs", content=body, headers=JSON)
        assert response.status_code == 404, response.text


async def test_run_list_with_nul_in_label(api: httpx.AsyncClient) -> None:
    response = await api.get("/api/testing/runs?label=%00")
    assert _problem_paths(response) == ["query.label"]
    assert "label" in response.json()["detail"]


@pytest.mark.parametrize("query", ["label=%FF", "label=%ED%A0%80", "la%00bel=x"])
async def test_run_list_with_invalid_utf8_or_nul_name(api: httpx.AsyncClient, query: str) -> None:
    response = await api.get(f"/api/testing/runs?{query}")
    assert len(_problem_paths(response)) == 1


async def test_eval_with_nul_in_label(api: httpx.AsyncClient) -> None:
    body = b'{"scenarios": ["scheduling.book-named-practitioner"], "label": "a\\u0000"}'
    response = await api.post("/api/testing/evals", content=body, headers=JSON)
    assert _problem_paths(response) == ["label"]


async def test_nested_field_is_named_by_its_json_path(api: httpx.AsyncClient) -> None:
    body = (
        b'{"id": "edge.nested", "fixture": [{"resourceType": "Patient"},'
        b' {"resourceType": "Patient", "name": [{"family": "\\u0000"}]}]}'
    )
    response = await api.post("/api/testing/scenarios", content=body, headers=JSON)
    assert _problem_paths(response) == ["fixture.1.name.0.family"]


async def test_path_parameter_with_nul(api: httpx.AsyncClient) -> None:
    for path in ("/api/testing/runs/%00", "/api/testing/runs/%FF/trace"):
        response = await api.get(path)
        assert _problem_paths(response) == ["path"]


async def test_webhook_with_nul_in_url(api: httpx.AsyncClient) -> None:
    body = b'{"url": "http://127.0.0.1:9/\\u0000", "events": ["*"]}'
    response = await api.post("/api/webhooks", content=body, headers=JSON)
    assert _problem_paths(response) == ["url"]
    events = b'{"url": "http://127.0.0.1:9/", "events": ["Patient.created", "\\udc00"]}'
    response = await api.post("/api/webhooks", content=events, headers=JSON)
    assert _problem_paths(response) == ["events.1"]


async def test_usage_with_nul_in_a_query_parameter(api: httpx.AsyncClient) -> None:
    response = await api.get("/api/usage?day=%00")
    assert _problem_paths(response) == ["query.day"]


async def test_eligibility_with_nul_in_patient(api: httpx.AsyncClient) -> None:
    body = b'{"patient": "Patient/\\u0000", "date": "2025-01-01"}'
    response = await api.post("/api/eligibility/$check", content=body, headers=JSON)
    assert _problem_paths(response) == ["patient"]


async def test_mcp_with_nul_in_a_tool_argument(api: httpx.AsyncClient) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        b' "params": {"name": "read", "arguments": {"reference": "Patient/\\u0000"}}}'
    )
    headers = {**JSON, "Accept": "application/json, text/event-stream"}
    response = await api.post("/mcp", content=body, headers=headers)
    assert _problem_paths(response) == ["params.arguments.reference"]


async def test_fhir_answers_an_operation_outcome_naming_the_element(
    api: httpx.AsyncClient,
) -> None:
    body = b'{"resourceType": "Patient", "name": [{"family": "a\\u0000"}]}'
    response = await api.post(
        "/api/fhir/r4/Patient", content=body, headers={"Content-Type": "application/fhir+json"}
    )
    assert response.status_code == 400
    outcome = response.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert outcome["issue"][0]["expression"] == ["name.0.family"]
    assert "NUL" in outcome["issue"][0]["diagnostics"]
    search = await api.get("/api/fhir/r4/Patient?family=%00")
    assert search.json()["issue"][0]["expression"] == ["query.family"]
    form = await api.post(
        "/api/fhir/r4/Patient/_search",
        content=b"family=a%00b",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 400
    assert form.json()["issue"][0]["expression"] == ["family"]


@pytest.mark.parametrize("escape", [b"\\u001f", b"\\u0001", b"\\u000b", b"\x1f"])
async def test_control_characters_fhir_forbids_are_refused_naming_the_element(
    api: httpx.AsyncClient, escape: bytes
) -> None:
    """FHIR strings and codes may not hold characters below U+0020 but tab, LF and CR; our
    search index keys are joined with U+001F, so one inside a code could forge a key."""
    fhir = {"Content-Type": "application/fhir+json"}
    body = (
        b'{"resourceType": "Observation", "status": "final", "code": {"coding": '
        b'[{"system": "http://loinc.org", "code": "2823-3' + escape + b'x"}]}}'
    )
    response = await api.post("/api/fhir/r4/Observation", content=body, headers=fhir)
    assert response.status_code == 400, response.text
    issue = response.json()["issue"][0]
    assert issue["expression"] == ["code.coding.0.code"]
    assert "control character" in issue["diagnostics"]
    search = await api.get("/api/fhir/r4/Observation?code=2823-3%1Fx")
    assert search.status_code == 400
    assert search.json()["issue"][0]["expression"] == ["query.code"]


async def test_tab_line_feed_and_carriage_return_are_text(api: httpx.AsyncClient) -> None:
    body = b'{"resourceType": "Patient", "name": [{"text": "a\\tb\\nc\\r\\u0009d"}]}'
    response = await api.post(
        "/api/fhir/r4/Patient", content=body, headers={"Content-Type": "application/fhir+json"}
    )
    assert response.status_code == 201, response.text
    assert response.json()["name"][0]["text"] == "a\tb\nc\r\td"


async def test_header_with_nul(api: httpx.AsyncClient) -> None:
    # If-None-Exist is a search: a percent-encoded NUL in it reached the database.
    response = await api.post(
        "/api/fhir/r4/Patient",
        json={"resourceType": "Patient"},
        headers={"Content-Type": "application/fhir+json", "If-None-Exist": "identifier=a%00"},
    )
    assert response.status_code == 400, response.text
    issue = response.json()["issue"][0]
    assert issue["expression"] == ["header.if-none-exist.identifier"]
    assert "If-None-Exist".lower() in issue["diagnostics"]


async def test_body_over_the_limit_is_413_on_every_route(api: httpx.AsyncClient) -> None:
    big = b'{"scenarioId": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    response = await api.post("/api/testing/runs", content=big, headers=JSON)
    assert response.status_code == 413
    assert response.json()["errors"][0]["path"] == "body"


def test_body_scan_names_keys_and_survives_deep_nesting() -> None:
    field, message = find_bad_json({"a": [{"b\x00": 1}]}) or ("", "")
    assert (field, message) == ("a.0", "a field name in 'a.0' contains a NUL character (U+0000)")
    check_json_body(b"[" * 100_000 + b"]" * 100_000)  # parses or not: never raises
    with pytest.raises(BadText) as bad:
        check_json_body(b'{"a": {"b": ["ok", "\\ud800"]}}')
    assert bad.value.field == "a.b.1"
    with pytest.raises(BadText) as bad:
        check_form(b"ok=1&na%2Bme=%C3%A9%00", "", "form field")
    assert bad.value.field == "na+me"
    check_form(b"name=%C3%A9+x&other=", "query", "query parameter")
