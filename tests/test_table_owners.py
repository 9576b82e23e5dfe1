"""Each feature owns its tables: no module outside the owning package names them in SQL.

Other features reach a table through its owner's service (`app.fhir.service` for the
FHIR store); the write statement's foreign parts are handed in by the composition root
(`app.runs.fhir_writes`), never written by the store itself. Extend OWNERS as tables
get their owner.
"""

from __future__ import annotations

import re
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"

# table -> the package (under app/) whose modules alone may name it in SQL.
OWNERS: dict[str, str] = {
    "fhir_resource": "fhir",
    "fhir_history": "fhir",
    "fhir_date": "fhir",
}

# The ORM (migrations' metadata) declares every table; it holds no queries.
EXEMPT = {"models"}

# A table named where SQL names one: after FROM / JOIN / INTO / UPDATE / DELETE FROM /
# USING / TABLE, or qualified as `table.column`.
_SQL_VERBS = r"(?:FROM|JOIN|INTO|UPDATE|USING|TABLE)"


def _pattern(table: str) -> re.Pattern[str]:
    return re.compile(rf"\b{_SQL_VERBS}\s+{table}\b|\b{table}\.\w", re.IGNORECASE)


def _violations(owners: dict[str, str], root: Path) -> list[str]:
    patterns = {table: _pattern(table) for table in owners}
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        package = path.relative_to(root).parts[0].removesuffix(".py")
        if package in EXEMPT:
            continue
        text = path.read_text(encoding="utf-8")
        for table, owner in owners.items():
            if package == owner:
                continue
            for match in patterns[table].finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(root.parent)}:{line}: {table} ({owner} owns it)")
    return found


def test_no_module_names_another_features_table_in_sql() -> None:
    assert _violations(OWNERS, APP) == []


def test_the_walk_finds_a_foreign_table(tmp_path: Path) -> None:
    # The check itself can fail: a runs module reading the store's table is reported,
    # the store's own module and a mere mention in prose are not.
    (tmp_path / "runs").mkdir()
    (tmp_path / "fhir").mkdir()
    (tmp_path / "runs" / "service.py").write_text(
        'SQL = """SELECT r.id\n    FROM fhir_resource r WHERE true"""\n'
        "# fhir_history is mentioned here only in prose\n"
    )
    (tmp_path / "fhir" / "repository.py").write_text('SQL = "DELETE FROM fhir_date"\n')
    assert _violations(OWNERS, tmp_path) == [
        f"{tmp_path.name}/runs/service.py:2: fhir_resource (fhir owns it)"
    ]
