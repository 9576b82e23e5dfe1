"""Whose change flipped a compare cell (issue 18): the scenario's, the simulated
patient's, the judge's, the platform's, or else the agent's (the system under test).

Read from the runs of the cell on each side: their scenario hashes and provenance
(`app.runs.provenance`). Runs started before provenance was recorded count as unchanged
on the parts they do not record. The first rule that holds names the attribution:

- `scenario`: the scenario's content hash differs between the sides;
- `simulator`: the scenario uses a patientSim and the patient's engines (engine, model,
  prompt version: those that answered, else those configured) differ;
- `judge`: every check deciding a pass (a required one) whose outcome moved is a judged
  (rubric) check, and the judges differ;
- `platform`: the platform's version (package version, git sha) differs;
- `agent`: none of the above.

A cell is labelled by pass rates, and a run's pass is decided by its required checks
alone. Rubric checks are always bonus (the scenario validation refuses a required one):
a judge moves scores, never a pass, so no flipped cell is the judge's today. Bonus
checks moving (a rubric the new judge fails, with the agent's regression beside it)
explain nothing about a flip and are not read: blaming the judge for them would let the
CI gate wave an agent's regression through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from app.runs.service import RunRow

Attribution = Literal["scenario", "simulator", "judge", "platform", "agent"]
ATTRIBUTIONS: tuple[Attribution, ...] = ("scenario", "simulator", "judge", "platform", "agent")
Engine = tuple[str, str | None, str | None]


def _engines(used: list[dict[str, Any]] | None, configured: dict[str, Any] | None) -> set[Engine]:
    chosen = used if used else ([configured] if configured else [])
    return {(e["engine"], e.get("model"), e.get("promptVersion")) for e in chosen}


def _signature(runs: Sequence[RunRow], part: str) -> set[Any]:
    out: set[Any] = set()
    for run in runs:
        p = run.provenance
        if p is None:
            continue
        if part == "platform":
            out.add((p["platform"]["version"], p["platform"].get("gitSha")))
        elif part == "patientSim":
            out |= _engines(p.get("patientSimUsed"), p.get("patientSim"))
        else:
            out |= _engines(p.get("judgeUsed"), p.get("judge"))
    return out


def _changed(a: Sequence[RunRow], b: Sequence[RunRow], part: str) -> bool:
    sa, sb = _signature(a, part), _signature(b, part)
    return bool(sa) and bool(sb) and sa != sb


def _failing_checks(runs: Sequence[RunRow]) -> dict[str, str]:
    """Check id -> type, of every check deciding a pass (required) that failed in some
    decided run of the side."""
    out: dict[str, str] = {}
    for run in runs:
        if run.verdict is None:
            continue
        for e in run.verdict.get("expectations", []):
            if e.get("passed") is False and e.get("required") is True:
                out[e["id"]] = e["type"]
    return out


def attribute(baseline: Sequence[RunRow], current: Sequence[RunRow]) -> Attribution:
    """The attribution of a flipped cell from its runs on each side."""
    if {r.scenario_hash for r in baseline} != {r.scenario_hash for r in current}:
        return "scenario"
    uses_sim = any(
        r.provenance is not None and r.provenance.get("patientSim") is not None
        for r in (*baseline, *current)
    )
    if uses_sim and _changed(baseline, current, "patientSim"):
        return "simulator"
    fa, fb = _failing_checks(baseline), _failing_checks(current)
    moved = set(fa) ^ set(fb)
    types = {fa.get(i) or fb.get(i) for i in moved}
    if moved and types == {"rubric"} and _changed(baseline, current, "judge"):
        return "judge"
    if _changed(baseline, current, "platform"):
        return "platform"
    return "agent"
