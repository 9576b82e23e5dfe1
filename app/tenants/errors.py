"""Errors of tenants, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import Conflict, NotFound


class TenantNotFound(NotFound):
    """No tenant with that name."""


class TenantNameTaken(Conflict):
    """A tenant with that name already exists."""
