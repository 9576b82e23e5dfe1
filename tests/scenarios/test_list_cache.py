"""`list_scenarios` and `get_scenario` parse each custom scenario once per content hash:
a second listing reads no document, a new version is listed as itself, a cache emptied
between two listings (or bounded to a few entries) changes nothing the caller sees, and
one scenario asked for again reads only its version and hash."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.db import Database, Scopes
from app.openapi import SCENARIO_EXAMPLE
from app.scenarios import repository
from app.scenarios import service as scenarios
from app.scenarios.errors import ScenarioNotFound
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


async def test_one_scenario_is_read_by_its_hash_and_parsed_once(
    db: Database, tenant: TenantHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every grading pass of a custom scenario's run asks for its scenario.
    await _import(db, tenant, _doc("custom.one", "First"))
    first = await scenarios.get_scenario(db.pool, tenant.id, "custom.one")
    assert (first.version, first.scenario.title) == (1, "First")

    read: list[str] = []
    for name in ("latest", "version"):
        real = getattr(repository, name)

        async def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            read.append(_name)
            return await _real(*args, **kw)

        monkeypatch.setattr(repository, name, counted)
    again = await scenarios.get_scenario(db.pool, tenant.id, "custom.one")
    assert read == [] and again.scenario is first.scenario  # no document read

    await _import(db, tenant, _doc("custom.one", "Second"))
    second = await scenarios.get_scenario(db.pool, tenant.id, "custom.one")
    assert (second.version, second.scenario.title, read) == (2, "Second", ["latest"])
    # The first content again, as version 3: its parse is reused, under its own version.
    await _import(db, tenant, _doc("custom.one", "First"))
    third = await scenarios.get_scenario(db.pool, tenant.id, "custom.one")
    assert (third.version, third.hash) == (3, first.hash)
    assert third.scenario is first.scenario and read == ["latest"]

    old = await scenarios.get_scenario_version(db.pool, tenant.id, "custom.one", 2)
    assert (old.version, old.scenario.title) == (2, "Second") and read == ["latest"]
    scenarios._PARSED.clear()
    old = await scenarios.get_scenario_version(db.pool, tenant.id, "custom.one", 2)
    assert (old.version, old.scenario.title, read) == (2, "Second", ["latest", "version"])
    gone = await scenarios.get_scenario_version(db.pool, tenant.id, "custom.one", 9)
    assert (gone.version, gone.scenario.title) == (3, "First")  # a version gone: the latest
    with pytest.raises(ScenarioNotFound):
        await scenarios.get_scenario(db.pool, tenant.id, "custom.none")
