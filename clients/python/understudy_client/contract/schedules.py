"""Scheduled evals: a schedule, its recent evals with their pass rates, the latest
compare with the previous completed eval, and each due time's outcome."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from understudy_client.contract.base import ApiModel, Instant, is_none
from understudy_client.contract.evals import EvalStatus, Rate


class ScheduledEvalSpec(ApiModel):
    """The eval a schedule starts (workflow mode), labelled '{labelPrefix} {UTC time}'."""

    mode: Literal["workflow"]
    label_prefix: str
    scenarios: list[str] | dict[str, str] | None
    personas: str | list[str]
    repeats: int
    timeout_seconds: int | None = Field(default=None, exclude_if=is_none)
    revision: str | None = Field(default=None, exclude_if=is_none)


class ScheduledEval(ApiModel):
    id: str
    label: str
    status: EvalStatus
    created_at: Instant
    pass_rate: Rate = Field(description="Of its runs so far (cancelled and errored left out)")
    baseline_id: str | None = Field(
        default=None, description="The schedule's previous completed eval it is compared with"
    )


class ScheduleCompare(ApiModel):
    """The newest completed eval of the schedule against its baseline."""

    eval_id: str
    baseline_id: str
    current_rate: Rate
    baseline_rate: Rate
    delta: float | None
    regressed_cells: list[str] = Field(description="'scenarioId / persona' of each")
    improved_cells: list[str]
    significant_regression: bool


class ScheduleFire(ApiModel):
    due_at: Instant
    outcome: Literal["started", "skipped"]
    reason: str | None = Field(default=None, exclude_if=is_none)
    eval_id: str | None = Field(default=None, exclude_if=is_none)


class ScheduleSummary(ApiModel):
    id: str
    name: str
    cron: str = Field(description="Five fields, UTC")
    description: str | None = Field(description="The cron expression in words")
    eval: ScheduledEvalSpec
    paused: bool
    next_due_at: Instant | None = Field(description="null while paused")
    created_at: Instant
    updated_at: Instant


class ScheduleView(ScheduleSummary):
    evals: list[ScheduledEval] = Field(description="Its last five evals, newest first")
    latest_compare: ScheduleCompare | None = Field(
        description="Its newest completed eval compared with its baseline, when both exist"
    )
    history: list[ScheduleFire] = Field(description="The last 20 due times, newest first")


class ScheduleList(ApiModel):
    schedules: list[ScheduleSummary]
