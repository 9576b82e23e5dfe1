"""Errors of the run lifecycle, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import Conflict, NotFound, TooManyRequests


class RunNotFound(NotFound):
    """No run with that id in this tenant."""


class LiveRunLimit(TooManyRequests):
    """The tenant already has its maximum of live runs."""


class RunNotLive(Conflict):
    """The run has ended: it can no longer be finished, cancelled or written to."""


class RunStillLive(Conflict):
    """The run is live: its data cannot be deleted yet."""
