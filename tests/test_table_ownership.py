"""Each feature owns its tables: only modules of the owning package name them in SQL.

Every other feature reaches a table through the owner's service module (docs/architecture.md:
"a feature calls another through its service module, never its repository"), so a
table's statements live in one package and can change with it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.models.base import Base

APP = Path(__file__).resolve().parent.parent / "app"

# table → the package that owns it (and alone writes SQL naming it). The FHIR write
# statement's run, usage and outbox parts live in their owners' repositories and are
# composed in by app/runs/fhir_writes.py.
OWNER = {
    "fhir_resource": "app/fhir",
    "fhir_history": "app/fhir",
    "fhir_date": "app/fhir",
    "tenant": "app/tenants",
    "api_key": "app/tenants",
    "usage_counter": "app/tenants",
    "signin_token": "app/tenants",
    "console_session": "app/tenants",
    "scenario": "app/scenarios",
    "run": "app/runs",
    "run_ref": "app/runs",
    "trace_call": "app/trace",
    "captured_effect": "app/capture",
    "webhook_subscription": "app/webhooks",
    "webhook_event": "app/webhooks",
    "webhook_delivery": "app/webhooks",
    "webhook_attempt": "app/webhooks",
    "eval": "app/evals",
    "eval_item": "app/evals",
    "eval_schedule": "app/schedules",
    "eval_schedule_fire": "app/schedules",
    "llm_call": "app/llm",
    "sim_reply": "app/patient_sim",
}

# Not features: the ORM declares every table, migrations live outside app/.
EXEMPT = {"app/models"}

_NAME = "|".join(sorted(OWNER, key=len, reverse=True))
# A table named where SQL names one: after FROM/JOIN/INTO/UPDATE/USING/TABLE, or as
# the target of asyncpg's COPY helpers.
SQL_TABLE = re.compile(
    rf"""(?:\b(?:FROM|JOIN|INTO|UPDATE|USING|TABLE)\s+|_to_table\(\s*["'])({_NAME})\b""",
)


def _package(path: Path) -> str:
    rel = path.relative_to(APP.parent).as_posix()
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else rel


def _findings() -> list[str]:
    out: list[str] = []
    for path in sorted(APP.rglob("*.py")):
        rel = path.relative_to(APP.parent).as_posix()
        package = _package(path)
        if package in EXEMPT:
            continue
        text = path.read_text()
        for match in SQL_TABLE.finditer(text):
            table = match.group(1)
            if OWNER[table] == package:
                continue
            line = text.count("\n", 0, match.start()) + 1
            out.append(f"{rel}:{line} names {table} (owned by {OWNER[table]})")
    return out


def test_every_table_has_an_owner() -> None:
    import app.models  # noqa: F401  (registers every table on Base.metadata)

    tables = set(Base.metadata.tables)
    assert tables == set(OWNER), "a table was added or dropped: give it an owner"
    assert all((APP.parent / owner).is_dir() for owner in OWNER.values())


def test_only_the_owner_names_its_tables_in_sql() -> None:
    assert _findings() == []


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ("SELECT 1 FROM run WHERE tenant_id = $1", "run"),
        ("DELETE FROM trace_call WHERE at < $1", "trace_call"),
        ("x JOIN run r ON r.id = i.run_id", "run"),
        ('copy_records_to_table("eval_item", records=rows)', "eval_item"),
        ("UPDATE webhook_delivery SET state = 'failed'", "webhook_delivery"),
        ('"""SELECT r.id\n    FROM fhir_resource r WHERE true"""', "fhir_resource"),
    ],
)
def test_the_pattern_sees_sql(sql: str, table: str) -> None:
    match = SQL_TABLE.search(sql)
    assert match is not None and match.group(1) == table


@pytest.mark.parametrize(
    "text",
    ["the run_ref table", "FROM running jobs", "UPDATE runs of the eval", "from run to run"],
)
def test_the_pattern_ignores_prose(text: str) -> None:
    assert SQL_TABLE.search(text) is None
