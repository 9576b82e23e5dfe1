#!/usr/bin/env python3
"""The benchmark's ceiling: a bare FHIR app on the store's table layout.

FastAPI + asyncpg over `fhir_resource` and `fhir_date` as migrations/versions/0001
creates them (the same columns, the same GIN indexes over tenant- and type-scoped keys,
the keys extracted by `app.fhir.search.index.extract_index`, so a search reads the same
postings as ours), serving only what scripts/bench_fhir.py measures: read by id,
`Patient?family=`, `Appointment?patient=&status=`, create, and a transaction Bundle of
POSTs to load the data. No validation, no history, no trace, no auth, no quota, no
run ownership, no webhooks: what is left is the floor of work one request needs on
this stack, so our figures can be given as shares of it, measured in the same run.

Started by bench_fhir.py as `uvicorn reference_fhir_app:app` (uvloop, httptools, no
access log: as `understudy serve` runs) with REFERENCE_DATABASE_URL naming a scratch
database; it creates the two tables when they are missing. Base URL: /fhir.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson
from fastapi import FastAPI, Request, Response

from app.fhir.search.index import extract_index, normalize_string

TENANT = uuid.UUID("00000000-0000-4000-8000-00000000ce11")
FHIR_JSON = "application/fhir+json"
SEP = "\x1f"
POOL_SIZE = 10  # as app.db.open_database
DEFAULT_COUNT = 20

DDL = """
CREATE TABLE IF NOT EXISTS fhir_resource (
    tenant_id uuid NOT NULL,
    resource_type text NOT NULL,
    id text NOT NULL,
    version_id integer NOT NULL,
    last_updated timestamptz NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    resource jsonb,
    run_id text,
    tokens text[] NOT NULL DEFAULT '{}',
    refs text[] NOT NULL DEFAULT '{}',
    strings text[] NOT NULL DEFAULT '{}',
    all_refs text[] NOT NULL DEFAULT '{}',
    sort jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT pk_fhir_resource PRIMARY KEY (tenant_id, resource_type, id)
);
CREATE INDEX IF NOT EXISTS ix_fhir_resource_all_refs ON fhir_resource
    USING gin (all_refs) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS ix_fhir_resource_refs ON fhir_resource
    USING gin (refs) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS ix_fhir_resource_strings ON fhir_resource
    USING gin (strings) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS ix_fhir_resource_tokens ON fhir_resource
    USING gin (tokens) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS ix_fhir_resource_run ON fhir_resource (tenant_id, run_id)
    WHERE run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_fhir_resource_updated ON fhir_resource
    (tenant_id, resource_type, last_updated);
CREATE TABLE IF NOT EXISTS fhir_date (
    row_id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL,
    resource_type text NOT NULL,
    id text NOT NULL,
    param text NOT NULL,
    low timestamptz NOT NULL,
    high timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_fhir_date_high ON fhir_date
    (tenant_id, resource_type, param, high);
CREATE INDEX IF NOT EXISTS ix_fhir_date_low ON fhir_date (tenant_id, resource_type, param, low);
CREATE INDEX IF NOT EXISTS ix_fhir_date_resource ON fhir_date (tenant_id, resource_type, id);
"""

# One statement per write, as ours: the current rows and their date rows.
INSERT_SQL = """
WITH up AS (
    INSERT INTO fhir_resource (tenant_id, resource_type, id, version_id, last_updated,
        resource, tokens, refs, strings, all_refs, sort)
    SELECT $1, t.rtype, t.rid, 1, $4, t.body::jsonb, string_to_array(t.tokens, E'\\x1f'),
        string_to_array(t.refs, E'\\x1f'), string_to_array(t.strings, E'\\x1f'),
        string_to_array(t.all_refs, E'\\x1f'), coalesce(t.sort::jsonb, '{}'::jsonb)
    FROM unnest($2::text[], $3::text[], $5::text[], $6::text[], $7::text[], $8::text[],
        $9::text[], $10::text[]) AS t(rtype, rid, body, tokens, refs, strings, all_refs, sort)
    RETURNING 1
), dates AS (
    INSERT INTO fhir_date (tenant_id, resource_type, id, param, low, high)
    SELECT $1, x.rtype, x.rid, x.param, x.low, x.high
    FROM unnest($11::text[], $12::text[], $13::text[], $14::timestamptz[],
        $15::timestamptz[]) AS x(rtype, rid, param, low, high)
)
SELECT count(*) FROM up
"""

READ_SQL = """SELECT resource FROM fhir_resource
WHERE tenant_id = $1 AND resource_type = $2 AND id = $3 AND NOT deleted"""

SEARCH_SQL = """SELECT r.id, r.resource, count(*) OVER () AS total FROM fhir_resource r
WHERE r.tenant_id = $1 AND r.resource_type = $2 AND NOT r.deleted AND {where}
ORDER BY r.id LIMIT {limit}"""


def _prefix(resource_type: str | None) -> str:
    return f"{TENANT.hex[:8]}{resource_type or ''}|"


class Prepared:
    """Rows for INSERT_SQL, one resource at a time."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.columns: list[list[Any]] = [[] for _ in range(8)]
        self.dates: list[list[Any]] = [[] for _ in range(5)]

    def add(self, resource_type: str, resource: dict[str, Any]) -> str:
        rid = str(uuid.uuid4())
        resource["id"] = rid
        resource["meta"] = {"versionId": "1", "lastUpdated": self.now.isoformat()}
        idx = extract_index(resource_type, resource)
        scoped = _prefix(resource_type)
        row: tuple[str | None, ...] = (
            resource_type,
            rid,
            orjson.dumps(resource).decode(),
            SEP.join(scoped + e for e in idx.tokens),
            SEP.join(scoped + e for e in idx.refs),
            SEP.join(scoped + e for e in idx.strings),
            SEP.join(_prefix(None) + e for e in idx.all_refs),
            orjson.dumps(idx.sort).decode() if idx.sort else None,
        )
        for column, value in zip(self.columns, row, strict=True):
            column.append(value)
        for param, low, high in idx.dates:
            dated: tuple[Any, ...] = (resource_type, rid, param, low, high)
            for column, dated_value in zip(self.dates, dated, strict=True):
                column.append(dated_value)
        return rid

    async def write(self, conn: asyncpg.Connection[Any]) -> None:
        rtype, rid, *rest = self.columns
        await conn.fetchval(INSERT_SQL, TENANT, rtype, rid, self.now, *rest, *self.dates)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    pool = await asyncpg.create_pool(
        os.environ["REFERENCE_DATABASE_URL"],
        min_size=2,
        max_size=POOL_SIZE,
        server_settings={"timezone": "UTC", "plan_cache_mode": "force_custom_plan"},
    )
    async with pool.acquire() as conn:
        await conn.execute(DDL)
    app.state.pool = pool
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)


def _fhir(body: bytes | str, status: int = 200, **headers: str) -> Response:
    return Response(body, status_code=status, media_type=FHIR_JSON, headers=headers)


def _outcome(status: int, text: str) -> Response:
    body = {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": "error", "code": "processing", "diagnostics": text}],
    }
    return _fhir(orjson.dumps(body), status)


@app.get("/fhir/metadata")
async def metadata() -> Response:
    return _fhir(
        orjson.dumps(
            {
                "resourceType": "CapabilityStatement",
                "status": "active",
                "kind": "instance",
                "fhirVersion": "4.0.1",
                "format": ["json"],
                "software": {"name": "reference app (benchmark ceiling)", "version": "0"},
            }
        )
    )


@app.get("/fhir/{resource_type}/{resource_id}")
async def read(request: Request, resource_type: str, resource_id: str) -> Response:
    body = await request.app.state.pool.fetchval(READ_SQL, TENANT, resource_type, resource_id)
    if body is None:
        return _outcome(404, f"{resource_type}/{resource_id} not found")
    return _fhir(body)


def _family_key(value: str) -> str:
    return "family=" + normalize_string(value)[:64]


def _patient_key(value: str) -> str:
    return "patient=" + value


def _status_key(value: str) -> str:
    return "status=" + value


# The searches the benchmark makes: (type, parameter) -> (column, key of a value).
_SEARCHES: dict[tuple[str, str], tuple[str, Callable[[str], str]]] = {
    ("Patient", "family"): ("strings", _family_key),
    ("Appointment", "patient"): ("refs", _patient_key),
    ("Appointment", "status"): ("tokens", _status_key),
}


@app.get("/fhir/{resource_type}")
async def search(request: Request, resource_type: str) -> Response:
    args: list[Any] = [TENANT, resource_type]
    where: list[str] = []
    filters = []
    for name, value in request.query_params.multi_items():
        spec = _SEARCHES.get((resource_type, name))
        if spec is None:
            return _outcome(400, f"unsupported search parameter {name!r}")
        filters.append((name, spec[0], spec[1](value)))
    if not filters:
        return _outcome(400, "a search needs a parameter")
    for name, column, key in filters:
        args.append([_prefix(resource_type) + key])
        # As ours: a low-cardinality token only filters what the other condition found.
        expr = f"array_cat(r.{column}, '{{}}'::text[])" if name == "status" else f"r.{column}"
        where.append(f"{expr} && ${len(args)}::text[]")
    rows = await request.app.state.pool.fetch(
        SEARCH_SQL.format(where=" AND ".join(where), limit=DEFAULT_COUNT), *args
    )
    base = str(request.base_url).rstrip("/") + f"/fhir/{resource_type}/"
    total = rows[0]["total"] if rows else 0
    entries = ",".join(
        '{"fullUrl":'
        + orjson.dumps(base + r["id"]).decode()
        + ',"resource":'
        + r["resource"]
        + ',"search":{"mode":"match"}}'
        for r in rows
    )
    body = (
        f'{{"resourceType":"Bundle","type":"searchset","total":{total},'
        f'"link":[{{"relation":"self","url":{orjson.dumps(str(request.url)).decode()}}}],'
        f'"entry":[{entries}]}}'
    )
    return _fhir(body)


@app.post("/fhir/{resource_type}")
async def create(request: Request, resource_type: str) -> Response:
    try:
        resource = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _outcome(400, "the body is not JSON")
    if not isinstance(resource, dict) or resource.get("resourceType") != resource_type:
        return _outcome(400, f"the body is not a {resource_type}")
    prepared = Prepared(datetime.now(UTC))
    rid = prepared.add(resource_type, resource)
    async with request.app.state.pool.acquire() as conn:
        await prepared.write(conn)
    return _fhir(
        orjson.dumps(resource), 201, Location=f"{resource_type}/{rid}/_history/1", ETag='W/"1"'
    )


@app.post("/fhir")
async def transaction(request: Request) -> Response:
    """A transaction Bundle of POSTs (what the benchmark loads with), in one statement."""
    try:
        bundle = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _outcome(400, "the body is not JSON")
    if not isinstance(bundle, dict) or bundle.get("type") != "transaction":
        return _outcome(400, "only transaction Bundles")
    prepared = Prepared(datetime.now(UTC))
    out = []
    for entry in bundle.get("entry") or ():
        resource = entry.get("resource")
        request_part = entry.get("request") or {}
        if request_part.get("method") != "POST" or not isinstance(resource, dict):
            return _outcome(400, "only POST entries with a resource")
        resource_type = str(resource.get("resourceType"))
        rid = prepared.add(resource_type, resource)
        out.append(
            {"response": {"status": "201 Created", "location": f"{resource_type}/{rid}/_history/1"}}
        )
    async with request.app.state.pool.acquire() as conn:
        async with conn.transaction():
            await prepared.write(conn)
        # Planner statistics after a bulk write, as ours refreshes them (a fresh table's
        # defaults make the GIN searches scan).
        await conn.execute("ANALYZE fhir_resource, fhir_date")
    return _fhir(
        orjson.dumps({"resourceType": "Bundle", "type": "transaction-response", "entry": out})
    )
