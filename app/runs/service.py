"""Runs: the feature's public face. Other features call `app.runs.service`; the work is
in the modules named for each concept:

- `row` — the run row (`RunRow`), its status and its one mapping to table `run`
  (where a new column goes: its docstring);
- `reads` — a run by id, a page of runs, the live ones, the marker a run page polls;
- `start` — starting a run: the request checked, setup and stimulus written, the row
  recorded under the live-run limit;
- `snapshot` — a run's snapshot for grading, read from the database;
- `verdicts` — grading a run, ending it with its verdict, a live run's checks;
- `ending` — cancelling runs and deleting an ended run's data;
- `changes` — marking runs changed (to be regraded) and the sweep for runs due a grading;
- `calls` — a run's traced calls;
- `board_load` — the scenario health board read (its rules: `board`).

All SQL of `run` and `run_ref` is in `repository`. A run leaves `live` exactly once:
every transition out of it is `UPDATE run … WHERE status = 'live'` with the row count
checked (`verdicts`, `ending`).
"""

from __future__ import annotations

from app.runs.board_load import BOARD_REVISIONS, BoardSummary, load_board, load_headline
from app.runs.calls import run_trace
from app.runs.changes import mark_changed, mark_runs_changed, runs_needing_grades
from app.runs.ending import cancel_live_runs, cancel_run, delete_run_data
from app.runs.reads import (
    LiveRunRef,
    get_run,
    list_runs,
    live_runs,
    run_marker,
    run_scheduling,
    runs_by_id,
)
from app.runs.row import FINAL, PatientDriver, RunRow, RunStatus
from app.runs.sms_patient import set_reply_url as set_sms_reply_url
from app.runs.snapshot import TEXT_TYPES, build_snapshot, expectations_of, needs_grounding
from app.runs.start import (
    StartRequest,
    check_sms_reply_url,
    count_live,
    lock_starts,
    start_run,
)
from app.runs.verdicts import grade_run, live_checks

__all__ = [
    "BOARD_REVISIONS",
    "FINAL",
    "TEXT_TYPES",
    "BoardSummary",
    "LiveRunRef",
    "PatientDriver",
    "RunRow",
    "RunStatus",
    "StartRequest",
    "build_snapshot",
    "cancel_live_runs",
    "cancel_run",
    "check_sms_reply_url",
    "count_live",
    "delete_run_data",
    "expectations_of",
    "get_run",
    "grade_run",
    "list_runs",
    "live_checks",
    "live_runs",
    "load_board",
    "load_headline",
    "lock_starts",
    "mark_changed",
    "mark_runs_changed",
    "needs_grounding",
    "run_marker",
    "run_scheduling",
    "run_trace",
    "runs_by_id",
    "runs_needing_grades",
    "set_sms_reply_url",
    "start_run",
]
