"""What a grading pass costs in CPU on a busy run: a run of scheduling.book-ask-time
(strict end state, text truth, message checks, a rubric left to the judge) whose system,
besides the reference solution's work, wrote 50 changes in all and 20 messages to the
patient — each message stating times, names and a claim, as a chatty agent's do. Pure:
no database, no server; the snapshot is built as the runs service builds it.

    python scripts/bench_grading_cost.py [--passes N]

Each pass is timed in process CPU time (`time.process_time`) as the runs service grades:
with the process's clause memo and `matches-reference`'s replay cache warm (a live run's
every pass after its first, `app.runs.verdicts.GRADING_MEMO`), and with both empty (a
run's first pass).
Goal (issue 31): ≤ 20 ms of CPU per pass. Prints the medians and p95, then the summary.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from app.grading import reference_expected
from app.grading.engine import grade
from app.grading.fhirpath import ClauseMemo
from app.grading.replay import Replay
from app.grading.snapshot import ChangedResource, RunSnapshot
from app.runs.defaults import default_expectations
from app.scenarios.expansion import expand_scenario
from app.scenarios.service import builtin_scenarios
from app.tenants.directory import aliases, names

SCENARIO = "scheduling.book-ask-time"
START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
CHANGES = 50
MESSAGES = 20
GOAL_MS = 20.0
GRADING_MEMO_SIZE = 8192  # as app.runs.verdicts.GRADING_MEMO


def _message(i: int, patient: str, at: datetime) -> dict[str, Any]:
    slot = START + timedelta(days=2 + i % 5, hours=i % 3)
    text = (
        f"Hi Marcus, following up ({i + 1}): Dr. Chen has an opening on "
        f"{slot:%A, %B} {slot.day} at {slot:%-I:%M %p} (UTC) at our Main Street clinic. "
        "I've booked your annual check-up with the flu shot. Please bring your insurance "
        "card and arrive ten minutes early. Reply here if that does not suit you."
    )
    return {
        "resourceType": "Communication",
        "id": f"bench-msg-{i}",
        "status": "completed",
        "subject": {"reference": patient},
        "recipient": [{"reference": patient}],
        "sender": {"reference": "Organization/demo-canonical-org"},
        "sent": at.isoformat(),
        "payload": [{"contentString": text}],
    }


def _task(i: int, patient: str) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "id": f"bench-task-{i}",
        "status": "requested",
        "intent": "order",
        "for": {"reference": patient},
        "owner": {"reference": "Practitioner/demo-canonical-prac-chen"},
        "description": f"Follow up with the patient about the visit ({i + 1})",
    }


def _changed(resource: dict[str, Any], at: datetime, run_id: str) -> ChangedResource:
    refs = tuple(
        str(v["reference"])
        for v in (resource.get("subject"), resource.get("for"), *(resource.get("recipient") or []))
        if isinstance(v, dict) and "reference" in v
    )
    return ChangedResource(
        resource_type=resource["resourceType"],
        id=resource["id"],
        resource=resource,
        first_changed_at=at,
        last_changed_at=at,
        created=True,
        all_refs=refs,
        run_id=run_id,
        via_run=True,
    )


def busy_run() -> tuple[list[Any], RunSnapshot]:
    """The scenario's expectations (its own and the defaults a run gets) and a snapshot
    of a run that did the reference's work and then wrote up to CHANGES changes, MESSAGES
    of them messages to the patient."""
    scenario = builtin_scenarios()[SCENARIO].scenario
    expanded = expand_scenario(scenario, "bench", START)
    by_ref = {f"{r['resourceType']}/{r['id']}": r for r in [*expanded.fixture, *expanded.stimulus]}
    point = RunSnapshot(
        run_id="run_bench",
        started_at=START,
        now=START,
        deadline=START + timedelta(minutes=10),
        fixture=dict(expanded.refs),
        current={s: by_ref.get(ref) for s, ref in expanded.refs.items()},
        patient_refs=frozenset(r for r in expanded.refs.values() if r.startswith("Patient/")),
        aliases=aliases(),
        names=names(),
    )
    done = Replay(point).run(list(scenario.oracle))
    patient = next(iter(point.patient_refs))
    extra: list[ChangedResource] = []
    at = done.now
    said = sum(1 for c in done.changed if c.resource_type == "Communication")
    for i in range(MESSAGES - said):
        at += timedelta(seconds=1)
        extra.append(_changed(_message(i, patient, at), at, point.run_id))
    for i in range(max(0, CHANGES - len(done.changed) - len(extra))):
        at += timedelta(seconds=1)
        extra.append(_changed(_task(i, patient), at, point.run_id))
    snapshot = replace(done, changed=[*done.changed, *extra], now=at + timedelta(seconds=1))
    expectations = [*scenario.expectations, *default_expectations(scenario)]
    return expectations, snapshot


def _cpu_ms(expectations: list[Any], snapshot: RunSnapshot, memo: ClauseMemo, cold: bool) -> float:
    if cold:
        reference_expected._replays.clear()
        memo = ClauseMemo(max_entries=GRADING_MEMO_SIZE)
    began = time.process_time()
    grade(expectations, snapshot, memo)
    return (time.process_time() - began) * 1000


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=40)
    args = parser.parse_args()
    expectations, snapshot = busy_run()
    memo = ClauseMemo(max_entries=GRADING_MEMO_SIZE)
    grade(expectations, snapshot, memo)  # compile every expression once, as a live process has
    warm, cold = [], []
    for _ in range(args.passes):
        warm.append(_cpu_ms(expectations, snapshot, memo, cold=False))
        cold.append(_cpu_ms(expectations, snapshot, memo, cold=True))
    messages = sum(1 for c in snapshot.changed if c.resource_type == "Communication")
    print(
        f"{SCENARIO}: {len(snapshot.changed)} changes, {messages} messages, "
        f"{len(expectations)} expectations"
    )
    print(
        f"  warm (memo, replay cached): median {statistics.median(warm):.1f} ms CPU, "
        f"p95 {_p95(warm):.1f}"
    )
    print(
        f"  a run's first pass:          median {statistics.median(cold):.1f} ms CPU, "
        f"p95 {_p95(cold):.1f}"
    )
    verdict = "within" if statistics.median(warm) <= GOAL_MS else "over"
    print(
        f"bench_grading_cost: a pass over {len(snapshot.changed)} changes and {messages} "
        f"messages costs a median {statistics.median(warm):.1f} ms of CPU "
        f"({statistics.median(cold):.1f} ms on a run's first pass), {verdict} the "
        f"{GOAL_MS:.0f} ms goal; {args.passes} passes"
    )


if __name__ == "__main__":
    main()
