"""One MCP tool call and what every tool shares: who is calling and from which client (its
MCP session, or a stateless client's `Mcp-Client-Id`: the owner of its current run), the
REST API called in process (`bridge.call`, so a tool's call is validated, counted, evented
and traced like the REST call, with transport `mcp`), the FHIR base a tool acts on and
what its result says about it (`acted_on`), the checks of ids a tool puts in a path, and a
run as the testing API answers it."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, TypeAdapter
from starlette.types import ASGIApp

from app.kit.urls import FHIR_PREFIX, run_view_base
from app.mcp import bridge
from app.mcp.caller import Caller, caller_of
from app.mcp.schemas import ActedOn, LiveRunInfo
from app.mcp.sessions import LiveRun, Owner
from understudy_client.contract.runs import RunView

# Resource types and ids as FHIR defines them; anything else would change the path.
RESOURCE_TYPE = re.compile(r"^[A-Z][A-Za-z]{1,63}$")
RESOURCE_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")
RUN_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")

RunIdArg = Annotated[
    str | None,
    Field(
        description="Act on this run (its id from start_test_run, or any live run of the "
        "tenant). Default: your current run (the one you started or adopted), or the "
        "tenant's shared data when you have none; another client's run is never the default."
    ),
]


class ToolCall:
    """One tool call: who is calling, from which client (its MCP session or Mcp-Client-Id:
    the owner of its current run), and the REST API in process."""

    def __init__(self, ctx: Context) -> None:
        request = ctx.request_context.request
        if request is None:
            raise ToolError("this server only serves MCP over HTTP")
        scope = request.scope
        self.caller: Caller = caller_of(scope)
        self.origin = bridge.Origin.of(scope)
        headers = ctx.headers or {}
        session, client = headers.get("mcp-session-id"), headers.get("mcp-client-id")
        self.owner: Owner | None = (
            Owner("session", session) if session else Owner("client", client) if client else None
        )
        public: str | None = self.caller.app.state.settings.public_url
        host = self.origin.host_header.decode("latin-1")
        self.root = public.rstrip("/") if public else f"{self.origin.scheme}://{host}"

    @property
    def tenant_id(self) -> uuid.UUID:
        return self.caller.tenant.id

    @property
    def api(self) -> ASGIApp:
        api: ASGIApp = self.caller.app
        return api

    async def run_id(self, explicit: str | None) -> str | None:
        """The run named, else this client's own current run (never another client's)."""
        if explicit is not None:
            return checked(explicit, RUN_ID, "run_id")
        return await self.caller.runs.current(self.tenant_id, self.owner)

    @property
    def no_current_run(self) -> str:
        """Why this client has no current run, in a few words."""
        if self.owner is None:
            return (
                "no current run: this client has no MCP session and sends no Mcp-Client-Id "
                "header, so no run is its own"
            )
        if self.owner.kind == "session":
            return "no current run in this session"
        return "no current run for this client (Mcp-Client-Id)"

    async def required_run(self, explicit: str | None) -> str:
        run_id = await self.run_id(explicit)
        if run_id is None:
            live = await self.caller.runs.live(self.tenant_id)
            listed = (
                "; live runs in the tenant, started by other clients or over REST: "
                + ", ".join(f"{r.run_id} ({r.scenario_id})" for r in live)
                + " (pass one as run_id, or adopt it with start_test_run(run_id=...))"
                if live
                else ""
            )
            raise ToolError(
                f"{self.no_current_run}: start one with start_test_run, or pass run_id{listed}"
            )
        return run_id

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/fhir+json",
        if_match: str | None = None,
    ) -> bridge.Reply:
        headers = []
        if if_match is not None:
            version = if_match.strip().removeprefix("W/").strip('"')
            headers.append((b"if-match", f'W/"{version}"'.encode()))
        reply = await bridge.call(
            self.api,
            self.origin,
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            headers=headers,
        )
        if not reply.ok:
            raise ToolError(bridge.problem_text(reply))
        return reply

    async def base(self, run_id: str | None) -> tuple[str, ActedOn]:
        """The FHIR base path a tool acts on and what its result says about it."""
        run = await self.run_id(run_id)
        if run is not None:
            path = run_view_base("", run)
            return path, ActedOn(base="run", run_id=run, fhir_base=self.root + path)
        return FHIR_PREFIX, await self.tenant_base(
            f"the tenant base: {self.no_current_run}, and runs other clients started are "
            "not used unless named; pass run_id to act on a run"
        )

    async def tenant_base(
        self, note: str, *, list_live: bool = True, live: list[LiveRun] | None = None
    ) -> ActedOn:
        if live is None:
            live = await self.caller.runs.live(self.tenant_id) if list_live else []
        return ActedOn(
            base="tenant",
            run_id=None,
            fhir_base=self.root + FHIR_PREFIX,
            note=note + (" (one of live_runs)" if live else ""),
            live_runs=[
                LiveRunInfo(
                    run_id=r.run_id,
                    scenario_id=r.scenario_id,
                    started_at=r.started_at.isoformat(),
                )
                for r in live
            ],
        )

    async def paged_base(self, path: str) -> ActedOn:
        """The base a next_page_url pages on (it names the run, if any)."""
        match = re.match(r"^/api/testing/runs/([A-Za-z0-9_\-]{1,64})/fhir/r4/", path)
        if match:
            return ActedOn(base="run", run_id=match.group(1), fhir_base=self.root + path)
        return await self.tenant_base(
            "the tenant base: this page_url pages on it; pass run_id (without page_url) "
            "to search a run"
        )

    async def instance_path(
        self, run_id: str | None, resource_type: str, resource_id: str
    ) -> tuple[str, str, str, ActedOn]:
        """The checked type and id, the path of that resource on the base acted on, and
        that base."""
        resource_type = checked(resource_type, RESOURCE_TYPE, "resource_type")
        resource_id = checked(resource_id, RESOURCE_ID, "id")
        base, acted_on = await self.base(run_id)
        return resource_type, resource_id, f"{base}/{resource_type}/{resource_id}", acted_on


def checked(value: str, pattern: re.Pattern[str], name: str) -> str:
    value = value.strip()
    if not pattern.match(value):
        raise ToolError(f"{name} '{value[:80]}' is not valid")
    return value


def split_reference(reference: str, name: str) -> tuple[str, str]:
    resource_type, _, resource_id = reference.strip().partition("/")
    return checked(resource_type, RESOURCE_TYPE, f"{name} type"), checked(
        resource_id, RESOURCE_ID, f"{name} id"
    )


_RUN_VIEW: TypeAdapter[RunView] = TypeAdapter(RunView)


def run_view(reply: bridge.Reply) -> RunView:
    """A run as the testing API answered it (in process: a mismatch is our bug)."""
    return _RUN_VIEW.validate_python(reply.json())
