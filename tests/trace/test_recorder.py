"""The trace over real HTTP: each call attributed to the run it belongs to (its run view,
a resource of its fixture, shared data in every live run), and old calls purged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from app.db import Database, Scopes
from tests.conftest import TenantHandle
from tests.runs.test_run_flow import api, start


async def test_trace_attribution(tenant: TenantHandle) -> None:
    first, second = await asyncio.gather(start(tenant), start(tenant))
    async with httpx.AsyncClient(headers=tenant.headers) as client:
        await client.get(f"{first['fhirBase']}/Slot?status=free&_count=1")
        await client.get(f"{tenant.fhir_base}/{second['fixture']['patient']}")
        await client.get(f"{tenant.fhir_base}/Practitioner?family=Chen")
    async with api(tenant) as client:
        one = (await client.get(f"/runs/{first['id']}/trace")).json()["calls"]
        two = (await client.get(f"/runs/{second['id']}/trace")).json()["calls"]
    one_paths = {(c["path"], c["shared"]) for c in one}
    two_paths = {(c["path"], c["shared"]) for c in two}
    assert (f"/api/testing/runs/{first['id']}/fhir/r4/Slot", False) in one_paths
    assert (f"/api/fhir/r4/{second['fixture']['patient']}", False) in two_paths
    assert (f"/api/fhir/r4/{second['fixture']['patient']}", False) not in one_paths
    assert ("/api/fhir/r4/Practitioner", True) in one_paths
    assert ("/api/fhir/r4/Practitioner", True) in two_paths
    assert not any("/Slot" in p for p, _ in two_paths)


async def test_trace_retention(tenant: TenantHandle, db: Database) -> None:
    from app.worker import purge_trace

    old = datetime.now(UTC) - timedelta(days=8)
    await db.pool.execute(
        """INSERT INTO trace_call (tenant_id, at, method, path, query, status, duration_ms,
            transport, refs) VALUES ($1, $2, 'GET', '/api/fhir/r4/Patient', '', 200, 1, 'rest',
            '{}'), ($1, now(), 'GET', '/api/fhir/r4/Patient', '', 200, 1, 'rest', '{}')""",
        tenant.id,
        old,
    )
    # A job context as the worker builds it: the job opens its unit on `scopes`.
    assert await purge_trace({"db": db, "scopes": Scopes(db.pool)}) >= 1
    left = await db.pool.fetch("SELECT at FROM trace_call WHERE tenant_id = $1", tenant.id)
    assert len(left) == 1 and left[0]["at"] > old


async def test_calls_keep_what_the_system_was_shown(tenant: TenantHandle, db: Database) -> None:
    """For the message checks' `grounded`: the response body of each call, cut at
    RESPONSE_CAP with its full size kept — a run's own, and a shared one on the tenant base
    (its system read that too) — and each call's request body."""
    from app.trace.recorder import RESPONSE_CAP
    from app.trace.service import responses_of_run

    run = await start(tenant)
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        patient = await client.get(f"{run['fhirBase']}/{run['fixture']['patient']}")
        big = await client.post(
            f"{run['fhirBase']}/Basic",
            json={
                "resourceType": "Basic",
                "code": {"text": "x" * (RESPONSE_CAP + 1000)},
                "subject": {"reference": run["fixture"]["patient"]},
            },
        )
        assert big.status_code == 201, big.text
        read = await client.get(f"{run['fhirBase']}/Basic/{big.json()['id']}")
        await client.get(f"{tenant.fhir_base}/Practitioner?family=Chen")  # shared
        await client.get(f"{run['fhirBase']}/Patient/nope")  # a 404 is not shown data
        find = await client.post(
            f"{tenant.fhir_base}/Appointment/$find",
            json={
                "resourceType": "Parameters",
                "parameter": [
                    {
                        "name": "practitioner",
                        "valueReference": {"reference": "Practitioner/demo-canonical-prac-chen"},
                    }
                ],
            },
        )
    assert find.status_code == 200, find.text
    async with api(tenant) as client:  # reading the trace flushes it
        assert (await client.get(f"/runs/{run['id']}/trace")).status_code == 200
    async with db.pool.acquire() as conn:
        kept = await responses_of_run(
            conn,
            tenant_id=tenant.id,
            run_id=run["id"],
            since=datetime.fromisoformat(run["startedAt"]),
            until=datetime.now(UTC),
        )
    by_path = {r.path.rsplit("/fhir/r4", 1)[-1]: r.response for r in kept}
    assert by_path[f"/{run['fixture']['patient']}"] == patient.text
    assert len(read.content) > RESPONSE_CAP
    assert by_path[f"/Basic/{big.json()['id']}"] == read.content[:RESPONSE_CAP].decode(
        "utf-8", "replace"
    )
    assert "demo-canonical-prac-chen" in by_path["/Practitioner"]  # shared, still shown
    assert by_path["/Appointment/$find"] == find.text
    sizes = await db.pool.fetch(
        "SELECT path, response_bytes, request FROM trace_call WHERE tenant_id = $1",
        tenant.id,
    )
    assert any(r["response_bytes"] == len(read.content) for r in sizes)
    asked = [r["request"] for r in sizes if r["path"].endswith("/Appointment/$find")]
    assert asked and "valueReference" in asked[0]


def test_a_bundle_longer_than_the_cap_is_kept_as_data_not_cut() -> None:
    """A month of Slots is more than RESPONSE_CAP bytes: kept as its resources (every
    time it offered), not as a text cut after the first days."""
    import orjson

    from app.trace.recorder import RESPONSE_CAP, _Body

    slots: list[dict[str, Any]] = [
        {
            "fullUrl": f"http://x/Slot/s{i}",
            "resource": {
                "resourceType": "Slot",
                "id": f"s{i}",
                "start": f"2026-12-{1 + i // 48:02d}T{(i % 48) // 2:02d}:{30 * (i % 2):02d}:00Z",
                "status": "free",
                "text": {"status": "generated", "div": "<div>" + "x" * 400 + "</div>"},
            },
            "search": {"mode": "match"},
        }
        for i in range(1400)
    ]
    raw = orjson.dumps(
        {"resourceType": "Bundle", "type": "searchset", "total": 1400, "entry": slots}
    )
    assert len(raw) > RESPONSE_CAP
    body = _Body(wanted=True)
    for i in range(0, len(raw), 65536):
        body.add(raw[i : i + 65536])
    text, size = body.kept()
    assert size == len(raw) and text is not None
    kept = orjson.loads(text)
    assert kept["total"] == 1400 and len(kept["entry"]) == 1400
    assert kept["entry"][-1]["resource"]["start"] == slots[-1]["resource"]["start"]
    assert "text" not in kept["entry"][0]["resource"]  # narratives are left out
    # Anything else still cut at the cap, as text.
    other = _Body(wanted=True)
    other.add(b'{"resourceType": "Basic", "code": {"text": "' + b"y" * RESPONSE_CAP + b'"}}')
    cut, _ = other.kept()
    assert cut is not None and len(cut) == RESPONSE_CAP


def _row(tenant: TenantHandle, n: int, status: int = 200, query: str = "") -> Any:
    return (
        tenant.id, None, datetime.now(UTC), "GET", f"/api/fhir/r4/Patient/p{n}", query, status,
        1.0, "rest", [f"Patient/p{n}"], None, None, None,
    )  # fmt: skip


async def test_a_flush_copies_in_pieces_and_loses_no_row(
    tenant: TenantHandle, db: Database, monkeypatch: Any
) -> None:
    """A flush COPYs COPY_ROWS rows at a time (the loop serves requests in between): a
    piece PostgreSQL refuses is dropped alone, and when the database goes away mid-flush
    the unwritten rows wait for the next flush while the written ones are announced
    with it, each row once."""
    from app.trace import recorder as rec
    from app.trace import repository as trace_repository

    monkeypatch.setattr(rec, "COPY_ROWS", 3)
    announced: list[str] = []

    async def on_flush(rows: list[Any]) -> None:
        announced.extend(row[4] for row in rows)

    recorder = rec.TraceRecorder(db.pool, on_flush=on_flush)
    pieces: list[int] = []
    real = trace_repository.insert_calls

    async def insert(conn: Any, rows: Any, columns: Any) -> None:
        pieces.append(len(rows))
        await real(conn, rows, columns)

    monkeypatch.setattr(trace_repository, "insert_calls", insert)
    for n in range(9):
        # Refused: p1 by PostgreSQL (a NUL in text), p4 by asyncpg (past int4).
        query, status = ("a\x00b" if n == 1 else ""), (2**40 if n == 4 else 200)
        recorder.add(_row(tenant, n, query=query, status=status))
    await recorder.flush()
    assert pieces == [3, 3, 3]
    kept = [f"/api/fhir/r4/Patient/p{n}" for n in (6, 7, 8)]
    assert announced == kept  # each refused piece dropped, and only it

    async def away_on_the_second(conn: Any, rows: Any, columns: Any) -> None:
        if len(pieces) == 4:  # the second piece of this flush
            pieces.append(-1)
            raise ConnectionResetError("the database went away")
        await insert(conn, rows, columns)

    monkeypatch.setattr(trace_repository, "insert_calls", away_on_the_second)
    announced.clear()
    for n in range(10, 17):
        recorder.add(_row(tenant, n))
    try:
        await recorder.flush()
    except ConnectionResetError:
        pass
    else:
        raise AssertionError("the failure was not raised")
    assert announced == []  # nothing announced while the flush failed
    await recorder.flush()
    paths = await db.pool.fetch(
        "SELECT path FROM trace_call WHERE tenant_id = $1 ORDER BY row_id", tenant.id
    )
    written = [r["path"] for r in paths]
    expected = [f"/api/fhir/r4/Patient/p{n}" for n in (6, 7, 8, *range(10, 17))]
    assert written == expected  # each once, in order
    assert sorted(announced) == sorted(expected[3:])


async def test_rows_announced_during_an_outage_are_announced_again(
    tenant: TenantHandle, db: Database
) -> None:
    """The database going away between the COPY and `on_flush` (its regrade marks) loses
    no announcement and logs no traceback: the outage is raised for the flusher to log,
    and the rows are announced with the next flush."""
    from app.trace import recorder as rec

    announced: list[str] = []
    away = [True]

    async def on_flush(rows: list[Any]) -> None:
        if away[0]:
            raise ConnectionResetError("the database went away")
        announced.extend(row[4] for row in rows)

    recorder = rec.TraceRecorder(db.pool, on_flush=on_flush)
    recorder.add(_row(tenant, 1))
    try:
        await recorder.flush()
    except ConnectionResetError:
        pass
    else:
        raise AssertionError("the outage was not raised")
    away[0] = False
    recorder.add(_row(tenant, 2))
    await recorder.flush()
    assert announced == ["/api/fhir/r4/Patient/p1", "/api/fhir/r4/Patient/p2"]
    written = await db.pool.fetch(
        "SELECT path FROM trace_call WHERE tenant_id = $1 ORDER BY row_id", tenant.id
    )
    assert [r["path"] for r in written] == announced  # each written once
