"""What the MCP tools return. The descriptions are read by language models that have no
other documentation, so they say what each field means and what to do with it. A run's
progress and its expected results are the contract's own models (the REST API answers
them too), their descriptions written there."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainSerializer, WithJsonSchema

from understudy_client.contract.runs import ExpectationResult, RunProgress


class ScenarioChoice(BaseModel):
    """A scenario as an agent picks one to run: the testing API's summary
    (`ScenarioSummary`) with its persona variants named as start_test_run takes them (the
    baseline left out), without the version and content hash."""

    id: str = Field(description="Pass this to start_test_run as scenario_id.")
    title: str
    category: str = Field(description="e.g. scheduling, results, messaging, coverage")
    modes: list[str] = Field(
        description="'agent': you get a brief and do the task; 'workflow': an automation "
        "reacts to events, there is no brief."
    )
    summary: str = Field(description="What the scenario tests and what a good result is.")
    variants: list[str] = Field(
        description="Persona variants (pass one to start_test_run as variant); the "
        "baseline is used when none is given."
    )
    builtin: bool = Field(description="True for the built-in library, false for imported ones.")


class ScenarioChoices(BaseModel):
    """The scenarios list_test_scenarios found (filtered by category and mode)."""

    scenarios: list[ScenarioChoice]


# The contract's models (understudy_client.contract) answer the REST API in camelCase
# aliases, and the SDK dumps a tool's result by alias; every MCP result is snake_case, so
# the contract's models nested in one are dumped by their field names.


def _progress_by_name(progress: RunProgress) -> dict[str, Any]:
    return progress.model_dump(mode="json", by_alias=False)


def _expectation_by_name(result: ExpectationResult) -> dict[str, Any]:
    """By field names, and `children` even when empty (the REST answer leaves it out)."""
    dumped = result.model_dump(mode="json", by_alias=False)
    dumped["children"] = [_expectation_by_name(child) for child in result.children]
    return dumped


ProgressByName = Annotated[
    RunProgress,
    PlainSerializer(_progress_by_name),
    WithJsonSchema(RunProgress.model_json_schema(by_alias=False)),
]
# Its fields and its evidence's are single words, alias and name alike, so the schema by
# alias is already the schema by name (tests/mcp/test_schemas.py holds both to it).
ExpectationByName = Annotated[ExpectationResult, PlainSerializer(_expectation_by_name)]


class TestRun(BaseModel):
    __test__ = False  # not a pytest class, whatever its name

    run_id: str = Field(description="Pass as run_id to any tool to act on this run explicitly.")
    status: str = Field(
        description="live (working), passed/failed (graded), timed_out, cancelled or error."
    )
    scenario_id: str
    mode: str
    variant: str | None = Field(description="The persona variant, or null for the baseline.")
    label: str | None = Field(default=None, description="The run's label, if it was given one.")
    revision: str | None = Field(
        default=None,
        description="The version of the system under test the run was started for, if named.",
    )
    brief: str | None = Field(
        default=None, description="The task, in plain words (agent mode only). Do what it says."
    )
    fixture: dict[str, str] = Field(
        description="The run's own resources by role: symbol -> 'Type/id' (e.g. patient -> "
        "'Patient/abc'). Use these ids; other runs' copies are hidden from you."
    )
    fhir_base: str = Field(
        description="This run's FHIR base URL (the FHIR tools already use it while this is "
        "your current run)."
    )
    started_at: str
    deadline: str = Field(description="The run is graded and ended at this time if not finished.")
    progress: ProgressByName | None = Field(
        default=None, description="While live: how many required results hold so far."
    )
    finished_at: str | None = None
    passed: bool | None = Field(default=None, description="The verdict, once the run ended.")
    score: float | None = Field(default=None, description="Weighted share of results met, 0-1.")
    expectations: list[ExpectationByName] = Field(
        default_factory=list, description="Each expected result with its evidence (once ended)."
    )
    note: str | None = None
    hint: str | None = Field(default=None, description="What to do next.")


class LiveRunInfo(BaseModel):
    run_id: str = Field(description="Pass as run_id to act on this run.")
    scenario_id: str = Field(description="The scenario the run tests.")
    started_at: str = Field(description="When it started (the newest is usually yours).")


class ActedOn(BaseModel):
    """Which FHIR base a tool read or wrote."""

    base: Literal["run", "tenant"] = Field(
        description="'run': a test run's own view (its fixture, hiding other runs' copies). "
        "'tenant': the tenant's shared data (all runs' copies mixed in). If you are doing a "
        "test run's task, call again with run_id: the tenant base is not your run's view."
    )
    run_id: str | None = Field(
        default=None, description="The run acted on (base 'run'); null on the tenant base."
    )
    fhir_base: str = Field(description="The FHIR base URL the call went to.")
    note: str | None = Field(
        default=None,
        description="Why this base was used and what to do if it is not the one you meant.",
    )
    live_runs: list[LiveRunInfo] = Field(
        default_factory=list,
        description="On the tenant base: the tenant's live runs. To work on one, repeat "
        "the call with its run_id (every later call too, or start your own run).",
    )


ACTED_ON = "Which base this call acted on: a run (run_id) or the tenant's shared data."


class FhirResource(BaseModel):
    reference: str = Field(description="'Type/id' of the resource.")
    version_id: str | None = Field(
        description="Current version; pass as if_match to update only this version."
    )
    resource: dict[str, Any]
    acted_on: ActedOn = Field(description=ACTED_ON)


class WriteOutcome(BaseModel):
    outcome: Literal["created", "updated", "existing"] = Field(
        description="created; updated; or existing (a conditional create found a match)."
    )
    reference: str = Field(description="'Type/id' of the written resource; use it in references.")
    version_id: str | None
    resource: dict[str, Any] | None = Field(description="The resource as stored.")
    acted_on: ActedOn = Field(description=ACTED_ON)


class Deleted(BaseModel):
    deleted: str = Field(description="'Type/id' of the deleted resource (reads now answer gone).")
    acted_on: ActedOn = Field(description=ACTED_ON)


class SearchResults(BaseModel):
    """One page of a fhir_search: the matches, what _include added, the next page."""

    resource_type: str
    total: int | None = Field(description="How many resources match in all (not just this page).")
    resources: list[dict[str, Any]] = Field(description="The matches on this page.")
    included: list[dict[str, Any]] = Field(
        default_factory=list, description="Resources added by _include/_revinclude."
    )
    next_page_url: str | None = Field(
        default=None,
        description="More matches exist: call fhir_search again with page_url set to this.",
    )
    acted_on: ActedOn = Field(description=ACTED_ON)


class FreeTimes(BaseModel):
    practitioner: str
    total: int
    proposals: list[dict[str, Any]] = Field(
        description="Free times as proposed Appointments (start, end, minutesDuration, slot). "
        "To book one, create an Appointment with status 'booked', the same start/end and "
        "slot, and the patient and practitioner as participants."
    )
    acted_on: ActedOn = Field(description=ACTED_ON)


class Eligibility(BaseModel):
    eligible: bool
    coverage: str | None = Field(description="'Coverage/<id>' the answer is based on, or null.")
    reason: str = Field(description="Why the patient is or is not covered.")
    acted_on: ActedOn = Field(description=ACTED_ON)


class Message(BaseModel):
    id: str = Field(description="Communication id; pass as in_response_to to answer it.")
    direction: Literal["from_patient", "to_patient", "other"]
    sent: str | None
    text: str
    in_response_to: list[str] = Field(default_factory=list)


class MessageSent(BaseModel):
    message_id: str
    reference: str = Field(description="'Communication/<id>' of your message.")
    patient: str
    sent: str
    hint: str


class Thread(BaseModel):
    patient: str = Field(description="'Patient/<id>' the thread is with.")
    messages: list[Message] = Field(description="Oldest first.")
    awaiting_reply: bool = Field(
        description="True when your latest message has no answer yet (the patient may still "
        "be typing: call again with wait_seconds)."
    )
    note: str | None = Field(
        default=None, description="Why no reply will come (e.g. the patient stopped replying)."
    )
