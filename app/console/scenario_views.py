"""View-models of the scenario pages, made from the scenario service's `LoadedScenario`,
the validator's problems and the scenario check's report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.orchestration.check import ScenarioReport, VariantReport
from app.runs.defaults import default_expectations
from app.scenarios.schema import (
    AnyOfExpectation,
    ApiCallExpectation,
    AskedExpectation,
    ChangesExpectation,
    ConsentExpectation,
    Expectation,
    FieldExpectation,
    MessageExpectation,
    ReferenceExpectation,
    ResourceExpectation,
    RubricExpectation,
    WebhookExpectation,
)
from app.scenarios.service import LoadedScenario
from app.scenarios.validation import Problem

# `{{patient.name}}`, `{{now+1d}}`: filled in when a run starts.
_TOKEN = re.compile(r"(\{\{[^{}]*\}\})")


class DocumentTooLarge(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ScenarioLine:
    id: str
    title: str
    category: str
    modes: list[str]
    personas: list[str]
    builtin: bool
    version: int
    summary: str

    @property
    def url(self) -> str:
        return f"/scenarios/{self.id}"


def scenario_line(loaded: LoadedScenario) -> ScenarioLine:
    s = loaded.summary()
    return ScenarioLine(
        s.id, s.title, s.category, s.modes, s.personas, s.builtin, s.version, s.summary
    )


def filter_scenarios(
    lines: list[ScenarioLine], *, mode: str | None, category: str | None, query: str | None
) -> list[ScenarioLine]:
    """The scenarios of that mode and category whose id, title, category or summary holds
    every word of the query (case-insensitive)."""
    words = (query or "").lower().split()
    out = []
    for line in lines:
        if mode and mode not in line.modes:
            continue
        if category and line.category != category:
            continue
        text = f"{line.id} {line.title} {line.category} {line.summary}".lower()
        if all(word in text for word in words):
            out.append(line)
    return out


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    token: bool


def segments(text: str | None) -> list[Segment]:
    """Text split around its `{{…}}` tokens, so a page can mark them."""
    if not text:
        return []
    return [Segment(part, bool(_TOKEN.fullmatch(part))) for part in _TOKEN.split(text) if part]


@dataclass(frozen=True, slots=True)
class ExpectationView:
    id: str
    label: str
    type: str
    required: bool
    weight: float
    detail: str
    clauses: list[str]
    children: list[ExpectationView]


def _count(count: Any) -> str:
    if count is None:
        return ""
    low, high = count.min, count.max
    if low is not None and low == high:
        return f", exactly {low}"
    parts = [f"at least {low}" if low is not None else "", f"at most {high}" if high else ""]
    return ", " + " and ".join(p for p in parts if p) if any(parts) else ""


def _detail(e: Expectation) -> tuple[str, list[str]]:
    if isinstance(e, ResourceExpectation):
        where = "the patient's chart" if e.scope == "patient" else "the tenant"
        return f"{e.resource_type} in {where}{_count(e.count)}", list(e.where)
    if isinstance(e, FieldExpectation):
        return f"{e.target} holds", list(e.where)
    if isinstance(e, WebhookExpectation):
        return f"webhook {e.event} for {e.resource}", []
    if isinstance(e, ApiCallExpectation):
        before = f" before {e.before}" if e.before else ""
        return f"a call {e.method} {e.path}{before}{_count(e.count)}", []
    if isinstance(e, AskedExpectation):
        before = e.before if e.before is not None else f"the first {e.before_write} written"
        return f"the patient is asked about {e.fact} before {before}", []
    if isinstance(e, ReferenceExpectation):
        free = ", ".join(f"{c.resource_type}.{c.path}" for c in e.free)
        messages = "" if e.messages is None else f"; messages{_count(e.messages)}"
        detail = "added by default: the end state matches the reference solution's " + (
            f"(free choices: {free}){messages}" if free else f"(no free choices){messages}"
        )
        return detail, [f"{c.resource_type}.{c.path}: {w}" for c in e.free for w in c.where]
    if isinstance(e, RubricExpectation):
        return f"judged against a rubric (threshold {e.threshold:g}) on {', '.join(e.of)}", [
            e.rubric
        ]
    if isinstance(e, ChangesExpectation):
        allowed = (
            ", ".join(
                a if isinstance(a, str) else f"{a.of} (at {', '.join(a.paths)})" for a in e.allow
            )
            or "nothing"
        )
        where = "the patient's chart" if e.scope == "patient" else "the tenant"
        return f"no other change in {where} (allowed: {allowed})", list(e.allow_where)
    if isinstance(e, MessageExpectation):
        parts = [f"says {p!r}" for p in e.says or []]
        parts += [f"says one of {e.says_any}"] if e.says_any else []
        parts += [f"never says {p!r}" for p in e.not_ or []]
        parts += [f"states {m.path} of {m.of}" for m in e.mentions or []]
        parts += [f"keeps to {e.voice}"] if e.voice else []
        parts += ["states only facts it was shown"] if e.grounded else []
        parts += ["claims only actions it took"] if e.claims else []
        after = f", after {e.after}" if e.after else ""
        return f"messages to the {e.to}{after}: " + "; ".join(parts), []
    if isinstance(e, AnyOfExpectation):
        return "any one of", []
    if isinstance(e, ConsentExpectation):
        parts = [f"{', '.join(e.actions)} only after the patient agreed"] if e.actions else []
        parts += ["no SMS to a patient who opted out"] if e.opt_out else []
        return "; ".join(parts) or "consent (nothing checked)", []
    return e.type, []


def expectation_view(e: Expectation) -> ExpectationView:
    detail, clauses = _detail(e)
    children = (
        [expectation_view(c) for c in e.expectations] if isinstance(e, AnyOfExpectation) else []
    )
    return ExpectationView(e.id, e.label, e.type, e.required, e.weight, detail, clauses, children)


def _describe(resource: dict[str, Any]) -> str:
    """A resource's one-line description: a name, a code, a subject or a status."""
    names = resource.get("name")
    if isinstance(names, list) and names and isinstance(names[0], dict):
        given = " ".join(str(g) for g in names[0].get("given") or [])
        return f"{given} {names[0].get('family', '')}".strip() or str(names[0].get("text", ""))
    if isinstance(names, str):
        return names
    for key in ("code", "serviceType", "category"):
        value = resource.get(key)
        value = value[0] if isinstance(value, list) and value else value
        if isinstance(value, dict):
            codings = value.get("coding") or [{}]
            text = value.get("text") or (codings[0] or {}).get("display")
            if text:
                return str(text)
    for key in ("description", "status"):
        if isinstance(resource.get(key), str):
            return str(resource[key])
    return ""


@dataclass(frozen=True, slots=True)
class ResourceView:
    resource_type: str
    symbol: str
    description: str
    json: dict[str, Any]


def resource_view(resource: dict[str, Any]) -> ResourceView:
    return ResourceView(
        str(resource.get("resourceType", "?")),
        str(resource.get("id", "")),
        _describe(resource),
        resource,
    )


@dataclass(frozen=True, slots=True)
class Variant:
    """A way to run the scenario: the baseline (persona None) or a persona."""

    persona: str | None
    summary: str
    brief: list[Segment]
    overrides: list[str]


@dataclass(frozen=True)
class ScenarioDetails:
    line: ScenarioLine
    hash: str
    brief: list[Segment]
    workflow: str | None
    timeout_seconds: int
    scheduling: str
    fixture: list[ResourceView]
    stimulus: list[ResourceView]
    expectations: list[ExpectationView]
    variants: list[Variant]
    patient_sim: dict[str, Any] | None
    oracle_calls: int
    document: dict[str, Any]

    @property
    def has_oracle(self) -> bool:
        return self.oracle_calls > 0


def scenario_details(loaded: LoadedScenario) -> ScenarioDetails:
    s = loaded.scenario
    baseline = Variant(None, "the scenario as written", segments(s.brief), [])
    personas = [
        Variant(v.persona, v.summary, segments(v.brief), sorted(v.overrides)) for v in s.variants
    ]
    sim = s.patient_sim
    return ScenarioDetails(
        line=scenario_line(loaded),
        hash=loaded.hash,
        brief=segments(s.brief),
        workflow=s.workflow,
        timeout_seconds=s.timeout_seconds,
        scheduling=s.scheduling,
        fixture=[resource_view(r) for r in s.fixture],
        stimulus=[resource_view(r) for r in s.stimulus],
        # What every run of it gets besides its own (strict by default).
        expectations=[expectation_view(e) for e in [*s.expectations, *default_expectations(s)]],
        variants=[baseline, *personas],
        patient_sim=None
        if sim is None
        else {
            "patient": sim.patient,
            "goal": sim.goal,
            "facts": [f.topic for f in sim.facts],
            "max_turns": sim.max_turns,
        },
        oracle_calls=len(s.oracle),
        document=s.model_dump(mode="json", by_alias=True, exclude_none=True),
    )


@dataclass(frozen=True, slots=True)
class ProblemView:
    path: str  # a JSON pointer; "" is the document itself
    message: str

    @property
    def where(self) -> str:
        return self.path or "(document)"


@dataclass
class ImportOutcome:
    """What the import form shows after a dry run or a refused save."""

    ok: bool
    errors: list[ProblemView] = field(default_factory=list)
    warnings: list[ProblemView] = field(default_factory=list)
    scenario_id: str | None = None
    title: str | None = None

    @classmethod
    def refused(cls, message: str, path: str = "") -> ImportOutcome:
        return cls(False, [ProblemView(path, message)])

    @classmethod
    def invalid(cls, problems: list[Problem], warnings: list[Problem]) -> ImportOutcome:
        return cls(
            False,
            [ProblemView(p.path, p.message) for p in problems],
            [ProblemView(p.path, p.message) for p in warnings],
        )

    @classmethod
    def valid(cls, loaded: LoadedScenario, warnings: list[Problem]) -> ImportOutcome:
        return cls(
            True,
            [],
            [ProblemView(p.path, p.message) for p in warnings],
            loaded.scenario.id,
            loaded.scenario.title,
        )


def empty_import() -> dict[str, Any]:
    return {"document": "", "outcome": None}


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of a check report: what was tried, whether it came out as it should."""

    good: bool
    kind: str
    description: str
    reason: str


@dataclass(frozen=True)
class VariantCheck:
    name: str
    mode: str
    ok: bool
    oracle_passed: bool
    oracle_reason: str
    noop_failed: bool
    mutants: list[Finding]
    rewrites: list[Finding]
    grading: str
    notes: list[str]


def _variant_check(v: VariantReport) -> VariantCheck:
    if v.oracle_error:
        oracle_reason = v.oracle_error
    elif v.oracle_failing:
        oracle_reason = "fails: " + ", ".join(v.oracle_failing)
    else:
        oracle_reason = "every required expectation holds"
    mutants = [
        Finding(
            not m.survived,
            m.kind,
            m.description,
            "caught by " + ", ".join(m.caught_by)
            if m.caught_by
            else "survived: no required expectation fails"
            + (f" (should be caught by {', '.join(m.should_catch)})" if m.should_catch else ""),
        )
        for m in v.mutants
    ]
    rewrites = [
        Finding(
            r.passed,
            r.kind,
            r.description,
            "passes"
            if r.passed
            else "fails: "
            + "; ".join(f"{b.get('expectation', '?')}: {b.get('clause', '')}" for b in r.broke),
        )
        for r in v.rewrites
    ]
    notes = []
    if v.never_decisive:
        notes.append("never decisive: " + ", ".join(v.never_decisive))
    if v.disagreement:
        notes.append("in-memory grading disagreed on: " + ", ".join(v.disagreement))
    return VariantCheck(
        v.variant or "baseline",
        v.mode,
        v.ok,
        v.oracle_passed,
        oracle_reason,
        v.noop_failed,
        mutants,
        rewrites,
        v.executor,
        notes,
    )


@dataclass(frozen=True)
class CheckView:
    ok: bool
    problems: list[str]
    warnings: list[str]
    variants: list[VariantCheck]


def check_report(report: ScenarioReport) -> CheckView:
    return CheckView(
        report.ok,
        list(report.problems),
        list(report.warnings),
        [_variant_check(v) for v in report.variants],
    )
