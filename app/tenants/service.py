"""Tenants and their API keys."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn
from app.errors import Conflict, Unauthorized
from app.fhir import service as fhir_service
from app.fhir.repository import WriteStatement
from app.kit.ids import hash_api_key, new_api_key
from app.tenants.directory import ensure_directory

# How long a key lookup is trusted in-process: a revoked key stops working within this.
KEY_CACHE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class TenantInfo:
    id: uuid.UUID
    name: str
    trace_enabled: bool


@dataclass(frozen=True, slots=True)
class TenantSummary:
    id: uuid.UUID
    name: str
    created_at: datetime
    keys: int
    resources: int


async def create_tenant(
    pool: asyncpg.Pool,
    name: str,
    *,
    write_statement: WriteStatement,
    trace_enabled: bool = False,
    slot_weeks: int = 8,
) -> tuple[TenantInfo, str]:
    """Create a tenant with its canonical directory; return it and its key (shown once).

    `write_statement` is the FHIR write statement the directory goes through
    (`app.runs.fhir_writes.FHIR_WRITES`, composed above this layer)."""
    key = new_api_key()
    async with pool.acquire() as conn, conn.transaction():
        try:
            tenant_id = await conn.fetchval(
                "INSERT INTO tenant (id, name, trace_enabled) VALUES ($1, $2, $3) RETURNING id",
                uuid.uuid4(),
                name,
                trace_enabled,
            )
        except asyncpg.UniqueViolationError:
            raise Conflict(f"a tenant named '{name}' already exists") from None
        await _insert_key(conn, tenant_id, key)
        await ensure_directory(conn, tenant_id, weeks=slot_weeks, write_statement=write_statement)
    return TenantInfo(tenant_id, name, trace_enabled), key


async def _insert_key(conn: Conn, tenant_id: uuid.UUID, key: str) -> None:
    await conn.execute(
        "INSERT INTO api_key (id, tenant_id, key_hash, prefix) VALUES ($1, $2, $3, $4)",
        uuid.uuid4(),
        tenant_id,
        hash_api_key(key),
        key[:12],
    )


async def add_key(pool: asyncpg.Pool, tenant_name: str) -> str:
    """A new key for an existing tenant (its old keys keep working)."""
    key = new_api_key()
    async with pool.acquire() as conn, conn.transaction():
        tenant_id = await conn.fetchval("SELECT id FROM tenant WHERE name = $1", tenant_name)
        if tenant_id is None:
            raise Conflict(f"no tenant named '{tenant_name}'")
        await _insert_key(conn, tenant_id, key)
    return key


async def list_tenants(pool: asyncpg.Pool) -> list[TenantSummary]:
    rows = await pool.fetch(
        f"""SELECT t.id, t.name, t.created_at,
            (SELECT count(*) FROM api_key k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL)
                AS keys,
            {fhir_service.live_count_sql("t.id")} AS resources
        FROM tenant t ORDER BY t.created_at"""
    )
    return [
        TenantSummary(r["id"], r["name"], r["created_at"], r["keys"], r["resources"]) for r in rows
    ]


async def set_trace(pool: asyncpg.Pool, tenant_id: uuid.UUID, enabled: bool) -> None:
    await pool.execute("UPDATE tenant SET trace_enabled = $2 WHERE id = $1", tenant_id, enabled)
    _cache.clear()


async def set_trace_by_name(pool: asyncpg.Pool, name: str, enabled: bool) -> bool:
    status = await pool.execute(
        "UPDATE tenant SET trace_enabled = $2 WHERE name = $1", name, enabled
    )
    _cache.clear()
    return bool(status.endswith(" 1"))


async def all_tenant_ids(pool: asyncpg.Pool) -> list[uuid.UUID]:
    return [r["id"] for r in await pool.fetch("SELECT id FROM tenant")]


_cache: dict[str, tuple[float, TenantInfo]] = {}


async def authenticate(pool: asyncpg.Pool, authorization: str | None) -> TenantInfo:
    if not authorization:
        raise Unauthorized("missing Authorization header: send 'Authorization: Bearer <key>'")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    digest = hash_api_key(key.strip())
    now = time.monotonic()
    cached = _cache.get(digest)
    if cached is not None and cached[0] > now:
        return cached[1]
    row = await pool.fetchrow(
        """SELECT t.id, t.name, t.trace_enabled FROM api_key k JOIN tenant t ON t.id = k.tenant_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL""",
        digest,
    )
    if row is None:
        _cache.pop(digest, None)
        raise Unauthorized("unknown or revoked API key")
    info = TenantInfo(row["id"], row["name"], row["trace_enabled"])
    _cache[digest] = (now + KEY_CACHE_SECONDS, info)
    return info
