"""The CI gate's reports: the Markdown summary (one function per section) and the JUnit
XML, both read from the `Outcome` the gate decided on (understudy_client/ci.py), plus the
GitHub annotation format."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from understudy_client import harness
from understudy_client.contract.evals import CellCounts, EvalView
from understudy_client.contract.evals import Comparison as ComparisonView
from understudy_client.contract.runs import ExpectationResult

FAILED = ("failed", "timed_out")
STATUS_MARK = {
    "passed": "✅",
    "failed": "❌",
    "timed_out": "⏱️",
    "errored": "💥",
    "cancelled": "⛔",
    "queued": "…",
    "live": "…",
}
LABEL_MARK = {"regressed": "🔻", "improved": "🔺", "same": "", "new": "🆕", "removed": "➖"}


@dataclass
class Outcome:
    """Everything the gate decided on, for the reports."""

    url: str
    label: str
    exit_code: int = harness.EXIT_NOT_JUDGED
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    view: EvalView | None = None
    baseline: EvalView | None = None
    baseline_note: str | None = None
    compared: ComparisonView | None = None
    failed_checks: dict[str, list[ExpectationResult]] = field(default_factory=dict)


def _md(text: object) -> str:
    """Safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _counts(counts: CellCounts | None) -> str:
    if counts is None:
        return "—"
    runs, passes = counts.runs, counts.passes
    return f"{passes}/{runs} ({passes / runs:.0%})" if runs else f"{passes}/{runs}"


def verdict_word(exit_code: int) -> tuple[str, str]:
    return {
        harness.EXIT_OK: ("✅", "passed"),
        harness.EXIT_FAILED: ("❌", "failed"),
    }.get(exit_code, ("⚠️", "could not be judged"))


def comparison_sentence(compared: ComparisonView) -> str:
    test = compared.test
    parts = []
    if compared.delta is not None:
        text = f"Δ = {compared.delta:+.1%}"
        if compared.delta_ci95:
            low, high = compared.delta_ci95
            text += f" (95% CI {low:+.1%} to {high:+.1%})"
        parts.append(text)
    parts.append(
        f"exact stratified test p = {test.p_two_sided:.4f} two-sided, "
        f"p_regress = {test.p_regress:.4f} (mid-p), α = {compared.alpha:g}, "
        f"{test.informative_cells} informative cells"
    )
    verdict = (
        "significant regression"
        if compared.significant_regression
        else "difference bigger than the noise"
        if compared.exceeds_noise
        else "no significant regression"
    )
    sentence = "; ".join(parts) + f" → **{verdict}**"
    if test.reason:
        sentence += f" ({test.reason})"
    return sentence + "."


def _current_cells(view: EvalView) -> list[tuple[str, str, int, int]]:
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for run in view.runs:
        cell = cells[(run.scenario_id, run.persona)]
        if run.status in harness.VALID:
            cell[0] += 1
            cell[1] += run.status == "passed"
    return [(s, p, n, c) for (s, p), (n, c) in sorted(cells.items())]


def _check_text(check: ExpectationResult) -> str:
    text = f"{check.id}: {check.label}"
    if not check.required:
        text += " (bonus)"
    if check.detail:
        text += f" — {check.detail}"
    return text


def _warning_lines(warnings: Sequence[str]) -> list[str]:
    if not warnings:
        return []
    return ["### Warnings", "", *(f"- {_md(w)}" for w in warnings), ""]


def _md_heading(outcome: Outcome) -> list[str]:
    """The verdict, the rules that decided it, and the eval it is about."""
    mark, word = verdict_word(outcome.exit_code)
    lines = [f"## {mark} Understudy eval `{outcome.label}`: {word} (exit {outcome.exit_code})", ""]
    lines += [f"- {_md(r)}" for r in outcome.reasons] + [""]
    view = outcome.view
    if view is not None:
        lines.append(
            f"Eval [`{view.id}`]({outcome.url}/evals/{view.id}) · "
            f"{view.mode} · {view.repeats} repeats · {view.total} runs · "
            f"{view.status}"
            + ("" if view.revision is None else f" · revision `{_md(view.revision)}`")
        )
        lines.append("")
    return lines


def _md_baseline(outcome: Outcome) -> list[str]:
    """Which eval it was compared with (and a link to the comparison), or why none."""
    view, base = outcome.view, outcome.baseline
    lines = []
    if base is not None:
        lines.append(
            f"Baseline: [`{base.id}`]({outcome.url}/evals/{base.id}) "
            f"`{base.label}` ({outcome.baseline_note})"
            + (
                ""
                if view is None
                else f" · [compare]({outcome.url}/evals/{view.id}/compare?baseline={base.id})"
            )
            + "."
        )
    elif outcome.baseline_note:
        lines.append(
            f"No baseline ({outcome.baseline_note}): gated on the pass rate alone."
            if outcome.exit_code != harness.EXIT_NOT_JUDGED or view is not None
            else f"No baseline: {outcome.baseline_note}."
        )
    return [*lines, ""]


def _md_rates(outcome: Outcome) -> list[str]:
    """Pass rate, pass^k and pass@k of the eval, and of the baseline beside it."""
    summary = None if outcome.view is None else outcome.view.summary
    if summary is None:
        return []
    k = summary.k
    lines = ["| | pass rate | pass^k | pass@k |", "|---|---|---|---|"]
    lines.append(
        f"| current | {_md(summary.pass_rate.text)} | "
        f"{harness.format_number(summary.pass_hat_k)} (k={k}) | "
        f"{harness.format_number(summary.pass_at_k)} (k={k}) |"
    )
    base = outcome.baseline
    if base is not None and base.summary is not None:
        bs = base.summary
        lines.append(
            f"| baseline | {_md(bs.pass_rate.text)} | "
            f"{harness.format_number(bs.pass_hat_k)} (k={bs.k}) | "
            f"{harness.format_number(bs.pass_at_k)} (k={bs.k}) |"
        )
    return [*lines, ""]


def _md_cells(outcome: Outcome) -> list[str]:
    """Per cell (scenario × persona): the comparison with its test and attribution, its
    warnings first; without a comparison, the eval's own counts and then its warnings."""
    compared, view = outcome.compared, outcome.view
    if compared is None:
        lines = []
        if view is not None and view.runs:
            lines += ["### Cells", "", "| scenario | persona | passed |", "|---|---|---|"]
            for scenario, persona, runs, passes in _current_cells(view):
                counts = _counts(CellCounts(runs=runs, passes=passes))
                lines.append(f"| {_md(scenario)} | {_md(persona)} | {counts} |")
            lines.append("")
        return lines + _warning_lines(outcome.warnings)
    lines = [f"**Overall:** {comparison_sentence(compared)}", ""]
    lines += _warning_lines(outcome.warnings)  # the MDE sentence and caveats first
    lines += [
        "### Cells",
        "",
        "| scenario | persona | label | baseline | current | p (worse) | flipped by |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in compared.cells:
        label = f"{LABEL_MARK.get(c.label, '')} {c.label}".strip()
        if c.comparable is False:
            label += " (scenario changed: not comparable)"
        p = "—" if c.fisher_p_worse is None else f"{c.fisher_p_worse:.4f}"
        lines.append(
            f"| {_md(c.scenario_id)} | {_md(c.persona)} | {label} | "
            f"{_counts(c.baseline)} | {_counts(c.current)} | {p} | {c.attribution or '—'} |"
        )
    return [*lines, ""]


def _md_failed_checks(outcome: Outcome) -> list[str]:
    summary = None if outcome.view is None else outcome.view.summary
    if summary is None or not summary.most_failed_checks:
        return []
    lines = ["### Most-failed checks", "", "| count | scenario | check |", "|---|---|---|"]
    for check in summary.most_failed_checks:
        lines.append(
            f"| {check.count} | {_md(check.scenario_id)} | "
            f"{_md(check.expectation_id)}: {_md(check.label)} |"
        )
    return [*lines, ""]


def _md_runs(outcome: Outcome) -> list[str]:
    """Every run with its status, its failed required checks and a link to its page."""
    view = outcome.view
    if view is None or not view.runs:
        return []
    lines = [
        "### Runs",
        "",
        "| # | scenario | persona | repeat | status | failed checks | run |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in view.runs:
        run_id = run.run_id
        link = f"[{run_id}]({outcome.url}/runs/{run_id})" if run_id else "—"
        checks = outcome.failed_checks.get(run_id or "", [])
        failed = "<br>".join(_md(f"{c.id}: {c.label}") for c in checks if c.required)
        status = f"{STATUS_MARK.get(run.status, '')} {run.status}".strip()
        lines.append(
            f"| {run.position + 1} | {_md(run.scenario_id)} | {_md(run.persona)} | "
            f"{run.repeat + 1} | {status} | {failed} | {link} |"
        )
    return [*lines, ""]


def markdown(outcome: Outcome) -> str:
    """The Markdown summary: verdict and the rule that decided, rates, the overall test
    with its MDE sentence, the cells, warnings, most-failed checks and links to runs."""
    sections = (_md_heading, _md_baseline, _md_rates, _md_cells, _md_failed_checks, _md_runs)
    return "\n".join(line for section in sections for line in section(outcome))


def junit_xml(outcome: Outcome) -> bytes:
    """JUnit XML: a testcase per run; failed and timed-out runs are failures naming their
    failed checks, errored runs errors, cancelled or never-started runs skipped. With no
    runs at all (not judged before the eval started) one `gate` case carries the reason."""
    view = outcome.view
    suite = ET.Element("testsuite", name=f"understudy eval {outcome.label}")
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="exitCode", value=str(outcome.exit_code))
    if view is not None:
        ET.SubElement(properties, "property", name="eval", value=view.id)
    if outcome.baseline is not None:
        ET.SubElement(properties, "property", name="baseline", value=outcome.baseline.id)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for run in [] if view is None else view.runs:
        counts["tests"] += 1
        case = ET.SubElement(
            suite,
            "testcase",
            classname=run.scenario_id,
            name=f"{run.scenario_id} [{run.persona}] #{run.repeat + 1}",
        )
        status, run_id = run.status, run.run_id
        if status in FAILED:
            counts["failures"] += 1
            checks = outcome.failed_checks.get(run_id or "", [])
            required = [c for c in checks if c.required]
            message = "timed out" if status == "timed_out" else "failed"
            if required:
                message += ": " + ", ".join(c.id for c in required)
            failure = ET.SubElement(case, "failure", message=message, type=status)
            failure.text = "\n".join(_check_text(c) for c in checks) or message
        elif status == "errored":
            counts["errors"] += 1
            ET.SubElement(case, "error", message="the run errored", type=status)
        elif status != "passed":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=run.note or status)
        if run_id:
            ET.SubElement(case, "system-out").text = f"{outcome.url}/runs/{run_id}"
    if view is None:
        counts["tests"] += 1
        counts["errors"] += 1
        case = ET.SubElement(suite, "testcase", classname="understudy", name="gate")
        ET.SubElement(case, "error", message="; ".join(outcome.reasons))
    for name, value in counts.items():
        suite.set(name, str(value))
    root = ET.Element("testsuites", {k: str(v) for k, v in counts.items()})
    root.append(suite)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data


def annotation(kind: str, message: str) -> str:
    escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::{kind} title=Understudy eval::{escaped}"
