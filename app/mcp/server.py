"""The MCP server: testing tools and FHIR tools for agents that reach us over MCP.

Every tool that has a REST equivalent makes that REST call in process (`bridge.call`),
so it is validated, counted, evented and traced exactly like the REST call, with
transport `mcp`. FHIR tools act through the current run's view: the run this MCP
client started or adopted last (`start_test_run`; a client is its MCP session, or a
stateless client's `Mcp-Client-Id`, see `sessions`), or the one named by `run_id`, else
the tenant's base. A run another client started is never used without `run_id`. Every
FHIR tool's result says which base it used (`acted_on`), and on the tenant base lists
the tenant's live runs so that the model can pass run_id.

This module assembles the server (`build_mcp`) from the tools of `run_tools` (scenarios,
runs), `message_tools` (the patient's thread), `capture_tools` (SMS and e-mail, captured
on the run) and `fhir_tools` (FHIR, free times, eligibility); what one tool call shares
(the caller, its current run, the in-process REST call, the base acted on) is
`tool_call`, what the tools answer is `schemas`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from app.mcp.capture_tools import send_email, send_sms
from app.mcp.fhir_tools import (
    check_eligibility,
    fhir_create,
    fhir_delete,
    fhir_patch,
    fhir_read,
    fhir_search,
    fhir_update,
    find_appointments,
)
from app.mcp.message_tools import get_patient_messages, message_patient
from app.mcp.run_tools import finish_test_run, get_test_run, list_test_scenarios, start_test_run
from app.settings import Settings

__all__ = ["INSTRUCTIONS", "TOOLS", "allowed_hosts", "build_mcp"]

INSTRUCTIONS = """\
Understudy is a FHIR R4 test sandbox. To test yourself: list_test_scenarios, then
start_test_run with a scenario id. It returns a brief (the task) and the run's fixture
(the ids of its patient and other resources). Do the task with the FHIR tools
(fhir_search, fhir_read, fhir_create, fhir_update, fhir_patch, fhir_delete,
find_appointments, check_eligibility) and, when the brief involves the patient,
message_patient / get_patient_messages (the patient portal); send_sms and send_email
text or e-mail them (kept on the run, never delivered, and graded like any message).
FHIR tools act on your current run (the one you started, or adopted with
start_test_run(run_id=...), in this MCP session) unless you pass run_id; runs other
clients started are never used unless you name them by run_id. Each
result's acted_on says which base was used. Without an MCP session (the stateless
protocol), send an Mcp-Client-Id header (a random id of your own) to have a current run,
or pass run_id to every tool. Then finish_test_run for the verdict: each expected
result with its evidence."""


TOOLS = (
    list_test_scenarios,
    start_test_run,
    get_test_run,
    finish_test_run,
    message_patient,
    get_patient_messages,
    send_sms,
    send_email,
    fhir_read,
    fhir_search,
    fhir_create,
    fhir_update,
    fhir_patch,
    fhir_delete,
    find_appointments,
    check_eligibility,
)


def allowed_hosts(settings: Settings) -> TransportSecuritySettings:
    hosts = list(settings.mcp_allowed_hosts)
    origins = list(settings.mcp_allowed_origins)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if settings.public_url:
        public = urlsplit(settings.public_url)
        if public.netloc:
            hosts.append(public.netloc)
            origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_mcp(settings: Settings) -> tuple[MCPServer, ASGIApp]:
    """A fresh server (its session manager runs once) and the SDK's ASGI app for it."""
    server = MCPServer("understudy", instructions=INSTRUCTIONS, version="0.1.0")
    for tool in TOOLS:
        server.add_tool(tool)
    # Stateless: no session in process memory, so any API process answers any request
    # (the endpoint issues session ids itself and each client's current run lives in
    # Redis, keyed by its session id or Mcp-Client-Id).
    mcp_app = server.streamable_http_app(
        streamable_http_path="/", stateless_http=True, transport_security=allowed_hosts(settings)
    )
    return server, mcp_app
