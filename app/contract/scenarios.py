"""Scenarios as the list shows them."""

from __future__ import annotations

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
