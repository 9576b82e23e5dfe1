"""What `matches-reference` adds to a grading pass: every built-in scenario's reference
solution replayed from a run's starting point (pure, no database), then graded N times
with all its expectations and with `matches-reference` alone, with the replay cached
(as a live run's every pass after its first) and replayed afresh (its first pass).

    python scripts/bench_reference.py [--passes N]

The reference is the same pass without `matches-reference` (the scenario's own
expectations, measured in the same sitting). Goal: it adds at most a fifth to a pass.
Prints one line per scenario, then the one-line summary last.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

from app.grading import reference_expected
from app.grading.engine import grade
from app.grading.replay import Replay
from app.grading.snapshot import RunSnapshot
from app.runs.defaults import default_expectations
from app.scenarios.expansion import expand_scenario
from app.scenarios.schema import Expectation
from app.scenarios.service import builtin_scenarios
from app.tenants.directory import aliases

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def _start_of(scenario_id: str) -> tuple[list[Expectation], list[Expectation], RunSnapshot]:
    scenario = builtin_scenarios()[scenario_id].scenario
    expanded = expand_scenario(scenario, "bench", START)
    by_ref = {f"{r['resourceType']}/{r['id']}": r for r in [*expanded.fixture, *expanded.stimulus]}
    point = RunSnapshot(
        run_id=f"run_{scenario_id}",
        started_at=START,
        now=START,
        deadline=START + timedelta(minutes=10),
        fixture=dict(expanded.refs),
        current={s: by_ref.get(ref) for s, ref in expanded.refs.items()},
        patient_refs=frozenset(r for r in expanded.refs.values() if r.startswith("Patient/")),
        aliases=aliases(),
    )
    snapshot = Replay(point).run(list(scenario.oracle))
    own = list(scenario.expectations)
    defaults = default_expectations(scenario)
    return own, [*own, *defaults], snapshot


def _timed(expectations: list[Expectation], snapshot: RunSnapshot, cold: bool) -> float:
    if cold:
        reference_expected._replays.clear()
    began = time.perf_counter()
    grade(expectations, snapshot)
    return (time.perf_counter() - began) * 1000


def _ms(
    own: list[Expectation], every: list[Expectation], snapshot: RunSnapshot, passes: int
) -> tuple[float, float, float]:
    """Medians of the three passes, taken in turn (the machine's drift hits all three)."""
    grade(every, snapshot)  # compile every expression once
    base, warm, cold = [], [], []
    for _ in range(passes):
        base.append(_timed(own, snapshot, cold=False))
        warm.append(_timed(every, snapshot, cold=False))
        cold.append(_timed(every, snapshot, cold=True))
    return statistics.median(base), statistics.median(warm), statistics.median(cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=30)
    args = parser.parse_args()
    shares: list[float] = []
    firsts: list[float] = []
    for scenario_id in sorted(builtin_scenarios()):
        own, every, snapshot = _start_of(scenario_id)
        base, warm, cold = _ms(own, every, snapshot, args.passes)
        shares.append((warm - base) / base if base else 0.0)
        firsts.append((cold - base) / base if base else 0.0)
        print(
            f"{scenario_id:<44} own {base:6.2f} ms  with matches-reference {warm:6.2f} ms "
            f"(first pass {cold:6.2f} ms)"
        )
    print(
        f"bench_reference: matches-reference adds a median {statistics.median(shares):.0%} "
        f"(max {max(shares):.0%}) to a pass with the replay cached, "
        f"{statistics.median(firsts):.0%} (max {max(firsts):.0%}) to a run's first pass; "
        f"{len(shares)} scenarios, {args.passes} passes each (goal: at most 20% cached)"
    )


if __name__ == "__main__":
    main()
