"""The MCP server: testing tools and FHIR tools for agents that reach us over MCP.

Every tool that has a REST equivalent makes that REST call in process (`bridge.call`),
so it is validated, counted, evented and traced exactly like the REST call, with
transport `mcp`. FHIR tools act through the current run's view: the run this MCP
client started or adopted last (`start_test_run`; a client is its MCP session, or a
stateless client's `Mcp-Client-Id`, see `sessions`), or the one named by `run_id`, else
the tenant's base. A run another client started is never used without `run_id`. Every
FHIR tool's result says which base it used (`acted_on`), and on the tenant base lists
the tenant's live runs so that the model can pass run_id.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, TypeAdapter
from starlette.types import ASGIApp

from app.kit.clock import fhir_instant, utcnow
from app.kit.urls import FHIR_PREFIX, run_view_base
from app.mcp import bridge
from app.mcp.caller import Caller, caller_of
from app.mcp.schemas import (
    ActedOn,
    Deleted,
    Eligibility,
    ExpectationResult,
    FhirResource,
    FreeTimes,
    LiveRunInfo,
    Message,
    MessageSent,
    RunProgress,
    ScenarioInfo,
    ScenarioList,
    SearchPage,
    TestRun,
    Thread,
    WriteOutcome,
)
from app.mcp.sessions import LiveRun, Owner, StoreUnavailable
from app.runs import simulated_patient as patient_sim_service
from app.scenarios import service as scenarios_service
from app.scenarios.schema import symbol_name
from app.settings import Settings
from understudy_client.contract import runs as contract
from understudy_client.contract import scenarios as contract_scenarios
from understudy_client.contract.runs import RunView

INSTRUCTIONS = """\
Understudy is a FHIR R4 test sandbox. To test yourself: list_test_scenarios, then
start_test_run with a scenario id. It returns a brief (the task) and the run's fixture
(the ids of its patient and other resources). Do the task with the FHIR tools
(fhir_search, fhir_read, fhir_create, fhir_update, fhir_patch, fhir_delete,
find_appointments, check_eligibility) and, when the brief involves the patient,
message_patient / get_patient_messages. FHIR tools act on your current run (the one you
started, or adopted with start_test_run(run_id=...), in this MCP session) unless you pass
run_id; runs other clients started are never used unless you name them by run_id. Each
result's acted_on says which base was used. Without an MCP session (the stateless
protocol), send an Mcp-Client-Id header (a random id of your own) to have a current run,
or pass run_id to every tool. Then finish_test_run for the verdict: each expected
result with its evidence."""

# Resource types and ids as FHIR defines them; anything else would change the path.
_TYPE = re.compile(r"^[A-Z][A-Za-z]{1,63}$")
_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")
_RUN_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
# Longest a get_patient_messages call waits for the simulated patient's reply.
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.25
THREAD_PAGE = 500  # messages read per direction; a test thread is a handful


# --- plumbing shared by the tools ------------------------------------------------------


class _Call:
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
            return _checked(explicit, _RUN_ID, "run_id")
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
        resource_type = _checked(resource_type, _TYPE, "resource_type")
        resource_id = _checked(resource_id, _ID, "id")
        base, acted_on = await self.base(run_id)
        return resource_type, resource_id, f"{base}/{resource_type}/{resource_id}", acted_on


def _checked(value: str, pattern: re.Pattern[str], name: str) -> str:
    value = value.strip()
    if not pattern.match(value):
        raise ToolError(f"{name} '{value[:80]}' is not valid")
    return value


def _split_reference(reference: str, name: str) -> tuple[str, str]:
    resource_type, _, resource_id = reference.strip().partition("/")
    return _checked(resource_type, _TYPE, f"{name} type"), _checked(resource_id, _ID, f"{name} id")


_RUN_VIEW: TypeAdapter[RunView] = TypeAdapter(RunView)


def _run_view(reply: bridge.Reply) -> RunView:
    """A run as the testing API answered it (in process: a mismatch is our bug)."""
    return _RUN_VIEW.validate_python(reply.json())


def _expectation_of(result: contract.ExpectationResult) -> ExpectationResult:
    return ExpectationResult(
        id=result.id,
        label=result.label,
        type=result.type,
        required=result.required,
        passed=result.passed,
        detail=result.detail,
        evidence=result.evidence.wire(),
        children=[_expectation_of(c) for c in result.children],
    )


def _run_of(view: RunView, hint: str | None = None) -> TestRun:
    run = TestRun(
        run_id=view.id,
        status=view.status,
        scenario_id=view.scenario_id,
        mode=view.mode,
        variant=view.variant,
        label=view.label,
        revision=view.revision,
        brief=view.brief,
        fixture=view.fixture,
        fhir_base=view.fhir_base,
        started_at=view.started_at.isoformat(),
        deadline=view.deadline.isoformat(),
        hint=hint,
    )
    if isinstance(view, contract.LiveRunView):
        last = view.progress.last_graded_at
        run.progress = RunProgress(
            required_total=view.progress.required_total,
            required_holding=view.progress.required_holding,
            last_graded_at=None if last is None else last.isoformat(),
        )
    else:
        run.finished_at = None if view.finished_at is None else view.finished_at.isoformat()
        run.passed, run.score, run.note = view.passed, view.score, view.note
        run.expectations = [_expectation_of(e) for e in view.expectations]
    return run


RunIdArg = Annotated[
    str | None,
    Field(
        description="Act on this run (its id from start_test_run, or any live run of the "
        "tenant). Default: your current run (the one you started or adopted), or the "
        "tenant's shared data when you have none; another client's run is never the default."
    ),
]
TypeArg = Annotated[str, Field(description="FHIR resource type, e.g. Patient, Appointment")]
IdArg = Annotated[str, Field(description="The resource's id (without the type)")]


def _written(
    reply: bridge.Reply,
    resource_type: str,
    outcome: Literal["created", "updated", "existing"],
    acted_on: ActedOn,
) -> WriteOutcome:
    """What a write answered: the reference and version from Location (else the body)."""
    body = reply.json()
    location = reply.headers.get("location", "")
    match = re.search(r"/([A-Za-z]+)/([A-Za-z0-9\-.]+)/_history/([^/]+)$", location)
    if match:
        reference, version = f"{match.group(1)}/{match.group(2)}", match.group(3)
    else:
        reference = f"{resource_type}/{(body or {}).get('id')}"
        version = ((body or {}).get("meta") or {}).get("versionId")
    return WriteOutcome(
        outcome=outcome,
        reference=reference,
        version_id=version,
        resource=body,
        acted_on=acted_on,
    )


# --- testing tools ----------------------------------------------------------------------


async def list_test_scenarios(
    ctx: Context,
    category: Annotated[
        str | None, Field(description="Only this category (e.g. scheduling, results).")
    ] = None,
    mode: Annotated[
        Literal["agent", "workflow"] | None,
        Field(description="Only scenarios that can run in this mode ('agent' for you)."),
    ] = None,
) -> ScenarioList:
    """List the test scenarios you can run: built-in ones and the tenant's imported ones.
    Pick one and pass its id to start_test_run."""
    call = _Call(ctx)
    reply = await call.request("GET", "/api/testing/scenarios")
    found = []
    for s in contract_scenarios.ScenarioList.model_validate(reply.json()).scenarios:
        if category is not None and s.category != category.strip():
            continue
        if mode is not None and mode not in s.modes:
            continue
        found.append(
            ScenarioInfo(
                id=s.id,
                title=s.title,
                category=s.category,
                modes=s.modes,
                summary=s.summary,
                variants=[p for p in s.personas if p],
                builtin=s.builtin,
            )
        )
    return ScenarioList(scenarios=found)


async def start_test_run(
    ctx: Context,
    scenario_id: Annotated[
        str | None,
        Field(description="A scenario id from list_test_scenarios (to start a new run)."),
    ] = None,
    variant: Annotated[
        str | None, Field(description="A persona variant of the scenario; default: baseline.")
    ] = None,
    timeout_seconds: Annotated[
        int | None,
        Field(description="How long the run may take, 30 to 1800 seconds (default 600)."),
    ] = None,
    label: Annotated[str | None, Field(description="A free label to find the run later.")] = None,
    revision: Annotated[
        str | None,
        Field(
            description="The version of you (the system under test) this run is for: a git "
            "sha, 'triage-agent v3'; 1 to 100 characters."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        Field(
            description="Adopt this live run instead of starting one (a run started over "
            "REST or by another MCP client): it becomes your current run. Give scenario_id "
            "or run_id, not both."
        ),
    ] = None,
) -> TestRun:
    """Start a test run of a scenario: sets up its patient and chart and returns the brief
    (your task) and the fixture ids. From now on the FHIR tools act on this run (it is
    yours; other clients use it only by naming its run_id). With run_id instead, adopt a
    live run started elsewhere (over REST, or by another client) as your current run. Do
    the task, then call finish_test_run."""
    call = _Call(ctx)
    if run_id is not None:
        if any(v is not None for v in (scenario_id, variant, timeout_seconds, label, revision)):
            raise ToolError(
                "run_id adopts an existing run, so scenario_id, variant, timeout_seconds, "
                "label and revision do not apply: pass either run_id or scenario_id"
            )
        return await _adopt(call, _checked(run_id, _RUN_ID, "run_id"))
    if scenario_id is None or not scenario_id.strip():
        raise ToolError(
            "scenario_id: required (an id from list_test_scenarios), or pass run_id to adopt "
            "a live run"
        )
    body: dict[str, Any] = {"scenarioId": scenario_id.strip()}
    if variant is not None:
        body["variant"] = variant
    if timeout_seconds is not None:
        body["timeoutSeconds"] = timeout_seconds
    if label is not None:
        body["label"] = label
    if revision is not None:
        body["revision"] = revision
    reply = await call.request(
        "POST", "/api/testing/runs", body=body, content_type="application/json"
    )
    view = _run_view(reply)
    return _run_of(view, hint=await _own(call, view.id, "this run"))


async def _own(call: _Call, run: str, what: str) -> str:
    """Make `run` the caller's current run; the hint that says what the tools do now."""
    then = "Do what the brief asks with the FHIR tools, then call finish_test_run."
    if call.owner is None:
        return (
            f"This client has no MCP session and sends no Mcp-Client-Id header, so no run is "
            f"its current run: pass run_id='{run}' to every tool (or send an Mcp-Client-Id "
            f"header, a random id of this client, and adopt the run). {then}"
        )
    if not await call.caller.runs.remember(call.tenant_id, call.owner, run):
        return (
            f"The session store is unavailable, so {what} could not be made your current "
            f"run: pass run_id='{run}' to every tool. {then}"
        )
    return f"The FHIR tools now act on {what} (your current run). {then}"


async def _adopt(call: _Call, run: str) -> TestRun:
    """A live run of the tenant (started over REST or by another client) becomes the
    caller's current run; an unknown run (or another tenant's) is not found."""
    if call.owner is None:
        raise ToolError(
            "this client has no MCP session and sends no Mcp-Client-Id header, so it has no "
            f"current run to adopt into: pass run_id='{run}' to each tool instead"
        )
    view = _run_view(await call.request("GET", f"/api/testing/runs/{run}"))
    if view.status != "live":
        raise ToolError(
            f"run {run} has ended ({view.status}) and cannot be adopted: start a new run "
            "with scenario_id (get_test_run with run_id shows its verdict)"
        )
    return _run_of(view, hint=await _own(call, view.id, "the adopted run"))


async def get_test_run(ctx: Context, run_id: RunIdArg = None) -> TestRun:
    """A run's state: progress while live (how many required results hold), the verdict
    with evidence once it ended."""
    call = _Call(ctx)
    run = await call.required_run(run_id)
    reply = await call.request("GET", f"/api/testing/runs/{run}")
    return _run_of(_run_view(reply))


async def finish_test_run(ctx: Context, run_id: RunIdArg = None) -> TestRun:
    """Grade the run now and end it. Returns the verdict: passed or not, the score, and
    every expected result with its evidence (for a failure, what almost matched)."""
    call = _Call(ctx)
    run = await call.required_run(run_id)
    await ctx.report_progress(0, 1, "grading")
    reply = await call.request("POST", f"/api/testing/runs/{run}/finish")
    if call.owner is not None:
        await call.caller.runs.forget(call.tenant_id, call.owner, run)
    await ctx.report_progress(1, 1, "graded")
    return _run_of(_run_view(reply))


async def _run_patient(call: _Call, run: str, patient: str | None) -> tuple[RunView, str, bool]:
    """The run's view, the patient to talk to (given, the simulated patient, or the
    fixture's `patient`) and whether a simulated patient answers in this run."""
    view = _run_view(await call.request("GET", f"/api/testing/runs/{run}"))
    pool = call.caller.app.state.db.pool
    loaded = await scenarios_service.get_scenario(pool, call.tenant_id, view.scenario_id)
    sim = loaded.scenario.patient_sim
    if patient is not None:
        resource_type, resource_id = _split_reference(
            patient if "/" in patient else f"Patient/{patient}", "patient"
        )
        if resource_type != "Patient":
            raise ToolError("patient must be a Patient id or 'Patient/<id>'")
        return view, f"Patient/{resource_id}", sim is not None
    ref = view.fixture.get(symbol_name(sim.patient) if sim is not None else "patient")
    if ref is None:
        raise ToolError("this run has no patient in its fixture: pass patient")
    return view, ref, sim is not None


async def message_patient(
    ctx: Context,
    text: Annotated[str, Field(description="The message, as the patient will read it.")],
    in_response_to: Annotated[
        str | None,
        Field(description="Id of the patient's message you are answering, if any."),
    ] = None,
    sender: Annotated[
        str | None,
        Field(
            description="Who signs the message, e.g. 'Practitioner/<id>' or "
            "'Organization/<id>'; default: none."
        ),
    ] = None,
    patient: Annotated[
        str | None, Field(description="Patient id; default: the run's patient.")
    ] = None,
    run_id: RunIdArg = None,
) -> MessageSent:
    """Send a message to the run's patient (a FHIR Communication addressed to them, the
    same as POST /Communication). A simulated patient answers within a few seconds: read
    the answer with get_patient_messages."""
    call = _Call(ctx)
    if not text.strip():
        raise ToolError("text: the message is empty")
    run = await call.required_run(run_id)
    _, patient_ref, _ = await _run_patient(call, run, patient)
    communication: dict[str, Any] = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": patient_ref},
        "recipient": [{"reference": patient_ref}],
        "sent": fhir_instant(utcnow()),
        "payload": [{"contentString": text}],
    }
    if in_response_to is not None:
        message_id = _checked(in_response_to.removeprefix("Communication/"), _ID, "in_response_to")
        communication["inResponseTo"] = [{"reference": f"Communication/{message_id}"}]
    if sender is not None:
        sender_type, sender_id = _split_reference(sender, "sender")
        communication["sender"] = {"reference": f"{sender_type}/{sender_id}"}
    path = run_view_base("", run) + "/Communication"
    reply = await call.request("POST", path, body=communication)
    written = reply.json()
    return MessageSent(
        message_id=written["id"],
        reference=f"Communication/{written['id']}",
        patient=patient_ref,
        sent=communication["sent"],
        hint="Call get_patient_messages to read the answer (it waits for it).",
    )


def _message_of(resource: dict[str, Any], patient_ref: str) -> Message:
    sender = str((resource.get("sender") or {}).get("reference", ""))
    recipients = [str(r.get("reference", "")) for r in resource.get("recipient") or []]
    direction: Literal["from_patient", "to_patient", "other"] = (
        "from_patient"
        if sender == patient_ref
        else "to_patient"
        if patient_ref in recipients
        else "other"
    )
    text = " ".join(
        str(p.get("contentString", ""))
        for p in resource.get("payload") or []
        if isinstance(p, dict)
    ).strip()
    return Message(
        id=str(resource.get("id")),
        direction=direction,
        sent=resource.get("sent") or (resource.get("meta") or {}).get("lastUpdated"),
        text=text,
        in_response_to=[
            str(r.get("reference"))
            for r in resource.get("inResponseTo") or []
            if r.get("reference")
        ],
    )


async def _read_thread(call: _Call, run: str, patient_ref: str) -> list[Message]:
    path = run_view_base("", run) + "/Communication"
    found: dict[str, dict[str, Any]] = {}
    for param in ("subject", "recipient"):
        reply = await call.request(
            "GET", path, query=[(param, patient_ref), ("_count", str(THREAD_PAGE))]
        )
        for entry in reply.json().get("entry") or []:
            resource = entry.get("resource") or {}
            found[str(resource.get("id"))] = resource
    messages = [_message_of(r, patient_ref) for r in found.values()]
    messages.sort(key=lambda m: (m.sent or "", m.id))
    return messages


async def _answered(call: _Call, run: str, message_id: str) -> tuple[bool, str | None]:
    """Whether the simulated patient has dealt with a message, and any note."""
    pool = call.caller.app.state.db.pool
    return await patient_sim_service.answer_to(pool, call.tenant_id, run, message_id)


async def get_patient_messages(
    ctx: Context,
    wait_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="When your latest message is not answered yet, wait up to this long "
            "for the simulated patient's reply (0: don't wait).",
        ),
    ] = 15,
    patient: Annotated[
        str | None, Field(description="Patient id; default: the run's patient.")
    ] = None,
    run_id: RunIdArg = None,
) -> Thread:
    """The message thread with the run's patient, oldest first: what they wrote and what
    was sent to them (the same as GET /Communication?subject=…). Waits briefly for the
    reply to your latest message."""
    call = _Call(ctx)
    run = await call.required_run(run_id)
    view, patient_ref, has_sim = await _run_patient(call, run, patient)
    messages = await _read_thread(call, run, patient_ref)
    note: str | None = None
    last = messages[-1] if messages else None
    if (
        last is not None
        and last.direction == "to_patient"
        and has_sim
        and wait_seconds > 0
        and view.status == "live"
    ):
        # Wait on the simulator's own record of the message, then read the thread again.
        started = time.monotonic()
        answered = False
        while time.monotonic() - started < wait_seconds:
            answered, note = await _answered(call, run, last.id)
            if answered:
                break
            elapsed = time.monotonic() - started
            await ctx.report_progress(elapsed, wait_seconds, "waiting for the patient's reply")
            await asyncio.sleep(POLL_SECONDS)
        if answered:
            messages = await _read_thread(call, run, patient_ref)
    last = messages[-1] if messages else None
    awaiting = last is not None and last.direction == "to_patient" and note is None
    return Thread(
        patient=patient_ref,
        messages=messages,
        awaiting_reply=awaiting,
        note=note,
    )


# --- FHIR tools -------------------------------------------------------------------------


async def fhir_read(
    ctx: Context, resource_type: TypeArg, id: IdArg, run_id: RunIdArg = None
) -> FhirResource:
    """Read one FHIR resource by type and id (GET /{type}/{id})."""
    call = _Call(ctx)
    resource_type, resource_id, path, acted_on = await call.instance_path(run_id, resource_type, id)
    reply = await call.request("GET", path)
    resource = reply.json()
    return FhirResource(
        reference=f"{resource_type}/{resource_id}",
        version_id=(resource.get("meta") or {}).get("versionId"),
        resource=resource,
        acted_on=acted_on,
    )


async def fhir_search(
    ctx: Context,
    resource_type: TypeArg,
    params: Annotated[
        dict[str, str | list[str]] | None,
        Field(
            description='FHIR search parameters, e.g. {"family": "Rivera", "birthdate": '
            '"1980-04-02"}; a list repeats a parameter (both must hold: {"date": '
            '["ge2026-01-01", "lt2026-02-01"]}); a comma inside a value means OR. '
            "Also _count, _sort, _include, _revinclude, _elements, _summary."
        ),
    ] = None,
    page_url: Annotated[
        str | None,
        Field(description="next_page_url from an earlier fhir_search, to read the next page."),
    ] = None,
    run_id: RunIdArg = None,
) -> SearchPage:
    """Search FHIR resources of one type (GET /{type}?params) and return the matches and
    the total."""
    call = _Call(ctx)
    resource_type = _checked(resource_type, _TYPE, "resource_type")
    query: list[tuple[str, str]] = []
    if page_url is not None:
        parts = urlsplit(page_url)
        if not (
            parts.path.startswith("/api/") and parts.path.endswith(f"/fhir/r4/{resource_type}")
        ):
            raise ToolError("page_url must be a next_page_url this tool returned for that type")
        path = parts.path
        query = parse_qsl(parts.query, keep_blank_values=True)
        acted_on = await call.paged_base(path)
    else:
        base, acted_on = await call.base(run_id)
        path = f"{base}/{resource_type}"
        for name, value in (params or {}).items():
            values = value if isinstance(value, list) else [value]
            query.extend((name, str(v)) for v in values)
    reply = await call.request("GET", path, query=query)
    bundle = reply.json()
    matches: list[dict[str, Any]] = []
    included: list[dict[str, Any]] = []
    for entry in bundle.get("entry") or []:
        resource = entry.get("resource")
        if not isinstance(resource, dict):
            continue
        mode = (entry.get("search") or {}).get("mode", "match")
        (included if mode == "include" else matches).append(resource)
    next_url = next(
        (link.get("url") for link in bundle.get("link") or [] if link.get("relation") == "next"),
        None,
    )
    return SearchPage(
        resource_type=resource_type,
        total=bundle.get("total"),
        resources=matches,
        included=included,
        next_page_url=next_url,
        acted_on=acted_on,
    )


async def fhir_create(
    ctx: Context,
    resource: Annotated[
        dict[str, Any],
        Field(description="The FHIR resource as JSON, with resourceType (and no id)."),
    ],
    if_none_exist: Annotated[
        str | None,
        Field(
            description="Conditional create: search parameters such as 'identifier=x|1'; "
            "when one resource matches, it is returned and nothing is written."
        ),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Create a FHIR resource (POST /{type}). It is validated as FHIR R4: an error names
    the element that is wrong."""
    call = _Call(ctx)
    declared = resource.get("resourceType")
    if not declared:
        raise ToolError('resource.resourceType is missing: say the type, e.g. "Patient"')
    resource_type = _checked(str(declared), _TYPE, "resource.resourceType")
    base, acted_on = await call.base(run_id)
    query = parse_qsl(if_none_exist, keep_blank_values=True) if if_none_exist else None
    reply = await call.request("POST", f"{base}/{resource_type}", body=resource, query=query)
    outcome: Literal["created", "existing"] = "created" if reply.status == 201 else "existing"
    return _written(reply, resource_type, outcome, acted_on)


async def fhir_update(
    ctx: Context,
    resource_type: TypeArg,
    id: IdArg,
    resource: Annotated[
        dict[str, Any], Field(description="The whole new resource (PUT replaces it).")
    ],
    if_match: Annotated[
        str | None,
        Field(description="Only update if the current version is this one (version_id)."),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Replace a FHIR resource with a new version (PUT /{type}/{id}). Send the whole
    resource: fields you leave out are removed. To change a few fields use fhir_patch."""
    call = _Call(ctx)
    resource_type, _, path, acted_on = await call.instance_path(run_id, resource_type, id)
    reply = await call.request("PUT", path, body=resource, if_match=if_match)
    outcome: Literal["created", "updated"] = "created" if reply.status == 201 else "updated"
    return _written(reply, resource_type, outcome, acted_on)


async def fhir_patch(
    ctx: Context,
    resource_type: TypeArg,
    id: IdArg,
    patch: Annotated[
        list[dict[str, Any]] | dict[str, Any],
        Field(
            description='Either a JSON Patch (a list of operations such as [{"op": '
            '"replace", "path": "/status", "value": "cancelled"}]) or a JSON merge '
            "patch (an object with the fields to change, null to remove one)."
        ),
    ],
    if_match: Annotated[
        str | None,
        Field(description="Only patch if the current version is this one (version_id)."),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Change some fields of a FHIR resource (PATCH /{type}/{id}); the result is validated
    as FHIR R4."""
    call = _Call(ctx)
    resource_type, _, path, acted_on = await call.instance_path(run_id, resource_type, id)
    content_type = (
        "application/json-patch+json" if isinstance(patch, list) else "application/merge-patch+json"
    )
    reply = await call.request(
        "PATCH", path, body=patch, content_type=content_type, if_match=if_match
    )
    return _written(reply, resource_type, "updated", acted_on)


async def fhir_delete(
    ctx: Context, resource_type: TypeArg, id: IdArg, run_id: RunIdArg = None
) -> Deleted:
    """Delete a FHIR resource (DELETE /{type}/{id}). Prefer a status change (e.g. an
    Appointment to 'cancelled') when the record should stay."""
    call = _Call(ctx)
    resource_type, resource_id, path, acted_on = await call.instance_path(run_id, resource_type, id)
    await call.request("DELETE", path)
    return Deleted(deleted=f"{resource_type}/{resource_id}", acted_on=acted_on)


async def find_appointments(
    ctx: Context,
    practitioner: Annotated[str, Field(description="The practitioner: id or 'Practitioner/<id>'.")],
    start: Annotated[
        str | None,
        Field(
            description="Earliest start, a date (2026-12-01) or date-time with offset; "
            "default: now."
        ),
    ] = None,
    end: Annotated[
        str | None,
        Field(description="Latest end (a bare date includes that day); default: 14 days on."),
    ] = None,
    duration_minutes: Annotated[
        int | None, Field(ge=5, le=480, description="Length of the visit; default 30.")
    ] = None,
    run_id: RunIdArg = None,
) -> FreeTimes:
    """Free times of a practitioner (GET /Appointment/$find), as proposed Appointments
    built from free Slots and not clashing with booked visits."""
    call = _Call(ctx)
    ref = practitioner.strip()
    if "/" not in ref:
        ref = f"Practitioner/{ref}"
    query = [("practitioner", ref)]
    if start is not None:
        query.append(("start", start))
    if end is not None:
        query.append(("end", end))
    if duration_minutes is not None:
        query.append(("duration", str(duration_minutes)))
    base, acted_on = await call.base(run_id)
    bundle = (await call.request("GET", f"{base}/Appointment/$find", query=query)).json()
    proposals = [e["resource"] for e in bundle.get("entry") or [] if "resource" in e]
    return FreeTimes(practitioner=ref, total=len(proposals), proposals=proposals, acted_on=acted_on)


async def check_eligibility(
    ctx: Context,
    patient: Annotated[str, Field(description="Patient id or 'Patient/<id>'.")],
    date: Annotated[str, Field(description="Date of service, YYYY-MM-DD.")],
    service_type: Annotated[str | None, Field(description="Optional service type code.")] = None,
) -> Eligibility:
    """Is the patient covered by insurance on that date (POST /api/eligibility/$check)?
    Answers eligible, the Coverage used and the reason."""
    call = _Call(ctx)
    body: dict[str, Any] = {"patient": patient, "date": date}
    if service_type is not None:
        body["serviceType"] = service_type
    reply = await call.request(
        "POST", "/api/eligibility/$check", body=body, content_type="application/json"
    )
    live: list[LiveRun] | None = None
    why = call.no_current_run
    try:
        current = await call.run_id(None)
    except StoreUnavailable as unknown:
        current, live = None, unknown.live
        why = "the session store is unavailable, so your current run is unknown"
    if current is None:
        acted_on = await call.tenant_base(
            f"the tenant base: {why}; give a run's patient id (from its fixture) to check "
            "that run's patient",
            live=live,
        )
    else:
        acted_on = await call.tenant_base(
            "the tenant's coverage data (eligibility has no run view): the patient id "
            f"picks whose coverage; use your current run {current}'s fixture patient",
            list_live=False,
        )
    return Eligibility(**reply.json(), acted_on=acted_on)


TOOLS = (
    list_test_scenarios,
    start_test_run,
    get_test_run,
    finish_test_run,
    message_patient,
    get_patient_messages,
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
