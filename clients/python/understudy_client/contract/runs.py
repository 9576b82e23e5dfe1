"""Runs: the live and final views, the verdict with its evidence, the trace, usage."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from understudy_client.contract.base import ApiModel, Instant, is_empty, is_none
from understudy_client.contract.capture import RunCapture

FinalStatus = Literal["passed", "failed", "timed_out", "cancelled", "errored"]


class Evidence(ApiModel):
    """Why an expectation holds or fails."""

    matches: list[str] = Field(
        description='What matched: "Appointment/abc", or a call such as "GET /Slot 200"'
    )
    closest: str | None = Field(
        default=None, exclude_if=is_none, description="The candidate that almost matched"
    )
    clauses: list[dict[str, Any]] = Field(
        default_factory=list,
        exclude_if=is_empty,
        description="Each condition on the closest candidate: {where, holds, value | error}",
    )
    note: str | None = Field(default=None, exclude_if=is_empty)
    diff: list[dict[str, Any]] = Field(
        default_factory=list,
        exclude_if=is_empty,
        description="matches-reference: per resource {kind: collateral | missing | differs"
        " | same, ref, resourceType, title, reasons, paths, expected, actual, free}, the"
        " reference solution's end state beside the run's, collateral and missing first",
    )


class ExpectationResult(ApiModel):
    id: str
    label: str = Field(description="The expected result in plain words")
    type: str
    required: bool = Field(description="A run passes only when every required one passed")
    weight: float = Field(description="Its weight in the run's score (default 1)")
    passed: bool | None = Field(
        description="null: not gradable yet or not graded (pending, unsupported, skipped)"
    )
    score: float = Field(description="1 when it passed, else 0")
    evidence: Evidence = Field(
        description="The resources or calls that matched (matches) and, on a failure, the "
        "closest one that almost matched (closest) with each condition's result (clauses)"
    )
    detail: str = Field(description="Why it passed or failed")
    children: list[ExpectationResult] = Field(
        default_factory=list,
        exclude_if=is_empty,
        description="The alternatives of an any_of expectation",
    )


class SimulatedReply(ApiModel):
    """One reply of the simulated patient: which engine answered it, and why a stand-in."""

    message: str = Field(description="Communication/<id> of the staff message")
    reply: str | None = Field(description="Communication/<id> of the reply; null: none")
    turn: int
    engine: str = Field(description="scripted or llm")
    model: str | None
    prompt_version: str | None
    note: str | None


class SimulatorIssue(ApiModel):
    message: str
    issue: str


class Verdict(ApiModel):
    """What grading decided as the run ended (stored with the run)."""

    passed: bool
    score: float
    expectations: list[ExpectationResult]
    note: str | None = Field(default=None, exclude_if=is_empty)
    # Both or neither: present when a simulated patient answered in the run.
    simulated_patient: list[SimulatedReply] | None = Field(default=None, exclude_if=is_none)
    simulator_issues: list[SimulatorIssue] | None = Field(default=None, exclude_if=is_none)


class EngineProvenance(ApiModel):
    """Who answers for the simulated patient or the judge: its engine, model and prompt."""

    engine: str = Field(
        description="patient: scripted, llm or human; judge: llm, or none (no model: "
        "rubrics are not judged; heuristic in runs recorded before)"
    )
    model: str | None
    prompt_version: str | None


class ScenarioProvenance(ApiModel):
    id: str
    version: int = Field(description="0 for a built-in scenario")
    hash: str = Field(description="The content hash of the scenario the run was started from")


class PlatformProvenance(ApiModel):
    version: str = Field(description="The package version of the platform")
    git_sha: str | None = Field(description="The platform's commit, when known")


class Provenance(ApiModel):
    """What a run was made of, recorded as it starts and completed as it is judged;
    immutable once the run ended."""

    scenario: ScenarioProvenance
    platform: PlatformProvenance
    revision: str | None = Field(description="The version of the system under test")
    patient_sim: EngineProvenance | None = Field(
        description="The simulated patient configured as the run started (null: the scenario "
        "has no patientSim)"
    )
    judge: EngineProvenance = Field(description="The judge configured as the run started")
    recorded_at: Instant
    judged_at: Instant | None = Field(default=None, description="null while the run is live")
    patient_sim_used: list[EngineProvenance] | None = Field(
        default=None,
        description="The engines that actually answered for the patient (set at judging)",
    )
    judge_used: list[EngineProvenance] | None = Field(
        default=None,
        description="The engines that actually judged the rubrics (set at judging; empty: "
        "no rubric was judged)",
    )


class RunProgress(ApiModel):
    """How a live run stands: how many of its required expected results hold so far."""

    required_total: int | None = Field(
        default=None, description="Required expected results in all (null: not graded yet)"
    )
    required_holding: int | None = Field(
        default=None, description="How many of them hold right now"
    )
    last_graded_at: Instant | None = Field(
        default=None, description="When the live run was last graded (null: not yet)"
    )


class _RunViewBase(ApiModel):
    id: str
    status: str  # narrowed by each view: it tells the two apart
    mode: str = Field(description="agent or workflow")
    scenario_id: str
    scenario_version: int = Field(description="0 for a built-in scenario")
    scenario_hash: str
    variant: str | None
    label: str | None
    revision: str | None = Field(
        default=None, description="The version of the system under test the run was started for"
    )
    fixture: dict[str, str] = Field(description='symbol -> "Type/id"')
    fhir_base: str
    started_at: Instant
    deadline: Instant
    brief: str | None = Field(
        default=None, exclude_if=is_none, description="The task (agent mode only)"
    )
    patient_driver: Literal["sim", "human"] = Field(
        default="sim",
        description="Who answers the staff's messages in a patientSim run: the simulated "
        "patient (sim) or a person on the console's run page (human)",
    )
    provenance: Provenance | None = Field(
        default=None, description="null only for runs started before provenance was recorded"
    )
    capture: RunCapture | None = Field(
        default=None,
        exclude_if=is_none,
        description="Where the run's system sends SMS and integration calls, captured on "
        "the run instead of leaving the sandbox, and the run's credentials for them",
    )


class LiveRunView(_RunViewBase):
    status: Literal["live"]
    progress: RunProgress


class FinalRunView(_RunViewBase):
    status: FinalStatus
    finished_at: Instant | None
    passed: bool
    score: float
    expectations: list[ExpectationResult]
    note: str | None = Field(default=None, exclude_if=is_empty)
    simulated_patient: list[SimulatedReply] | None = Field(default=None, exclude_if=is_none)
    simulator_issues: list[SimulatorIssue] | None = Field(default=None, exclude_if=is_none)


RunView = Annotated[LiveRunView | FinalRunView, Field(discriminator="status")]


class RunList(ApiModel):
    runs: list[RunView]


class RunDataRemoved(ApiModel):
    id: str
    resources_removed: int


class TraceCall(ApiModel):
    at: Instant
    method: str
    path: str
    query: str
    status: int
    duration_ms: float
    transport: str = Field(description="rest, mcp, sms, email or integration")
    refs: list[str]
    shared: bool = Field(description="Not attributed to one run: seen by every live run")


class RunTrace(ApiModel):
    id: str
    calls: list[TraceCall]


# The purposes of model calls, each listed on every day of `GET /api/usage` (zeros when
# none); a call of any other purpose is listed on the days it happened.
MODEL_CALL_PURPOSES = ("patient-sim", "judge")


class DecidedRuns(ApiModel):
    """The runs that ended with a verdict on a UTC day: the billable unit."""

    passed: int
    failed: int = Field(description="Failed and timed-out runs (a timeout is a failure)")
    decided: int = Field(description="passed + failed; errored and cancelled runs are not counted")


class ModelCallUsage(ApiModel):
    """The model calls of one purpose on a UTC day that reached the provider, whatever
    their outcome (the hourly allowance counts them too)."""

    purpose: str = Field(description="patient-sim or judge")
    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class UsageDay(ApiModel):
    day: date = Field(alias="date", description="A UTC day")
    runs: DecidedRuns
    model_calls: list[ModelCallUsage]


class Usage(ApiModel):
    day: date = Field(alias="date")
    writes: int
    limit: int
    remaining: int
    resets_at: datetime = Field(description="The next UTC midnight")
    days: list[UsageDay] = Field(
        description="The last `days` UTC days, today first; a day with nothing is listed "
        "with zeros. A run counts on the day it ended (finishedAt): passed, or failed "
        "(failed or timed out); errored and cancelled runs are not counted."
    )
