"""The run tools: list the test scenarios, start a run (or adopt a live one as the
client's current run), read it, and finish it for the verdict."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from app.mcp.schemas import ScenarioChoice, ScenarioChoices, TestRun
from app.mcp.tool_call import RUN_ID, RunIdArg, ToolCall, checked, run_view
from understudy_client.contract import runs as contract
from understudy_client.contract import scenarios as contract_scenarios
from understudy_client.contract.runs import RunView


def _run_of(view: RunView, hint: str | None = None) -> TestRun:
    """A run as the tools answer it: the REST view's, in snake_case, with the hint."""
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
        run.progress = view.progress
    else:
        run.finished_at = None if view.finished_at is None else view.finished_at.isoformat()
        run.passed, run.score, run.note = view.passed, view.score, view.note
        run.expectations = list(view.expectations)
    return run


async def list_test_scenarios(
    ctx: Context,
    category: Annotated[
        str | None, Field(description="Only this category (e.g. scheduling, results).")
    ] = None,
    mode: Annotated[
        Literal["agent", "workflow"] | None,
        Field(description="Only scenarios that can run in this mode ('agent' for you)."),
    ] = None,
) -> ScenarioChoices:
    """List the test scenarios you can run: built-in ones and the tenant's imported ones.
    Pick one and pass its id to start_test_run."""
    call = ToolCall(ctx)
    reply = await call.request("GET", "/api/testing/scenarios")
    found = []
    for s in contract_scenarios.ScenarioList.model_validate(reply.json()).scenarios:
        if category is not None and s.category != category.strip():
            continue
        if mode is not None and mode not in s.modes:
            continue
        found.append(
            ScenarioChoice(
                id=s.id,
                title=s.title,
                category=s.category,
                modes=s.modes,
                summary=s.summary,
                variants=[p for p in s.personas if p],
                builtin=s.builtin,
            )
        )
    return ScenarioChoices(scenarios=found)


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
    call = ToolCall(ctx)
    if run_id is not None:
        if any(v is not None for v in (scenario_id, variant, timeout_seconds, label, revision)):
            raise ToolError(
                "run_id adopts an existing run, so scenario_id, variant, timeout_seconds, "
                "label and revision do not apply: pass either run_id or scenario_id"
            )
        return await _adopt(call, checked(run_id, RUN_ID, "run_id"))
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
    view = run_view(reply)
    return _run_of(view, hint=await _own(call, view.id, "this run"))


async def _own(call: ToolCall, run: str, what: str) -> str:
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


async def _adopt(call: ToolCall, run: str) -> TestRun:
    """A live run of the tenant (started over REST or by another client) becomes the
    caller's current run; an unknown run (or another tenant's) is not found."""
    if call.owner is None:
        raise ToolError(
            "this client has no MCP session and sends no Mcp-Client-Id header, so it has no "
            f"current run to adopt into: pass run_id='{run}' to each tool instead"
        )
    view = run_view(await call.request("GET", f"/api/testing/runs/{run}"))
    if view.status != "live":
        raise ToolError(
            f"run {run} has ended ({view.status}) and cannot be adopted: start a new run "
            "with scenario_id (get_test_run with run_id shows its verdict)"
        )
    return _run_of(view, hint=await _own(call, view.id, "the adopted run"))


async def get_test_run(ctx: Context, run_id: RunIdArg = None) -> TestRun:
    """A run's state: progress while live (how many required results hold), the verdict
    with evidence once it ended."""
    call = ToolCall(ctx)
    run = await call.required_run(run_id)
    reply = await call.request("GET", f"/api/testing/runs/{run}")
    return _run_of(run_view(reply))


async def finish_test_run(ctx: Context, run_id: RunIdArg = None) -> TestRun:
    """Grade the run now and end it. Returns the verdict: passed or not, the score, and
    every expected result with its evidence (for a failure, what almost matched)."""
    call = ToolCall(ctx)
    run = await call.required_run(run_id)
    await ctx.report_progress(0, 1, "grading")
    reply = await call.request("POST", f"/api/testing/runs/{run}/finish")
    if call.owner is not None:
        await call.caller.runs.forget(call.tenant_id, call.owner, run)
    await ctx.report_progress(1, 1, "graded")
    return _run_of(run_view(reply))
