"""Scenarios as the list shows them, and the answers of import and check."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from understudy_client.contract.base import ApiModel


class ScenarioSummary(ApiModel):
    id: str
    title: str
    category: str
    modes: list[str]
    summary: str
    personas: list[str]
    builtin: bool
    version: int
    hash: str


class ScenarioList(ApiModel):
    scenarios: list[ScenarioSummary]


class ProblemOut(ApiModel):
    path: str = Field(description="JSON pointer into the scenario document; '' is the whole")
    message: str


class ImportedOut(ScenarioSummary):
    """An imported (201) or dry-run validated (200) scenario: its summary (`version` is
    the new version, 0 for a dry run) and what validation said."""

    dry_run: bool
    valid: bool
    warnings: list[ProblemOut] = Field(
        description="legal but often a slip (a symbol nothing mentions); never blocks import"
    )


class ScenarioInvalidOut(ApiModel):
    """problem+json: every problem at once (`errors`), and the warnings beside them."""

    title: str
    status: int
    detail: str | None = None
    errors: list[ProblemOut] = Field(default_factory=list)
    warnings: list[ProblemOut] = Field(default_factory=list)


class MutantOut(ApiModel):
    """A near miss derived from the oracle: it must fail a required expectation."""

    kind: str = Field(
        description=(
            "drop | redirect | code | reorder | collateral | duplicate | slot | guess | "
            "message-* | element | delete"
        )
    )
    description: str
    caught_by: list[str] = Field(
        description="required expectations it fails (or 'the API (refused with 409)')"
    )
    survived: bool
    should_catch: list[str] | None = Field(
        default=None,
        description="for a survivor: the expectations that looked at what it changed",
    )


class BrokeOut(ApiModel):
    expectation: str
    clause: str = Field(description="the failing where clause(s), else the detail")


class RewriteOut(ApiModel):
    """An equivalent rewrite of the oracle: it must pass; failing is a false failure."""

    kind: str = Field(
        description=(
            "offset | choice | transaction | put-create | create-then-patch | extras | free"
        )
    )
    description: str
    passed: bool
    broke: list[BrokeOut] | None = None


class VariantReportOut(ApiModel):
    """One variant (baseline or persona) in one mode, checked both ways: mutants must
    fail, rewrites must pass."""

    variant: str | None
    mode: str
    ok: bool
    oracle_passes: bool
    oracle_failing: list[str]
    oracle_error: str | None
    nothing_fails: bool
    mutants: int
    mutants_caught: int
    survivors: list[MutantOut]
    caught: list[MutantOut]
    rewrites: int
    rewrites_passing: int
    false_failures: list[RewriteOut]
    never_decisive: list[str]
    mutant_grading: str = Field(description="memory | real runs")
    generated: dict[str, int] = Field(
        default_factory=dict,
        description=(
            "the check's own adversaries by kind: element and delete mutants (must fail), "
            "free alternatives (must pass)"
        ),
    )
    free_unmet: list[str] = Field(
        default_factory=list,
        description="free choices (Type.path) for which no tried value met the constraints",
    )
    simulation_disagreed: list[str]


class CheckReportOut(ApiModel):
    """The scenario check's report; `warnings` are never a failure."""

    scenario_id: str
    ok: bool
    valid: bool
    problems: list[str]
    warnings: list[str]
    mutant_kinds: dict[str, int]
    rewrite_kinds: dict[str, int]
    variants: list[VariantReportOut]


class ScenarioDraftOut(ApiModel):
    """`POST /api/testing/runs/{id}/scenario`: a scenario drafted from an ended run, not
    saved; import it (`POST /api/testing/scenarios`) once edited."""

    run_id: str
    draft: dict[str, Any] = Field(
        description="The scenario JSON: the run's fixture, stimulus and brief, the system's "
        "writes as the oracle, expectations derived from what it did"
    )
    problems: list[ProblemOut] = Field(
        description="What the lint refuses (the import would answer 422 until they are fixed)"
    )
    warnings: list[ProblemOut] = Field(description="What the lint warns about; never blocks")
