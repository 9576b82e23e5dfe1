#!/usr/bin/env python3
"""Load and throughput benchmark for any FHIR R4 server on this machine.

Usage:
    scripts/bench_fhir.py BASE [KEY] [--pid PID] [--duration 40] [--rounds 4]
        [--connections 8] [--patients 10000] [--appointments 20000] [--bundle-size N]
        [--ops read,search-family,search-appt,create] [--json-out FILE]
        [--no-ceiling] [--ceiling-port PORT] [--ceiling-database NAME] [--pg-port 5432]

    scripts/bench_fhir.py http://127.0.0.1:8000/api/fhir/r4 "$KEY" --pid "$SERVER_PID"
    scripts/bench_fhir.py http://127.0.0.1:8080/fhir          # another server, no auth

BASE is a FHIR R4 base URL; KEY, when given, is sent as `Authorization: Bearer KEY`
(without it no Authorization header is sent). Only loopback hosts are accepted: this
is a load generator and it sends its traffic to this machine only.

What it does:
1. Load: POSTs transaction Bundles to BASE (a few in flight at once): first
   --patients Patients (names drawn from ~500 family x ~200 given names, so a
   family search matches a handful to a few dozen), then --appointments Appointments
   referencing those Patients by the ids read from each `transaction-response`
   entry's `response.location`. Each phase is timed separately.
2. Checks one request of each operation and warns about non-2xx answers or empty
   searches, then drives `wrk` (Debian package `wrk`) with a generated Lua script
   per operation: a ~1 s warm-up call (not reported), then --duration seconds with
   --connections connections. The Lua script pre-builds a few thousand request
   strings from values (ids, family names, bodies) written into it, counts every
   non-2xx answer per status code and prints one machine-readable line at done().
3. The ceiling (unless --no-ceiling): before loading, it starts the reference app
   scripts/reference_fhir_app.py (Understudy's FHIR store on plain Starlette routes
   under uvicorn, in a subprocess, in the scratch database --ceiling-database on the
   local PostgreSQL --pg-port: the same SQL, validation, history, plan caching,
   statistics upkeep and GC settings, without auth, tenancy, trace or usage; its
   docstring lists what it keeps and skips), loads the same Patients and Appointments
   into it, checks that it answers the sampled requests as BASE did (statuses, entries,
   totals; a difference is warned about and makes the exit status 3), and measures
   each operation on both in --rounds interleaved rounds (A B, B A, A B, ...; each
   side warmed up before its first). The machine's speed swings from day to day and
   within a sitting, so only these same-run ratios mean anything: each of BASE's
   figures is given as a share of the ceiling's (req/s: ours / ceiling; p50 and p99:
   ceiling / ours, so 100% is as fast as the ceiling), judged against CEILING_GOALS on
   the req/s share (create also by its p99); the reference app is stopped and its
   database dropped at the end.
4. Prints a text table (requests/s, p50/p90/p99 ms, errors, goal and whether it is
   met; then ours vs the ceiling with the three shares, each round's req/s share and
   the goal) and the same figures as JSON on stdout (and in --json-out FILE), then a
   one-line summary last (with the shares, the verdict on the ceiling goals when it
   ran). Over rounds, req/s counts every request of every round; p50/p90/p99 are the
   median round's. With --pid, the server process's peak memory (VmHWM) and RSS after
   the run, also summed over its child processes.

It talks to BASE (and its own reference app) only and keeps nothing of its own in
Redis or elsewhere (what the server does with its writes is the server's; the data it
loaded stays there).

Operations: read (GET Patient/{id}), search-family (GET Patient?family=...),
search-appt (GET Appointment?patient=Patient/{id}&status=booked), create
(POST Patient). An operation with more than 1% failed requests is flagged.

Exit status: 0 done; 1 the server (or the reference app) failed (unreachable, load
rejected); 2 usage error or wrk missing; 3 done, but an operation was flagged for
errors or the ceiling answered a sampled request differently.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import ipaddress
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import orjson
from benchkit import (
    HOST,
    BenchError,
    Process,
    database_url,
    descendants,
    drop_database,
    emit,
    figure,
    free_port,
    log,
    mark,
    port_answers,
    proc_status_kb,
    recreate_database,
    verdict,
)

FHIR_JSON = "application/fhir+json"
MRN_SYSTEM = "urn:bench:mrn"
# A practitioner without a Schedule: the canonical ones (Dr. Chen) have one, and the
# scheduling rules refuse a booked Appointment in the past or off their free Slots.
PRACTITIONER_REF = "Practitioner/bench-practitioner"
CREATE_FAMILY = "Benchcreated"  # not a prefix of / prefixed by any loaded family name
OPS = ("read", "search-family", "search-appt", "create")
REQUESTS_PER_SCRIPT = 4096  # request strings pre-built per wrk thread, cycled through
CREATE_BODIES = 1000
FLAG_ERROR_RATE = 0.01
LOAD_TIMEOUT_S = 300.0  # per transaction bundle
WRK_TIMEOUT_S = 5  # wrk's per-request timeout; slower answers count as socket errors

# --------------------------------------------------------------------------- names


def _words(text: str) -> list[str]:
    return text.split()


_FAMILY_PREFIXES = _words(
    "Ash Black Brad Brook Cald Clay Cole Dal Den East Fair Glen Green Hal Hart Hay "
    "Kings Lang Mar Mill North Oak Pen Red Stan Thorn West Whit"
)
_FAMILY_SUFFIXES = _words(
    "ford wood ton ley field man well by more worth ridge brook son ham stead wick "
    "hurst dale croft gate"
)

_FEMALE_GIVEN = _words(
    "Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica Sarah Karen Lisa Nancy "
    "Betty Sandra Margaret Ashley Kimberly Emily Donna Michelle Carol Amanda Melissa Deborah "
    "Stephanie Dorothy Rebecca Sharon Laura Cynthia Amy Kathleen Angela Shirley Brenda Emma "
    "Anna Pamela Nicole Samantha Katherine Christine Helen Debra Rachel Carolyn Janet Maria "
    "Catherine Heather Diane Olivia Julie Joyce Victoria Ruth Virginia Lauren Kelly Christina "
    "Joan Evelyn Judith Andrea Hannah Megan Cheryl Jacqueline Martha Madison Teresa Gloria "
    "Sara Janice Ann Kathryn Abigail Sophia Frances Jean Alice Judy Isabella Julia Grace "
    "Amber Denise Danielle Marilyn Beverly Charlotte Natalie Theresa Diana Brittany Doris "
    "Kayla Alexis Lori Marie Rose Ingrid Priya Mei Fatima Aisha"
)
_MALE_GIVEN = _words(
    "James Robert John Michael David William Richard Joseph Thomas Christopher Charles "
    "Daniel Matthew Anthony Mark Donald Steven Andrew Paul Joshua Kenneth Kevin Brian George "
    "Timothy Ronald Jason Edward Jeffrey Ryan Jacob Gary Nicholas Eric Jonathan Stephen "
    "Larry Justin Scott Brandon Benjamin Samuel Gregory Alexander Patrick Frank Raymond Jack "
    "Dennis Jerry Tyler Aaron Jose Adam Nathan Henry Zachary Douglas Peter Kyle Noah Ethan "
    "Jeremy Walter Christian Keith Roger Terry Austin Sean Gerald Carl Harold Dylan Arthur "
    "Lawrence Jordan Jesse Bryan Billy Bruce Gabriel Joe Logan Albert Willie Alan Eugene "
    "Russell Vincent Philip Bobby Johnny Bradley Roy Ralph Louis Randy Wayne Howard Omar "
    "Ravi Wei Hiroshi Mateo"
)


def family_names(count: int = 500) -> list[str]:
    """`count` surname-like names, none a prefix of another (FHIR string search is
    a case-insensitive prefix match, so this keeps each family search exact)."""
    combos = sorted(
        {p + s for p in _FAMILY_PREFIXES for s in _FAMILY_SUFFIXES},
        key=lambda n: (len(n), n),
    )
    chosen: list[str] = []
    for name in combos:
        low = name.lower()
        if any(low.startswith(c.lower()) or c.lower().startswith(low) for c in chosen):
            continue
        chosen.append(name)
    random.Random(7).shuffle(chosen)
    return chosen[:count]


@cache
def given_names() -> tuple[list[str], list[str]]:
    female = list(dict.fromkeys(_FEMALE_GIVEN))[:100]
    male = list(dict.fromkeys(_MALE_GIVEN))[:100]
    return female, male


# --------------------------------------------------------------------------- data


def make_patient(rng: random.Random, run_tag: str, index: int, families: Sequence[str]) -> Any:
    female, male = given_names()
    roll = rng.random()
    gender = "female" if roll < 0.495 else "male" if roll < 0.99 else "unknown"
    pool = female if gender == "female" else male if gender == "male" else female + male
    given = [rng.choice(pool)]
    if rng.random() < 0.3:
        given.append(rng.choice(pool))
    birth = date(1930, 1, 1) + timedelta(days=rng.randrange(0, 365 * 94))
    return {
        "resourceType": "Patient",
        "identifier": [{"system": MRN_SYSTEM, "value": f"{run_tag}-{index:06d}"}],
        "active": True,
        "name": [{"use": "official", "family": rng.choice(families), "given": given}],
        "telecom": [
            {
                "system": "phone",
                "value": f"555-{rng.randrange(100, 1000)}-{rng.randrange(0, 10000):04d}",
                "use": "home",
            }
        ],
        "gender": gender,
        "birthDate": birth.isoformat(),
    }


_APPT_STATUSES = (("booked", 0.80), ("fulfilled", 0.10), ("cancelled", 0.06), ("noshow", 0.04))
_APPT_TYPES = ("ROUTINE", "FOLLOWUP", "CHECKUP", "WALKIN")


def make_appointment(rng: random.Random, patient_id: str) -> Any:
    roll, status = rng.random(), "booked"
    for name, weight in _APPT_STATUSES:
        if roll < weight:
            status = name
            break
        roll -= weight
    day = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(0, 3 * 365))
    start = day + timedelta(hours=rng.randrange(8, 17), minutes=rng.choice((0, 15, 30, 45)))
    minutes = rng.choice((15, 20, 30, 30, 45, 60))
    appt_type = rng.choice(_APPT_TYPES)
    return {
        "resourceType": "Appointment",
        "status": status,
        "appointmentType": {
            "coding": [
                {"system": "http://terminology.hl7.org/CodeSystem/v2-0276", "code": appt_type}
            ]
        },
        "description": f"{appt_type.title()} visit",
        "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "end": (start + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "minutesDuration": minutes,
        "participant": [
            {"actor": {"reference": f"Patient/{patient_id}"}, "status": "accepted"},
            {"actor": {"reference": PRACTITIONER_REF}, "status": "accepted"},
        ],
    }


def make_create_body(rng: random.Random, run_tag: str, index: int) -> bytes:
    female, male = given_names()
    gender = rng.choice(("female", "male"))
    return orjson.dumps(
        {
            "resourceType": "Patient",
            "identifier": [{"system": MRN_SYSTEM, "value": f"{run_tag}-c{index:05d}"}],
            "name": [
                {
                    "family": CREATE_FAMILY,
                    "given": [rng.choice(female if gender == "female" else male)],
                }
            ],
            "gender": gender,
            "birthDate": (
                date(1940, 1, 1) + timedelta(days=rng.randrange(0, 365 * 80))
            ).isoformat(),
        }
    )


# --------------------------------------------------------------------------- helpers


def ensure_loopback(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(f"BASE must be an http(s) URL, got {url!r}")
    host = parts.hostname
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, parts.port or 80, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise BenchError(f"cannot resolve {host!r}: {exc}") from exc
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses or not all(a.is_loopback for a in addresses):
        raise BenchError(
            f"{host!r} is not a loopback address: this benchmark only targets servers "
            "on this machine (127.0.0.0/8, ::1, localhost)"
        )


def request_headers(key: str | None, *, body: bool = False) -> dict[str, str]:
    headers = {"Accept": FHIR_JSON}
    if body:
        headers["Content-Type"] = FHIR_JSON
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def id_from_location(location: str, resource_type: str) -> str | None:
    """'Patient/123/_history/1' (relative or absolute) -> '123'."""
    parts = [p for p in location.split("?", 1)[0].split("/") if p]
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == resource_type and parts[i + 1] != "_history":
            return parts[i + 1]
    return None


def snippet(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------- load


@dataclass
class LoadPhase:
    resource_type: str
    count: int
    seconds: float
    per_second: float
    bundles: int


def build_bundle(resources: Sequence[Any], resource_type: str) -> bytes:
    return orjson.dumps(
        {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {
                    "fullUrl": f"urn:uuid:{uuid.uuid4()}",
                    "resource": resource,
                    "request": {"method": "POST", "url": resource_type},
                }
                for resource in resources
            ],
        }
    )


def parse_transaction_response(
    resp: httpx.Response, expected: int, resource_type: str, index: int
) -> list[str]:
    where = f"{resource_type} bundle #{index + 1}"
    if not resp.is_success:
        raise BenchError(f"{where}: HTTP {resp.status_code}: {snippet(resp.text)}")
    try:
        body = orjson.loads(resp.content)
    except orjson.JSONDecodeError as exc:
        raise BenchError(f"{where}: response is not JSON: {snippet(resp.text)}") from exc
    if not isinstance(body, dict) or body.get("resourceType") != "Bundle":
        raise BenchError(f"{where}: response is not a Bundle: {snippet(resp.text)}")
    if body.get("type") != "transaction-response":
        log(f"warning: {where}: Bundle.type is {body.get('type')!r}, not transaction-response")
    entries = body.get("entry")
    if not isinstance(entries, list) or len(entries) != expected:
        got = len(entries) if isinstance(entries, list) else 0
        raise BenchError(f"{where}: expected {expected} response entries, got {got}")
    ids: list[str] = []
    for n, entry in enumerate(entries):
        response = entry.get("response") if isinstance(entry, dict) else None
        status = str(response.get("status", "")) if isinstance(response, dict) else ""
        if status and not status.startswith("2"):
            raise BenchError(f"{where}: entry {n} has status {status!r}")
        found: str | None = None
        location = response.get("location") if isinstance(response, dict) else None
        if isinstance(location, str):
            found = id_from_location(location, resource_type)
        if found is None and isinstance(entry, dict):
            resource = entry.get("resource")
            if isinstance(resource, dict) and isinstance(resource.get("id"), str):
                found = resource["id"]
        if found is None:
            raise BenchError(f"{where}: entry {n} has no usable response.location")
        ids.append(found)
    return ids


async def load_resources(
    base: str,
    key: str | None,
    resource_type: str,
    resources: Sequence[Any],
    bundle_size: int,
    concurrency: int,
) -> tuple[list[str], LoadPhase]:
    chunks = [resources[i : i + bundle_size] for i in range(0, len(resources), bundle_size)]
    bodies = [build_bundle(chunk, resource_type) for chunk in chunks]
    largest = max((len(b) for b in bodies), default=0)
    log(
        f"loading {len(resources)} {resource_type} in {len(bodies)} transaction bundles "
        f"(<= {bundle_size} entries, largest {largest / 1024:.0f} KiB, {concurrency} in flight)"
    )
    results: list[list[str]] = [[] for _ in bodies]
    done = 0
    semaphore = asyncio.Semaphore(concurrency)
    headers = request_headers(key, body=True)
    timeout = httpx.Timeout(LOAD_TIMEOUT_S, connect=10.0)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers) as client:

        async def post(index: int) -> None:
            nonlocal done
            async with semaphore:
                try:
                    resp = await client.post(base, content=bodies[index])
                except httpx.HTTPError as exc:
                    raise BenchError(f"{resource_type} bundle #{index + 1}: {exc!r}") from exc
            results[index] = parse_transaction_response(
                resp, len(chunks[index]), resource_type, index
            )
            done += len(chunks[index])
            if len(bodies) > 1:
                log(f"  {resource_type}: {done}/{len(resources)}")

        started = time.perf_counter()
        try:
            async with asyncio.TaskGroup() as group:
                for index in range(len(bodies)):
                    group.create_task(post(index))
        except* BenchError as failures:
            raise failures.exceptions[0] from None
        seconds = time.perf_counter() - started

    ids = [rid for chunk_ids in results for rid in chunk_ids]
    phase = LoadPhase(
        resource_type=resource_type,
        count=len(ids),
        seconds=round(seconds, 3),
        per_second=round(len(ids) / seconds, 1) if seconds > 0 else 0.0,
        bundles=len(bodies),
    )
    return ids, phase


# --------------------------------------------------------------------------- wrk + Lua

LUA_TEMPLATE = r"""-- Generated by scripts/bench_fhir.py for operation "@@OP@@"; do not edit.
-- Pre-builds request strings from the values below in init() and cycles through
-- them; counts answers per status code; done() prints one BENCH_RESULT JSON line.
local method = @@METHOD@@
local path_prefix = @@PATH_PREFIX@@
local path_suffix = @@PATH_SUFFIX@@
local value_is_body = @@VALUE_IS_BODY@@
local host_header = @@HOST@@
local authorization = @@AUTHORIZATION@@
local content_type = @@CONTENT_TYPE@@
local n_requests = @@N_REQUESTS@@
local seed = @@SEED@@
local values_blob = @@VALUES@@

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("thread_index", #threads)
end

non2xx = 0
status_counts = {}
local prepared = {}
local n_prepared = 0
local cursor = 0

function init(args)
  local values = {}
  for v in string.gmatch(values_blob, "[^\n]+") do
    values[#values + 1] = v
  end
  if #values == 0 then
    error("bench script has no values")
  end
  math.randomseed(seed + 7919 * (thread_index or 1))
  for i = 1, n_requests do
    local v = values[math.random(#values)]
    local headers = { ["Host"] = host_header, ["Accept"] = "application/fhir+json" }
    if authorization then
      headers["Authorization"] = authorization
    end
    local path, body
    if value_is_body then
      path = path_prefix .. path_suffix
      body = v
      headers["Content-Type"] = content_type
    else
      path = path_prefix .. v .. path_suffix
    end
    prepared[i] = wrk.format(method, path, headers, body)
  end
  n_prepared = n_requests
end

function request()
  cursor = cursor + 1
  if cursor > n_prepared then
    cursor = 1
  end
  return prepared[cursor]
end

function response(status, headers, body)
  status_counts[status] = (status_counts[status] or 0) + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  local merged = {}
  for _, t in ipairs(threads) do
    bad = bad + (t:get("non2xx") or 0)
    local counts = t:get("status_counts")
    if counts then
      for code, n in pairs(counts) do
        merged[code] = (merged[code] or 0) + n
      end
    end
  end
  local parts = {}
  for code, n in pairs(merged) do
    parts[#parts + 1] = string.format('"%.0f":%.0f', code, n)
  end
  local e = summary.errors
  local lmin = 0
  if summary.requests > 0 then
    lmin = latency.min
  end
  io.write(string.format(
    'BENCH_RESULT {"requests":%.0f,"duration_us":%.0f,"bytes":%.0f,"non2xx":%.0f,' ..
    '"errors":{"connect":%.0f,"read":%.0f,"write":%.0f,"timeout":%.0f,"status":%.0f},' ..
    '"latency_us":{"min":%.0f,"mean":%.1f,"max":%.0f,"stdev":%.1f,' ..
    '"p50":%.0f,"p75":%.0f,"p90":%.0f,"p99":%.0f,"p999":%.0f},"statuses":{%s}}\n',
    summary.requests, summary.duration, summary.bytes, bad,
    e.connect, e.read, e.write, e.timeout, e.status,
    lmin, latency.mean, latency.max, latency.stdev,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), table.concat(parts, ",")))
end
"""


def lua_string(value: str | None) -> str:
    """A Lua string literal (or nil) for `value`."""
    if value is None:
        return "nil"
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 32 <= code < 127:
            out.append(ch)
        else:
            out.extend(f"\\{byte}" for byte in ch.encode("utf-8"))
    out.append('"')
    return "".join(out)


def lua_long_string(value: str) -> str:
    level = 0
    while f"]{'=' * level}]" in value:
        level += 1
    eq = "=" * level
    return f"[{eq}[\n{value}]{eq}]"


@dataclass
class OpSpec:
    name: str
    method: str
    path_prefix: str
    path_suffix: str
    values: list[str]
    value_is_body: bool = False


def render_lua(spec: OpSpec, base: str, key: str | None, seed: int) -> str:
    parts = urlsplit(base)
    host = parts.netloc.rsplit("@", 1)[-1]
    for value in spec.values:
        if not value or "\n" in value or "\r" in value:
            raise BenchError(f"{spec.name}: unusable value {value!r}")
    replacements = {
        "@@OP@@": spec.name,
        "@@METHOD@@": lua_string(spec.method),
        "@@PATH_PREFIX@@": lua_string(spec.path_prefix),
        "@@PATH_SUFFIX@@": lua_string(spec.path_suffix),
        "@@VALUE_IS_BODY@@": "true" if spec.value_is_body else "false",
        "@@HOST@@": lua_string(host),
        "@@AUTHORIZATION@@": lua_string(f"Bearer {key}" if key else None),
        "@@CONTENT_TYPE@@": lua_string(FHIR_JSON if spec.value_is_body else None),
        "@@N_REQUESTS@@": str(REQUESTS_PER_SCRIPT),
        "@@SEED@@": str(seed),
    }
    text = LUA_TEMPLATE
    for token, replacement in replacements.items():
        text = text.replace(token, replacement)
    # Values last: they are data and must not be scanned for tokens.
    return text.replace("@@VALUES@@", lua_long_string("\n".join(spec.values) + "\n"))


def build_specs(
    base: str,
    patient_ids: Sequence[str],
    families: Sequence[str],
    create_bodies: Sequence[str],
) -> dict[str, OpSpec]:
    path = urlsplit(base).path.rstrip("/")
    ids = [quote(i, safe="") for i in patient_ids]
    return {
        "read": OpSpec("read", "GET", f"{path}/Patient/", "", ids),
        "search-family": OpSpec(
            "search-family",
            "GET",
            f"{path}/Patient?family=",
            "",
            [quote(f, safe="") for f in families],
        ),
        "search-appt": OpSpec(
            "search-appt", "GET", f"{path}/Appointment?patient=Patient/", "&status=booked", ids
        ),
        "create": OpSpec("create", "POST", f"{path}/Patient", "", list(create_bodies), True),
    }


@dataclass
class OpResult:
    name: str
    requests: int
    duration_s: float
    requests_per_s: float
    ok_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    non2xx: int
    socket_errors: dict[str, int]
    statuses: dict[str, int]
    errors: int
    error_rate: float
    flagged: bool
    goal: dict[str, float] | None = None
    meets_goal: bool | None = None
    # Each interleaved round's own figures: seconds, requests_per_s, p50_ms, p99_ms.
    rounds: list[dict[str, float]] = field(default_factory=list)


def run_wrk(
    wrk: str,
    script: Path,
    url: str,
    *,
    threads: int,
    connections: int,
    duration: int,
) -> dict[str, Any]:
    cmd = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration}s",
        "--latency",
        "--timeout",
        f"{WRK_TIMEOUT_S}s",
        "-s",
        str(script),
        url,
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=duration + WRK_TIMEOUT_S + 60, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"wrk did not finish in time: {' '.join(cmd)}") from exc
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            try:
                parsed = orjson.loads(line.removeprefix("BENCH_RESULT "))
            except orjson.JSONDecodeError as exc:
                raise BenchError(f"unreadable wrk result line: {line!r}") from exc
            if isinstance(parsed, dict):
                return parsed
    raise BenchError(
        f"wrk exited {proc.returncode} without a result line.\n"
        f"stdout: {snippet(proc.stdout, 2000)}\nstderr: {snippet(proc.stderr, 2000)}"
    )


def to_result(name: str, raw: dict[str, Any]) -> OpResult:
    lat = raw["latency_us"]
    sock = {k: int(raw["errors"][k]) for k in ("connect", "read", "write", "timeout")}
    requests = int(raw["requests"])
    duration_s = max(float(raw["duration_us"]) / 1e6, 1e-9)
    non2xx = int(raw["non2xx"])
    socket_total = sum(sock.values())
    attempts = requests + socket_total
    errors = non2xx + socket_total
    rate = errors / attempts if attempts else 1.0
    statuses = {str(k): int(v) for k, v in sorted(raw.get("statuses", {}).items())}
    return OpResult(
        name=name,
        requests=requests,
        duration_s=round(duration_s, 3),
        requests_per_s=round(requests / duration_s, 1),
        ok_per_s=round((requests - non2xx) / duration_s, 1),
        p50_ms=round(float(lat["p50"]) / 1000, 3),
        p90_ms=round(float(lat["p90"]) / 1000, 3),
        p99_ms=round(float(lat["p99"]) / 1000, 3),
        mean_ms=round(float(lat["mean"]) / 1000, 3),
        max_ms=round(float(lat["max"]) / 1000, 3),
        non2xx=non2xx,
        socket_errors=sock,
        statuses=statuses,
        errors=errors,
        error_rate=round(rate, 5),
        flagged=rate > FLAG_ERROR_RATE or requests == 0,
    )


def round_lengths(duration: int, rounds: int) -> list[int]:
    """`duration` seconds in `rounds` whole-second rounds, as even as they go."""
    each, extra = divmod(duration, rounds)
    return [each + (1 if i < extra else 0) for i in range(rounds)]


def combine(name: str, parts: Sequence[OpResult]) -> OpResult:
    """One operation's figure over its rounds: requests and errors summed (req/s over all
    of them), p50/p90/p99 the median round's (wrk gives percentiles, not histograms, so
    they cannot be merged exactly), the mean weighted by requests, the max the largest."""
    requests = sum(p.requests for p in parts)
    duration_s = max(sum(p.duration_s for p in parts), 1e-9)
    non2xx = sum(p.non2xx for p in parts)
    sock = {k: sum(p.socket_errors.get(k, 0) for p in parts) for k in parts[0].socket_errors}
    statuses: Counter[str] = Counter()
    for p in parts:
        statuses.update(p.statuses)
    attempts = requests + sum(sock.values())
    errors = non2xx + sum(sock.values())
    rate = errors / attempts if attempts else 1.0
    return OpResult(
        name=name,
        requests=requests,
        duration_s=round(duration_s, 3),
        requests_per_s=round(requests / duration_s, 1),
        ok_per_s=round((requests - non2xx) / duration_s, 1),
        p50_ms=round(statistics.median(p.p50_ms for p in parts), 3),
        p90_ms=round(statistics.median(p.p90_ms for p in parts), 3),
        p99_ms=round(statistics.median(p.p99_ms for p in parts), 3),
        mean_ms=round(sum(p.mean_ms * p.requests for p in parts) / max(requests, 1), 3),
        max_ms=max(p.max_ms for p in parts),
        non2xx=non2xx,
        socket_errors=sock,
        statuses=dict(sorted(statuses.items())),
        errors=errors,
        error_rate=round(rate, 5),
        flagged=rate > FLAG_ERROR_RATE or requests == 0,
        rounds=[
            {
                "seconds": p.duration_s,
                "requests_per_s": p.requests_per_s,
                "p50_ms": p.p50_ms,
                "p99_ms": p.p99_ms,
            }
            for p in parts
        ],
    )


# --------------------------------------------------------------------------- checks


async def preflight(
    base: str, key: str | None, specs: dict[str, OpSpec], ops: Sequence[str], samples: int = 5
) -> dict[str, Any]:
    """A few plain requests per operation: warn early about errors and empty searches."""
    report: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=30.0, headers=request_headers(key)) as client:
        root = urlsplit(base)
        origin = f"{root.scheme}://{root.netloc}"
        for op in ops:
            spec = specs[op]
            statuses: list[int] = []
            matches: list[int] = []
            totals: list[int] = []
            for value in random.Random(99).sample(spec.values, min(samples, len(spec.values))):
                try:
                    if spec.value_is_body:
                        # Creating is what the benchmark measures; one sample is enough.
                        if statuses:
                            break
                        resp = await client.post(
                            origin + spec.path_prefix + spec.path_suffix,
                            content=value.encode(),
                            headers={"Content-Type": FHIR_JSON},
                        )
                    else:
                        url = origin + spec.path_prefix + value + spec.path_suffix
                        resp = await client.get(url)
                except httpx.HTTPError as exc:
                    raise BenchError(f"{op}: sample request failed: {exc!r}") from exc
                statuses.append(resp.status_code)
                if resp.is_success and op.startswith("search"):
                    try:
                        body = orjson.loads(resp.content)
                    except orjson.JSONDecodeError:
                        body = None
                    entries = body.get("entry") if isinstance(body, dict) else None
                    matches.append(len(entries) if isinstance(entries, list) else 0)
                    total = body.get("total") if isinstance(body, dict) else None
                    totals.append(total if isinstance(total, int) else -1)
                elif not resp.is_success:
                    log(
                        f"warning: {op}: sample request got HTTP {resp.status_code}: "
                        f"{snippet(resp.text, 200)}"
                    )
            report[op] = {"statuses": statuses}
            if matches:
                report[op]["entries_per_page"] = matches
                report[op]["totals"] = totals
                if max(matches) == 0:
                    log(f"warning: {op}: sample searches returned no entries")
    return report


def compare_answers(ours: dict[str, Any], theirs: dict[str, Any], ops: Sequence[str]) -> list[str]:
    """Where the ceiling's sample answers differ from BASE's (the same requests: the same
    positions in id lists that are aligned, the same family names and create body): their
    statuses, entries per page and totals. A ceiling that answers differently does other
    work, and its shares mean nothing."""
    differences = []
    for op in ops:
        for key in ("statuses", "entries_per_page", "totals"):
            here, there = ours.get(op, {}).get(key), theirs.get(op, {}).get(key)
            if here != there:
                differences.append(f"{op}: {key} {here} from BASE, {there} from the ceiling")
    return differences


def read_metadata(base: str, key: str | None) -> dict[str, Any]:
    try:
        resp = httpx.get(base.rstrip("/") + "/metadata", headers=request_headers(key), timeout=30)
    except httpx.HTTPError as exc:
        raise BenchError(f"cannot reach {base}: {exc!r}") from exc
    info: dict[str, Any] = {"status": resp.status_code}
    if resp.is_success:
        try:
            body = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict):
            software = body.get("software")
            if isinstance(software, dict):
                info["software"] = " ".join(
                    str(software[k]) for k in ("name", "version") if k in software
                )
            info["fhirVersion"] = body.get("fhirVersion")
    else:
        log(f"warning: GET {base}/metadata answered HTTP {resp.status_code}")
    return info


# --------------------------------------------------------------------------- memory


def memory_report(pid: int) -> dict[str, Any]:
    main = proc_status_kb(pid)
    if not main:
        return {"pid": pid, "error": f"no /proc/{pid}/status (process gone or not local)"}
    kids = {child: proc_status_kb(child) for child in descendants(pid)}
    kids = {k: v for k, v in kids.items() if v}
    mb = 1024.0
    return {
        "pid": pid,
        "children": len(kids),
        "peak_mb": round(main.get("VmHWM", 0) / mb, 1),
        "rss_mb": round(main.get("VmRSS", 0) / mb, 1),
        "peak_mb_with_children": round(
            (main.get("VmHWM", 0) + sum(v.get("VmHWM", 0) for v in kids.values())) / mb, 1
        ),
        "rss_mb_with_children": round(
            (main.get("VmRSS", 0) + sum(v.get("VmRSS", 0) for v in kids.values())) / mb, 1
        ),
    }


# --------------------------------------------------------------------------- goals + output

GOALS: dict[str, dict[str, float]] = {
    "read": {"min_rps": 2000, "max_p99_ms": 10},
    "search-family": {"min_rps": 1000, "max_p99_ms": 20},
    "search-appt": {"min_rps": 1500, "max_p99_ms": 15},
    "create": {"min_rps": 600, "max_p99_ms": 25},
}
LOAD_GOAL_PATIENTS_PER_S = 1000.0  # 10k Patients in <= 10 s


def render_table(
    load: dict[str, LoadPhase], results: Sequence[OpResult], goals: bool, memory: Any
) -> str:
    lines: list[str] = []
    head = f"{'load':<14} {'resources':>9} {'seconds':>8} {'res/s':>9}"
    lines.append(head + ("  goal" if goals else ""))
    for label, phase in load.items():
        row = f"{label:<14} {phase.count:>9} {phase.seconds:>8.2f} {phase.per_second:>9.1f}"
        if goals and label == "patients":
            limit = phase.count / LOAD_GOAL_PATIENTS_PER_S
            row += f"  ≤ {limit:.1f} s {mark(phase.seconds <= limit)}"
        lines.append(row)
    lines.append("")
    head = (
        f"{'operation':<14} {'req/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'errors':>16}"
    )
    lines.append(head + ("  goal" if goals else ""))
    for r in results:
        err = f"{r.errors} ({r.error_rate * 100:.2f}%)"
        row = (
            f"{r.name:<14} {r.requests_per_s:>9.1f} {r.p50_ms:>8.2f} {r.p90_ms:>8.2f} "
            f"{r.p99_ms:>8.2f} {err:>16}"
        )
        if goals and r.goal is not None:
            rps_ok = r.requests_per_s >= r.goal["min_rps"]
            p99_ok = r.p99_ms <= r.goal["max_p99_ms"]
            row += (
                f"  ≥ {r.goal['min_rps']:.0f} req/s {mark(rps_ok)}"
                f"  p99 ≤ {r.goal['max_p99_ms']:.0f} ms {mark(p99_ok)}"
            )
        if r.flagged:
            row += "  FLAGGED: >1% failed"
        lines.append(row)
    flagged = [r for r in results if r.flagged]
    for r in flagged:
        lines.append(f"  {r.name}: statuses {r.statuses}, socket errors {r.socket_errors}")
    if isinstance(memory, dict) and "peak_mb" in memory:
        lines.append("")
        lines.append(
            f"server pid {memory['pid']}: peak (VmHWM) {memory['peak_mb']:.1f} MB, "
            f"RSS after run {memory['rss_mb']:.1f} MB"
            + (
                f"; with {memory['children']} child process(es): peak "
                f"{memory['peak_mb_with_children']:.1f} MB, RSS "
                f"{memory['rss_mb_with_children']:.1f} MB"
                if memory["children"]
                else ""
            )
        )
    elif isinstance(memory, dict):
        lines.append("")
        lines.append(f"server memory: {memory.get('error')}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- ceiling

# Our figures as shares of the reference app's, measured in the same run (issue 31: the
# fair ceiling, Understudy's own store on plain Starlette); a create is also held to a p99.
CEILING_GOALS: dict[str, float] = {
    "read": 0.80,
    "search-family": 0.80,
    "search-appt": 0.80,
    "create": 0.75,
}
CEILING_CREATE_P99_MS = 15.0
CEILING_APP = Path(__file__).resolve().parent / "reference_fhir_app.py"
CEILING_PATH = "/api/fhir/r4"  # Understudy's FHIR base path, so links and routes match


def start_ceiling(args: argparse.Namespace, log_path: Path) -> tuple[Process, str]:
    """The reference app (scripts/reference_fhir_app.py) under uvicorn on a scratch
    database, as `understudy serve` runs (uvloop, httptools, no access log); its base URL
    once /metadata answers."""
    port = args.ceiling_port or free_port()
    if port_answers(port):
        raise BenchError(f"port {port} for the reference app is in use; pick --ceiling-port")
    log(f"ceiling: scratch database {args.ceiling_database} (dropped and created)")
    recreate_database(args.pg_port, args.ceiling_database)
    env = dict(os.environ)
    root = str(CEILING_APP.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["REFERENCE_DATABASE_URL"] = database_url(args.pg_port, args.ceiling_database)
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        f"{CEILING_APP.stem}:app",
        "--app-dir",
        str(CEILING_APP.parent),
        "--host",
        HOST,
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    process = Process("reference app", command, env, log_path)
    process.spawn()
    base = f"http://{HOST}:{port}{CEILING_PATH}"
    deadline = time.perf_counter() + 60
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.perf_counter() < deadline:
            process.check_alive()
            try:
                if client.get(base + "/metadata").status_code == 200:
                    log(f"ceiling: reference app pid {process.pid} at {base}")
                    return process, base
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    process.stop(10)
    raise BenchError("the reference app did not answer /metadata within 60 s")


def with_patient(appointment: Any, patient_id: str) -> Any:
    """The same Appointment for another server's id of its Patient."""
    copy = orjson.loads(orjson.dumps(appointment))
    copy["participant"][0]["actor"]["reference"] = f"Patient/{patient_id}"
    return copy


def share(ours: OpResult, ceiling: OpResult | None) -> float | None:
    """Our requests/s as a share of the ceiling's."""
    if ceiling is None or ceiling.requests_per_s <= 0:
        return None
    return round(ours.requests_per_s / ceiling.requests_per_s, 3)


def latency_share(ours_ms: float, ceiling_ms: float) -> float | None:
    """A latency as a share of the ceiling's speed: the ceiling's over ours, so that, as
    for requests/s, 100% is as fast as the ceiling and less is slower."""
    if ours_ms <= 0 or ceiling_ms <= 0:
        return None
    return round(ceiling_ms / ours_ms, 3)


def shares_of(ours: OpResult, ceiling: OpResult | None) -> dict[str, Any]:
    """Our figures of one operation as shares of the ceiling's (requests/s, p50, p99),
    each round's requests/s share beside them, and the goal on the requests/s share."""
    ratio = share(ours, ceiling)
    shares: dict[str, Any] = {
        "share": ratio,
        "p50_share": None,
        "p99_share": None,
        "round_shares": [],
        "goal": CEILING_GOALS[ours.name],
        "goal_max_p99_ms": CEILING_CREATE_P99_MS if ours.name == "create" else None,
        "meets_goal": meets_ceiling_goal(ours, ratio),
    }
    if ceiling is not None:
        shares["p50_share"] = latency_share(ours.p50_ms, ceiling.p50_ms)
        shares["p99_share"] = latency_share(ours.p99_ms, ceiling.p99_ms)
        shares["round_shares"] = [
            round(a["requests_per_s"] / b["requests_per_s"], 3)
            for a, b in zip(ours.rounds, ceiling.rounds, strict=False)
            if b["requests_per_s"] > 0
        ]
    return shares


def meets_ceiling_goal(ours: OpResult, ratio: float | None) -> bool:
    if ratio is None or ours.flagged:
        return False
    if ours.name == "create" and ours.p99_ms > CEILING_CREATE_P99_MS:
        return False
    return ratio >= CEILING_GOALS[ours.name]


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def render_ceiling(results: Sequence[OpResult], ceiling: dict[str, OpResult]) -> str:
    rounds = max((len(r.rounds) for r in results), default=0)
    lines = [
        f"vs the ceiling, {rounds} interleaved round(s) per operation. Share: ours / "
        "ceiling for req/s, ceiling / ours for latency (100% = as fast as the ceiling); "
        "req/s over all rounds, p50 and p99 the median round's.",
        f"{'operation':<14} {'req/s':>8} {'ceiling':>8} {'share':>6} "
        f"{'p50 ms':>7} {'ceiling':>7} {'share':>6} {'p99 ms':>7} {'ceiling':>7} {'share':>6}"
        f"  {'by round':<16} goal",
    ]
    for r in results:
        c = ceiling.get(r.name)
        if c is None:
            continue
        shares = shares_of(r, c)
        goal = f"≥ {CEILING_GOALS[r.name] * 100:.0f}%"
        if r.name == "create":
            goal += f", p99 ≤ {CEILING_CREATE_P99_MS:.0f} ms"
        by_round = "/".join(f"{x * 100:.0f}" for x in shares["round_shares"]) + "%"
        lines.append(
            f"{r.name:<14} {r.requests_per_s:>8.1f} {c.requests_per_s:>8.1f} "
            f"{percent(shares['share']):>6} {r.p50_ms:>7.2f} {c.p50_ms:>7.2f} "
            f"{percent(shares['p50_share']):>6} {r.p99_ms:>7.2f} {c.p99_ms:>7.2f} "
            f"{percent(shares['p99_share']):>6}  {by_round:<16} {goal} "
            f"{mark(bool(shares['meets_goal']))}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Load a FHIR R4 server with Patients and Appointments, then measure "
        "read/search/create throughput and latency with wrk.",
        epilog="Example: scripts/bench_fhir.py http://127.0.0.1:8000/api/fhir/r4 KEY --pid 1234",
    )
    parser.add_argument("base", metavar="BASE", help="FHIR R4 base URL (loopback hosts only)")
    parser.add_argument(
        "key", metavar="KEY", nargs="?", default=None, help="API key, sent as a Bearer token"
    )
    parser.add_argument("--pid", type=int, help="server process id, to report its memory")
    parser.add_argument(
        "--duration",
        type=int,
        # 10 s rounds: with 5 s ones (15 s over 3) a share swung by ten points between two
        # sittings of the same code; in 10 s rounds a read's four shares read 71-73%.
        default=40,
        help="seconds per operation on each server, over all rounds (default 40)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="interleaved rounds per operation, BASE and the ceiling alternating (default 4)",
    )
    parser.add_argument(
        "--connections", type=int, default=8, help="concurrent connections (default 8)"
    )
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    parser.add_argument(
        "--patients", type=int, default=10_000, help="Patients to load (default 10000)"
    )
    parser.add_argument(
        "--appointments", type=int, default=20_000, help="Appointments to load (default 20000)"
    )
    parser.add_argument(
        "--bundle-size", type=int, default=500, help="entries per transaction Bundle (default 500)"
    )
    parser.add_argument(
        "--load-concurrency",
        type=int,
        default=4,
        help="transaction Bundles in flight at once (default 4)",
    )
    parser.add_argument(
        "--ops",
        default=",".join(OPS),
        help=f"comma-separated operations to measure (default {','.join(OPS)})",
    )
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds per op (0: none)")
    parser.add_argument("--seed", type=int, default=1, help="random seed for generated data")
    parser.add_argument("--json-out", type=Path, help="also write the JSON results here")
    parser.add_argument("--no-goals", action="store_true", help="do not compare with goals")
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="do not start the bare reference app (scripts/reference_fhir_app.py) to "
        "measure each operation against in the same run",
    )
    parser.add_argument(
        "--ceiling-port", type=int, default=0, help="port of the reference app (0: a free one)"
    )
    parser.add_argument(
        "--ceiling-database",
        default="bench_fhir_ceiling",
        help="scratch database of the reference app, dropped and created (bench_fhir_ceiling)",
    )
    parser.add_argument("--pg-port", type=int, default=5432, help="local PostgreSQL port (5432)")
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        parser.error(f"--ops: unknown {unknown}; choose from {','.join(OPS)}")
    args.ops = ops
    limits = {
        "--duration": (args.duration, 1, 3600),
        "--connections": (args.connections, 1, 10_000),
        "--threads": (args.threads, 1, 64),
        "--patients": (args.patients, 1, 1_000_000),
        "--appointments": (args.appointments, 0, 2_000_000),
        "--bundle-size": (args.bundle_size, 1, 10_000),
        "--load-concurrency": (args.load_concurrency, 1, 64),
        "--warmup": (args.warmup, 0, 60),
        "--rounds": (args.rounds, 1, 60),
    }
    for flag, (value, low, high) in limits.items():
        if not low <= value <= high:
            parser.error(f"{flag} must be between {low} and {high}")
    if args.connections < args.threads:
        parser.error("--connections must be at least --threads")
    if args.duration < args.rounds:
        parser.error("--duration must be at least --rounds (whole seconds per round)")
    name = args.ceiling_database
    if (
        not name.replace("_", "").isalnum()
        or not name[0].isalpha()
        or name
        in (
            "postgres",
            "understudy",
            "template0",
            "template1",
        )
    ):
        parser.error("--ceiling-database must be a scratch database name (letters, digits, _)")
    if not 0 <= args.ceiling_port <= 65535:
        parser.error("--ceiling-port must be 0..65535")
    return args


def run(args: argparse.Namespace) -> int:
    base: str = args.base.rstrip("/")
    key: str | None = args.key or None
    ensure_loopback(base)
    wrk = shutil.which("wrk")
    if wrk is None:
        log(
            "wrk is not installed (Debian package `wrk`). Install it with:\n"
            "    apt-get install -y wrk"
        )
        print("bench_fhir: not run — wrk is not installed", flush=True)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench_fhir_") as tmp:
        ceiling: Process | None = None
        try:
            if not args.no_ceiling:
                ceiling, ceiling_base = start_ceiling(args, Path(tmp) / "reference.log")
            code, report_out = measure(
                args, wrk, base, key, Path(tmp), ceiling_base if ceiling else None
            )
        finally:
            if ceiling is not None:
                stopped = ceiling.stop(30)
                log(f"reference app stopped (exit {stopped})")
                with contextlib.suppress(Exception):
                    drop_database(args.pg_port, args.ceiling_database)
                    log(f"dropped the scratch database {args.ceiling_database}")
    report_out()
    return code


@dataclass
class Side:
    """One server an operation is measured on: its base URL, key and wrk script."""

    base: str
    key: str | None
    spec: OpSpec


def measure_op(
    wrk: str, tmp: Path, op: str, sides: Sequence[Side], args: argparse.Namespace
) -> list[OpResult]:
    """`op` on each side (BASE, then the ceiling) in --rounds interleaved rounds of
    --duration seconds in all, the order alternating from round to round (A B, B A, A B,
    ...) so that the machine's drift during the operation falls on both alike; each side
    warmed up just before its first round. One combined result per side, in order."""
    drives = []
    for side in sides:
        script = tmp / f"{op}-{abs(hash(side.base))}.lua"
        script.write_text(render_lua(side.spec, side.base, side.key, args.seed))
        drives.append(
            functools.partial(
                run_wrk,
                wrk,
                script,
                side.base,
                threads=args.threads,
                connections=args.connections,
            )
        )
    parts: list[list[OpResult]] = [[] for _ in sides]
    lengths = round_lengths(args.duration, args.rounds)
    for n, seconds in enumerate(lengths):
        order = range(len(sides)) if n % 2 == 0 else reversed(range(len(sides)))
        for i in order:
            base = sides[i].base
            if not parts[i] and args.warmup:
                log(f"{op} @ {base}: warm-up {args.warmup} s")
                drives[i](duration=args.warmup)
            result = to_result(op, drives[i](duration=seconds))
            parts[i].append(result)
            log(
                f"{op} @ {base}: round {n + 1}/{len(lengths)}, {seconds} s with "
                f"{args.connections} connections: {result.requests_per_s:.1f} req/s, "
                f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, {result.errors} errors"
            )
    return [combine(op, runs) for runs in parts]


def measure(
    args: argparse.Namespace,
    wrk: str,
    base: str,
    key: str | None,
    tmp: Path,
    ceiling_base: str | None,
) -> tuple[int, Callable[[], None]]:
    """The exit status, and what prints the report: called once the ceiling is stopped,
    so that the one-line summary is the last line printed."""
    memory_before = memory_report(args.pid) if args.pid else None
    metadata = read_metadata(base, key)
    log(f"server: {metadata.get('software', 'unknown')} (metadata HTTP {metadata['status']})")

    rng = random.Random(args.seed)
    run_tag = f"bench-{uuid.uuid4().hex[:8]}"
    families_all = family_names()
    patients = [make_patient(rng, run_tag, i, families_all) for i in range(args.patients)]
    family_counts = Counter(p["name"][0]["family"] for p in patients)

    load: dict[str, LoadPhase] = {}
    patient_ids, load["patients"] = asyncio.run(
        load_resources(base, key, "Patient", patients, args.bundle_size, args.load_concurrency)
    )
    log(f"patients: {load['patients'].seconds:.2f} s ({load['patients'].per_second:.0f}/s)")
    picks: list[int] = []
    appointments: list[Any] = []
    for _ in range(args.appointments):
        picks.append(rng.choice(range(len(patient_ids))))
        appointments.append(make_appointment(rng, patient_ids[picks[-1]]))
    if appointments:
        _, load["appointments"] = asyncio.run(
            load_resources(
                base, key, "Appointment", appointments, args.bundle_size, args.load_concurrency
            )
        )
        log(
            f"appointments: {load['appointments'].seconds:.2f} s "
            f"({load['appointments'].per_second:.0f}/s)"
        )

    families = sorted(family_counts)
    sizes = sorted(family_counts.values())
    family_stats = {
        "families": len(families),
        "min": sizes[0],
        "median": statistics.median(sizes),
        "max": sizes[-1],
    }
    create_rng = random.Random(args.seed + 1)
    create_bodies = [
        make_create_body(create_rng, run_tag, i).decode() for i in range(CREATE_BODIES)
    ]
    specs = build_specs(base, patient_ids, families, create_bodies)
    checks = asyncio.run(preflight(base, key, specs, args.ops))

    ceiling_specs: dict[str, OpSpec] = {}
    ceiling_load: dict[str, LoadPhase] = {}
    ceiling_checks: dict[str, Any] = {}
    differences: list[str] = []
    if ceiling_base is not None:
        log("ceiling: loading the same resources into the reference app")
        ceiling_ids, ceiling_load["patients"] = asyncio.run(
            load_resources(
                ceiling_base, None, "Patient", patients, args.bundle_size, args.load_concurrency
            )
        )
        if appointments:
            theirs = [
                with_patient(a, ceiling_ids[i]) for a, i in zip(appointments, picks, strict=True)
            ]
            _, ceiling_load["appointments"] = asyncio.run(
                load_resources(
                    ceiling_base,
                    None,
                    "Appointment",
                    theirs,
                    args.bundle_size,
                    args.load_concurrency,
                )
            )
        ceiling_specs = build_specs(ceiling_base, ceiling_ids, families, create_bodies)
        ceiling_checks = asyncio.run(preflight(ceiling_base, None, ceiling_specs, args.ops))
        differences = compare_answers(checks, ceiling_checks, args.ops)
        for difference in differences:
            log(f"warning: the ceiling answers differently: {difference}")
        if not differences:
            log("ceiling: same statuses and result counts as BASE on every sampled request")

    results: list[OpResult] = []
    ceiling_results: dict[str, OpResult] = {}
    for op in args.ops:
        # Each operation on ours and on the ceiling in interleaved rounds: the two figures
        # of a ratio are taken over the same minute or so, on the same machine state.
        sides = [Side(base, key, specs[op])]
        if ceiling_base is not None:
            sides.append(Side(ceiling_base, None, ceiling_specs[op]))
        result, *theirs = measure_op(wrk, tmp, op, sides, args)
        if not args.no_goals:
            result.goal = GOALS[op]
            result.meets_goal = (
                not result.flagged
                and result.requests_per_s >= GOALS[op]["min_rps"]
                and result.p99_ms <= GOALS[op]["max_p99_ms"]
            )
        results.append(result)
        if theirs:
            ceiling_results[op] = theirs[0]

    memory = memory_report(args.pid) if args.pid else None
    table = render_table(load, results, not args.no_goals, memory)
    report: dict[str, Any] = {
        "base": base,
        "server": metadata,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {
            "duration_s": args.duration,
            "connections": args.connections,
            "wrk_threads": args.threads,
            "patients": args.patients,
            "appointments": args.appointments,
            "bundle_size": args.bundle_size,
            "load_concurrency": args.load_concurrency,
            "ops": args.ops,
            "authorization": bool(key),
            "seed": args.seed,
            "run_tag": run_tag,
            "ceiling": ceiling_base,
            "rounds": args.rounds,
        },
        "load": {label: asdict(phase) for label, phase in load.items()},
        "family_search_expected_matches": family_stats,
        "preflight": checks,
        "ops": {r.name: asdict(r) for r in results},
    }
    if not args.no_goals and "patients" in load:
        limit = load["patients"].count / LOAD_GOAL_PATIENTS_PER_S
        report["load"]["patients"]["goal_max_s"] = round(limit, 2)
        report["load"]["patients"]["meets_goal"] = load["patients"].seconds <= limit
    if args.pid:
        report["memory"] = {"before": memory_before, "after": memory}
    if ceiling_base is not None:
        report["ceiling"] = {
            "load": {label: asdict(phase) for label, phase in ceiling_load.items()},
            "preflight": ceiling_checks,
            "differences": differences,
            "ops": {name: asdict(r) for name, r in ceiling_results.items()},
            "shares": {r.name: shares_of(r, ceiling_results.get(r.name)) for r in results},
        }
        table += "\n\n" + render_ceiling(results, ceiling_results)

    def report_out() -> None:
        print(table)
        print()
        emit(
            report,
            args.json_out,
            summary_line(results, args.no_goals, ceiling_results, len(differences)),
        )

    return (3 if differences or any(r.flagged for r in results) else 0), report_out


def summary_line(
    results: Sequence[OpResult],
    no_goals: bool,
    ceiling: dict[str, OpResult] | None = None,
    differences: int = 0,
) -> str:
    """One line, last: each operation's req/s, p50 and p99, with their shares of the
    ceiling when the reference app ran (then the verdict is on the ceiling goals)."""
    parts = []
    for r in results:
        text = (
            f"{r.name} {figure(r.requests_per_s)} req/s p50 {figure(r.p50_ms)} "
            f"p99 {figure(r.p99_ms)} ms"
        )
        c = (ceiling or {}).get(r.name)
        if c is not None:
            shares = shares_of(r, c)
            text += (
                f" = {percent(shares['share'])} of the ceiling's {figure(c.requests_per_s)} "
                f"(p50 {percent(shares['p50_share'])}, p99 {percent(shares['p99_share'])})"
            )
        parts.append(text)
    flagged = sum(1 for r in results if r.flagged)
    if no_goals:
        judged = ""
    elif ceiling:
        met = [meets_ceiling_goal(r, share(r, ceiling.get(r.name))) for r in results]
        judged = f" — ceiling goals: {verdict(met)}"
    else:
        judged = f" — {verdict([bool(r.meets_goal) for r in results])}"
    if differences:
        judged += f" — the ceiling answered {differences} check(s) differently"
    return f"bench_fhir: {', '.join(parts)}, {flagged} flagged{judged}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except BenchError as exc:
        log(f"error: {exc}")
        print(f"bench_fhir: failed — {str(exc).splitlines()[0]}", flush=True)
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
