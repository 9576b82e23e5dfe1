"""Scenarios: the built-in library in `scenarios/*.json` (read-only) and each tenant's
imported ones (versioned in the `scenario` table)."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from app.contract.scenarios import ScenarioSummary
from app.db import Conn
from app.errors import Conflict, NotFound, Unprocessable
from app.kit import jsontext
from app.scenarios.schema import Scenario
from app.scenarios.validation import Problem, content_hash, validate_scenario


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
    row = await pool.fetchrow(
        """SELECT version, document, hash FROM scenario WHERE tenant_id = $1 AND id = $2
        ORDER BY version DESC LIMIT 1""",
        tenant_id,
        scenario_id,
    )
    if row is None:
        raise NotFound(f"no scenario '{scenario_id}'")
    scenario = Scenario.model_validate(jsontext.loads(row["document"]))
    return LoadedScenario(scenario, row["version"], False, row["hash"])


async def list_scenarios(pool: asyncpg.Pool | Conn, tenant_id: uuid.UUID) -> list[LoadedScenario]:
    rows = await pool.fetch(
        """SELECT DISTINCT ON (id) id, version, document, hash FROM scenario
        WHERE tenant_id = $1 ORDER BY id, version DESC""",
        tenant_id,
    )
    custom = [
        LoadedScenario(
            Scenario.model_validate(jsontext.loads(r["document"])), r["version"], False, r["hash"]
        )
        for r in rows
    ]
    return sorted([*builtin_scenarios().values(), *custom], key=lambda s: s.scenario.id)


async def import_scenario(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, document: Any, *, dry_run: bool
) -> Imported:
    scenario, problems, warnings = validate_scenario(document)
    if problems or scenario is None:
        raise ScenarioInvalid(problems, warnings)
    if scenario.id in builtin_scenarios():
        raise Conflict(f"'{scenario.id}' is a built-in scenario; import yours under another id")
    digest = content_hash(scenario)
    if dry_run:
        return Imported(LoadedScenario(scenario, 0, False, digest), warnings)
    # Python mode keeps fixture decimals as Decimal, which jsontext writes back verbatim
    # (JSON mode would turn 9.1 into the string "9.1", and the fixture would fail FHIR).
    body = jsontext.dumps(scenario.model_dump(by_alias=True, exclude_none=True))
    async with pool.acquire() as conn, conn.transaction():
        # Serialise imports of one id so versions stay dense.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1 || $2))", str(tenant_id), scenario.id
        )
        version = await conn.fetchval(
            """INSERT INTO scenario (tenant_id, id, version, document, hash)
            SELECT $1, $2, coalesce(max(version), 0) + 1, $3::jsonb, $4
            FROM scenario WHERE tenant_id = $1 AND id = $2
            RETURNING version""",
            tenant_id,
            scenario.id,
            body,
            digest,
        )
    return Imported(LoadedScenario(scenario, version, False, digest), warnings)
