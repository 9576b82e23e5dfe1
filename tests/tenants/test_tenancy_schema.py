"""Tenancy is explicit in the schema (docs/architecture.md "Tenancy").

Every table but `tenant` carries a NOT NULL `tenant_id`, and every index, unique
constraint and primary key on a tenant-owned table leads with it, so no query can reach
another tenant's rows through an index and every lookup is a per-tenant range scan.
Checked on the ORM metadata (what alembic autogenerates from) and on the migrated test
database (what actually runs).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

import sqlalchemy as sa

import app.models
from app.db import Database
from app.models import Base

TENANT_COLUMN = "tenant_id"

# The tenant registry itself is the only table that is not owned by a tenant.
NOT_TENANT_OWNED = frozenset({"tenant"})

# alembic's own bookkeeping in the database; not part of Base.metadata.
NOT_APP_TABLES = frozenset({"alembic_version"})

# A primary key made of one surrogate column (a random UUID `id`, a sequence `row_id`) is
# unique across all tenants by construction and is never how tenant data is looked up,
# so it does not need to lead with tenant_id.
SURROGATE_KEY_COLUMNS = frozenset({"id", "row_id"})

# Keys that deliberately do NOT lead with tenant_id: (table, columns).
GLOBAL_LOOKUPS = frozenset(
    {
        # api_key.key_hash: authentication finds the tenant *from* the key's hash, so this
        # unique lookup runs before any tenant is known. It must be global.
        ("api_key", ("key_hash",)),
        # signin_token.token_hash: a one-time console sign-in link names no tenant either.
        ("signin_token", ("token_hash",)),
        # The search-key GIN indexes: every key in these arrays starts with its tenant
        # (and type) scope, `app.fhir.repository.key_prefix`, so a lookup only reaches its
        # own tenant's postings; a multi-column GIN led by tenant_id would instead scan
        # a posting list as long as the whole tenant on every search. The queries still
        # filter on tenant_id (and tests/tenants/test_isolation.py proves it).
        ("fhir_resource", ("tokens",)),
        ("fhir_resource", ("refs",)),
        ("fhir_resource", ("strings",)),
        ("fhir_resource", ("all_refs",)),
        # eval_schedule.next_due_at (WHERE NOT paused): the worker's schedule tick finds
        # what is due across every tenant, then takes each schedule by its full key.
        ("eval_schedule", ("next_due_at",)),
    }
)


@dataclass(frozen=True)
class Key:
    table: str
    name: str
    kind: str  # primary key | unique | index
    columns: tuple[str | None, ...]  # None for an expression


def _load_all_models() -> None:
    # Tables register on Base.metadata when their module is imported: import them all, so
    # a model module that app/models/__init__.py forgot is still checked.
    for module in pkgutil.iter_modules(app.models.__path__):
        importlib.import_module(f"app.models.{module.name}")


def _tables() -> list[sa.Table]:
    _load_all_models()
    return [t for t in Base.metadata.sorted_tables if t.name not in NOT_TENANT_OWNED]


def _metadata_keys(table: sa.Table) -> list[Key]:
    keys = [
        Key(
            table.name,
            str(table.primary_key.name or "primary key"),
            "primary key",
            tuple(c.name for c in table.primary_key.columns),
        )
    ]
    for constraint in table.constraints:
        if isinstance(constraint, sa.UniqueConstraint):
            keys.append(
                Key(
                    table.name,
                    str(constraint.name),
                    "unique",
                    tuple(c.name for c in constraint.columns),
                )
            )
    for index in table.indexes:
        columns = tuple(
            expr.name if isinstance(expr, sa.Column) else None for expr in index.expressions
        )
        keys.append(Key(table.name, str(index.name), "index", columns))
    return keys


def _violations(keys: list[Key]) -> list[Key]:
    bad = []
    for key in keys:
        if key.columns[:1] == (TENANT_COLUMN,):
            continue
        surrogate = len(key.columns) == 1 and key.columns[0] in SURROGATE_KEY_COLUMNS
        if key.kind == "primary key" and surrogate:
            continue
        if (key.table, key.columns) in GLOBAL_LOOKUPS:
            continue
        bad.append(key)
    return bad


def test_metadata_holds_the_tenant_owned_tables() -> None:
    names = {t.name for t in _tables()}
    # A guard against walking an empty or half-imported metadata.
    assert {"fhir_resource", "fhir_history", "fhir_date", "api_key", "trace_call"} <= names
    assert "tenant" in Base.metadata.tables


def test_every_table_has_a_not_null_tenant_id() -> None:
    missing = [t.name for t in _tables() if TENANT_COLUMN not in t.c]
    assert missing == [], f"tables without {TENANT_COLUMN}: {missing}"
    nullable = [t.name for t in _tables() if t.c[TENANT_COLUMN].nullable]
    assert nullable == [], f"tables whose {TENANT_COLUMN} may be NULL: {nullable}"


def test_every_key_and_index_leads_with_tenant_id() -> None:
    keys = [key for table in _tables() for key in _metadata_keys(table)]
    assert _violations(keys) == []


def test_the_allow_list_is_not_stale() -> None:
    # Every exception must still exist: one that no longer matches anything would
    # silently allow a future global index of the same shape.
    present = {(k.table, k.columns) for table in _tables() for k in _metadata_keys(table)}
    assert present >= GLOBAL_LOOKUPS


_DB_TABLES_SQL = """
SELECT c.relname AS table_name,
       bool_or(a.attname = 'tenant_id') AS has_tenant,
       bool_or(a.attname = 'tenant_id' AND a.attnotnull) AS tenant_not_null
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
GROUP BY c.relname
"""

_DB_INDEXES_SQL = """
SELECT t.relname AS table_name, i.relname AS index_name, ix.indisprimary, ix.indisunique,
       ARRAY(
           SELECT a.attname::text
           FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
           LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
           ORDER BY k.ord
       ) AS columns
FROM pg_index ix
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public'
"""


async def test_migrated_database_follows_the_same_rules(db: Database) -> None:
    skip = NOT_TENANT_OWNED | NOT_APP_TABLES
    async with db.pool.acquire() as conn:
        tables = [r for r in await conn.fetch(_DB_TABLES_SQL) if r["table_name"] not in skip]
        indexes = [r for r in await conn.fetch(_DB_INDEXES_SQL) if r["table_name"] not in skip]
    assert {"fhir_resource", "api_key"} <= {r["table_name"] for r in tables}
    assert [r["table_name"] for r in tables if not r["has_tenant"]] == []
    assert [r["table_name"] for r in tables if not r["tenant_not_null"]] == []

    keys = [
        Key(
            r["table_name"],
            r["index_name"],
            "primary key" if r["indisprimary"] else "unique" if r["indisunique"] else "index",
            tuple(r["columns"]),
        )
        for r in indexes
    ]
    # btree_gin lets the GIN search indexes lead with tenant_id; the migration falls back
    # to array-only GIN indexes where it is missing (the embedded dev server), not here.
    assert _violations(keys) == []
