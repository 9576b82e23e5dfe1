"""Scenarios: the built-in library in `scenarios/*.json` (read-only) and each tenant's
imported ones (versioned in the `scenario` table)."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from app.db import Conn, Tx
from app.errors import Unprocessable
from app.kit import jsontext
from app.scenarios import repository
from app.scenarios.errors import BuiltinScenarioId, ScenarioNotFound
from app.scenarios.schema import Scenario
from app.scenarios.validation import Problem, content_hash, validate_scenario
from understudy_client.contract.scenarios import ScenarioSummary


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    version: int  # 0 for a built-in scenario
    builtin: bool
    hash: str

    def summary(self) -> ScenarioSummary:
        s = self.scenario
        return ScenarioSummary(
            id=s.id,
            title=s.title,
            category=s.category,
            modes=[str(m) for m in s.modes],
            summary=s.summary,
            personas=[v.persona for v in s.variants],
            builtin=self.builtin,
            version=self.version,
            hash=self.hash,
        )


class ScenarioInvalid(Unprocessable):
    def __init__(self, problems: list[Problem], warnings: list[Problem]) -> None:
        super().__init__(f"the scenario has {len(problems)} problem(s)")
        self.problems = problems
        self.warnings = warnings


@dataclass(frozen=True)
class Imported:
    loaded: LoadedScenario
    warnings: list[Problem]  # legal but often a slip (a symbol nothing mentions)


def builtin_dir() -> Path:
    # Beside the package in a checkout, or in the working directory of a container.
    for candidate in (Path(__file__).resolve().parents[2] / "scenarios", Path("scenarios")):
        if candidate.is_dir():
            return candidate.resolve()
    return Path("scenarios")


@functools.cache
def builtin_scenarios() -> dict[str, LoadedScenario]:
    """Every built-in scenario, loaded once. A broken file is a bug caught by the tests
    (tests/scenarios), so it raises here rather than being skipped silently."""
    out: dict[str, LoadedScenario] = {}
    for path in sorted(builtin_dir().glob("*.json")):
        scenario = Scenario.model_validate(jsontext.loads(path.read_text()))
        out[scenario.id] = LoadedScenario(scenario, 0, True, content_hash(scenario))
    return out


async def get_scenario(
    pool: asyncpg.Pool | Conn, tenant_id: uuid.UUID, scenario_id: str
) -> LoadedScenario:
    builtin = builtin_scenarios().get(scenario_id)
    if builtin is not None:
        return builtin
    # Every grading pass of a custom scenario's run asks for it: the version and hash
    # first, the document only when this process has not parsed that content yet.
    head = await repository.latest_head(pool, tenant_id=tenant_id, scenario_id=scenario_id)
    if (cached := _cached(head)) is not None:
        return cached
    row = await repository.latest(pool, tenant_id=tenant_id, scenario_id=scenario_id)
    if row is None:
        raise ScenarioNotFound(f"no scenario '{scenario_id}'")
    return _loaded(row)


async def get_scenario_version(
    pool: asyncpg.Pool | Conn, tenant_id: uuid.UUID, scenario_id: str, version: int
) -> LoadedScenario:
    """The version a run used (a built-in scenario has one: its file, version 0); the
    latest when that version is gone."""
    if version == 0 or scenario_id in builtin_scenarios():
        return await get_scenario(pool, tenant_id, scenario_id)
    head = await repository.version_head(
        pool, tenant_id=tenant_id, scenario_id=scenario_id, version=version
    )
    if (cached := _cached(head)) is not None:
        return cached
    row = await repository.version(
        pool, tenant_id=tenant_id, scenario_id=scenario_id, version=version
    )
    if row is None:
        return await get_scenario(pool, tenant_id, scenario_id)
    return _loaded(row)


# Custom scenarios parsed once per content hash (the same hash is the same document),
# shared read-only as the built-in ones are: the console's home page and runs list read
# every one of the tenant's on each view, and every grading pass of a run reads its own.
# Bounded: emptied when full.
_PARSED: dict[str, Scenario] = {}
PARSED_CACHED = 512


def _cached(head: asyncpg.Record | None) -> LoadedScenario | None:
    """The custom scenario of a row with `version` and `hash`, if its content is parsed."""
    if head is None or (parsed := _PARSED.get(head["hash"])) is None:
        return None
    return LoadedScenario(parsed, head["version"], False, head["hash"])


def _loaded(row: asyncpg.Record) -> LoadedScenario:
    """The custom scenario of a row with `version`, `hash` and `document`."""
    return LoadedScenario(_parse(row), row["version"], False, row["hash"])


def _parse(row: asyncpg.Record) -> Scenario:
    """The scenario of a row with `hash` and `document`, parsed once per hash."""
    digest: str = row["hash"]
    parsed = _PARSED.get(digest)
    if parsed is None:
        parsed = Scenario.model_validate(jsontext.loads(row["document"]))
        if len(_PARSED) >= PARSED_CACHED:
            _PARSED.clear()
        _PARSED[digest] = parsed
    return parsed


async def list_scenarios(pool: asyncpg.Pool | Conn, tenant_id: uuid.UUID) -> list[LoadedScenario]:
    rows = await repository.latest_of_each(pool, tenant_id=tenant_id)
    # Taken before the await below, so another request emptying the cache meanwhile
    # takes nothing from this one.
    known = {r["hash"]: _PARSED[r["hash"]] for r in rows if r["hash"] in _PARSED}
    missing = [r["hash"] for r in rows if r["hash"] not in known]
    if missing:
        docs = await repository.documents_of(pool, tenant_id=tenant_id, hashes=missing)
        for doc in docs:
            known[doc["hash"]] = _parse(doc)
    custom = [
        LoadedScenario(known[r["hash"]], r["version"], False, r["hash"])
        for r in rows
        if r["hash"] in known  # a version deleted between the two reads is left out
    ]
    return sorted([*builtin_scenarios().values(), *custom], key=lambda s: s.scenario.id)


async def import_scenario(
    tx: Tx, tenant_id: uuid.UUID, document: Any, *, dry_run: bool
) -> Imported:
    """Validate the document and, unless `dry_run`, store it as the id's next version in
    the caller's transaction."""
    scenario, problems, warnings = validate_scenario(document)
    if problems or scenario is None:
        raise ScenarioInvalid(problems, warnings)
    if scenario.id in builtin_scenarios():
        raise BuiltinScenarioId(
            f"'{scenario.id}' is a built-in scenario; import yours under another id"
        )
    digest = content_hash(scenario)
    if dry_run:
        return Imported(LoadedScenario(scenario, 0, False, digest), warnings)
    # Python mode keeps fixture decimals as Decimal, which jsontext writes back verbatim
    # (JSON mode would turn 9.1 into the string "9.1", and the fixture would fail FHIR).
    body = jsontext.dumps(scenario.model_dump(by_alias=True, exclude_none=True))
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("import_scenario runs inside the caller's transaction")
    # Serialise imports of one id so versions stay dense.
    await repository.lock_id(conn, tenant_id=tenant_id, scenario_id=scenario.id)
    version = await repository.insert_next_version(
        conn, tenant_id=tenant_id, scenario_id=scenario.id, document_json=body, digest=digest
    )
    return Imported(LoadedScenario(scenario, version, False, digest), warnings)
