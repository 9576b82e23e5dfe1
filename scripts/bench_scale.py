#!/usr/bin/env python3
"""Data at scale (issue 31): one tenant of --resources resources (default 1,000,000) beside
--tenants tenants of --tenant-size (default 100 x 10,000), then read, Patient family search,
Appointment search and create on the big tenant against the same operations on a 10k
tenant in the same database, server and sitting.

    python scripts/bench_scale.py [--resources N] [--tenants N] [--tenant-size N] [--quick]
        [--duration 15] [--rounds 3] [--connections 8] [--keep] [--json-out FILE]

Set-up: `understudy serve --dev` (benchkit.server_env: a scratch database `--database`,
default understudy_bench_scale, created afresh and migrated by the server, and a Redis
queue of its own) in a process of its own; the tenants are made as `understudy tenants
create` makes them (canonical directory included).

1. Load, through the product's own bulk path: transaction Bundles of --bundle-size (500)
   POSTed to /api/fhir/r4, --load-concurrency (4) in flight. Each tenant holds Patients
   and Appointments 1 : 2 (bench_fhir's proportions: 10k Patients, 20k Appointments), the
   Appointments referencing the tenant's Patients by the ids its transaction-responses
   gave. The big tenant's and the small tenants' Bundles are interleaved through each
   phase (Patients, then Appointments), as tenants writing at the same time would leave
   the table. Family names are drawn so that a family matches --family-size (20) Patients
   on average in every tenant, as at bench_fhir's 10k (500 families): a larger practice
   has more surnames, not larger families. Statistics are left to the product (its
   AutoAnalyze after writes, the worker's sweep); the script only reads how stale they
   are once the load ends.
2. Plans: for each search (family; patient + status), on both tenants, EXPLAIN (ANALYZE,
   BUFFERS) of the statements the product runs for it (`compile_search`'s WHERE and ORDER
   BY, in `search_repository`'s first-page shape with its window count, and in its
   keyset next-page shape), with the values of a few sampled requests: the top node,
   the node chain down to the scan, the index each scan uses, the time and buffers. A
   walk of the primary key (pk_fhir_resource) for a search that has an indexed condition,
   or a sequential scan of fhir_resource, is flagged. One family search is a surname's
   prefix (a few hundred matches in the big tenant: the common-name case).
3. Throughput: each operation with wrk (bench_fhir's Lua scripts and figures), 8
   connections, in --rounds interleaved rounds on the 10k tenant and the big one (A B, B
   A, ...): req/s, p50, p99; a share is big ÷ 10k for req/s (10k ÷ big for latency), the
   goal being >= 75% (within 25% of the 10k figures).

--keep leaves the loaded database; --reuse (with the same sizes and seed) measures it again
without loading it.

Afterwards the server is stopped, Redis cleaned of its queue and the scratch database
dropped unless --keep. Exit status: 0 done, every goal met and no plan flagged; 1 failed;
2 usage or missing tools; 3 done but a goal missed or a plan flagged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import asyncpg
import httpx
import orjson
from bench_fhir import (
    CREATE_BODIES,
    FHIR_JSON,
    MRN_SYSTEM,
    OpResult,
    OpSpec,
    build_bundle,
    combine,
    family_names,
    make_appointment,
    make_create_body,
    make_patient,
    parse_transaction_response,
    render_lua,
    round_lengths,
    run_wrk,
    to_result,
)
from benchkit import (
    HOST,
    BenchError,
    Server,
    add_scratch_arguments,
    check_scratch_arguments,
    check_services,
    clean_up,
    database_url,
    figure,
    log,
    mark,
    run_report,
    scratch_server,
    server_env,
    stop_all,
)

from app.db import Scopes, open_database
from app.fhir.search.query import parse_search
from app.fhir.search.sql import compile_search
from app.runs.fhir_writes import FHIR_WRITES

OPS = ("read", "search-family", "search-appt", "create")
SEARCHES = ("search-family", "search-appt")
GOAL_SHARE = 0.75  # issue 31: within 25% of the 10k figures
PATIENT_SHARE = 1 / 3  # bench_fhir's 10k Patients : 20k Appointments
QUICK = {"resources": 50_000, "tenants": 5, "tenant_size": 10_000}
SAMPLED_VALUES = 5_000  # ids / families per wrk script: enough to spread over the tenant
EXPLAIN_SAMPLES = 3  # requests of each search explained on each tenant
LOAD_TIMEOUT_S = 300.0  # per transaction Bundle
PK_INDEX = "pk_fhir_resource"
FHIR_PATH = "/api/fhir/r4"
# Two-letter endings, all of one length and so prefix-free: appended to bench_fhir's
# prefix-free surnames they give more surnames none of which is a prefix of another
# (FHIR string search matches prefixes), for tenants with more than 500 families.
_ENDINGS = [c + v for c in "bdklmnrstvz" for v in "aeiou"]


# --------------------------------------------------------------------------- data


def families_for(patients: int, family_size: int) -> list[str]:
    """Surnames for `patients` Patients, `family_size` to a name on average, none a
    prefix of another; bench_fhir's own 500 when that is enough."""
    wanted = max(1, round(patients / family_size))
    base = family_names()
    if wanted <= len(base):
        return base[:wanted]
    if wanted > len(base) * len(_ENDINGS):
        raise BenchError(f"{wanted} families asked; at most {len(base) * len(_ENDINGS)}")
    return [name + ending for ending in _ENDINGS for name in base][:wanted]


@dataclass
class TenantLoad:
    """One tenant: what it is to hold, its key, and the ids its Patients got."""

    name: str
    key: str
    patients: int
    appointments: int
    families: list[str]
    patient_ids: list[str] = field(default_factory=list)

    @property
    def resources(self) -> int:
        return self.patients + self.appointments


def split(resources: int) -> tuple[int, int]:
    patients = max(1, round(resources * PATIENT_SHARE))
    return patients, resources - patients


@dataclass(frozen=True, slots=True)
class Job:
    tenant: int
    resource_type: str
    start: int  # index of the first resource of the Bundle within the tenant's type
    count: int


def interleaved(tenants: Sequence[TenantLoad], resource_type: str, size: int) -> list[Job]:
    """Every tenant's Bundles of one type, each tenant's spread evenly over the phase."""
    keyed: list[tuple[float, int, Job]] = []
    for t, tenant in enumerate(tenants):
        total = tenant.patients if resource_type == "Patient" else tenant.appointments
        chunks = range(0, total, size)
        for n, start in enumerate(chunks):
            job = Job(t, resource_type, start, min(size, total - start))
            keyed.append(((n + 0.5) / len(chunks), t, job))
    return [job for _, _, job in sorted(keyed, key=lambda k: (k[0], k[1]))]


def bundle_body(job: Job, tenant: TenantLoad, seed: int) -> bytes:
    rng = random.Random(f"{seed}:{tenant.name}:{job.resource_type}:{job.start}")
    if job.resource_type == "Patient":
        resources = [
            make_patient(rng, tenant.name, job.start + i, tenant.families) for i in range(job.count)
        ]
    else:
        ids = tenant.patient_ids
        resources = [make_appointment(rng, ids[rng.randrange(len(ids))]) for _ in range(job.count)]
    return build_bundle(resources, job.resource_type)


async def load_phase(
    base: str,
    tenants: Sequence[TenantLoad],
    jobs: Sequence[Job],
    concurrency: int,
    seed: int,
) -> float:
    """POST the phase's Bundles, `concurrency` at a time; the seconds it took. Patient
    ids are kept per tenant, in order, from the transaction-responses."""
    total = sum(j.count for j in jobs)
    found: dict[tuple[int, int], list[str]] = {}
    queue: Iterator[Job] = iter(jobs)
    done = 0
    step = max(total // 20, 1)
    shown = 0
    started = time.perf_counter()
    timeout = httpx.Timeout(LOAD_TIMEOUT_S, connect=10.0)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:

        async def worker() -> None:
            nonlocal done, shown
            for job in queue:
                tenant = tenants[job.tenant]
                body = bundle_body(job, tenant, seed)
                headers = {
                    "Authorization": f"Bearer {tenant.key}",
                    "Content-Type": FHIR_JSON,
                    "Accept": FHIR_JSON,
                }
                try:
                    resp = await client.post(base, content=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise BenchError(f"{tenant.name} {job.resource_type} bundle: {exc!r}") from exc
                ids = parse_transaction_response(
                    resp, job.count, job.resource_type, job.start // max(job.count, 1)
                )
                if job.resource_type == "Patient":
                    found[(job.tenant, job.start)] = ids
                done += job.count
                if done - shown >= step:
                    shown = done
                    rate = done / (time.perf_counter() - started)
                    log(f"  {jobs[0].resource_type}: {done:,}/{total:,} ({rate:,.0f}/s)")

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(concurrency):
                    group.create_task(worker())
        except* BenchError as failures:
            raise failures.exceptions[0] from None
    for t, tenant in enumerate(tenants):
        starts = sorted(s for (owner, s) in found if owner == t)
        tenant.patient_ids.extend(i for s in starts for i in found[(t, s)])
    return time.perf_counter() - started


async def create_tenants(url: str, names: Sequence[str]) -> list[str]:
    """The tenants' keys, each tenant made as `understudy tenants create` makes it."""
    from app.tenants import service as tenants_service

    db = await open_database(url, pool_size=2)
    keys: list[str] = []
    try:
        for name in names:
            async with Scopes(db.pool).transaction() as tx:
                _, key = await tenants_service.create_tenant(tx, name, write_statement=FHIR_WRITES)
            keys.append(key)
    finally:
        await db.close()
    return keys


async def reuse_tenants(url: str, names: Sequence[str]) -> list[str]:
    """A new key for each tenant a kept run made (keys are shown once)."""
    from app.tenants import service as tenants_service

    db = await open_database(url, pool_size=2)
    try:
        keys = []
        for name in names:
            async with Scopes(db.pool).transaction() as tx:
                keys.append(await tenants_service.add_key(tx, name))
    finally:
        await db.close()
    return keys


async def loaded_patient_ids(url: str, names: Sequence[str]) -> dict[str, list[str]]:
    """The ids of the Patients a kept run loaded (its MRNs), by tenant."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            """SELECT t.name, r.id FROM fhir_resource r JOIN tenant t ON t.id = r.tenant_id
               WHERE t.name = ANY($1::text[]) AND r.resource_type = 'Patient'
                 AND r.resource->'identifier'->0->>'system' = $2
                 AND r.resource->'identifier'->0->>'value' LIKE t.name || '-%'""",
            list(names),
            MRN_SYSTEM,
        )
    finally:
        await conn.close()
    found: dict[str, list[str]] = {name: [] for name in names}
    for row in rows:
        found[row["name"]].append(row["id"])
    return found


# --------------------------------------------------------------------------- plans


def search_items(op: str, value: str) -> list[tuple[str, str]]:
    if op == "search-family":
        return [("family", value)]
    return [("patient", f"Patient/{value}"), ("status", "booked")]


def statements(tenant_id: uuid.UUID, op: str, value: str) -> dict[str, tuple[str, list[Any]]]:
    """The SQL the product runs for a search, by shape: its first page (the window count,
    `search_repository._offset_page`) and a keyset next page (`_keyset_page`). Written
    out here as search_repository writes them, around `compile_search`'s clauses."""
    resource_type = "Patient" if op == "search-family" else "Appointment"
    query = parse_search(resource_type, search_items(op, value))
    compiled = compile_search(tenant_id, query)
    select = "SELECT r.id, r.version_id, r.last_updated, r.resource"
    first = (
        f"{select}, count(*) OVER () AS total FROM fhir_resource r WHERE {compiled.where} "
        f"ORDER BY {compiled.order_by} LIMIT {query.count + 1} OFFSET 0"
    )
    args = [*compiled.args, ""]
    keyset = (
        f"{select} FROM fhir_resource r WHERE {compiled.where} AND r.id > ${len(args)} "
        f"ORDER BY {compiled.order_by} LIMIT {query.count + 1}"
    )
    return {"first page": (first, list(compiled.args)), "next page (_after)": (keyset, args)}


def walk(node: dict[str, Any], depth: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    yield depth, node
    for child in node.get("Plans", ()):
        yield from walk(child, depth + 1)


def describe_plan(plan: dict[str, Any], indexed: bool) -> dict[str, Any]:
    """What a plan (EXPLAIN's JSON) does: its top node, the chain of nodes to the first
    scan, every scan with its index, and the flags (a primary-key walk where an indexed
    condition exists, a sequential scan of fhir_resource)."""
    root = plan["Plan"]
    chain: list[str] = []
    node = root
    while True:
        chain.append(node["Node Type"])
        children = node.get("Plans") or []
        if not children or "Scan" in node["Node Type"]:
            break
        node = children[0]
    scans = []
    flags = []
    for _, n in walk(root):
        kind = n["Node Type"]
        if "Scan" not in kind:
            continue
        scans.append(
            {
                "node": kind,
                "relation": n.get("Relation Name"),
                "index": n.get("Index Name"),
                "rows": n.get("Actual Rows"),
                "loops": n.get("Actual Loops"),
                "removed_by_filter": n.get("Rows Removed by Filter"),
            }
        )
        if kind == "Seq Scan" and n.get("Relation Name") == "fhir_resource":
            flags.append("seq scan of fhir_resource")
        if n.get("Index Name") == PK_INDEX and indexed:
            flags.append(f"primary-key walk ({PK_INDEX})")
    top_index = next((s["index"] for s in scans if s["index"]), None)
    return {
        "top_node": root["Node Type"],
        "chain": " → ".join(chain),
        "index": top_index,
        "scans": scans,
        "execution_ms": round(plan.get("Execution Time", 0.0), 3),
        "planning_ms": round(plan.get("Planning Time", 0.0), 3),
        "shared_hit": root.get("Shared Hit Blocks", 0),
        "shared_read": root.get("Shared Read Blocks", 0),
        "estimated_rows": root.get("Plan Rows"),
        "flags": flags,
    }


async def explain_searches(
    url: str, tenants: dict[str, tuple[uuid.UUID, list[str], list[str]]], seed: int
) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE, BUFFERS) of each search shape on each tenant, for a few sampled
    values; planned as the server plans searches (plan_cache_mode=force_custom_plan)."""
    out: list[dict[str, Any]] = []
    conn = await asyncpg.connect(url, server_settings={"plan_cache_mode": "force_custom_plan"})
    try:
        for label, (tenant_id, families, patient_ids) in tenants.items():
            rng = random.Random(seed)
            for op in SEARCHES:
                pool = families if op == "search-family" else patient_ids
                values = rng.sample(pool, min(EXPLAIN_SAMPLES, len(pool)))
                if op == "search-family":
                    # A prefix of a surname, as a user types it: the common-name case
                    # (hundreds of matches in the big tenant), where a walk of the
                    # primary key looks cheapest to the planner.
                    values.append(values[0][:-2])
                for value in values:
                    for shape, (sql, args) in statements(tenant_id, op, value).items():
                        raw = await conn.fetchval(
                            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args
                        )
                        plan = orjson.loads(raw)[0]
                        entry = {"tenant": label, "op": op, "shape": shape, "value": value}
                        out.append(entry | describe_plan(plan, indexed=True))
    finally:
        await conn.close()
    return out


async def table_state(url: str) -> dict[str, Any]:
    """How current the planner's statistics are once the load ended, and the sizes."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            """SELECT relname, n_live_tup, n_mod_since_analyze,
                 greatest(last_analyze, last_autoanalyze) AS analyzed_at,
                 pg_total_relation_size(relid) AS bytes
               FROM pg_stat_user_tables
               WHERE relname = ANY($1::text[]) ORDER BY relname""",
            ["fhir_resource", "fhir_history", "fhir_date"],
        )
        size = await conn.fetchval("SELECT pg_database_size(current_database())")
    finally:
        await conn.close()
    return {
        "tables": {
            r["relname"]: {
                "live_rows": r["n_live_tup"],
                "modified_since_analyze": r["n_mod_since_analyze"],
                "analyzed_at": r["analyzed_at"].isoformat() if r["analyzed_at"] else None,
                "mib": round(r["bytes"] / 2**20),
            }
            for r in rows
        },
        "database_mib": round(size / 2**20),
    }


async def tenant_ids(url: str, names: Sequence[str]) -> dict[str, uuid.UUID]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT id, name FROM tenant WHERE name = ANY($1)", list(names))
    finally:
        await conn.close()
    return {r["name"]: r["id"] for r in rows}


# --------------------------------------------------------------------------- throughput


def specs_for(tenant: TenantLoad, rng: random.Random, bodies: Sequence[str]) -> dict[str, OpSpec]:
    ids = rng.sample(tenant.patient_ids, min(SAMPLED_VALUES, len(tenant.patient_ids)))
    quoted = [quote(i, safe="") for i in ids]
    families = [quote(f, safe="") for f in tenant.families]
    return {
        "read": OpSpec("read", "GET", f"{FHIR_PATH}/Patient/", "", quoted),
        "search-family": OpSpec(
            "search-family", "GET", f"{FHIR_PATH}/Patient?family=", "", families
        ),
        "search-appt": OpSpec(
            "search-appt",
            "GET",
            f"{FHIR_PATH}/Appointment?patient=Patient/",
            "&status=booked",
            quoted,
        ),
        "create": OpSpec("create", "POST", f"{FHIR_PATH}/Patient", "", list(bodies), True),
    }


def measure_op(
    wrk: str,
    tmp: Path,
    op: str,
    sides: Sequence[tuple[str, str, OpSpec]],
    base: str,
    args: argparse.Namespace,
) -> list[OpResult]:
    """`op` on each side (label, key, spec) in --rounds interleaved rounds, each side
    warmed up before its first (as bench_fhir's measure_op, for two tenants of one
    server)."""
    scripts = []
    for label, key, spec in sides:
        script = tmp / f"{op}-{label}.lua"
        script.write_text(render_lua(spec, base, key, args.seed))
        scripts.append(script)
    parts: list[list[OpResult]] = [[] for _ in sides]
    for n, seconds in enumerate(round_lengths(args.duration, args.rounds)):
        order = range(len(sides)) if n % 2 == 0 else reversed(range(len(sides)))
        for i in order:
            drive = {"threads": 1, "connections": args.connections}
            if not parts[i] and args.warmup:
                run_wrk(wrk, scripts[i], base, duration=args.warmup, **drive)
            result = to_result(op, run_wrk(wrk, scripts[i], base, duration=seconds, **drive))
            parts[i].append(result)
            log(
                f"{op} @ {sides[i][0]}: round {n + 1}/{args.rounds}, {seconds} s: "
                f"{result.requests_per_s:.1f} req/s, p50 {result.p50_ms:.2f} ms, "
                f"p99 {result.p99_ms:.2f} ms, {result.errors} errors"
            )
    return [combine(op, p) for p in parts]


async def sample_checks(base: str, tenant: TenantLoad) -> dict[str, Any]:
    """One family search and one Appointment search, to show what a page holds."""
    headers = {"Authorization": f"Bearer {tenant.key}", "Accept": FHIR_JSON}
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=60, headers=headers, trust_env=False) as client:
        for op in SEARCHES:
            value = tenant.families[0] if op == "search-family" else tenant.patient_ids[0]
            resource_type = "Patient" if op == "search-family" else "Appointment"
            url = f"{base}/{resource_type}?{urlencode(search_items(op, value))}"
            started = time.perf_counter()
            resp = await client.get(url)
            elapsed = time.perf_counter() - started
            if resp.status_code != 200:
                raise BenchError(f"{op} on {tenant.name}: HTTP {resp.status_code}: {resp.text}")
            body = resp.json()
            out[op] = {
                "entries": len(body.get("entry", [])),
                "total": body.get("total"),
                "ms": round(elapsed * 1000, 1),
            }
    return out


def share(big: OpResult, small: OpResult) -> dict[str, float | None]:
    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 3) if b > 0 else None

    return {
        "share": ratio(big.requests_per_s, small.requests_per_s),
        "p50_share": ratio(small.p50_ms, big.p50_ms),
        "p99_share": ratio(small.p99_ms, big.p99_ms),
    }


# --------------------------------------------------------------------------- run


def measure(args: argparse.Namespace, server: Server, wrk: str, tmp: Path) -> dict[str, Any]:
    base = f"http://{HOST}:{args.port}{FHIR_PATH}"
    url = database_url(args.pg_port, args.database)
    big_name = "scale-big"
    small_names = [f"scale-small-{i + 1:03d}" for i in range(args.tenants)]
    names = [big_name, *small_names]
    started = time.perf_counter()
    if args.reuse:
        keys = asyncio.run(reuse_tenants(url, names[:2]))
        names = names[:2]
    else:
        keys = asyncio.run(create_tenants(url, names))
        log(f"{len(names)} tenants created in {time.perf_counter() - started:.1f} s")
    tenants: list[TenantLoad] = []
    sizes = [args.resources] + [args.tenant_size] * (len(names) - 1)
    for name, key, size in zip(names, keys, sizes, strict=True):
        patients, appointments = split(size)
        families = families_for(patients, args.family_size)
        tenants.append(TenantLoad(name, key, patients, appointments, families))
    big, small = tenants[0], tenants[1]

    load: dict[str, Any] = {"reused": args.reuse}
    for resource_type in () if args.reuse else ("Patient", "Appointment"):
        jobs = interleaved(tenants, resource_type, args.bundle_size)
        count = sum(j.count for j in jobs)
        log(
            f"loading {count:,} {resource_type}s in {len(jobs):,} transaction Bundles "
            f"(<= {args.bundle_size}, {args.load_concurrency} in flight) into {len(tenants)} "
            "tenants"
        )
        seconds = asyncio.run(load_phase(base, tenants, jobs, args.load_concurrency, args.seed))
        load[resource_type] = {
            "count": count,
            "bundles": len(jobs),
            "seconds": round(seconds, 1),
            "per_second": round(count / seconds),
        }
        log(f"{resource_type}s: {seconds:.1f} s ({count / seconds:,.0f}/s)")
    load["seconds"] = round(
        sum(load[t]["seconds"] for t in ("Patient", "Appointment") if t in load), 1
    )
    load["resources"] = sum(t.resources for t in tenants)
    if args.reuse:
        found = asyncio.run(loaded_patient_ids(url, [t.name for t in tenants]))
        for tenant in tenants:
            tenant.patient_ids = found[tenant.name]
            if len(tenant.patient_ids) != tenant.patients:
                raise BenchError(
                    f"--reuse: {tenant.name} holds {len(tenant.patient_ids)} loaded Patients, "
                    f"not the {tenant.patients} these sizes make: pass the kept run's sizes"
                )
    server.check_alive()
    state = asyncio.run(table_state(url))
    for table, s in state["tables"].items():
        log(
            f"{table}: {s['live_rows']:,} rows, {s['modified_since_analyze']:,} modified since "
            f"its last ANALYZE ({s['analyzed_at']}), {s['mib']:,} MiB"
        )

    checks = {
        "big": asyncio.run(sample_checks(base, big)),
        "small": asyncio.run(sample_checks(base, small)),
    }
    ids = asyncio.run(tenant_ids(url, [big.name, small.name]))
    explain_input = {
        "small": (ids[small.name], small.families, small.patient_ids),
        "big": (ids[big.name], big.families, big.patient_ids),
    }
    plans = asyncio.run(explain_searches(url, explain_input, args.seed))
    for p in plans:
        log(
            f"plan {p['tenant']:>5} {p['op']} {p['shape']}: {p['chain']} [{p['index']}] "
            f"{p['execution_ms']} ms, {p['shared_hit']} hit / {p['shared_read']} read"
            + (f" — FLAGGED: {', '.join(p['flags'])}" if p["flags"] else "")
        )

    bodies_rng = random.Random(args.seed + 1)
    bodies = {
        label: [
            make_create_body(bodies_rng, f"{label}-create", i).decode()
            for i in range(CREATE_BODIES)
        ]
        for label in ("small", "big")
    }
    rng = random.Random(args.seed + 2)
    specs = {
        "small": specs_for(small, rng, bodies["small"]),
        "big": specs_for(big, rng, bodies["big"]),
    }
    results: dict[str, dict[str, Any]] = {}
    for op in args.ops:
        sides = [("small", small.key, specs["small"][op]), ("big", big.key, specs["big"][op])]
        ten, large = measure_op(wrk, tmp, op, sides, base, args)
        server.check_alive()
        shares = share(large, ten)
        ratio = shares["share"]
        results[op] = {
            "small": asdict(ten),
            "big": asdict(large),
            **shares,
            "meets_goal": ratio is not None
            and ratio >= GOAL_SHARE
            and not ten.flagged
            and not large.flagged,
        }
    return {
        "sizes": {
            "big": {
                "resources": big.resources,
                "patients": big.patients,
                "families": len(big.families),
            },
            "small": {
                "tenants": args.tenants,
                "resources": small.resources,
                "patients": small.patients,
                "families": len(small.families),
            },
        },
        "load": load,
        "statistics": state,
        "sample_pages": checks,
        "plans": plans,
        "ops": results,
    }


def print_table(report: dict[str, Any]) -> None:
    m = report["measured"]
    print(
        f"\nbig tenant: {m['sizes']['big']['resources']:,} resources; "
        f"{m['sizes']['small']['tenants']} tenants of {m['sizes']['small']['resources']:,}; "
        f"loaded in {m['load']['seconds']:.0f} s"
    )
    print("\nplans (EXPLAIN (ANALYZE, BUFFERS)):")
    for p in m["plans"]:
        flag = f"  ✗ {', '.join(p['flags'])}" if p["flags"] else "  ✓"
        print(
            f"  {p['tenant']:>5}  {p['op']:<13} {p['shape']:<18} {p['top_node']:<8} "
            f"{p['chain']:<55} index {p['index']}  {p['execution_ms']:>8.2f} ms{flag}"
        )
    small = f"{m['sizes']['small']['resources'] // 1000}k"
    big = f"{m['sizes']['big']['resources'] // 1000}k"
    print(
        f"\noperation       {small + ' req/s (p50/p99 ms)':<28} "
        f"{big + ' req/s (p50/p99 ms)':<27} share  ok"
    )
    for op, r in m["ops"].items():
        a, b = r["small"], r["big"]
        share_text = f"{r['share'] * 100:.0f}%" if r["share"] is not None else "-"
        print(
            f"{op:<15} {a['requests_per_s']:>8.0f} ({a['p50_ms']:.1f}/{a['p99_ms']:.1f})"
            f"{'':<8} {b['requests_per_s']:>8.0f} ({b['p50_ms']:.1f}/{b['p99_ms']:.1f})"
            f"{'':<8} {share_text:>5}  {mark(r['meets_goal'])}"
        )


def summary(report: dict[str, Any], error: str | None) -> str:
    if error is not None:
        return f"bench_scale: failed — {error}"
    m = report["measured"]
    parts = [
        f"{op} {figure(r['big']['requests_per_s'])} req/s at "
        f"{m['sizes']['big']['resources']:,} = "
        + (f"{r['share'] * 100:.0f}%" if r["share"] is not None else "-")
        + f" of {figure(r['small']['requests_per_s'])} at "
        f"{m['sizes']['small']['resources']:,}"
        for op, r in m["ops"].items()
    ]
    flagged = sum(1 for p in m["plans"] if p["flags"])
    met = sum(1 for r in m["ops"].values() if r["meets_goal"])
    return (
        (
            f"bench_scale: reused {m['load']['resources']:,} loaded resources; "
            if m["load"]["reused"]
            else f"bench_scale: loaded {m['load']['resources']:,} resources in "
            f"{m['load']['seconds']:.0f} s; "
        )
        + ", ".join(parts)
        + f"; {met} of {len(m['ops'])} within 25%; {flagged} plan(s) flagged"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="One big tenant beside many 10k tenants: read, search and create at "
        "scale against the same at 10k, with the search plans.",
        epilog="Example: python scripts/bench_scale.py --quick --resources 20000 --tenants 2",
    )
    add_scratch_arguments(parser, "understudy_bench_scale", 0)
    parser.add_argument("--resources", type=int, help="resources in the big tenant (1,000,000)")
    parser.add_argument("--tenants", type=int, help="tenants beside it (100)")
    parser.add_argument("--tenant-size", type=int, help="resources in each of them (10,000)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smaller defaults: {QUICK['resources']:,} resources beside {QUICK['tenants']} "
        f"tenants of {QUICK['tenant_size']:,} (flags still override)",
    )
    parser.add_argument(
        "--family-size", type=int, default=20, help="Patients per family name on average (20)"
    )
    parser.add_argument("--bundle-size", type=int, default=500, help="entries a Bundle (500)")
    parser.add_argument(
        "--load-concurrency", type=int, default=4, help="Bundles in flight at once (4)"
    )
    parser.add_argument(
        "--duration", type=int, default=15, help="seconds per operation per tenant (15)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (8)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds (1; 0: none)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"operations ({','.join(OPS)})")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the scratch database a --keep run left (same sizes and seed) without "
        "loading it again",
    )
    args = parser.parse_args(argv)
    check_scratch_arguments(parser, args)
    full = {"resources": 1_000_000, "tenants": 100, "tenant_size": 10_000}
    for name, value in (QUICK if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    if not args.ops or any(op not in OPS for op in args.ops):
        parser.error(f"--ops: choose from {','.join(OPS)}")
    limits = {
        "--resources": (args.resources, 3, 5_000_000),
        "--tenants": (args.tenants, 1, 1_000),
        "--tenant-size": (args.tenant_size, 3, 1_000_000),
        "--family-size": (args.family_size, 1, 10_000),
        "--bundle-size": (args.bundle_size, 1, 1_000),
        "--load-concurrency": (args.load_concurrency, 1, 16),
        "--duration": (args.duration, 1, 600),
        "--rounds": (args.rounds, 1, 20),
        "--connections": (args.connections, 1, 256),
        "--warmup": (args.warmup, 0, 60),
    }
    for flag, (value, low, high) in limits.items():
        if not low <= value <= high:
            parser.error(f"{flag} must be between {low} and {high}")
    if args.duration < args.rounds:
        parser.error("--duration must be at least --rounds (whole seconds per round)")
    return args


@contextlib.contextmanager
def serving(args: argparse.Namespace, queue: str, command: list[str]) -> Iterator[Server]:
    """The server on a fresh scratch database, or with --reuse on the kept one (cleaned up
    alike afterwards: Redis, and the database dropped unless --keep)."""
    if not args.reuse:
        with scratch_server(args, queue, "bench_scale_", command) as server:
            yield server
        return
    try:
        with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
            env = server_env(args, Path(tmp) / "data", queue)
            server = Server(command, env, Path(tmp) / "server.log")
            try:
                server.start(args.port, args.start_timeout)
                yield server
            finally:
                stop_all([server], args.stop_timeout)
    finally:
        clean_up(args, queue)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        log("wrk is not installed (Debian package `wrk`): apt-get install -y wrk")
        return 2
    exe = check_services(args)
    if exe is None:
        return 2
    command = [exe, "serve", "--dev", "--port", str(args.port)]
    queue = f"bench-scale-{uuid.uuid4().hex[:8]}"
    report: dict[str, Any] = {
        "command": command,
        "database": args.database,
        "config": {
            k: getattr(args, k)
            for k in (
                "resources",
                "tenants",
                "tenant_size",
                "family_size",
                "bundle_size",
                "load_concurrency",
                "duration",
                "rounds",
                "connections",
                "ops",
                "seed",
            )
        },
    }

    def serve_and_measure() -> None:
        with serving(args, queue, command) as server:
            log(f"server pid {server.pid} ready in {server.ready_s:.1f} s")
            with tempfile.TemporaryDirectory(prefix="bench_scale_lua_") as tmp:
                report["measured"] = measure(args, server, wrk, Path(tmp))

    code = run_report(report, args.json_out, serve_and_measure, print_table, summary)
    if code == 0:
        m = report["measured"]
        if any(p["flags"] for p in m["plans"]) or not all(
            r["meets_goal"] for r in m["ops"].values()
        ):
            return 3
    return code


if __name__ == "__main__":
    sys.exit(main())
