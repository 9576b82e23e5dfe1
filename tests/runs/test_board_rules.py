"""The board's rules as tables (docs/console.md "Board rules"): states, the last-3 rule, the
hash reset, the reasons for no result, the sort with its ties, the headline, the chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.runs import board
from app.runs.board import BoardInput, CheckFailures, RevisionTally, RunFact, ScenarioRef
from understudy_client.contract.board import BoardCard, BoardCheck

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=5)
S = ScenarioRef("s.one", "One", "h2")


def _runs(statuses: str, scenario: str = "s.one", hash_: str = "h2") -> list[RunFact]:
    """One run per letter, a minute apart: p passed, f failed, t timed out, c cancelled,
    e errored, l live (deadline ahead), w live past its deadline (waiting)."""
    names = {
        "p": "passed",
        "f": "failed",
        "t": "timed_out",
        "c": "cancelled",
        "e": "errored",
        "l": "live",
        "w": "live",
    }
    out = []
    for i, letter in enumerate(statuses):
        at = T0 + timedelta(minutes=i)
        deadline = NOW - timedelta(minutes=1) if letter == "w" else NOW + timedelta(minutes=10)
        note = "the grader crashed" if letter == "e" else None
        out.append(
            RunFact(
                f"{scenario}-{hash_}-{i:02d}", scenario, hash_, names[letter], at, deadline, note
            )
        )
    return out


def _card(runs: list[RunFact], scenario: ScenarioRef = S) -> BoardCard:
    data = BoardInput("workflow", "rev1", "rev1", NOW, [scenario], runs)
    return board.build_card(scenario, data)


@pytest.mark.parametrize(
    ("history", "state"),
    [
        ("f", "failing"),
        ("ff", "failing"),
        ("t", "failing"),  # a timeout is a failure
        ("ftf", "failing"),
        ("fce", "failing"),  # cancelled and errored are not verdicts
        ("p", "passing"),
        ("ppp", "passing"),
        ("pcp", "passing"),
        ("pep", "passing"),
        ("pl", "passing"),  # a live run does not change a verdict
        ("fppp", "passing"),  # the last-3 rule
        ("tppp", "passing"),
        ("ffpfppp", "passing"),
        ("fpcpp", "passing"),  # the last 3 *with a verdict*
        ("fpp", "flaky"),  # only two since the failure
        ("pf", "flaky"),
        ("pppf", "flaky"),
        ("fpppf", "flaky"),
        ("pt", "flaky"),
        ("", "no_results"),
        ("c", "no_results"),
        ("e", "no_results"),
        ("l", "no_results"),
        ("w", "no_results"),
    ],
)
def test_states(history: str, state: str) -> None:
    assert _card(_runs(history)).state == state


@pytest.mark.parametrize(
    ("history", "reason"),
    [
        ("", "not_run"),
        ("c", "not_run"),
        ("cc", "not_run"),
        ("e", "errored"),
        ("ce", "errored"),
        ("w", "waiting"),
        ("ew", "waiting"),
        ("l", "live"),
        ("wl", "live"),
        ("elw", "live"),
    ],
)
def test_no_result_reasons(history: str, reason: str) -> None:
    card = _card(_runs(history))
    assert card.state == "no_results"
    assert card.reason == reason
    assert card.reason is not None and card.reason_text == board.REASON_TEXT[card.reason]


def test_a_card_with_a_verdict_gives_no_reason() -> None:
    card = _card(_runs("pl"))
    assert card.reason is None and card.reason_text is None


def test_an_errored_run_shows_why() -> None:
    card = _card(_runs("e"))
    assert [r.note for r in card.errored_runs] == ["the grader crashed"]
    assert card.errored == 1


def test_hash_reset_counts_only_the_current_hash() -> None:
    """Failing at the old hash, passing since the edit: the card says passing."""
    old = _runs("fff", hash_="h1")
    new = _runs("p", hash_="h2")
    card = _card(old + new)
    assert card.state == "passing"
    assert card.counted == 1 and card.failed == 0
    assert [r.id for r in card.history] == [new[0].id]


def test_hash_reset_with_no_run_since_the_edit() -> None:
    card = _card(_runs("pp", hash_="h1"))
    assert card.state == "no_results" and card.reason == "not_run" and card.counted == 0


def test_other_scenarios_runs_do_not_count() -> None:
    card = _card(_runs("ff", scenario="s.other"))
    assert card.state == "no_results"


def test_counts_and_share() -> None:
    card = _card(_runs("ptfpclwe"))
    assert (card.passed, card.failed, card.cancelled, card.live, card.waiting, card.errored) == (
        2,
        2,
        1,
        1,
        1,
        1,
    )
    assert card.failed_share == 0.5
    assert card.counted == 8


def _sorted(cards: list[tuple[str, str]]) -> list[str]:
    scenarios = [ScenarioRef(sid, sid, "h") for sid, _ in cards]
    runs = [r for sid, history in cards for r in _runs(history, scenario=sid, hash_="h")]
    result = board.build_board(BoardInput("agent", "r", "r", NOW, scenarios, runs))
    return [c.scenario_id for c in result.cards]


@pytest.mark.parametrize(
    ("cards", "order"),
    [
        # by state, worst first
        ([("a", "p"), ("b", ""), ("c", "pf"), ("d", "f")], ["d", "c", "b", "a"]),
        # flaky: the larger share of failed runs first
        ([("a", "pf"), ("b", "pff"), ("c", "ppf")], ["b", "a", "c"]),
        # ties in state and share: by id
        ([("c", "pf"), ("a", "fp"), ("b", "ppff")], ["a", "b", "c"]),
        ([("z", "f"), ("m", "ft"), ("a", "t")], ["a", "m", "z"]),
        ([("b", ""), ("a", "c"), ("c", "l")], ["a", "b", "c"]),
        # passing by the last-3 rule sorts before an always-passing one (it has failures)
        ([("a", "ppp"), ("b", "fppp")], ["b", "a"]),
        ([("b", "ppp"), ("a", "pp")], ["a", "b"]),
    ],
)
def test_sort(cards: list[tuple[str, str]], order: list[str]) -> None:
    assert _sorted(cards) == order


@pytest.mark.parametrize(
    ("histories", "text", "attention"),
    [
        (["f", "pf", "p"], "2 of 3 scenarios need attention", 2),
        (["f", "", "p"], "1 of 3 scenarios needs attention", 1),
        (["p", "ppp"], "All 2 scenarios passing", 0),
        (["", "c", "l"], "No results yet", 0),
        (["p", ""], "Nothing needs attention: 1 passing, 1 without results yet", 0),
        ([], "No scenarios in this mode", 0),
    ],
)
def test_headline(histories: list[str], text: str, attention: int) -> None:
    scenarios = [ScenarioRef(f"s{i}", "t", "h") for i in range(len(histories))]
    runs = [r for i, h in enumerate(histories) for r in _runs(h, scenario=f"s{i}", hash_="h")]
    result = board.build_board(BoardInput("agent", "r", "r", NOW, scenarios, runs))
    assert result.headline.text == text
    assert result.headline.attention == attention
    counts = result.headline.counts
    assert counts.failing + counts.flaky + counts.no_results + counts.passing == len(histories)


def test_chart_oldest_first_current_hash_only_last_12() -> None:
    tallies = [
        RevisionTally("s.one", "h2", f"r{i:02d}", T0 + timedelta(hours=i), 4, i % 5)
        for i in range(15)
    ]
    tallies.append(RevisionTally("s.one", "h1", "old", T0 - timedelta(days=1), 3, 0))
    tallies.append(RevisionTally("s.one", "h2", "nov", T0 + timedelta(hours=20), 0, 0))
    data = BoardInput("agent", "r", "r", NOW, [S], [], tallies=tallies)
    chart = board.build_card(S, data).chart
    assert len(chart) == board.CHART_REVISIONS
    assert [c.revision for c in chart] == [f"r{i:02d}" for i in range(4, 15)] + ["nov"]
    assert chart[0].rate == 4 / 4 and chart[1].rate == 0.0
    assert chart[-1].rate is None  # no verdict on that revision


def test_most_failed_check_at_current_hash_ties_by_id() -> None:
    failures = [
        CheckFailures("s.one", "h2", "b-check", "B", 3),
        CheckFailures("s.one", "h2", "a-check", "A", 3),
        CheckFailures("s.one", "h2", "c-check", "C", 1),
        CheckFailures("s.one", "h1", "old", "Old", 9),
    ]
    data = BoardInput("agent", "r", "r", NOW, [S], _runs("f"), failures=failures)
    top = board.build_card(S, data).most_failed
    assert top is not None and (top.id, top.failures) == ("a-check", 3)


def test_recent_runs_newest_first_with_checks() -> None:
    runs = _runs("fppppp")
    checks = [BoardCheck(id="x", label="X", passed=True)]
    runs = [
        RunFact(
            r.id,
            r.scenario_id,
            r.scenario_hash,
            r.status,
            r.started_at,
            r.deadline,
            score=1.0,
            checks=checks,
        )
        if r.id in board.recent_ids([S], runs)
        else r
        for r in runs
    ]
    card = _card(runs)
    assert len(card.recent) == board.RECENT
    assert card.recent[0].id == runs[-1].id
    assert all(r.checks == checks and r.score == 1.0 for r in card.recent)
    assert [r.id for r in card.history] == [r.id for r in reversed(runs)]
    assert card.history[0].checks == []


def test_recent_ids_only_counted_runs() -> None:
    runs = _runs("ff", hash_="h1") + _runs("p" * 7, hash_="h2")
    ids = board.recent_ids([S], runs)
    assert ids == [r.id for r in runs[-board.RECENT :]]
