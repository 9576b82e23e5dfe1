"""`list_scenarios` parses each custom scenario once per content hash: a second listing
reads no document, a new version is listed as itself, and a cache emptied between two
listings (or bounded to a few entries) changes nothing the caller sees."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.db import Database, Scopes
from app.openapi import SCENARIO_EXAMPLE
from app.scenarios import repository
from app.scenarios import service as scenarios
from tests.conftest import TenantHandle


def _doc(scenario_id: str, title: str) -> dict[str, Any]:
    return {**copy.deepcopy(SCENARIO_EXAMPLE), "id": scenario_id, "title": title}


async def _import(db: Database, tenant: TenantHandle, document: dict[str, Any]) -> str:
    async with Scopes(db.pool).transaction() as tx:
        imported = await scenarios.import_scenario(tx, tenant.id, document, dry_run=False)
    return imported.loaded.hash


def _custom(listed: list[scenarios.LoadedScenario]) -> dict[str, scenarios.LoadedScenario]:
    return {s.scenario.id: s for s in listed if not s.builtin}


async def test_a_listing_parses_each_version_once(
    db: Database, tenant: TenantHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _import(db, tenant, _doc("custom.cache-a", "First title"))
    await _import(db, tenant, _doc("custom.cache-b", "Other"))
    first = _custom(await scenarios.list_scenarios(db.pool, tenant.id))
    assert first["custom.cache-a"].scenario.title == "First title"

    read: list[list[str]] = []
    real = repository.documents_of

    async def counted(conn: Any, *, tenant_id: Any, hashes: list[str]) -> Any:
        read.append(hashes)
        return await real(conn, tenant_id=tenant_id, hashes=hashes)

    monkeypatch.setattr(repository, "documents_of", counted)
    again = _custom(await scenarios.list_scenarios(db.pool, tenant.id))
    assert read == []  # nothing new: no document read
    assert again["custom.cache-a"].scenario is first["custom.cache-a"].scenario

    new_hash = await _import(db, tenant, _doc("custom.cache-a", "Second title"))
    after = _custom(await scenarios.list_scenarios(db.pool, tenant.id))
    assert read == [[new_hash]]  # only the new version's document
    assert (after["custom.cache-a"].version, after["custom.cache-a"].scenario.title) == (
        2,
        "Second title",
    )
    assert after["custom.cache-b"].scenario is first["custom.cache-b"].scenario


async def test_an_emptied_or_tiny_cache_changes_nothing_listed(
    db: Database, tenant: TenantHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(4):
        await _import(db, tenant, _doc(f"custom.tiny-{n}", f"Title {n}"))
    expected = {
        s.scenario.id: (s.version, s.hash, s.scenario.title)
        for s in await scenarios.list_scenarios(db.pool, tenant.id)
    }
    monkeypatch.setattr(scenarios, "PARSED_CACHED", 2)
    for _ in range(3):
        scenarios._PARSED.clear()
        listed = await scenarios.list_scenarios(db.pool, tenant.id)
        assert {s.scenario.id: (s.version, s.hash, s.scenario.title) for s in listed} == expected
        assert len(scenarios._PARSED) <= 4
