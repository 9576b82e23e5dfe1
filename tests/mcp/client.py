"""An MCP client for tests (the official SDK over real HTTP) and a replay of a
scenario's oracle through the MCP tools instead of REST."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from app.scenarios.calls import capture_kind, capture_text
from app.scenarios.expansion import expand_path, expand_value
from app.scenarios.schema import Scenario, symbol_name


@asynccontextmanager
async def mcp_session(
    server: str, key: str | None, mode: str = "legacy", client_id: str | None = None
) -> AsyncIterator[mcp.Client]:
    """`mode="legacy"`: the initialize handshake (an MCP session id); `"auto"`: the
    SDK's default, the stateless 2026 protocol. `client_id` is sent as Mcp-Client-Id
    (what gives a stateless client a current run of its own)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    if client_id is not None:
        headers["Mcp-Client-Id"] = client_id
    # A client we pass in is ours to close; the SDK leaves it open.
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{server}/mcp", http_client=http)
        async with mcp.Client(transport, mode=mode) as client:
            yield client


async def call_ok(client: mcp.Client, name: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {error_text(result)}"
    return result.structured_content


async def call_error(client: mcp.Client, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} should have failed: {result.structured_content}"
    return error_text(result)


def error_text(result: CallToolResult) -> str:
    """The error the model reads, without the SDK's 'Error executing tool x: ' prefix."""
    text = " ".join(getattr(block, "text", "") for block in result.content)
    return text.split(": ", 1)[1] if text.startswith("Error executing tool ") else text


def tool_for(method: str, path: str, body: Any) -> tuple[str, dict[str, Any]]:
    """The MCP tool (and its arguments) that stands for one REST call of an oracle."""
    parts = urlsplit(path)
    segments = [s for s in parts.path.split("/") if s]
    query = parse_qsl(parts.query, keep_blank_values=True)
    kind = capture_kind(parts.path)
    if kind == "sms":
        return "send_sms", {"to": body["to"], "body": capture_text(body["body"])}
    if kind == "email":
        to = body["to"] if isinstance(body["to"], list) else [body["to"]]
        subject = body.get("subject") or "(no subject)"
        return "send_email", {"to": to, "subject": subject, "body": capture_text(body["body"])}
    if parts.path == "/api/eligibility/$check":
        args = {"patient": body["patient"], "date": body["date"]}
        if body.get("serviceType"):
            args["service_type"] = body["serviceType"]
        return "check_eligibility", args
    if parts.path == "/Appointment/$find":
        params = dict(query)
        for p in (body or {}).get("parameter", []):
            value = next(v for k, v in p.items() if k.startswith("value"))
            params[p["name"]] = value["reference"] if isinstance(value, dict) else str(value)
        args = {"practitioner": params["practitioner"]}
        for name in ("start", "end"):
            if name in params:
                args[name] = params[name]
        if "duration" in params:
            args["duration_minutes"] = int(params["duration"])
        return "find_appointments", args
    if method == "GET" and len(segments) == 1:
        grouped: dict[str, list[str]] = {}
        for name, value in query:
            grouped.setdefault(name, []).append(value)
        return "fhir_search", {"resource_type": segments[0], "params": grouped}
    if method == "GET":
        return "fhir_read", {"resource_type": segments[0], "id": segments[1]}
    if method == "POST":
        return "fhir_create", {"resource": body}
    if method == "PUT":
        return "fhir_update", {"resource_type": segments[0], "id": segments[1], "resource": body}
    if method == "PATCH":
        return "fhir_patch", {"resource_type": segments[0], "id": segments[1], "patch": body}
    if method == "DELETE":
        return "fhir_delete", {"resource_type": segments[0], "id": segments[1]}
    raise AssertionError(f"no MCP tool for {method} {path}")


async def replay_oracle(client: mcp.Client, run: dict[str, Any], scenario: Scenario) -> None:
    """The scenario's reference solution, every call made through the MCP tools on the
    session's current run (no run_id passed). A message to the simulated patient is
    followed by reading the thread until they answer, as an agent waits for the answer to
    its question before acting on it (`asked` expectations need the reply first)."""
    refs = dict(run["fixture"])
    started = datetime.fromisoformat(run["started_at"])
    patient = (
        refs.get(symbol_name(scenario.patient_sim.patient))
        if scenario.patient_sim is not None
        else None
    )
    for call in scenario.oracle:
        body = expand_value(call.body, refs, started) if call.body else None
        name, args = tool_for(call.method, expand_path(call.path, refs), body)
        result = await call_ok(client, name, args)
        if call.save_as:
            refs[call.save_as] = result["reference"]
        if name == "fhir_create" and patient is not None and _to(body, patient):
            thread = await call_ok(client, "get_patient_messages", {"wait_seconds": 10})
            assert not thread["awaiting_reply"], thread


def _to(body: Any, patient: str) -> bool:
    """Whether a body is a Communication addressed to `patient` ("Patient/<id>")."""
    return (
        isinstance(body, dict)
        and body.get("resourceType") == "Communication"
        and any(r.get("reference") == patient for r in body.get("recipient") or [])
    )
