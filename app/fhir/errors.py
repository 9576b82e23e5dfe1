"""Errors of the FHIR store, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import Conflict, PreconditionFailed


class VersionConflict(Conflict):
    """Another writer changed a resource between this write's read and its write (409:
    retry). repository.write_versions raises it when a versioned write lost the race."""


class StaleVersion(PreconditionFailed):
    """If-Match named a version that is no longer the current one (412)."""


class AmbiguousMatch(PreconditionFailed):
    """A conditional interaction's criteria matched more than one resource (412)."""
