"""Precision and recall of the message checks over the corpus, and their cost.

For each field (grounded, claims, mentions): over the corpus in tests/grading/corpus, a
"positive" is a wrong message the field must fail. Precision is the share of the field's
failures that are real mistakes; recall is the share of the field's mistakes it failed;
"false failures" counts correct messages the field failed (the goal is none).

Cost: grading a run with 10 messages against 50 traced responses (a third of them Bundles
of 20 Slots, the rest the chart an agent re-reads: Patient, Practitioner, MedicationRequest,
an eligibility answer): building the source index once, then grounded, claims and mentions for
every message. The goal is ≤ 20 ms; this prints the figure, it does not assert it. It
writes nothing to Redis or PostgreSQL; the one-line summary is printed last.

Run: PYTHONPATH=$PWD .venv/bin/python scripts/bench_message_checks.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.grading.message.claims import claims, unbacked
from app.grading.message.facts import SourceIndex, grounded
from app.kit import date_statements
from app.kit.dates import states_datetime
from tests.grading.corpus.cases import WORLDS, all_correct, all_wrong, booked, sources
from tests.grading.corpus.evaluate import FIELDS, holds

COST_GOAL_MS = 20.0
MESSAGES = 10
RESPONSES = 50


def quality() -> tuple[int, int, int, int]:
    """Prints the table; (correct passing, correct, wrong failing, wrong)."""
    correct = [(c, holds(c)) for c in all_correct()]
    wrong = [(c, holds(c)) for c in all_wrong()]
    print(f"corpus: {len(correct)} correct, {len(wrong)} wrong messages")
    print(f"{'field':<10} {'precision':>9} {'recall':>7} {'caught':>9} {'false failures':>15}")
    for name in FIELDS:
        true_pos = sum(1 for c, r in wrong if name in c.fails and not r.get(name, True))
        meant = sum(1 for c, _ in wrong if name in c.fails)
        # A wrong case failing a field it is not about is not counted either way.
        false_pos = sum(1 for _, r in correct if not r.get(name, True))
        flagged = true_pos + false_pos
        precision = true_pos / flagged if flagged else 1.0
        recall = true_pos / meant if meant else 1.0
        print(
            f"{name:<10} {precision:>9.1%} {recall:>7.1%} {true_pos:>4}/{meant:<4} {false_pos:>15}"
        )
    passing = sum(1 for _, r in correct if all(r.values()))
    failing = sum(1 for c, r in wrong if not r[c.fails[0]])
    print(
        f"correct passing: {passing}/{len(correct)} ({passing / len(correct):.1%}); "
        f"wrong failing: {failing}/{len(wrong)} ({failing / len(wrong):.1%})"
    )
    return passing, len(correct), failing, len(wrong)


SLOTS_PER_BUNDLE = 20  # a $find answer for a week of one practitioner's half-hours


def _slot_bundle(day: int) -> dict[str, Any]:
    entries = []
    for i in range(SLOTS_PER_BUNDLE):
        start = datetime(2026, 12, day, 14, 0, tzinfo=UTC) + timedelta(minutes=30 * i)
        end = start + timedelta(minutes=30)
        entries.append(
            {
                "fullUrl": f"https://sandbox.example/fhir/Slot/s{day}-{i}",
                "resource": {
                    "resourceType": "Slot",
                    "id": f"s{day}-{i}",
                    "status": "free",
                    "meta": {"versionId": "1", "lastUpdated": "2026-12-01T09:00:00.000Z"},
                    "schedule": {"reference": "Schedule/sch1", "display": "Dr. Sarah Chen"},
                    "serviceType": [{"text": "Follow-up visit"}],
                    "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "end": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                },
            }
        )
    return {"resourceType": "Bundle", "type": "searchset", "total": len(entries), "entry": entries}


def _run_inputs() -> tuple[list[str], list[Any], tuple[str, ...], str]:
    world = WORLDS[0]
    base = sources(world)
    responses: list[Any] = list(base)
    day = 7
    while len(responses) < RESPONSES:
        # An agent pages through free slots and re-reads the chart between them.
        responses.append(_slot_bundle(day % 20 + 7))
        responses.extend(base[1:3])
        day += 1
    responses = responses[:RESPONSES]
    messages = [c.message for c in all_correct() if c.id.startswith("ny-")][:MESSAGES]
    return messages, responses, (world.zone,), world.slots[0]


def cost(repeat: int) -> float:
    """Prints the cost; the median in ms."""
    messages, responses, zones, instant = _run_inputs()
    writes = [booked(WORLDS[0])]
    timings: list[float] = []
    for _ in range(repeat):
        date_statements._find_cached.cache_clear()  # each run reads its messages afresh
        start = time.perf_counter()
        index = SourceIndex.build(responses, zones)
        for message in messages:
            grounded(message, index)
            unbacked(claims(message), writes)
        states_datetime(messages, instant, zones)
        timings.append((time.perf_counter() - start) * 1000)
    median = statistics.median(timings)
    worst = max(timings)
    verdict = "within" if median <= COST_GOAL_MS else "OVER"
    print(
        f"cost: {MESSAGES} messages, {RESPONSES} traced responses: median {median:.2f} ms, "
        f"max {worst:.2f} ms over {repeat} runs ({verdict} the {COST_GOAL_MS:.0f} ms goal)"
    )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    passing, correct, failing, wrong = quality()
    median = cost(args.repeat)
    met = "goal met" if median <= COST_GOAL_MS else "goal missed"
    print(
        f"bench_message_checks: correct passing {passing}/{correct}, wrong failing "
        f"{failing}/{wrong}, cost median {median:.2f} ms (goal <= {COST_GOAL_MS:.0f} ms) — {met}",
        flush=True,
    )


if __name__ == "__main__":
    main()
