"""The scenario health board: one card per scenario of a mode, for one revision."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from understudy_client.contract.base import ApiModel, Instant

BoardState = Literal["failing", "flaky", "no_results", "passing"]
# Why a card has no result: a run still live, a run past its deadline waiting for its
# grading pass, a run that errored, or no run on this revision at the current hash.
NoResultReason = Literal["live", "waiting", "errored", "not_run"]


class BoardCheck(ApiModel):
    id: str
    label: str
    passed: bool | None = Field(description="null: not graded")


class BoardRun(ApiModel):
    id: str
    status: str = Field(description="live, passed, failed, timed_out, cancelled or errored")
    started_at: Instant
    score: float | None = Field(description="null: live, or not among the recent runs")
    checks: list[BoardCheck] = Field(
        default_factory=list, description="Each check of the verdict (recent runs only)"
    )
    note: str | None = Field(default=None, description="Why an errored run could not be graded")


class RevisionRate(ApiModel):
    """The scenario's pass rate on one revision, at its current hash."""

    revision: str | None
    first_run_at: Instant
    verdicts: int = Field(description="Runs with a verdict (passed, failed, timed out)")
    passed: int
    rate: float | None = Field(description="passed / verdicts; null without a verdict")


class FailedCheck(ApiModel):
    id: str
    label: str
    failures: int = Field(description="Counted runs on which this check failed")


class BoardCard(ApiModel):
    scenario_id: str
    title: str
    scenario_hash: str = Field(description="The current hash: only runs at it are counted")
    state: BoardState
    reason: NoResultReason | None = Field(description="Why there is no result (no_results only)")
    reason_text: str | None = Field(description="The reason in words")
    counted: int = Field(description="Runs counted: this scenario, mode, revision, current hash")
    passed: int
    failed: int = Field(description="Failed or timed out")
    failed_share: float = Field(description="failed / (passed + failed); 0 without a verdict")
    live: int
    waiting: int = Field(description="Live runs past their deadline, waiting to be graded")
    errored: int
    cancelled: int
    most_failed: FailedCheck | None = Field(description="The check that failed most often")
    recent: list[BoardRun] = Field(description="The latest counted runs, newest first")
    errored_runs: list[BoardRun] = Field(description="Errored runs, newest first, with why")
    history: list[BoardRun] = Field(description="Counted runs, newest first (at most 20)")
    chart: list[RevisionRate] = Field(
        description="Pass rate per revision at the current hash, oldest first (at most 12)"
    )


class BoardCounts(ApiModel):
    failing: int
    flaky: int
    no_results: int
    passing: int


class BoardHeadline(ApiModel):
    text: str
    attention: int = Field(description="Scenarios failing or flaky")
    counts: BoardCounts


class BoardRevision(ApiModel):
    revision: str | None
    last_run_at: Instant


class Board(ApiModel):
    mode: Literal["agent", "workflow"]
    revision: str | None = Field(
        description="The revision shown (default: that of the tenant's latest run of the mode)"
    )
    current_revision: str | None = Field(description="The revision of the latest run of the mode")
    revisions: list[BoardRevision] = Field(description="Revisions run in this mode, newest first")
    headline: BoardHeadline
    cards: list[BoardCard] = Field(description="Worst first")
