"""Evals: the eval view (runs, counts, summary figures), the list, and the compare."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from understudy_client.contract.base import ApiModel, Instant, is_empty, is_none
from understudy_client.contract.runs import Provenance

EvalStatus = Literal["queued", "running", "completed", "cancelled"]
CellLabel = Literal["regressed", "improved", "same", "new", "removed"]
Attribution = Literal["scenario", "simulator", "judge", "platform", "agent"]


class Rate(ApiModel):
    """A pass rate with its Wilson interval; `rate` and `ci95` are null with no runs."""

    passes: int
    runs: int
    rate: float | None
    ci95: tuple[float, float] | None
    text: str = Field(description="e.g. '8/10 = 80.0% (95% CI 49.0%–94.3%)'")


class FlakyCell(ApiModel):
    scenario_id: str
    persona: str
    passes: int
    runs: int


class FailedCheck(ApiModel):
    scenario_id: str
    expectation_id: str
    label: str
    count: int
    run_id: str | None = Field(
        default=None, exclude_if=is_none, description="A run where it failed (the first)"
    )


class Excluded(ApiModel):
    cancelled: int
    errored: int


class EvalSummary(ApiModel):
    pass_rate: Rate
    k: int = Field(description="The eval's repeats")
    pass_at_k: float | None
    pass_hat_k: float | None
    cells_left_out: int = Field(description="Cells with fewer than k valid runs")
    flaky_cells: list[FlakyCell]
    personas: dict[str, Rate]
    most_failed_checks: list[FailedCheck]
    excluded: Excluded = Field(description="Runs left out of the rates")
    incomplete: bool = Field(description="More than 10% of the runs errored")


class EvalRun(ApiModel):
    """One planned run of an eval: queued, or started (then with its run's id and base)."""

    position: int
    scenario_id: str
    persona: str
    repeat: int
    status: str = Field(description="queued, cancelled, or the run's status")
    note: str | None = Field(
        default=None,
        exclude_if=is_empty,
        description="Why it was cancelled or errored (left out of the rates), when known",
    )
    run_id: str | None = Field(default=None, exclude_if=is_none)
    fhir_base: str | None = Field(default=None, exclude_if=is_none)
    fixture: dict[str, str] | None = Field(default=None, exclude_if=is_none)
    brief: str | None = Field(
        default=None, exclude_if=is_none, description="A started agent-mode run's task"
    )
    passed: bool | None = Field(default=None, exclude_if=is_none)
    score: float | None = Field(default=None, exclude_if=is_none)
    provenance: Provenance | None = Field(
        default=None, exclude_if=is_none, description="A started run's provenance"
    )


class EvalRequestEcho(ApiModel):
    """The eval's request as it was made (in the order the database keeps its keys)."""

    repeats: int
    personas: str | list[str]
    scenarios: list[str] | dict[str, str] | None
    timeout_seconds: int | None


class EvalView(ApiModel):
    id: str
    label: str
    revision: str | None = Field(
        default=None, description="The version of the system under test; its runs carry it"
    )
    mode: str
    repeats: int
    request: EvalRequestEcho
    status: EvalStatus
    created_at: Instant
    counts: dict[str, int] = Field(description="Runs by status")
    total: int
    runs: list[EvalRun]
    summary: EvalSummary | None = Field(
        default=None, exclude_if=is_none, description="Once completed or cancelled"
    )
    completed_at: Instant | None = Field(
        default=None,
        exclude_if=is_none,
        description="When its last run ended (set once, with its eval.completed event)",
    )
    schedule_id: str | None = Field(
        default=None, exclude_if=is_none, description="The schedule that started it"
    )
    baseline_id: str | None = Field(
        default=None,
        exclude_if=is_none,
        description="The eval it is compared with by default (a scheduled eval: the "
        "schedule's previous completed eval); absent: the CI rule's choice",
    )


class EvalListItem(ApiModel):
    id: str
    label: str
    revision: str | None = Field(
        default=None, description="The version of the system under test; its runs carry it"
    )
    mode: str
    status: EvalStatus
    created_at: Instant
    total: int
    counts: dict[str, int]
    schedule_id: str | None = Field(
        default=None, exclude_if=is_none, description="The schedule that started it"
    )
    baseline_id: str | None = Field(
        default=None,
        exclude_if=is_none,
        description="The eval it is compared with by default, when its own",
    )


class EvalList(ApiModel):
    evals: list[EvalListItem]


class CellCounts(ApiModel):
    passes: int
    runs: int


class CompareCell(ApiModel):
    scenario_id: str
    persona: str
    label: CellLabel
    baseline: CellCounts | None
    current: CellCounts | None
    fisher_p_worse: float | None
    comparable: bool | None = Field(description="false: the scenario changed between the evals")
    attribution: Attribution | None = Field(
        default=None,
        description="Whose change flipped the cell (null when the label is same): scenario "
        "(its hash changed), simulator (the patient's engine, model or prompt changed and "
        "the scenario uses one), judge (the only required checks that moved are judged ones "
        "and the judge changed; rubric checks are always bonus, so a judge change alone "
        "moves scores, never a cell), "
        "platform (its version changed, nothing above did), else agent",
    )


class OverallTest(ApiModel):
    """The stratified exact test over the informative cells."""

    statistic: int
    expected: float
    p_two_sided: float
    p_regress: float = Field(description="One-sided mid-p of a regression")
    p_improve: float
    p_regress_plain: float = Field(description="One-sided plain exact p of a regression")
    informative_cells: int
    reason: str | None


class Comparison(ApiModel):
    id: str
    baseline: str
    label: str
    baseline_label: str
    complete: bool
    cells: list[CompareCell]
    baseline_rate: Rate
    current_rate: Rate
    test: OverallTest
    delta: float | None
    delta_ci95: tuple[float, float] | None
    mde: float | None
    underpowered: bool
    exceeds_noise: bool
    significant_regression: bool
    alpha: float
    mde_note: str | None = Field(default=None, exclude_if=is_none)
    flips: dict[str, int] = Field(
        default_factory=dict,
        description="Cells whose label is not same, counted by attribution (every "
        "attribution is listed, 0 included)",
    )
