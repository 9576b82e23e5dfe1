"""The scenario health board's rules (docs/console.md "Board rules"): pure functions over run
rows and per-revision tallies, so the rules are tested as tables.

For one mode and one revision, a run counts for a scenario's card when it is of that
scenario, mode and revision and its scenario hash is the scenario's current hash
(editing a scenario starts its count again). The caller fetches the runs of the mode
and revision; `build_board` applies the hash rule, the states, the sort and the
headline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from understudy_client.contract.board import (
    Board,
    BoardCard,
    BoardCheck,
    BoardCounts,
    BoardHeadline,
    BoardRevision,
    BoardRun,
    BoardState,
    FailedCheck,
    NoResultReason,
    RevisionRate,
)

PASSED = "passed"
FAILING_VERDICTS = frozenset({"failed", "timed_out"})  # a timeout is a failure
VERDICTS = FAILING_VERDICTS | {PASSED}  # cancelled and errored never count
# A flaky history that has since held this many times running counts as passing again.
RECOVERED_AFTER = 3
RECENT = 5  # runs whose score and checks a card shows
HISTORY = 20  # runs listed in a card's history
CHART_REVISIONS = 12  # revisions on a card's chart
ERRORED_SHOWN = 5
# Worst first.
STATE_ORDER: dict[BoardState, int] = {"failing": 0, "flaky": 1, "no_results": 2, "passing": 3}
REASON_TEXT: dict[NoResultReason, str] = {
    "live": "a run is still live",
    "waiting": "a run is waiting to be graded",
    "errored": "a run could not be graded",
    "not_run": "not run on this revision",
}


@dataclass(frozen=True, slots=True)
class ScenarioRef:
    id: str
    title: str
    hash: str  # the current one


@dataclass(slots=True)  # not frozen: thousands per board, and a frozen init is slower
class RunFact:
    """A run of the board's mode and revision (any hash), as the query returns it; score
    and checks are filled in for the recent runs only."""

    id: str
    scenario_id: str
    scenario_hash: str
    status: str
    started_at: datetime
    deadline: datetime
    note: str | None = None
    score: float | None = None
    checks: list[BoardCheck] | None = None


@dataclass(frozen=True, slots=True)
class RevisionTally:
    """Verdicts of one scenario at one hash on one revision (the chart's data)."""

    scenario_id: str
    scenario_hash: str
    revision: str | None
    first_run_at: datetime
    verdicts: int
    passed: int


@dataclass(frozen=True, slots=True)
class CheckFailures:
    """How often a check failed on a scenario's runs at one hash (mode and revision)."""

    scenario_id: str
    scenario_hash: str
    check_id: str
    label: str
    failures: int


@dataclass(slots=True)
class BoardInput:
    mode: Literal["agent", "workflow"]
    revision: str | None
    current_revision: str | None
    now: datetime
    scenarios: Sequence[ScenarioRef]
    runs: Sequence[RunFact]
    tallies: Sequence[RevisionTally] = ()
    failures: Sequence[CheckFailures] = ()
    revisions: Sequence[BoardRevision] = field(default_factory=list)


def _order(run: RunFact) -> tuple[datetime, str]:
    return run.started_at, run.id


def counted_runs(scenario: ScenarioRef, runs: Iterable[RunFact]) -> list[RunFact]:
    """The scenario's runs at its current hash, oldest first (mode and revision are the
    query's)."""
    return sorted(
        (r for r in runs if r.scenario_id == scenario.id and r.scenario_hash == scenario.hash),
        key=_order,
    )


def state_of(statuses: Sequence[str]) -> BoardState | None:
    """The state from the counted runs' statuses, oldest first; None: no verdict."""
    verdicts = [s for s in statuses if s in VERDICTS]
    passed = sum(1 for s in verdicts if s == PASSED)
    latest_passed = sum(1 for s in verdicts[-RECOVERED_AFTER:] if s == PASSED)
    return state_of_tally(len(verdicts), passed, latest_passed)


def state_of_tally(verdicts: int, passed: int, latest_passed: int) -> BoardState | None:
    """The state from counts alone: verdicts, those passed, and those passed among the
    latest RECOVERED_AFTER verdicts (what `state_of` reads from the statuses)."""
    if not verdicts:
        return None
    if passed == 0:
        return "failing"
    if passed == verdicts:
        return "passing"
    if latest_passed == RECOVERED_AFTER:
        return "passing"
    return "flaky"


def no_result_reason(runs: Sequence[RunFact], now: datetime) -> NoResultReason:
    """Why counted runs without a verdict give none, the most hopeful reason first."""
    live = [r for r in runs if r.status == "live"]
    if any(r.deadline > now for r in live):
        return "live"
    if live:
        return "waiting"
    if any(r.status == "errored" for r in runs):
        return "errored"
    return "not_run"


def _shown(run: RunFact, *, detail: bool) -> BoardRun:
    return BoardRun(
        id=run.id,
        status=run.status,
        started_at=run.started_at,
        score=run.score if detail else None,
        checks=(run.checks or []) if detail else [],
        note=run.note if run.status == "errored" else None,
    )


def recent_ids(scenarios: Sequence[ScenarioRef], runs: Sequence[RunFact]) -> list[str]:
    """The runs whose score and checks the cards show (the caller fetches them)."""
    current = {s.id: s.hash for s in scenarios}
    mine: dict[str, list[RunFact]] = {}
    for r in runs:
        if current.get(r.scenario_id) == r.scenario_hash:
            mine.setdefault(r.scenario_id, []).append(r)
    return [r.id for s in scenarios for r in sorted(mine.get(s.id, []), key=_order)[-RECENT:]]


def _chart(scenario: ScenarioRef, tallies: Iterable[RevisionTally]) -> list[RevisionRate]:
    mine = sorted(
        (t for t in tallies if t.scenario_id == scenario.id and t.scenario_hash == scenario.hash),
        key=lambda t: (t.first_run_at, t.revision or ""),
    )
    return [
        RevisionRate(
            revision=t.revision,
            first_run_at=t.first_run_at,
            verdicts=t.verdicts,
            passed=t.passed,
            rate=t.passed / t.verdicts if t.verdicts else None,
        )
        for t in mine[-CHART_REVISIONS:]
    ]


def _most_failed(scenario: ScenarioRef, failures: Iterable[CheckFailures]) -> FailedCheck | None:
    mine = [
        f
        for f in failures
        if f.scenario_id == scenario.id and f.scenario_hash == scenario.hash and f.failures > 0
    ]
    if not mine:
        return None
    top = min(mine, key=lambda f: (-f.failures, f.check_id))
    return FailedCheck(id=top.check_id, label=top.label, failures=top.failures)


def build_card(
    scenario: ScenarioRef, data: BoardInput, runs: Sequence[RunFact] | None = None
) -> BoardCard:
    """`runs`: the scenario's runs at any hash when the caller grouped them already."""
    runs = counted_runs(scenario, data.runs if runs is None else runs)
    statuses = [r.status for r in runs]
    passed = statuses.count(PASSED)
    failed = sum(1 for s in statuses if s in FAILING_VERDICTS)
    state = state_of(statuses)
    reason = no_result_reason(runs, data.now) if state is None else None
    live = [r for r in runs if r.status == "live"]
    errored = [r for r in reversed(runs) if r.status == "errored"]
    newest = list(reversed(runs))
    return BoardCard(
        scenario_id=scenario.id,
        title=scenario.title,
        scenario_hash=scenario.hash,
        state=state or "no_results",
        reason=reason,
        reason_text=REASON_TEXT[reason] if reason else None,
        counted=len(runs),
        passed=passed,
        failed=failed,
        failed_share=failed / (passed + failed) if passed + failed else 0.0,
        live=sum(1 for r in live if r.deadline > data.now),
        waiting=sum(1 for r in live if r.deadline <= data.now),
        errored=len(errored),
        cancelled=statuses.count("cancelled"),
        most_failed=_most_failed(scenario, data.failures),
        recent=[_shown(r, detail=True) for r in newest[:RECENT]],
        errored_runs=[_shown(r, detail=False) for r in errored[:ERRORED_SHOWN]],
        history=[_shown(r, detail=False) for r in newest[:HISTORY]],
        chart=_chart(scenario, data.tallies),
    )


def sort_key(card: BoardCard) -> tuple[int, float, str]:
    """Worst first: by state, then the larger share of failed runs, then by id."""
    return STATE_ORDER[card.state], -card.failed_share, card.scenario_id


def headline_of(cards: Sequence[BoardCard]) -> BoardHeadline:
    return headline_of_states([c.state for c in cards])


def headline_of_states(states: Sequence[BoardState]) -> BoardHeadline:
    """The headline of cards in these states (one a card)."""
    counts = BoardCounts(
        failing=states.count("failing"),
        flaky=states.count("flaky"),
        no_results=states.count("no_results"),
        passing=states.count("passing"),
    )
    attention = counts.failing + counts.flaky
    total = len(states)
    if total == 0:
        text = "No scenarios in this mode"
    elif attention:
        verb = "needs" if attention == 1 else "need"
        text = f"{attention} of {total} {_scenarios(total)} {verb} attention"
    elif counts.passing == total:
        text = f"All {total} {_scenarios(total)} passing"
    elif counts.passing == 0:
        text = "No results yet"
    else:
        text = (
            f"Nothing needs attention: {counts.passing} passing, "
            f"{counts.no_results} without results yet"
        )
    return BoardHeadline(text=text, attention=attention, counts=counts)


def _scenarios(n: int) -> str:
    return "scenario" if n == 1 else "scenarios"


def build_board(data: BoardInput) -> Board:
    by_scenario: dict[str, list[RunFact]] = {}
    for run in data.runs:
        by_scenario.setdefault(run.scenario_id, []).append(run)
    cards = sorted(
        (build_card(s, data, by_scenario.get(s.id, [])) for s in data.scenarios), key=sort_key
    )
    return Board(
        mode=data.mode,
        revision=data.revision,
        current_revision=data.current_revision,
        revisions=list(data.revisions),
        headline=headline_of(cards),
        cards=cards,
    )
