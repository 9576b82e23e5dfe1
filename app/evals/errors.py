"""Errors of evals, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import NotFound


class EvalNotFound(NotFound):
    """No eval with that id in this tenant."""
