"""The run table is described once: `RunRow`'s fields are the ORM's columns of `run`,
JSONB exactly where the ORM says so, and the run views copy the fields they share."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.dialects.postgresql import JSONB

from app.models.run import Run
from app.runs.repository import INSERT_RUN
from app.runs.row import COLUMNS, JSON_COLUMNS, VIEW_FIELDS, RunRow
from understudy_client.contract.runs import FinalRunView, LiveRunView


def test_the_row_has_a_field_per_column() -> None:
    assert sorted(COLUMNS) == sorted(c.name for c in Run.__table__.columns)


def test_jsonb_columns_are_declared_so() -> None:
    jsonb = {c.name for c in Run.__table__.columns if isinstance(c.type, JSONB)}
    assert jsonb == JSON_COLUMNS


def test_insert_names_every_column() -> None:
    assert INSERT_RUN.startswith(f"INSERT INTO run ({', '.join(COLUMNS)}) VALUES ($1, ")
    assert INSERT_RUN.count("$") == len(COLUMNS)
    assert INSERT_RUN.count("::jsonb") == len(JSON_COLUMNS)


def test_views_get_every_shared_field() -> None:
    shared = set(LiveRunView.model_fields) & set(FinalRunView.model_fields)
    # computed in RunRow.view: status tells the views apart, fhir_base is the run's URL,
    # capture the run's derived capture credentials (app.capture)
    assert set(VIEW_FIELDS) == shared - {"status", "fhir_base", "capture"}


def _row(**changes: Any) -> RunRow:
    now = datetime(2026, 1, 5, 9, tzinfo=UTC)
    values: dict[str, Any] = {
        "tenant_id": uuid.uuid4(),
        "id": "run_x",
        "scenario_id": "s",
        "scenario_version": 1,
        "scenario_hash": "h",
        "builtin": False,
        "mode": "agent",
        "variant": None,
        "label": "l",
        "status": "live",
        "brief": "b",
        "fixture": {"patient": "Patient/p1"},
        "expectations": [{"type": "resource"}],
        "started_at": now,
        "deadline": now,
        "finished_at": None,
        "changed_at": now,
        "graded_change_at": None,
        "graded_at": None,
        "progress": None,
        "verdict": {"passed": True, "score": 1.0, "expectations": []},
        "patient_driver": "sim",
        "revision": None,
        "provenance": None,
        "scheduling": "lenient",
        "settle_until": None,
    }
    return RunRow(**{**values, **changes})


def test_values_round_trip_through_the_one_mapping() -> None:
    run = _row()
    stored = dict(zip(COLUMNS, run.column_values(), strict=True))
    assert isinstance(stored["fixture"], str)
    assert stored["progress"] is None
    assert RunRow.from_record(stored) == run  # type: ignore[arg-type]
