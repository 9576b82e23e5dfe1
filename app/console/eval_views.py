"""View-models of the eval pages, made from what the evals service returns (the REST
API's EvalView and Comparison): the start form's choices and the request it makes, the
progress, the scenario × persona grid, the interval bars and the compare's sentences."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from markupsafe import Markup
from starlette.datastructures import FormData

from app.console.views import State
from app.evals.service import BASELINE, MAX_REPEATS, EvalRequest
from app.scenarios.service import LoadedScenario
from understudy_client import statistics as stats
from understudy_client.contract.evals import (
    CellCounts,
    CompareCell,
    Comparison,
    EvalRun,
    EvalView,
    Rate,
)

MODES = ("workflow", "agent")
# Fewer valid runs than this and the pass rate is shown as indicative only.
INDICATIVE_UNDER = 10
DONE = ("passed", "failed", "timed_out", "cancelled", "errored")


# --- the start form -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScenarioChoice:
    id: str
    title: str
    modes: list[str]
    personas: list[str]


@dataclass(frozen=True, slots=True)
class Category:
    name: str
    scenarios: list[ScenarioChoice]


def categories_of(loaded: list[LoadedScenario]) -> list[Category]:
    groups: dict[str, list[ScenarioChoice]] = defaultdict(list)
    for item in loaded:
        s = item.scenario
        groups[s.category].append(
            ScenarioChoice(
                s.id, s.title, [str(m) for m in s.modes], [v.persona for v in s.variants]
            )
        )
    return [
        Category(name, sorted(items, key=lambda c: c.id)) for name, items in sorted(groups.items())
    ]


def persona_names(categories: list[Category]) -> list[str]:
    return sorted({p for c in categories for s in c.scenarios for p in s.personas})


@dataclass
class StartForm:
    """The start form's fields as posted (and shown again)."""

    mode: str = "workflow"
    scenarios: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    personas: str = BASELINE  # baseline | all | chosen
    chosen: list[str] = field(default_factory=list)
    repeats: int = 1
    label: str = ""
    revision: str = ""

    @classmethod
    def of(cls, form: FormData) -> StartForm:
        def text(name: str) -> str:
            value = form.get(name)
            return value.strip() if isinstance(value, str) else ""

        def many(name: str) -> list[str]:
            return [v.strip() for v in form.getlist(name) if isinstance(v, str) and v.strip()]

        try:
            repeats = int(text("repeats") or "1")
        except ValueError:
            repeats = 0  # refused by the service's own check, with its reason
        return cls(
            mode=text("mode") or "workflow",
            scenarios=many("scenario"),
            categories=many("category"),
            personas=text("personas") or BASELINE,
            chosen=many("persona"),
            repeats=repeats,
            label=text("label"),
            revision=text("revision"),
        )

    def request(self, categories: list[Category]) -> EvalRequest:
        """The request the REST API would be sent: a category's box stands for each of its
        scenarios of the mode (so the box works without JavaScript); nothing ticked is the
        API's default, every scenario of the mode."""
        ids = list(dict.fromkeys(self.scenarios))
        for category in categories:
            if category.name in self.categories:
                ids.extend(
                    s.id for s in category.scenarios if self.mode in s.modes and s.id not in ids
                )
        chosen = list(dict.fromkeys(self.chosen))
        personas: str | list[str] = chosen if self.personas == "chosen" else self.personas
        return EvalRequest(
            mode=self.mode,
            label=self.label,
            scenarios=ids or None,
            repeats=self.repeats,
            personas=personas,
            timeout_seconds=None,
            revision=self.revision or None,
        )

    def fingerprint(self, categories: list[Category]) -> str:
        """What was previewed: Start only starts the request the preview counted."""
        r = self.request(categories)
        text = repr((r.mode, r.label, r.scenarios, r.repeats, r.personas, r.revision))
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def form_problem(form: StartForm) -> str | None:
    """What the REST body's own field checks would refuse before the service is asked."""
    if not form.label:
        return "give the eval a label (e.g. 'triage-agent v3')"
    if len(form.label) > 200:
        return "a label is at most 200 characters"
    if len(form.revision) > 100:
        return "a revision is at most 100 characters"
    if form.personas == "chosen" and not form.chosen:
        return "choose at least one persona (or pick baseline or all)"
    return None


REPEAT_CHOICES = list(range(1, MAX_REPEATS + 1))


# --- the eval page --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mark:
    status: str
    run_id: str | None
    repeat: int
    note: str | None

    @property
    def url(self) -> str | None:
        return f"/runs/{self.run_id}" if self.run_id else None


@dataclass(frozen=True, slots=True)
class GridCell:
    marks: list[Mark]
    passes: int
    valid: int

    @property
    def flaky(self) -> bool:
        return 0 < self.passes < self.valid


@dataclass(frozen=True, slots=True)
class GridRow:
    scenario_id: str
    cells: list[GridCell | None]  # one per persona column; None: not planned


@dataclass(frozen=True, slots=True)
class Grid:
    personas: list[str]
    rows: list[GridRow]


def grid_of(runs: list[EvalRun]) -> Grid:
    personas: list[str] = []
    scenarios: list[str] = []
    marks: dict[tuple[str, str], list[Mark]] = defaultdict(list)
    for run in runs:
        if run.persona not in personas:
            personas.append(run.persona)
        if run.scenario_id not in scenarios:
            scenarios.append(run.scenario_id)
        marks[(run.scenario_id, run.persona)].append(
            Mark(run.status, run.run_id, run.repeat, run.note)
        )
    # The baseline column first, the personas as planned.
    planned = list(personas)
    personas.sort(key=lambda p: (p != BASELINE, planned.index(p)))
    rows = []
    for scenario in scenarios:
        cells: list[GridCell | None] = []
        for persona in personas:
            found = sorted(marks.get((scenario, persona), []), key=lambda m: m.repeat)
            if not found:
                cells.append(None)
                continue
            valid = [m for m in found if m.status in ("passed", "failed", "timed_out")]
            cells.append(GridCell(found, sum(m.status == "passed" for m in valid), len(valid)))
        rows.append(GridRow(scenario, cells))
    return Grid(personas, rows)


EVAL_STATES = {
    "queued": State("○", "queued", "idle"),
    "running": State("●", "running", "live"),
    "completed": State("✓", "completed", "ok"),
    "cancelled": State("–", "cancelled", "idle"),
}


def eval_state(status: str) -> Markup:
    state = EVAL_STATES.get(status, State("?", status, "idle"))
    return Markup(
        '<span class="state {css}"><span aria-hidden="true">{icon}</span> {word}</span>'
    ).format(css=state.css, icon=state.icon, word=state.word)


@dataclass(frozen=True, slots=True)
class ListRate:
    passes: int
    runs: int
    rate: float | None


def list_rate(counts: dict[str, int]) -> ListRate:
    """An ended eval's pass rate from its runs by status, as its summary computes it:
    passed over passed, failed and timed out (cancelled and errored left out)."""
    valid = sum(counts.get(s, 0) for s in ("passed", "failed", "timed_out"))
    passes = counts.get("passed", 0)
    return ListRate(passes, valid, passes / valid if valid else None)


def mark_state(status: str) -> str:
    """A run's status as its grid mark: cancelled and errored runs are excluded (–)."""
    return "excluded" if status in ("cancelled", "errored") else status


@dataclass(frozen=True, slots=True)
class Progress:
    queued: int
    live: int
    done: int
    total: int

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100


def progress_of(view: EvalView) -> Progress:
    queued = view.counts.get("queued", 0)
    live = view.counts.get("live", 0)
    return Progress(queued, live, view.total - queued - live, view.total)


@dataclass(frozen=True, slots=True)
class Bar:
    """An interval on a 0–100 % scale, for an inline SVG (attributes, not styles: the
    CSP allows no inline style)."""

    low: float
    high: float
    point: float

    @property
    def x(self) -> str:
        return f"{100 * self.low:.2f}"

    @property
    def width(self) -> str:
        return f"{max(0.4, 100 * (self.high - self.low)):.2f}"

    @property
    def at(self) -> str:
        return f"{min(99.4, 100 * self.point):.2f}"  # the tick stays inside the bar


def bar_of(rate: Rate) -> Bar | None:
    if rate.rate is None or rate.ci95 is None:
        return None
    return Bar(rate.ci95[0], rate.ci95[1], rate.rate)


def percent(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def mde_sentence(rate: Rate) -> str | None:
    """The smallest change in pass rate a compare with another eval of this size could
    tell from noise (the compare's MDE with this eval on both sides)."""
    if rate.rate is None:
        return None
    if not 0 < rate.rate < 1:
        every = "passed" if rate.passes else "failed"
        return (
            f"Every valid run {every}, so there is no spread to measure the noise by: a "
            "compare with another eval says how small a change it can tell from noise."
        )
    effect = stats.mde(rate.runs, rate.runs, rate.rate)
    return (
        f"Compared with another eval of {rate.runs} runs, changes in pass rate smaller than "
        f"{percent(effect)} cannot be told from noise."
    )


# --- the compare page -----------------------------------------------------------------


def cell_rate(counts: CellCounts | None) -> str:
    if counts is None:
        return "–"
    passes, runs = counts.passes, counts.runs
    return f"{passes}/{runs}" + (f" ({percent(passes / runs, 0)})" if runs else "")


ATTRIBUTION_NOTES = {
    "scenario": "the scenario's content changed between the evals",
    "simulator": "the simulated patient's engine, model or prompt changed",
    "judge": "only judged checks deciding a pass moved, and the judge changed",
    "platform": "the platform's version changed, nothing above did",
    "agent": "nothing else changed: the system under test did",
}


def attribution_note(attribution: str) -> str:
    """Why a flipped cell is attributed as it is (the compare page's tooltip)."""
    return ATTRIBUTION_NOTES.get(attribution, attribution)


def cell_label(cell: CompareCell) -> str:
    if cell.comparable is False:
        return "not comparable"
    return cell.label


def points(value: float) -> str:
    """A difference of rates in percentage points, signed."""
    return f"{100 * value:+.1f} points"


@dataclass(frozen=True, slots=True)
class ComparisonHeadline:
    """What the comparison of two evals says overall: the compare page's alert (a run's
    verdict is the contract's `Verdict`, not this)."""

    headline: str
    kind: str  # bad | ok | idle (the alert's colour; the words carry the meaning)
    details: list[str]


def verdict_of(c: Comparison) -> ComparisonHeadline:
    """The overall result in words a non-statistician reads correctly (docs/evals.md)."""
    a, b = c.baseline_rate, c.current_rate
    details: list[str] = []
    if c.delta is None:
        return ComparisonHeadline(
            "No comparison yet: a side has no valid runs in the cells both evals share.",
            "idle",
            [],
        )
    rates = f"The pass rate went from {a.passes}/{a.runs} ({percent(a.rate)}) to "
    rates += f"{b.passes}/{b.runs} ({percent(b.rate)}), a change of {points(c.delta)}"
    if c.delta_ci95 is not None:
        low, high = c.delta_ci95
        rates += f" (95% interval {points(low)} to {points(high)})"
    details.append(rates + ".")
    test = c.test
    if test.reason:
        details.append(f"The overall test has nothing to weigh: {test.reason}.")
    else:
        details.append(
            f"The stratified exact test over the {test.informative_cells} cells whose results "
            f"differ gives p = {test.p_two_sided:.4f} (two-sided; below {c.alpha:g} counts as "
            f"real). One-sided, the chance of a drop at least this large from noise alone is "
            f"p = {test.p_regress:.4f}."
        )
    if c.mde is not None:
        details.append(
            f"Changes smaller than {percent(c.mde)} in pass rate cannot be told from noise "
            "with these run counts."
        )
    if c.underpowered:
        note = stats.underpowered_note(
            test.informative_cells,
            c.baseline_rate.runs,
            c.current_rate.runs,
            significant=c.significant_regression,
        )
        details.append(note[0].upper() + note[1:] + ".")
    if not c.complete:
        details.append("One of the evals is still running: the numbers will change.")
    if c.exceeds_noise and c.delta < 0:
        headline, kind = "Worse, and the drop is bigger than the noise.", "bad"
    elif c.exceeds_noise and c.delta > 0:
        headline, kind = "Better, and the rise is bigger than the noise.", "ok"
    elif c.exceeds_noise:
        headline, kind = "The difference is bigger than the noise.", "warn"
    else:
        headline = "Not bigger than the noise: this compare does not show a real change."
        kind = "idle"
    return ComparisonHeadline(headline, kind, details)


def run_pairs(baseline: list[EvalRun], current: list[EvalRun]) -> dict[tuple[str, str], str]:
    """Per (scenario, persona) cell of a compare, the two runs to open side by side: the
    baseline's passing run beside this eval's failing one where there are such, else the
    first finished run of each (`/runs/{a}/vs/{b}`)."""

    def pick(runs: list[EvalRun], key: tuple[str, str], prefer: str) -> str | None:
        done = [r for r in runs if (r.scenario_id, r.persona) == key and r.run_id]
        done = [r for r in done if r.status not in ("queued", "live")]
        best = next((r for r in done if r.status == prefer), done[0] if done else None)
        return best.run_id if best else None

    out = {}
    for key in {(r.scenario_id, r.persona) for r in current} & {
        (r.scenario_id, r.persona) for r in baseline
    }:
        a, b = pick(baseline, key, "passed"), pick(current, key, "failed")
        if a and b:
            out[key] = f"/runs/{a}/vs/{b}"
    return out
