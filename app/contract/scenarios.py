"""Scenarios as the list shows them, and the answers of import and check."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.contract.base import ApiModel


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


class CheckReportOut(ApiModel):
    """The scenario check's report; `warnings` are never a failure."""

    scenario_id: str
    ok: bool
    valid: bool
    problems: list[str]
    warnings: list[str]
    mutant_kinds: dict[str, int]
    variants: list[dict[str, Any]]
