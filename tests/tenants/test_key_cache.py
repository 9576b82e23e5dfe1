"""The in-process API-key cache: a revoked key stops working within the TTL, and the
cache holds at most its size whatever keys are sent."""

from __future__ import annotations

import uuid

import pytest

from app.db import Database
from app.errors import Unauthorized
from app.tenants import service as tenants
from tests.conftest import TenantHandle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _info(n: int) -> tenants.TenantInfo:
    return tenants.TenantInfo(uuid.uuid4(), f"t{n}", False)


async def test_a_revoked_key_stops_working_within_the_ttl(
    db: Database, tenant: TenantHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    cache = tenants.KeyCache(tenants.KEY_CACHE_SIZE, tenants.KEY_CACHE_SECONDS, timer=clock)
    monkeypatch.setattr(tenants, "_cache", cache)
    header = f"Bearer {tenant.key}"
    assert (await tenants.authenticate(db.pool, header)).id == tenant.id
    assert len(cache) == 1
    await db.pool.execute("UPDATE api_key SET revoked_at = now() WHERE tenant_id = $1", tenant.id)
    # Still trusted from the cache just before the TTL runs out...
    clock.now += tenants.KEY_CACHE_SECONDS - 0.5
    assert (await tenants.authenticate(db.pool, header)).id == tenant.id
    # ...and refused once it has.
    clock.now += 1.0
    with pytest.raises(Unauthorized):
        await tenants.authenticate(db.pool, header)
    assert len(cache) == 0


async def test_unknown_keys_are_not_cached(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tenants.KeyCache(tenants.KEY_CACHE_SIZE, tenants.KEY_CACHE_SECONDS, timer=Clock())
    monkeypatch.setattr(tenants, "_cache", cache)
    for n in range(5):
        with pytest.raises(Unauthorized):
            await tenants.authenticate(db.pool, f"Bearer usk_not-a-key-{n}")
    assert len(cache) == 0


def test_the_cache_keeps_at_most_its_size_dropping_the_least_recently_used() -> None:
    cache = tenants.KeyCache(3, 10.0, timer=Clock())
    infos = [_info(n) for n in range(5)]
    for n in range(3):
        cache.put(f"d{n}", infos[n])
    assert cache.get("d0") == infos[0]  # d0 used last: d1 is now the least recent
    cache.put("d3", infos[3])
    cache.put("d4", infos[4])
    assert len(cache) == 3
    assert cache.get("d1") is None
    assert cache.get("d2") is None
    assert [cache.get(d) for d in ("d0", "d3", "d4")] == [infos[0], infos[3], infos[4]]


def test_the_process_cache_is_bounded() -> None:
    assert tenants._cache.maxsize == tenants.KEY_CACHE_SIZE
    cache = tenants.KeyCache(tenants.KEY_CACHE_SIZE, tenants.KEY_CACHE_SECONDS, timer=Clock())
    for n in range(tenants.KEY_CACHE_SIZE * 3):
        cache.put(f"d{n}", _info(n))
    assert len(cache) == tenants.KEY_CACHE_SIZE


def test_an_entry_is_trusted_for_its_ttl_from_when_it_was_put() -> None:
    clock = Clock()
    cache = tenants.KeyCache(4, 10.0, timer=clock)
    info = _info(1)
    cache.put("d", info)
    clock.now += 9.0
    assert cache.get("d") == info  # a hit does not extend its trust
    clock.now += 1.0
    assert cache.get("d") is None
    assert len(cache) == 0
