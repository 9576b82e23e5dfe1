"""The FHIR store's public face: what the REST routes, Bundles, runs, the console and
the rest call (`fhir_service.X`). Each name lives in the module of its concept:

- `context`: `FhirContext` (tenant, base URL, run view, who writes), `WriteResult`
- `checks`: the type, the id, the body, If-Match
- `interactions`: read, vread, create, update, patch, delete, and `Deferred` writes of a
  transaction Bundle
- `conditional`: conditional update, patch and delete
- `searching`: search and the single match of a conditional interaction
- `history`: `_history`
- `prepare`: a new version ready to write; `events`: the webhook events it emits
- `reads`: what other features read or delete of the store, as typed values
"""

from __future__ import annotations

from app.fhir.checks import check_id, check_type, is_valid_id, parse_body, parse_if_match
from app.fhir.conditional import conditional_delete, conditional_patch, conditional_update
from app.fhir.context import RUN_TAG, SIM_TAG, FhirContext, WriteResult, http_date
from app.fhir.events import events_for, previous_status
from app.fhir.history import history
from app.fhir.interactions import Deferred, create, delete, flush, patch, read, update, vread
from app.fhir.prepare import deletion, prepare_write
from app.fhir.reads import (
    ChangedByRun,
    ChartResource,
    CurrentBody,
    Origin,
    StoredVersion,
    ThreadMessage,
    communications_of,
    current_or_deleted,
    current_version,
    delete_run_resources,
    ids_like,
    live_count_sql,
    origins_of,
    patient_chart,
    resources_changed_by_run,
    version_join_sql,
    versions_of,
    written_by_run,
)
from app.fhir.repository import StoredResource
from app.fhir.searching import SearchPage, conditional_match, search

__all__ = [
    "RUN_TAG",
    "SIM_TAG",
    "ChangedByRun",
    "ChartResource",
    "CurrentBody",
    "Deferred",
    "FhirContext",
    "Origin",
    "SearchPage",
    "StoredResource",
    "StoredVersion",
    "ThreadMessage",
    "WriteResult",
    "check_id",
    "check_type",
    "communications_of",
    "conditional_delete",
    "conditional_match",
    "conditional_patch",
    "conditional_update",
    "create",
    "current_or_deleted",
    "current_version",
    "delete",
    "delete_run_resources",
    "deletion",
    "events_for",
    "flush",
    "history",
    "http_date",
    "ids_like",
    "is_valid_id",
    "live_count_sql",
    "origins_of",
    "parse_body",
    "parse_if_match",
    "patch",
    "patient_chart",
    "prepare_write",
    "previous_status",
    "read",
    "resources_changed_by_run",
    "search",
    "update",
    "version_join_sql",
    "versions_of",
    "vread",
    "written_by_run",
]
