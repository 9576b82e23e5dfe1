"""The CI gate (`scripts/eval_ci.py`, `understudy eval ci`; rules: docs/evals.md "CI gate").

Start an eval, wait for it with progress on stderr (in agent mode driving it with the
harness; in workflow mode the team's automation does the work through its webhooks),
find the baseline (the newest completed eval whose label starts with a prefix, or a
given id), compare, and decide with `statistics.ci_gate`:

- exit 1: significant regression by the overall test, a pass rate under
  `--min-pass-rate`, or an incomplete (or cancelled) eval;
- exit 2: could not be judged: the service is unreachable or refused, no baseline while
  `--require-baseline`, or the eval did not complete within `--timeout`;
- exit 0 otherwise. Per-cell `regressed` labels are printed as warnings with their
  evidence.

By default (`--gate-on agent`) the decision leaves out the flipped cells the service
attributes to the scenario, the simulated patient or the judge (the overall test is
recomputed without them), and says so for each; `--gate-on all` decides on every cell.

It writes a Markdown summary (`--summary-file`, appended to `$GITHUB_STEP_SUMMARY` when
set) and JUnit XML (`--junit-file`, one testcase per run) whatever the outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TextIO

from understudy_client import harness
from understudy_client import statistics as stats
from understudy_client.ci_report import (
    FAILED,
    Outcome,
    annotation,
    comparison_sentence,
    junit_xml,
    markdown,
    verdict_word,
)
from understudy_client.contract.evals import CellCounts, EvalListItem, EvalSummary, EvalView
from understudy_client.contract.evals import Comparison as ComparisonView
from understudy_client.contract.runs import ExpectationResult, FinalRunView
from understudy_client.harness import EvalApi, HarnessError, Progress

BASELINE_PREFIX = "label:"
RUN_FETCH_CONCURRENCY = 8  # failing runs read at once for their checks
GATE_ON = ("agent", "all")
# Flips the default gate leaves out, and why.
IGNORED_ATTRIBUTIONS = {
    "scenario": "the scenario changed between the evals",
    "simulator": "the simulated patient's engine, model or prompt changed",
    "judge": "only judged checks deciding a pass moved and the judge changed",
}


# --- arguments ------------------------------------------------------------------------


def _fraction(text: str) -> float:
    value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (or 0% and 100%): {text}")
    return value


def _alpha(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"alpha must be between 0 and 1: {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=["agent", "workflow"],
        help="default: agent with --agent-cmd, else workflow",
    )
    parser.add_argument("--label", required=True, help="this eval's label, e.g. 'main 1a2b3c4'")
    harness.add_scope_arguments(parser)
    harness.add_revision_argument(parser)
    parser.add_argument(
        "--repeats", type=harness.positive_int, default=3, help="runs per cell, 1-5 (default 3)"
    )
    parser.add_argument(
        "--baseline",
        help="'label:PREFIX' (the newest completed eval whose label starts with PREFIX) "
        "or an eval id",
    )
    parser.add_argument(
        "--require-baseline",
        action="store_true",
        help="exit 2 when no baseline is found (default: gate on the pass rate alone)",
    )
    parser.add_argument(
        "--gate-on",
        choices=GATE_ON,
        default="agent",
        help="agent (default): fail only on regressions attributed to the agent or the "
        "platform, ignoring (with a note) cells whose scenario, simulated patient or judge "
        "changed; all: every regression counts (the strict rule)",
    )
    parser.add_argument(
        "--min-pass-rate", type=_fraction, help="fail under this pass rate (0.9 or 90%%)"
    )
    parser.add_argument(
        "--alpha", type=_alpha, default=stats.DEFAULT_ALPHA, help="test level (default 0.05)"
    )
    parser.add_argument(
        "--agent-cmd", help="agent mode: run this per run, as `understudy eval run` does"
    )
    parser.add_argument(
        "--parallel", type=harness.positive_int, default=4, help="agent commands at once"
    )
    parser.add_argument(
        "--run-timeout", type=harness.positive_int, help="per-run deadline in seconds"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="overall bound on the wait, seconds (default 3600); beyond it the eval is "
        "cancelled and the exit is 2",
    )
    parser.add_argument("--summary-file", type=Path, help="write the Markdown summary here")
    parser.add_argument("--junit-file", type=Path, help="write JUnit XML here (a case per run)")


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("current", help="the eval under test (an id)")
    parser.add_argument(
        "baseline_id",
        metavar="baseline",
        help="the eval to compare with: an id, or 'label:PREFIX' (the newest completed "
        "eval whose label starts with PREFIX, other than the current one)",
    )
    parser.add_argument(
        "--gate-on", choices=GATE_ON, default="agent", help="as for `ci` (default agent)"
    )
    parser.add_argument(
        "--min-pass-rate", type=_fraction, help="fail under this pass rate (0.9 or 90%%)"
    )
    parser.add_argument(
        "--alpha", type=_alpha, default=stats.DEFAULT_ALPHA, help="test level (default 0.05)"
    )
    parser.add_argument("--summary-file", type=Path, help="write the Markdown summary here")
    parser.add_argument("--junit-file", type=Path, help="write JUnit XML here (a case per run)")
    parser.set_defaults(require_baseline=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval_ci.py",
        description="Run an Understudy eval, compare it with a baseline and gate CI "
        "(exit 0 pass, 1 fail, 2 could not be judged). UNDERSTUDY_URL and "
        "UNDERSTUDY_API_KEY say where and as whom.",
    )
    add_arguments(parser)
    return parser


# --- the flow -------------------------------------------------------------------------


def label_prefix(label: str) -> str:
    """The prefix a label's baseline shares: the label up to its first space ("main
    1a2b3c" → "main"; the whole label when it has none)."""
    return label.split(" ", 1)[0]


def newest_completed(
    listed: Iterable[EvalListItem], *, exclude: str | None, before: datetime | None = None
) -> EvalListItem | None:
    """The baseline rule: the newest completed eval of `listed` (newest first, as
    `GET /evals` answers) that is not `exclude` and, with `before`, was created earlier."""
    for item in listed:
        if item.status != "completed" or item.id == exclude:
            continue
        if before is not None and item.created_at >= before:
            continue
        return item
    return None


async def find_baseline(
    api: EvalApi, spec: str, exclude: str | None
) -> tuple[EvalView | None, str]:
    """The baseline eval for `label:PREFIX` (newest completed with that label prefix, not
    `exclude`) or an eval id, and a sentence saying what was found."""
    if spec.startswith(BASELINE_PREFIX):
        prefix = spec[len(BASELINE_PREFIX) :]
        listed = newest_completed(await api.list_evals(prefix), exclude=exclude)
        if listed is not None:
            found = await api.get_eval(listed.id)
            return found, f"newest completed eval labelled '{prefix}…'"
        return None, f"no completed eval with a label starting '{prefix}'"
    try:
        found = await api.get_eval(spec)
    except harness.ApiError as exc:
        if exc.status == 404:
            return None, f"no eval '{spec}'"
        raise
    return found, f"eval {spec} as given"


async def _failed_checks(api: EvalApi, view: EvalView) -> dict[str, list[ExpectationResult]]:
    """Failed expectations of every failed or timed-out run, by run id."""
    limit = asyncio.Semaphore(RUN_FETCH_CONCURRENCY)

    async def one(run_id: str) -> tuple[str, list[ExpectationResult]]:
        async with limit:
            run = await api.get_run(run_id)
        if not isinstance(run, FinalRunView):
            return run_id, []
        return run_id, [e for e in run.expectations if e.passed is False]

    ids = [r.run_id for r in view.runs if r.status in FAILED and r.run_id]
    return dict(await asyncio.gather(*(one(i) for i in ids)))


def comparison_of(compared: ComparisonView) -> stats.Comparison:
    """The service's compare answer as the `statistics.Comparison` that `ci_gate` reads.
    The decision fields (labels, significantRegression, underpowered) are the service's."""

    def cell(key: stats.CellKey, counts: CellCounts | None) -> stats.Cell | None:
        return None if counts is None else stats.Cell(key, counts.runs, counts.passes)

    cells: list[stats.CellVerdict] = []
    for c in compared.cells:
        key = (c.scenario_id, c.persona)
        cells.append(
            stats.CellVerdict(
                key=key,
                label=c.label,
                a=cell(key, c.baseline),
                b=cell(key, c.current),
                fisher_p=c.fisher_p_worse,
                comparable=c.comparable,
            )
        )
    test = compared.test
    interval = compared.delta_ci95
    return stats.Comparison(
        cells=cells,
        overall=stats.StratifiedTest(
            t=test.statistic,
            expected=test.expected,
            p_two=test.p_two_sided,
            p_regress=test.p_regress,
            p_improve=test.p_improve,
            informative_cells=test.informative_cells,
            reason=test.reason,
            p_regress_plain=test.p_regress_plain,
        ),
        a_c=compared.baseline_rate.passes,
        a_n=compared.baseline_rate.runs,
        b_c=compared.current_rate.passes,
        b_n=compared.current_rate.runs,
        delta=compared.delta,
        delta_interval=None if interval is None else stats.Interval(*interval),
        mde=compared.mde,
        underpowered=compared.underpowered,
        exceeds_noise=compared.exceeds_noise,
        significant_regression=compared.significant_regression,
        alpha=compared.alpha,
    )


def gated_comparison(compared: ComparisonView) -> tuple[stats.Comparison, list[str]]:
    """The comparison the default gate decides on: the service's, less the flipped cells
    attributed to the scenario, the simulated patient or the judge (the overall test
    recomputed without them); and a note per cell it left out, saying why."""
    ignored = [c for c in compared.cells if c.attribution in IGNORED_ATTRIBUTIONS]
    if not ignored:
        return comparison_of(compared), []
    notes = [
        f"ignored cell {c.scenario_id} × {c.persona} {c.label}: attributed to "
        f"{c.attribution} ({IGNORED_ATTRIBUTIONS[c.attribution or '']}); --gate-on all "
        "counts it"
        for c in ignored
    ]
    left_out = {(c.scenario_id, c.persona) for c in ignored}
    baseline: dict[stats.CellKey, stats.Cell] = {}
    current: dict[stats.CellKey, stats.Cell] = {}
    hashes_a: dict[stats.CellKey, str] = {}
    hashes_b: dict[stats.CellKey, str] = {}
    for c in compared.cells:
        key = (c.scenario_id, c.persona)
        if key in left_out:
            continue
        if c.baseline is not None:
            baseline[key] = stats.Cell(key, c.baseline.runs, c.baseline.passes)
        if c.current is not None:
            current[key] = stats.Cell(key, c.current.runs, c.current.passes)
        # Cells the service found not comparable stay so.
        hashes_a[key], hashes_b[key] = "same", "same" if c.comparable is not False else "other"
    recomputed = stats.compare(
        baseline, current, alpha=compared.alpha, hashes_a=hashes_a, hashes_b=hashes_b
    )
    return recomputed, notes


def _summary(view: EvalView) -> EvalSummary:
    if view.summary is None:  # the service sends it once the eval completed or was cancelled
        raise HarnessError(f"eval {view.id} is {view.status} but has no summary")
    return view.summary


def _pass_rate(view: EvalView) -> float | None:
    """Exactly passes/runs (the API's `rate` is rounded, which can flip a threshold)."""
    rate = _summary(view).pass_rate
    return None if not rate.runs else rate.passes / rate.runs


async def _judge(
    args: argparse.Namespace,
    api: EvalApi,
    connection: harness.Connection,
    outcome: Outcome,
    mode: str,
) -> None:
    """Run the eval and fill in `outcome`. Raises HarnessError when it cannot be judged."""
    if args.baseline and (args.require_baseline or not args.baseline.startswith(BASELINE_PREFIX)):
        # Fail fast: no point spending runs on an eval that cannot be judged. A baseline
        # id that does not exist is a mistake, never "no baseline yet".
        found, note = await find_baseline(api, args.baseline, exclude=None)
        if found is None and not args.baseline.startswith(BASELINE_PREFIX):
            raise HarnessError(f"--baseline {args.baseline}: {note}")
        if found is None:
            outcome.baseline_note = note
            gate = stats.ci_gate(
                comparison=None,
                pass_rate=None,
                min_pass_rate=None,
                incomplete=False,
                require_baseline=True,
            )
            outcome.exit_code, outcome.reasons = gate.exit_code, [*gate.reasons, note]
            return
    body = harness.eval_request(
        mode=mode,
        label=args.label,
        scenarios=args.scenarios,
        category=args.category,
        repeats=args.repeats,
        personas=args.personas,
        timeout_seconds=args.run_timeout,
        revision=harness.resolve_revision(args.revision),
    )
    created = await api.create_eval(body)
    eval_id = created.id
    outcome.view = created
    progress = Progress(sys.stderr)
    revision = "" if created.revision is None else f" of revision {created.revision}"
    progress.line(f"eval {eval_id} '{args.label}'{revision} ({mode}): {created.total} runs")
    agent = harness.AgentCommand(args.agent_cmd, args.parallel) if args.agent_cmd else None
    try:
        async with asyncio.timeout(args.timeout):
            view = await harness.drive_eval(
                api, connection, eval_id, agent=agent, progress=progress
            )
    except TimeoutError:
        with contextlib.suppress(HarnessError):
            outcome.view = await api.get_eval(eval_id)
        raise HarnessError(
            f"eval {eval_id} did not complete within --timeout {args.timeout:g} s; it was cancelled"
        ) from None
    outcome.view = view
    await _decide(args, api, outcome, view)


async def _decide(args: argparse.Namespace, api: EvalApi, outcome: Outcome, view: EvalView) -> None:
    """Compare the finished eval `view` with its baseline and fill in the decision."""
    eval_id = view.id
    comparison: stats.Comparison | None = None
    ignored_notes: list[str] = []
    if args.baseline:
        found, note = await find_baseline(api, args.baseline, exclude=eval_id)
        outcome.baseline, outcome.baseline_note = found, note
        if found is not None:
            outcome.compared = await api.compare(eval_id, found.id, args.alpha)
            if getattr(args, "gate_on", "agent") == "all":
                comparison = comparison_of(outcome.compared)
            else:
                comparison, ignored_notes = gated_comparison(outcome.compared)
    else:
        outcome.baseline_note = "no --baseline given"
    outcome.failed_checks = await _failed_checks(api, view)

    gate = stats.ci_gate(
        comparison=comparison,
        pass_rate=_pass_rate(view),
        min_pass_rate=args.min_pass_rate,
        incomplete=_summary(view).incomplete,
        require_baseline=args.require_baseline,
    )
    exit_code, reasons, warnings = gate.exit_code, list(gate.reasons), list(gate.warnings)
    warnings.extend(ignored_notes)
    if comparison is None and exit_code != harness.EXIT_NOT_JUDGED:
        warnings.append(f"baseline: {outcome.baseline_note}")
    if view.status == "cancelled":
        cancelled = "eval cancelled before it completed"
        if exit_code == harness.EXIT_OK:
            exit_code, reasons = harness.EXIT_FAILED, [cancelled]
        else:
            reasons.append(cancelled)
    if outcome.baseline is not None and outcome.baseline.status != "completed":
        warnings.append(
            f"baseline eval {outcome.baseline.id} is {outcome.baseline.status}, not completed"
        )
    outcome.exit_code, outcome.reasons, outcome.warnings = exit_code, reasons, warnings


async def run_compare(
    args: argparse.Namespace, connection: harness.Connection, *, out: TextIO
) -> int:
    """`understudy-eval compare CURRENT BASELINE`: gate two evals that already ran, by the
    same rules as `ci` (nothing is started)."""
    outcome = Outcome(url=connection.url, label=args.current)
    try:
        async with EvalApi(connection) as api:
            view = await api.get_eval(args.current)
            outcome.view, outcome.label = view, view.label or view.id
            if view.status not in ("completed", "cancelled"):
                raise HarnessError(f"eval {view.id} is {view.status}: wait until it completes")
            args.baseline = args.baseline_id
            await _decide(args, api, outcome, view)
            if outcome.baseline is None:
                raise HarnessError(f"baseline {args.baseline_id}: {outcome.baseline_note}")
    except HarnessError as exc:
        outcome.exit_code = harness.EXIT_NOT_JUDGED
        outcome.reasons = [str(exc)]
    report(outcome, args, out=out)
    return outcome.exit_code


async def run_ci(args: argparse.Namespace, connection: harness.Connection, *, out: TextIO) -> int:
    mode = args.mode or ("agent" if args.agent_cmd else "workflow")
    outcome = Outcome(url=connection.url, label=args.label)
    try:
        async with EvalApi(connection) as api:
            await _judge(args, api, connection, outcome, mode)
    except HarnessError as exc:
        outcome.exit_code = harness.EXIT_NOT_JUDGED
        outcome.reasons = [str(exc)]
    report(outcome, args, out=out)
    return outcome.exit_code


# --- reports --------------------------------------------------------------------------


def report(outcome: Outcome, args: argparse.Namespace, *, out: TextIO) -> None:
    """Print the result and the rule that fired; write the summary and JUnit files."""
    if outcome.view is not None:
        for line in harness.summary_lines(outcome.view):
            print(line, file=out)
    if outcome.baseline is not None:
        print(
            f"baseline: {outcome.baseline.id} '{outcome.baseline.label}' ({outcome.baseline_note})",
            file=out,
        )
    if outcome.compared is not None:
        print("overall: " + comparison_sentence(outcome.compared).replace("**", ""), file=out)
    github = os.environ.get("GITHUB_ACTIONS") == "true"
    for warning in outcome.warnings:
        print(annotation("warning", warning) if github else f"warning: {warning}", file=out)
    word = verdict_word(outcome.exit_code)[1]
    print(f"{word} (exit {outcome.exit_code}):", file=out)
    for reason in outcome.reasons:
        print(f"  rule: {reason}", file=out)
        if github and outcome.exit_code != harness.EXIT_OK:
            print(annotation("error", reason), file=out)
    text = markdown(outcome)
    if args.summary_file is not None:
        args.summary_file.write_text(text + "\n", encoding="utf-8")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    if args.junit_file is not None:
        args.junit_file.write_bytes(junit_xml(outcome))


# --- entry points ---------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """`understudy eval ci` / `scripts/eval_ci.py` with parsed arguments: the exit code."""
    mode = args.mode or ("agent" if args.agent_cmd else "workflow")
    if mode == "agent" and not args.agent_cmd:
        print("eval ci: agent mode needs --agent-cmd (it drives the runs)", file=sys.stderr)
        return harness.EXIT_NOT_JUDGED
    if mode == "workflow" and args.agent_cmd:
        print("eval ci: --agent-cmd is for agent mode", file=sys.stderr)
        return harness.EXIT_NOT_JUDGED
    try:
        connection = harness.connection_from_env()
    except HarnessError as exc:
        print(f"eval ci: could not be judged (exit 2): {exc}", file=sys.stderr)
        return harness.EXIT_NOT_JUDGED
    try:
        return asyncio.run(harness.until_terminated(run_ci(args, connection, out=sys.stdout)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("eval ci: interrupted; the eval was cancelled", file=sys.stderr)
        return harness.EXIT_INTERRUPTED
    except Exception:  # a crash has judged nothing: 2, never 1 (which reads as a regression)
        traceback.print_exc()
        print("eval ci: could not be judged (exit 2): unexpected error", file=sys.stderr)
        return harness.EXIT_NOT_JUDGED


def compare(args: argparse.Namespace) -> int:
    """`understudy-eval compare` with parsed arguments: the exit code (0/1/2, as `ci`)."""
    try:
        connection = harness.connection_from_env()
        return asyncio.run(run_compare(args, connection, out=sys.stdout))
    except HarnessError as exc:
        print(f"eval compare: could not be judged (exit 2): {exc}", file=sys.stderr)
        return harness.EXIT_NOT_JUDGED
    except KeyboardInterrupt:
        return harness.EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
