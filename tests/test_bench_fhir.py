"""scripts/bench_fhir.py's arithmetic against its ceiling: rounds, how they combine, the
shares of the ceiling (req/s, p50, p99) and the check that both servers answered alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_fhir
from bench_fhir import OpResult


def result(name: str, requests: int, seconds: float, p50: float, p99: float) -> OpResult:
    return OpResult(
        name=name,
        requests=requests,
        duration_s=seconds,
        requests_per_s=round(requests / seconds, 1),
        ok_per_s=round(requests / seconds, 1),
        p50_ms=p50,
        p90_ms=p50 * 2,
        p99_ms=p99,
        mean_ms=p50,
        max_ms=p99 * 2,
        non2xx=0,
        socket_errors={"connect": 0, "read": 0, "write": 0, "timeout": 0},
        statuses={"200": requests},
        errors=0,
        error_rate=0.0,
        flagged=False,
    )


@pytest.mark.parametrize(
    ("duration", "rounds", "lengths"),
    [(15, 3, [5, 5, 5]), (16, 3, [6, 5, 5]), (3, 3, [1, 1, 1]), (7, 1, [7])],
)
def test_a_duration_splits_into_whole_second_rounds(
    duration: int, rounds: int, lengths: list[int]
) -> None:
    assert bench_fhir.round_lengths(duration, rounds) == lengths


def test_rounds_combine_into_one_figure() -> None:
    parts = [
        result("read", 5000, 5.0, 1.0, 3.0),
        result("read", 4000, 5.0, 1.4, 5.0),
        result("read", 6000, 5.0, 1.2, 4.0),
    ]
    combined = bench_fhir.combine("read", parts)
    assert combined.requests == 15_000
    assert combined.requests_per_s == 1000.0
    assert (combined.p50_ms, combined.p99_ms) == (1.2, 4.0)  # the median round's
    assert combined.statuses == {"200": 15_000}
    assert [r["requests_per_s"] for r in combined.rounds] == [1000.0, 800.0, 1200.0]


def test_shares_read_as_a_part_of_the_ceiling_for_throughput_and_latency() -> None:
    ours = bench_fhir.combine("read", [result("read", 800, 1.0, 2.0, 8.0)])
    ceiling = bench_fhir.combine("read", [result("read", 1000, 1.0, 1.0, 6.0)])
    shares = bench_fhir.shares_of(ours, ceiling)
    assert shares["share"] == 0.8
    assert shares["p50_share"] == 0.5  # twice the ceiling's latency: half its speed
    assert shares["p99_share"] == 0.75
    assert shares["round_shares"] == [0.8]
    assert shares["meets_goal"] is True  # read: ≥ 80%
    line = bench_fhir.summary_line([ours], False, {"read": ceiling})
    assert "= 80% of the ceiling's 1000 (p50 50%, p99 75%)" in line
    assert line.endswith("ceiling goals: goal met")


def test_the_goals_are_issue_31s_and_a_create_is_held_to_its_p99() -> None:
    assert bench_fhir.CEILING_GOALS == {
        "read": 0.80,
        "search-family": 0.80,
        "search-appt": 0.80,
        "create": 0.75,
    }
    slow_read = bench_fhir.combine("read", [result("read", 790, 1.0, 1.0, 6.0)])
    ceiling = bench_fhir.combine("read", [result("read", 1000, 1.0, 1.0, 6.0)])
    assert bench_fhir.shares_of(slow_read, ceiling)["meets_goal"] is False  # 79%
    create_ceiling = bench_fhir.combine("create", [result("create", 1000, 1.0, 5.0, 20.0)])
    quick = bench_fhir.combine("create", [result("create", 800, 1.0, 6.0, 14.0)])
    late = bench_fhir.combine("create", [result("create", 800, 1.0, 6.0, 16.0)])
    assert bench_fhir.shares_of(quick, create_ceiling)["meets_goal"] is True
    assert bench_fhir.shares_of(late, create_ceiling)["meets_goal"] is False  # p99 > 15 ms


def test_a_ceiling_that_answers_differently_is_reported() -> None:
    ours = {"search-family": {"statuses": [200, 200], "entries_per_page": [3, 5], "totals": [3, 5]}}
    same = {"search-family": {"statuses": [200, 200], "entries_per_page": [3, 5], "totals": [3, 5]}}
    other = {
        "search-family": {"statuses": [200, 200], "entries_per_page": [3, 5], "totals": [3, 6]}
    }
    assert bench_fhir.compare_answers(ours, same, ["search-family"]) == []
    assert bench_fhir.compare_answers(ours, other, ["search-family"]) == [
        "search-family: totals [3, 5] from BASE, [3, 6] from the ceiling"
    ]
