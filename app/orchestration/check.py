"""`scenarios check`: is a scenario a fair test? Per variant (the baseline and each
persona): it validates, its oracle passes, doing nothing fails, and the check goes
both ways: every near miss derived from the oracle (`app.orchestration.mutants`) fails
a required expectation, and every equivalent rewrite of it
(`app.orchestration.rewrites`) passes. A rewrite that fails is a false failure: the
scenario grades how the work was written; the report names the expectation and clause.

The oracle and the no-op are real runs through the HTTP stack. Mutants and rewrites are
graded in memory (`app.orchestration.simulation`) from the oracle run's snapshot taken
before the oracle was replayed — 20 mutants cost milliseconds instead of 20 runs. That
is only trusted where it is equivalent: the unmutated oracle is replayed in memory too,
and if its verdict differs from the real run on any expectation, that variant's
mutants and rewrites are graded with real runs instead (and the report says so).
Mutants the scheduling rules refuse (`slot`) are always graded with a real run: the
rules read the tenant's Slots, which the snapshot does not hold.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg

from app.db import Scopes
from app.grading.engine import grade
from app.grading.fhirpath import ClauseMemo
from app.grading.snapshot import RunSnapshot
from app.orchestration import oracle as oracle_replay
from app.orchestration.adversaries import derive_element_mutants, derive_free_alternatives
from app.orchestration.capture_adversaries import (
    derive_capture_mutants,
    derive_capture_rewrites,
)
from app.orchestration.consent_adversaries import derive_consent_mutants, derive_opt_out_mutants
from app.orchestration.mutants import Mutant, derive_mutants, derive_variant_mutants
from app.orchestration.rewrites import Rewrite, derive_rewrites
from app.orchestration.simulation import Patient, Simulation, patient_of
from app.orchestration.text_adversaries import derive_text_adversaries
from app.runs import service as runs_service
from app.scenarios.schema import Expectation, OracleCall, Scenario
from app.scenarios.service import LoadedScenario
from app.scenarios.validation import validate_scenario
from app.tenants.quota import RunLimits
from understudy_client.contract.runs import ExpectationResult, Verdict

LABEL = "scenario-check"
Transform = Callable[[OracleCall, Any], Any]
HTTP_ERROR = 400


@dataclass
class MutantResult:
    kind: str
    description: str
    caught_by: list[str]  # required expectations it fails
    should_catch: list[str] = field(default_factory=list)  # for a survivor

    @property
    def survived(self) -> bool:
        return not self.caught_by

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "description": self.description,
            "caughtBy": self.caught_by,
            "survived": self.survived,
        }
        if self.survived:
            out["shouldCatch"] = self.should_catch
        return out


@dataclass
class RewriteResult:
    """An equivalent rewrite and, when it fails, what broke: each failing required
    expectation with the clause (or, without one, the detail) that failed."""

    kind: str
    description: str
    broke: list[dict[str, str]] = field(default_factory=list)  # {expectation, clause}

    @property
    def passed(self) -> bool:
        return not self.broke

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "description": self.description,
            "passed": self.passed,
        }
        if self.broke:
            out["broke"] = self.broke
        return out


@dataclass
class VariantReport:
    variant: str | None
    mode: str
    oracle_passed: bool = False
    oracle_failing: list[str] = field(default_factory=list)
    oracle_error: str | None = None
    noop_failed: bool = False
    mutants: list[MutantResult] = field(default_factory=list)
    rewrites: list[RewriteResult] = field(default_factory=list)
    never_decisive: list[str] = field(default_factory=list)
    executor: str = "memory"
    disagreement: list[str] = field(default_factory=list)
    # Generated adversaries by kind (element, delete, free), and the free choices no
    # tried value satisfied.
    generated: dict[str, int] = field(default_factory=dict)
    free_unmet: list[str] = field(default_factory=list)

    @property
    def survivors(self) -> list[MutantResult]:
        return [m for m in self.mutants if m.survived]

    @property
    def false_failures(self) -> list[RewriteResult]:
        return [r for r in self.rewrites if not r.passed]

    @property
    def ok(self) -> bool:
        return (
            self.oracle_passed
            and self.noop_failed
            and not self.survivors
            and not self.false_failures
            and not self.free_unmet
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "mode": self.mode,
            "ok": self.ok,
            "oraclePasses": self.oracle_passed,
            "oracleFailing": self.oracle_failing,
            "oracleError": self.oracle_error,
            "nothingFails": self.noop_failed,
            "mutants": len(self.mutants),
            "mutantsCaught": len(self.mutants) - len(self.survivors),
            "survivors": [m.as_json() for m in self.survivors],
            "caught": [m.as_json() for m in self.mutants if not m.survived],
            "rewrites": len(self.rewrites),
            "rewritesPassing": len(self.rewrites) - len(self.false_failures),
            "falseFailures": [r.as_json() for r in self.false_failures],
            "neverDecisive": self.never_decisive,
            "mutantGrading": self.executor,
            "generated": self.generated,
            "freeUnmet": self.free_unmet,
            "simulationDisagreed": self.disagreement,
        }


@dataclass
class ScenarioReport:
    scenario_id: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # never a failure
    variants: list[VariantReport] = field(default_factory=list)
    mutant_kinds: dict[str, int] = field(default_factory=dict)
    rewrite_kinds: dict[str, int] = field(default_factory=dict)
    source: str = ""  # the file checked, when it came from one (orders the reports)

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.variants) and all(v.ok for v in self.variants)

    def as_json(self) -> dict[str, Any]:
        return {
            "scenarioId": self.scenario_id,
            "ok": self.ok,
            "valid": not self.problems,
            "problems": self.problems,
            "warnings": self.warnings,
            "mutantKinds": self.mutant_kinds,
            "rewriteKinds": self.rewrite_kinds,
            "variants": [v.as_json() for v in self.variants],
        }


@dataclass(frozen=True)
class Target:
    """Where the check's real runs happen: the app (for HTTP replays), a tenant and a key
    of it, and the base URL links are built from."""

    app: Any
    scopes: Scopes
    tenant_id: uuid.UUID
    authorization: str
    root: str
    limits: RunLimits

    @property
    def pool(self) -> asyncpg.Pool:
        return self.scopes.pool


def _walk(results: list[ExpectationResult]) -> Iterator[ExpectationResult]:
    for result in results:
        yield result
        yield from _walk(result.children)


def _walk_json(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from _walk_json(item.get("children") or [])


def _required_failing(results: list[ExpectationResult]) -> list[str]:
    return [r.id for r in results if r.required and r.passed is False]


def _required_failing_json(verdict: dict[str, Any]) -> list[str]:
    """The same, read from a stored verdict (a real run's)."""
    return [
        e["id"]
        for e in verdict.get("expectations", [])
        if e.get("required") and e.get("passed") is False
    ]


async def check_scenario(
    target: Target,
    loaded: LoadedScenario,
    *,
    personas: list[str | None] | None = None,
    real_mutants: bool = False,
) -> ScenarioReport:
    """Check every variant (or only `personas`; None is the baseline) in every mode the
    scenario has: a workflow run fires its stimulus where an agent run hands over a brief,
    and each must be a fair test. `real_mutants`
    grades every mutant with a real run even where the in-memory replay agrees (slow:
    for proving the two equivalent)."""
    scenario = loaded.scenario
    report = ScenarioReport(scenario.id)
    _, problems, warnings = validate_scenario(scenario.model_dump(by_alias=True, exclude_none=True))
    report.problems = [f"{p.path}: {p.message}" for p in problems]
    report.warnings = [f"{p.path}: {p.message}" for p in warnings]
    if report.problems:
        return report
    mutants = derive_mutants(scenario)
    for m in mutants:
        report.mutant_kinds[m.kind] = report.mutant_kinds.get(m.kind, 0) + 1
    rewrites = derive_rewrites(scenario) + derive_capture_rewrites(scenario)
    for rw in rewrites:
        report.rewrite_kinds[rw.kind] = report.rewrite_kinds.get(rw.kind, 0) + 1
    every: list[str | None] = [None, *(v.persona for v in scenario.variants)]
    chosen = every if personas is None else [p for p in every if p in personas]
    for mode in [str(m) for m in scenario.modes]:
        for persona in chosen:
            # A mutant that needs a real run (the scheduling rules refuse it whatever the
            # persona or mode: they read the directory, not the fixture) runs once, in
            # the first variant checked; `real_mutants` runs every mutant everywhere.
            own = (
                mutants
                if not report.variants or real_mutants
                else [m for m in mutants if not m.real_run]
            )
            persona_mutants = derive_variant_mutants(scenario, persona)
            if mode == str(scenario.modes[0]):
                for m in persona_mutants:
                    report.mutant_kinds[m.kind] = report.mutant_kinds.get(m.kind, 0) + 1
            own = [*own, *persona_mutants]
            report.variants.append(
                await _check_variant(
                    target,
                    scenario,
                    mode,
                    persona,
                    own,
                    rewrites,
                    real_mutants,
                    first=not report.variants,
                )
            )
    return report


async def _start(
    target: Target, scenario: Scenario, mode: str, persona: str | None
) -> runs_service.RunRow:
    # As the REST start does (the same service, quota and live limit included); leaving
    # the scope drops the live-run cache, so the replay's first call is attributed.
    async with target.scopes.transaction() as tx:
        return await runs_service.start_run(
            tx,
            target.tenant_id,
            runs_service.StartRequest(scenario.id, mode, persona, LABEL, None),
            limits=target.limits,
            root_url=target.root,
        )


async def _finish(target: Target, run: runs_service.RunRow) -> runs_service.RunRow:
    recorder = getattr(target.app.state, "recorder", None)
    if recorder is not None:
        await recorder.flush()  # the replay's calls must be in the trace before grading
    return await runs_service.grade_run(target.scopes, target.tenant_id, run.id, final=True)


async def _cleanup(target: Target, run_ids: list[str]) -> None:
    for run_id in run_ids:
        async with target.scopes.transaction() as tx:
            await runs_service.delete_run_data(tx, target.tenant_id, run_id)


async def _check_variant(
    target: Target,
    scenario: Scenario,
    mode: str,
    persona: str | None,
    mutants: list[Mutant],
    rewrites: list[Rewrite],
    real_mutants: bool,
    *,
    first: bool = True,
) -> VariantReport:
    """A variant's checks in order: doing nothing fails, the oracle passes, every near
    miss fails and every equivalent rewrite passes. `first`: the first variant checked,
    where mutants needing a real run run (the scheduling rules read the directory, not
    the persona)."""
    variant = _Variant(target, scenario, mode, persona)
    try:
        await _nothing_fails(variant)
        oracle = await _oracle_passes(variant)
        generated, alternatives = _generated_adversaries(variant, oracle, first or real_mutants)
        memory = _in_memory(scenario, persona, oracle)
        worded, paraphrases = _text_adversaries(variant, oracle, memory)
        report = variant.report
        report.disagreement = _disagreement(memory.oracle_verdict, oracle.verdict_json)
        if report.disagreement or real_mutants:
            report.executor = "real runs"
        await _grade_mutants(variant, memory, [*mutants, *generated, *worded])
        await _grade_rewrites(variant, memory, [*rewrites, *alternatives, *paraphrases])
        report.never_decisive = _never_decisive(report, memory.oracle_verdict)
        return report
    finally:
        await _cleanup(target, variant.created)


@dataclass
class _Variant:
    """The variant being checked: where its runs happen and what they run, its report so
    far, and the runs it created (deleted when its check ends)."""

    target: Target
    scenario: Scenario
    mode: str
    persona: str | None
    report: VariantReport = field(init=False)
    created: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.report = VariantReport(self.persona, self.mode)

    async def start(self) -> runs_service.RunRow:
        run = await _start(self.target, self.scenario, self.mode, self.persona)
        self.created.append(run.id)
        return run

    def count_generated(self, kinds: list[str]) -> None:
        for kind in kinds:
            self.report.generated[kind] = self.report.generated.get(kind, 0) + 1


@dataclass(frozen=True)
class _Oracle:
    """The oracle's real run: its expectations, the snapshot taken before it was replayed
    (where mutants and rewrites start), and the verdict it got."""

    expectations: list[Expectation]
    before: RunSnapshot
    verdict_json: dict[str, Any]


@dataclass(frozen=True)
class _InMemory:
    """Grading in memory from the oracle's start: the simulated patient, the clause
    outcomes mutants and rewrites share, and the oracle replayed and graded there."""

    expectations: list[Expectation]
    before: RunSnapshot
    patient: Patient | None
    simulated: Simulation
    memo: ClauseMemo
    oracle_snapshot: RunSnapshot
    oracle_verdict: Verdict


async def _nothing_fails(variant: _Variant) -> None:
    """Doing nothing must fail."""
    noop = await variant.start()
    noop_final = await _finish(variant.target, noop)
    variant.report.noop_failed = noop_final.status != runs_service.RunStatus.PASSED


async def _oracle_passes(variant: _Variant) -> _Oracle:
    """The oracle must pass; the snapshot before it is where mutants start. A failing
    oracle does not stop the check: what else is wrong with the scenario (surviving
    mutants, false failures, free choices nothing meets) is reported too, so one round of
    fixes can address all of it."""
    target, report = variant.target, variant.report
    run = await variant.start()
    expectations = runs_service.expectations_of(run)
    async with target.pool.acquire() as conn:
        before = await runs_service.build_snapshot(conn, run, expectations, final=True)
    try:
        await oracle_replay.replay(
            target.app, target.root, target.authorization, run, variant.scenario.oracle
        )
    except Exception as exc:  # the replay's own 422 or anything else: report it
        report.oracle_error = str(exc)
    final = await _finish(target, run)
    verdict_json = final.verdict or {}
    report.oracle_passed = final.status == runs_service.RunStatus.PASSED
    report.oracle_failing = _required_failing_json(verdict_json)
    if runs_service.needs_grounding(expectations):
        before = await _with_what_the_oracle_was_shown(target, final, expectations, before)
    return _Oracle(expectations, before, verdict_json)


async def _with_what_the_oracle_was_shown(
    target: Target,
    final: runs_service.RunRow,
    expectations: list[Expectation],
    before: RunSnapshot,
) -> RunSnapshot:
    """What the oracle was shown (its reads' answers) is what a near miss or a rewrite of
    it reads too: the replay in memory answers no searches itself."""
    async with target.pool.acquire() as conn:
        seen = await runs_service.build_snapshot(conn, final, expectations, final=True)
    return replace(before, shown=seen.shown)


def _generated_adversaries(
    variant: _Variant, oracle: _Oracle, with_real_runs: bool
) -> tuple[list[Mutant], list[Rewrite]]:
    """The check's own adversaries, from the consequential table and the scenario's free
    choices (`app.orchestration.adversaries`), made from this run's start; mutants that
    need a real run only `with_real_runs`."""
    scenario, before = variant.scenario, oracle.before
    generated = (
        [m for m in derive_element_mutants(scenario, before) if with_real_runs or not m.real_run]
        + derive_capture_mutants(scenario, before)
        + derive_consent_mutants(scenario, before)
        + derive_opt_out_mutants(scenario, before)
    )
    alternatives, variant.report.free_unmet = derive_free_alternatives(scenario, before)
    variant.count_generated([m.kind for m in generated] + [r.kind for r in alternatives])
    return generated, alternatives


def _in_memory(scenario: Scenario, persona: str | None, oracle: _Oracle) -> _InMemory:
    """The oracle replayed and graded in memory. Mutants and rewrites differ from the
    oracle in a call or two: most clauses read the same resources with the same
    variables, so their outcomes are shared (one memo)."""
    patient = patient_of(scenario, persona)
    simulated = Simulation(oracle.before, patient)
    memo = ClauseMemo()
    oracle_snapshot = simulated.run(scenario.oracle)
    oracle_verdict = grade(oracle.expectations, oracle_snapshot, memo)
    return _InMemory(
        oracle.expectations,
        oracle.before,
        patient,
        simulated,
        memo,
        oracle_snapshot,
        oracle_verdict,
    )


def _text_adversaries(
    variant: _Variant, oracle: _Oracle, memory: _InMemory
) -> tuple[list[Mutant], list[Rewrite]]:
    """Text adversaries, from what text-truth read in the reference's own texts
    (`app.orchestration.text_adversaries`): near misses in words, and paraphrases; none
    without a text-truth expectation."""
    if not any(e.type == "text-truth" for e in oracle.expectations):
        return [], []
    worded, paraphrases = derive_text_adversaries(
        variant.scenario, oracle.before, memory.oracle_snapshot
    )
    variant.count_generated([m.kind for m in worded] + [r.kind for r in paraphrases])
    return worded, paraphrases


async def _grade_mutants(variant: _Variant, memory: _InMemory, mutants: list[Mutant]) -> None:
    """Each mutant must fail a required expectation: graded in memory while the replay
    there is trusted, else with a real run (always, for one that needs it); a survivor
    names the expectations that should have caught it."""
    report = variant.report
    for mutant in mutants:
        if report.executor == "memory" and not mutant.real_run:
            verdict = await asyncio.to_thread(
                _grade_mutant,
                memory.expectations,
                memory.before,
                mutant,
                memory.patient,
                memory.memo,
            )
            caught = _required_failing(verdict.expectations)
        else:
            caught, run_id = await _real_mutant(
                variant.target, variant.scenario, variant.mode, variant.persona, mutant
            )
            variant.created.append(run_id)
        result = MutantResult(mutant.kind, mutant.description, caught)
        if result.survived:
            result.should_catch = _should_catch(memory.oracle_verdict, memory.simulated, mutant)
        report.mutants.append(result)


async def _grade_rewrites(variant: _Variant, memory: _InMemory, rewrites: list[Rewrite]) -> None:
    """Each equivalent rewrite must pass: graded in memory while the replay there is
    trusted, else with a real run; a false failure names what broke."""
    report = variant.report
    for rewrite in rewrites:
        if report.executor == "memory":
            graded = await asyncio.to_thread(
                _grade_rewrite,
                memory.expectations,
                memory.before,
                rewrite,
                memory.patient,
                memory.memo,
            )
            broke = _broke(graded.expectations)
        else:
            broke, run_id = await _real_rewrite(
                variant.target, variant.scenario, variant.mode, variant.persona, rewrite
            )
            variant.created.append(run_id)
        report.rewrites.append(RewriteResult(rewrite.kind, rewrite.description, broke))


def _never_decisive(report: VariantReport, oracle_verdict: Verdict) -> list[str]:
    """The required expectations no mutant breaks."""
    broken = {e for m in report.mutants for e in m.caught_by}
    return [r.id for r in oracle_verdict.expectations if r.required and r.id not in broken]


def _grade_mutant(
    expectations: Any,
    before: RunSnapshot,
    mutant: Mutant,
    patient: Patient | None = None,
    memo: ClauseMemo | None = None,
) -> Verdict:
    return grade(expectations, Simulation(before, patient).run(mutant.calls, mutant.expanded), memo)


def _grade_rewrite(
    expectations: Any,
    before: RunSnapshot,
    rewrite: Rewrite,
    patient: Patient | None = None,
    memo: ClauseMemo | None = None,
) -> Verdict:
    snapshot = Simulation(before, patient).run(rewrite.calls, rewrite.expanded, rewrite.saves)
    return grade(expectations, snapshot, memo)


def _clause_of(evidence: dict[str, Any], detail: str) -> str:
    failing = [
        c["where"] + (f" ({c['error']})" if c.get("error") else "")
        for c in evidence.get("clauses") or []
        if not c.get("holds")
    ]
    return "; ".join(failing) or detail


def _broke(results: list[ExpectationResult]) -> list[dict[str, str]]:
    """Each failing required expectation and the clause that broke it (for an any_of,
    its alternatives' clauses)."""
    out = []
    for r in results:
        if not (r.required and r.passed is False):
            continue
        clause = _clause_of(r.evidence.wire(), "")
        if not clause and r.children:
            clause = " | ".join(
                f"{c.id}: {_clause_of(c.evidence.wire(), c.detail)}" for c in r.children
            )
        out.append({"expectation": r.id, "clause": clause or r.detail})
    return out


def _broke_json(verdict: dict[str, Any]) -> list[dict[str, str]]:
    """The same, read from a stored verdict (a real run's)."""
    out = []
    for e in verdict.get("expectations", []):
        if not (e.get("required") and e.get("passed") is False):
            continue
        clause = _clause_of(e.get("evidence") or {}, "")
        if not clause and e.get("children"):
            clause = " | ".join(
                f"{c['id']}: {_clause_of(c.get('evidence') or {}, c.get('detail', ''))}"
                for c in e["children"]
            )
        out.append({"expectation": e["id"], "clause": clause or str(e.get("detail", ""))})
    return out


async def _real_replay(
    target: Target,
    scenario: Scenario,
    mode: str,
    persona: str | None,
    calls: Sequence[OracleCall],
    expanded: Transform | None,
    saves: Mapping[str, str] | None = None,
) -> tuple[runs_service.RunRow, list[int | None]]:
    """A fresh run of the variant with `calls` replayed through the HTTP API, finished."""
    run = await _start(target, scenario, mode, persona)
    statuses = await oracle_replay.replay(
        target.app,
        target.root,
        target.authorization,
        run,
        calls,
        strict=False,
        expanded=expanded,
        saves=saves,
    )
    return await _finish(target, run), statuses


async def _real_rewrite(
    target: Target, scenario: Scenario, mode: str, persona: str | None, rewrite: Rewrite
) -> tuple[list[dict[str, str]], str]:
    final, _ = await _real_replay(
        target, scenario, mode, persona, rewrite.calls, rewrite.expanded, rewrite.saves
    )
    return _broke_json(final.verdict or {}), final.id


async def _real_mutant(
    target: Target, scenario: Scenario, mode: str, persona: str | None, mutant: Mutant
) -> tuple[list[str], str]:
    final, statuses = await _real_replay(
        target, scenario, mode, persona, mutant.calls, mutant.expanded
    )
    caught = _required_failing_json(final.verdict or {})
    refused = statuses[mutant.probe] if mutant.probe is not None else None
    if refused is not None and refused >= HTTP_ERROR:
        caught.insert(0, f"the API (refused with {refused})")
    return caught, final.id


def _disagreement(memory: Verdict, real: dict[str, Any]) -> list[str]:
    """Expectations (rubrics aside: always bonus, judged only at a real run's end) on
    which the in-memory replay of the oracle and the real run disagree."""
    real_passed = {e["id"]: e.get("passed") for e in _walk_json(real.get("expectations", []))}
    return [
        r.id
        for r in _walk(memory.expectations)
        if r.type != "rubric" and real_passed.get(r.id, "missing") != r.passed
    ]


def _should_catch(oracle: Verdict, simulated: Simulation, mutant: Mutant) -> list[str]:
    """The required expectations that looked at what the mutated call wrote in the
    oracle run (so they should have noticed the change); for a reorder, the api_call
    expectations whose `before` the change defeats."""
    if mutant.kind == "collateral":
        return []  # nothing looks at a resource the oracle leaves alone
    if mutant.call_index is None:
        return [
            r.id
            for r in oracle.expectations
            if r.required and r.type in ("api_call", "any_of", "asked")
        ]
    ref = simulated.refs_written.get(mutant.call_index)
    if ref is None:
        return []
    return [r.id for r in _walk(oracle.expectations) if r.required and ref in r.evidence.matches]


def render(reports: list[ScenarioReport]) -> str:
    """A readable table: one line per scenario and variant, then the details of every
    failure and warning."""
    lines = [
        f"{'scenario':<44} {'variant':<20} {'valid':<6} {'oracle':<7} {'no-op':<6} "
        f"{'mutants (must fail)':<24} rewrites (must pass)"
    ]
    details: list[str] = []
    for report in reports:
        details += [f"{report.scenario_id}: warning: {w}" for w in report.warnings]
        if report.problems:
            lines.append(f"{report.scenario_id:<44} {'-':<20} {'NO':<6}")
            details += [f"{report.scenario_id}: invalid: {p}" for p in report.problems]
            continue
        several_modes = len({v.mode for v in report.variants}) > 1
        for v in report.variants:
            name = (v.variant or "baseline") + (f" ({v.mode})" if several_modes else "")
            caught = len(v.mutants) - len(v.survivors)
            passing = len(v.rewrites) - len(v.false_failures)
            mark = "" if v.executor == "memory" else " (real runs)"
            lines.append(
                f"{report.scenario_id:<44} {name:<20} {'yes':<6} "
                f"{'passes' if v.oracle_passed else 'FAILS':<7} "
                f"{'fails' if v.noop_failed else 'PASSES':<6} "
                f"{f'{caught}/{len(v.mutants)} caught{mark}':<24} "
                f"{passing}/{len(v.rewrites)} pass"
            )
            where = f"{report.scenario_id} [{name}]"
            if v.oracle_error:
                details.append(f"{where}: the oracle could not be replayed: {v.oracle_error}")
            if not v.oracle_passed:
                details.append(f"{where}: the oracle fails {', '.join(v.oracle_failing)}")
            if not v.noop_failed:
                details.append(f"{where}: doing nothing passes")
            for m in v.survivors:
                catch = ", ".join(m.should_catch) or "no expectation looks at that write"
                details.append(
                    f"{where}: mutant survived: {m.description}; should be caught by: {catch}"
                )
            for r in v.false_failures:
                broke = "; ".join(f"{b['expectation']} ({b['clause']})" for b in r.broke)
                details.append(f"{where}: false failure: {r.description} fails {broke}")
            if v.disagreement:
                details.append(
                    f"{where}: note: the in-memory replay disagreed on "
                    f"{', '.join(v.disagreement)}; mutants graded with real runs"
                )
            if v.free_unmet:
                details.append(
                    f"{where}: no alternative found for free choice(s) "
                    + ", ".join(v.free_unmet)
                    + " (no tried value meets their constraints)"
                )
            if v.never_decisive:
                details.append(
                    f"{where}: warning: never decisive (no mutant breaks it): "
                    + ", ".join(v.never_decisive)
                )
    ok = sum(r.ok for r in reports)
    generated: dict[str, int] = {}
    for report in reports:
        for v in report.variants:
            for kind, n in v.generated.items():
                generated[kind] = generated.get(kind, 0) + n
    if generated:
        lines.append("")
        lines.append(
            "generated adversaries: "
            + ", ".join(f"{n} {kind}" for kind, n in sorted(generated.items()))
            + " (element, delete and text mutants must fail; free alternatives and text"
            " paraphrases and courtesies must pass)"
        )
    lines.append("")
    lines.append(f"{ok}/{len(reports)} scenarios pass the check")
    return "\n".join(lines + (["", *details] if details else []))
