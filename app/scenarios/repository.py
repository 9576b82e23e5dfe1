"""The SQL of `scenario`: a tenant's imported scenarios, every version kept."""

from __future__ import annotations

import uuid

import asyncpg

from app.db import Conn

# asyncpg's pool speaks the same query API as a connection: reads take either.
Reader = Conn | asyncpg.Pool


async def latest(conn: Reader, *, tenant_id: uuid.UUID, scenario_id: str) -> asyncpg.Record | None:
    return await _latest(conn, "version, document, hash", tenant_id, scenario_id)


async def latest_head(
    conn: Reader, *, tenant_id: uuid.UUID, scenario_id: str
) -> asyncpg.Record | None:
    """`latest` without the document: version and hash."""
    return await _latest(conn, "version, hash", tenant_id, scenario_id)


async def version(
    conn: Reader, *, tenant_id: uuid.UUID, scenario_id: str, version: int
) -> asyncpg.Record | None:
    return await _version(conn, "version, document, hash", tenant_id, scenario_id, version)


async def version_head(
    conn: Reader, *, tenant_id: uuid.UUID, scenario_id: str, version: int
) -> asyncpg.Record | None:
    """`version` without the document: version and hash."""
    return await _version(conn, "version, hash", tenant_id, scenario_id, version)


async def _latest(
    conn: Reader, columns: str, tenant_id: uuid.UUID, scenario_id: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {columns} FROM scenario WHERE tenant_id = $1 AND id = $2
        ORDER BY version DESC LIMIT 1""",
        tenant_id,
        scenario_id,
    )


async def _version(
    conn: Reader, columns: str, tenant_id: uuid.UUID, scenario_id: str, version: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {columns} FROM scenario WHERE tenant_id = $1 AND id = $2 AND version = $3",
        tenant_id,
        scenario_id,
        version,
    )


async def latest_of_each(conn: Reader, *, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    """The latest version of each of the tenant's scenarios: id, version and hash, without
    the document (`documents_of` reads those a caller has not parsed yet)."""
    return await conn.fetch(
        """SELECT DISTINCT ON (id) id, version, hash FROM scenario
        WHERE tenant_id = $1 ORDER BY id, version DESC""",
        tenant_id,
    )


async def documents_of(
    conn: Reader, *, tenant_id: uuid.UUID, hashes: list[str]
) -> list[asyncpg.Record]:
    """hash, document of the tenant's scenario versions with these content hashes."""
    return await conn.fetch(
        "SELECT DISTINCT ON (hash) hash, document FROM scenario "
        "WHERE tenant_id = $1 AND hash = ANY($2::text[])",
        tenant_id,
        hashes,
    )


async def lock_id(conn: Conn, *, tenant_id: uuid.UUID, scenario_id: str) -> None:
    """Serialise imports of one id until the caller's transaction ends."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1 || $2))", str(tenant_id), scenario_id
    )


async def insert_next_version(
    conn: Conn, *, tenant_id: uuid.UUID, scenario_id: str, document_json: str, digest: str
) -> int:
    version: int = await conn.fetchval(
        """INSERT INTO scenario (tenant_id, id, version, document, hash)
            SELECT $1, $2, coalesce(max(version), 0) + 1, $3::jsonb, $4
            FROM scenario WHERE tenant_id = $1 AND id = $2
            RETURNING version""",
        tenant_id,
        scenario_id,
        document_json,
        digest,
    )
    return version
