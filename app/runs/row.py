"""The run row: `RunRow`, its status, and the one mapping between it and table `run`.

Where a new column of `run` goes:

1. the ORM model (`app/models/run.py`) and an alembic migration — the schema;
2. a field of `RunRow` here (a JSONB column declared `field(metadata=JSONB)`).
   That is the whole mapping: `RunRow.from_record` reads every field
   from the row by name, and `RunRow.column_values` gives the values `insert_run`
   (`app/runs/repository.py`) writes, its column list taken from `COLUMNS`.
   `tests/runs/test_row.py` fails when the fields and the ORM columns disagree;
3. only if the testing API shows it: a field of the same name on the contract's run
   view (`understudy_client/contract/runs.py` `_RunViewBase`). `RunRow.view` copies
   every field the row and the view share by name.

Nothing here reads the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, cast

import asyncpg
import orjson

from app.capture import service as capture_service
from app.kit import jsontext
from app.kit.urls import run_view_base
from understudy_client.contract.runs import (
    FinalRunView,
    FinalStatus,
    LiveRunView,
    Provenance,
    RunProgress,
    RunView,
    Verdict,
)


class RunStatus(StrEnum):
    LIVE = "live"
    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    ERRORED = "errored"


FINAL = frozenset(s for s in RunStatus if s is not RunStatus.LIVE)


class PatientDriver(StrEnum):
    """Who answers the staff's messages in a patientSim run."""

    SIM = "sim"  # the simulated patient (app.patient_sim)
    HUMAN = "human"  # a person, typing on the run page


# A JSONB column's field: `field(metadata=JSONB)`, stored as JSON text, read back as
# Python values.
JSONB = MappingProxyType({"jsonb": True})


@dataclass
class RunRow:
    """One row of table `run`, a field per column (see the module docstring)."""

    tenant_id: uuid.UUID
    id: str
    scenario_id: str
    scenario_version: int
    scenario_hash: str
    builtin: bool
    mode: str
    variant: str | None
    label: str | None
    status: str
    brief: str | None
    fixture: dict[str, str] = field(metadata=JSONB)  # symbol -> "Type/id"
    expectations: list[Any] = field(metadata=JSONB)
    started_at: datetime
    deadline: datetime
    finished_at: datetime | None
    # Last write or call attributed to the run, and the value of it the last grading saw.
    changed_at: datetime
    graded_change_at: datetime | None
    graded_at: datetime | None
    progress: dict[str, Any] | None = field(metadata=JSONB)
    verdict: dict[str, Any] | None = field(metadata=JSONB)
    patient_driver: str = PatientDriver.SIM
    revision: str | None = None
    provenance: dict[str, Any] | None = field(default=None, metadata=JSONB)
    scheduling: str = "strict"  # the scenario's booking rules, read by its view's writes
    settle_until: datetime | None = None  # a pass waiting for the quiet: when it ends
    # Where the simulated patient's SMS replies are posted (Twilio's inbound webhook).
    sms_reply_url: str | None = None

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> RunRow:
        """The row as `SELECT *` / `RETURNING *` gives it (an asyncpg Record)."""
        return cls(**{f.name: _decoded(f.name, r[f.name]) for f in fields(cls)})

    def column_values(self) -> tuple[object, ...]:
        """The value of each column in `COLUMNS`' order, as `insert_run` writes them."""
        return tuple(_encoded(name, getattr(self, name)) for name in COLUMNS)

    def view(self, root: str) -> RunView:
        common: dict[str, Any] = {name: getattr(self, name) for name in VIEW_FIELDS}
        common["fhir_base"] = run_view_base(root, self.id)
        common["brief"] = self.brief if self.mode == "agent" else None
        common["provenance"] = (
            None if self.provenance is None else Provenance.model_validate(self.provenance)
        )
        common["capture"] = capture_service.run_capture(
            root, self.tenant_id, self.id, sms_reply_url=self.sms_reply_url
        )
        if self.status == RunStatus.LIVE:
            progress = RunProgress.model_validate(self.progress or {})
            return LiveRunView(status="live", progress=progress, **common)
        verdict = self.final_verdict()
        return FinalRunView(
            status=cast(FinalStatus, self.status),
            finished_at=self.finished_at,
            passed=verdict.passed,
            score=verdict.score,
            expectations=verdict.expectations,
            note=verdict.note,
            simulated_patient=verdict.simulated_patient,
            simulator_issues=verdict.simulator_issues,
            **common,
        )

    def final_verdict(self) -> Verdict:
        """The stored verdict of an ended run (a run ended without one: failed, score 0)."""
        if self.verdict is None:
            return Verdict(passed=False, score=0.0, expectations=[])
        return Verdict.model_validate(self.verdict)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRow))
JSON_COLUMNS: frozenset[str] = frozenset(f.name for f in fields(RunRow) if f.metadata.get("jsonb"))

# The columns both run views show as they are (`status` tells the views apart; the rest
# of a view is computed in `RunRow.view`).
VIEW_FIELDS = tuple(
    name
    for name in COLUMNS
    if name in LiveRunView.model_fields and name in FinalRunView.model_fields and name != "status"
)


def _decoded(name: str, value: Any) -> Any:
    if name in JSON_COLUMNS and value is not None:
        # Our own JSON (no FHIR decimals): plain floats, so scores serialise as numbers.
        return orjson.loads(value)
    return value


def _encoded(name: str, value: Any) -> object:
    if name in JSON_COLUMNS and value is not None:
        return jsontext.dumps(value)
    if isinstance(value, StrEnum):
        return str(value)
    return value
