"""Errors of schedules, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import NotFound


class ScheduleNotFound(NotFound):
    """No schedule with that id in this tenant."""
