"""Tenants and their API keys."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn, Scopes, Tx
from app.errors import Unauthorized
from app.fhir.repository import WriteStatement
from app.kit.ids import hash_api_key, new_api_key
from app.tenants import repository
from app.tenants.directory import ensure_directory
from app.tenants.errors import TenantNameTaken, TenantNotFound

# How long a key lookup is trusted in-process: a revoked key stops working within this.
KEY_CACHE_SECONDS = 10.0
# How many keys' lookups are kept at most (least recently used dropped first): about
# 480 bytes each (measured with tracemalloc), so the cache stays under 0.5 MB however
# many keys call.
KEY_CACHE_SIZE = 1024
# A one-time sign-in link (`serve --dev`) is for the person starting the server now.
SIGNIN_LINK_SECONDS = 600


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
    tx: Tx,
    name: str,
    *,
    write_statement: WriteStatement,
    trace_enabled: bool = False,
    slot_weeks: int = 8,
) -> tuple[TenantInfo, str]:
    """Create a tenant with its canonical directory, in the caller's transaction; return
    it and its key (shown once). `write_statement` is the FHIR write statement the
    directory goes through (`app.runs.fhir_writes.FHIR_WRITES`, composed above this
    layer)."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("create_tenant runs inside the caller's transaction")
    key = new_api_key()
    try:
        # A taken name aborts the caller's transaction, which this error then rolls back.
        tenant_id = await repository.insert_tenant(
            conn, tenant_id=uuid.uuid4(), name=name, trace_enabled=trace_enabled
        )
    except asyncpg.UniqueViolationError:
        raise TenantNameTaken(f"a tenant named '{name}' already exists") from None
    await _insert_key(conn, tenant_id, key)
    await ensure_directory(conn, tenant_id, weeks=slot_weeks, write_statement=write_statement)
    return TenantInfo(tenant_id, name, trace_enabled), key


async def _insert_key(conn: Conn, tenant_id: uuid.UUID, key: str) -> None:
    await repository.insert_key(
        conn, tenant_id=tenant_id, key_id=uuid.uuid4(), key_hash=hash_api_key(key), prefix=key[:12]
    )


async def add_key(tx: Tx, tenant_name: str) -> str:
    """A new key for an existing tenant (its old keys keep working), in the caller's
    transaction."""
    key = new_api_key()
    tenant_id = await repository.tenant_id_named(tx.conn, tenant_name)
    if tenant_id is None:
        raise TenantNotFound(f"no tenant named '{tenant_name}'")
    await _insert_key(tx.conn, tenant_id, key)
    return key


async def list_tenants(pool: asyncpg.Pool) -> list[TenantSummary]:
    rows = await repository.tenants_with_counts(pool)
    return [
        TenantSummary(r["id"], r["name"], r["created_at"], r["keys"], r["resources"]) for r in rows
    ]


async def set_trace(tx: Tx, tenant_id: uuid.UUID, enabled: bool) -> None:
    await repository.set_trace(tx.conn, tenant_id=tenant_id, enabled=enabled)
    _cache.clear()


async def set_trace_by_name(tx: Tx, name: str, enabled: bool) -> None:
    """Record every call of the tenant (or only those while a run is live)."""
    if not await repository.set_trace_by_name(tx.conn, name, enabled):
        raise TenantNotFound(f"no tenant named '{name}'")
    _cache.clear()


async def roll_directory(
    tx: Tx, tenant_id: uuid.UUID, *, weeks: int, write_statement: WriteStatement
) -> int:
    """Write whatever part of the tenant's canonical directory is missing (the coming
    weeks' Slots); returns how many resources were written."""
    return await ensure_directory(tx.conn, tenant_id, weeks=weeks, write_statement=write_statement)


async def all_tenant_ids(pool: asyncpg.Pool) -> list[uuid.UUID]:
    return await repository.all_tenant_ids(pool)


class KeyCache:
    """Key digest -> tenant: at most `size` entries, the least recently used dropped
    first, each trusted for `ttl` seconds, so a revoked key stops working within that and
    the cache stays bounded whatever keys are sent. A plain dict (its order is the
    recency): a lookup is two dictionary operations, where cachetools' TTLCache spent
    about 2% of a FHIR read's CPU on its bookkeeping (py-spy, 2026-12-04)."""

    def __init__(self, size: int, ttl: float, timer: Callable[[], float] = time.monotonic) -> None:
        self.maxsize = size
        self.ttl = ttl
        self.timer = timer
        self._entries: dict[str, tuple[float, TenantInfo]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, digest: str) -> TenantInfo | None:
        entry = self._entries.pop(digest, None)
        if entry is None:
            return None
        if entry[0] <= self.timer():
            return None  # expired: dropped
        self._entries[digest] = entry  # the most recently used now
        return entry[1]

    def put(self, digest: str, info: TenantInfo) -> None:
        self._entries.pop(digest, None)
        while len(self._entries) >= self.maxsize:
            del self._entries[next(iter(self._entries))]
        self._entries[digest] = (self.timer() + self.ttl, info)

    def pop(self, digest: str) -> None:
        self._entries.pop(digest, None)

    def clear(self) -> None:
        self._entries.clear()


# Unknown keys are not cached.
_cache = KeyCache(KEY_CACHE_SIZE, KEY_CACHE_SECONDS)


async def authenticate(pool: asyncpg.Pool, authorization: str | None) -> TenantInfo:
    if not authorization:
        raise Unauthorized("missing Authorization header: send 'Authorization: Bearer <key>'")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    digest = hash_api_key(key.strip())
    cached = _cache.get(digest)
    if cached is not None:
        return cached
    row = await repository.tenant_of_key(pool, digest)
    if row is None:
        raise Unauthorized("unknown or revoked API key")
    info = TenantInfo(row["id"], row["name"], row["trace_enabled"])
    _cache.put(digest, info)
    return info


@dataclass(frozen=True, slots=True)
class KeyHolder:
    """A tenant as known by one of its keys: a console session names the key, so revoking
    the key ends the session."""

    tenant: TenantInfo
    key_id: uuid.UUID


def _holder(row: asyncpg.Record) -> KeyHolder:
    return KeyHolder(TenantInfo(row["id"], row["name"], row["trace_enabled"]), row["key_id"])


async def identify_key(pool: asyncpg.Pool, key: str) -> KeyHolder:
    """The tenant and key id of an unrevoked key (Unauthorized otherwise)."""
    row = await repository.key_of_hash(pool, hash_api_key(key.strip()))
    if row is None:
        raise Unauthorized("unknown or revoked API key")
    return _holder(row)


async def open_console_session(
    pool: asyncpg.Pool,
    holder: KeyHolder,
    session_id: uuid.UUID,
    lifetime_seconds: float,
) -> None:
    """Record a console sign-in with the key it signed in with (its cookie names it)."""
    await repository.insert_console_session(
        pool,
        tenant_id=holder.tenant.id,
        session_id=session_id,
        key_id=holder.key_id,
        lifetime_seconds=lifetime_seconds,
    )


async def tenant_of_session(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> TenantInfo | None:
    """The tenant while the console session is open and its key unrevoked (read every
    time: no cache, so sign-out and a revoked key end the session at its next request)."""
    row = await repository.tenant_of_session(pool, tenant_id=tenant_id, session_id=session_id)
    return None if row is None else TenantInfo(row["id"], row["name"], row["trace_enabled"])


async def end_console_session(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    await repository.delete_console_session(pool, tenant_id=tenant_id, session_id=session_id)


async def create_signin_token(tx: Tx, key: str) -> str:
    """A one-time sign-in token for the key's tenant, valid SIGNIN_LINK_SECONDS; only its
    hash is stored."""
    row = await repository.key_of_hash(tx.conn, hash_api_key(key.strip()))
    if row is None:
        raise Unauthorized("unknown or revoked API key")
    token = secrets.token_urlsafe(32)
    await repository.insert_signin_token(
        tx.conn,
        token_hash=hash_api_key(token),
        tenant_id=row["id"],
        key_id=row["key_id"],
        lifetime_seconds=SIGNIN_LINK_SECONDS,
    )
    return token


async def use_signin_token(pool: asyncpg.Pool, token: str) -> KeyHolder | None:
    """The tenant and key a sign-in token names, the first time it is used before it
    expires (and while the key is unrevoked); None otherwise."""
    row = await repository.use_signin_token(pool, hash_api_key(token.strip()))
    return None if row is None else _holder(row)


@asynccontextmanager
async def transient_key(scopes: Scopes, tenant_id: uuid.UUID) -> AsyncIterator[str]:
    """A key of the tenant that exists only for the block, for work that replays calls
    through the app's own HTTP stack on behalf of a console session (which holds no key
    in clear). Committed before the block so other connections see it; deleted after."""
    key = new_api_key()
    key_id = uuid.uuid4()
    async with scopes.transaction() as tx:
        await repository.insert_key(
            tx.conn, tenant_id=tenant_id, key_id=key_id, key_hash=hash_api_key(key), prefix=key[:12]
        )
    try:
        yield key
    finally:
        async with scopes.transaction(autocommit=True) as tx:
            await repository.delete_key(tx.conn, tenant_id=tenant_id, key_id=key_id)
        _cache.pop(hash_api_key(key))
