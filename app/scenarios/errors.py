"""Errors of scenarios, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import Conflict, NotFound


class ScenarioNotFound(NotFound):
    """No built-in scenario and no imported one with that id in this tenant."""


class BuiltinScenarioId(Conflict):
    """An import reuses the id of a built-in scenario."""
