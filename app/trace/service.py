"""What other features ask of the trace: a run's calls, and retention. They get typed
values, never the repository's rows: the API's own `TraceCall` for a run's trace, and
for grading `KeptCall` (a call with the bodies kept of it) and `ShownResponse`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from app.db import Conn, Tx
from app.trace import repository
from app.trace.recorder import COLUMNS, TraceRow
from understudy_client.contract.runs import TraceCall


@dataclass(frozen=True, slots=True)
class KeptCall:
    """A recorded call in a run's window as grading reads it: with the request and
    response bodies kept of it (their first bytes, as text; None unless asked for).
    `shared`: made on the tenant's base, not the run's own (it counts for every live run
    of the tenant in its window)."""

    at: datetime
    method: str
    path: str
    query: str
    status: int
    transport: str
    refs: tuple[str, ...]
    shared: bool
    request: str | None = None
    response: str | None = None


@dataclass(frozen=True, slots=True)
class ShownResponse:
    """A kept response body of a successful call: what the system under test was shown."""

    at: datetime
    method: str
    path: str
    response: str


async def calls_for_grading(
    conn: Conn,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
    with_bodies: bool = False,
) -> list[KeptCall]:
    """The run's own calls and the tenant's unattributed ones in its window, oldest
    first; `with_bodies`: their kept request and response bodies too."""
    rows = await repository.calls_for_grading(
        conn,
        tenant_id=tenant_id,
        run_id=run_id,
        since=since,
        until=until,
        with_bodies=with_bodies,
    )
    return [
        KeptCall(
            at=r["at"],
            method=r["method"],
            path=r["path"],
            query=r["query"],
            status=r["status"],
            transport=r["transport"],
            refs=tuple(r["refs"] or ()),
            shared=r["run_id"] is None,
            request=r["request"],
            response=r["response"],
        )
        for r in rows
    ]


async def responses_of_run(
    conn: Conn, *, tenant_id: uuid.UUID, run_id: str, since: datetime, until: datetime
) -> list[ShownResponse]:
    """What the system under test was shown: see `repository.responses_of_run`."""
    rows = await repository.responses_of_run(
        conn, tenant_id=tenant_id, run_id=run_id, since=since, until=until
    )
    return [ShownResponse(r["at"], r["method"], r["path"], r["response"]) for r in rows]


async def calls_of_run(
    conn: Conn | asyncpg.Pool,
    *,
    tenant_id: uuid.UUID,
    run_id: str,
    since: datetime,
    until: datetime,
) -> list[TraceCall]:
    """The run's calls as its trace shows them (with their durations), oldest first."""
    rows = await repository.calls_of_run(
        conn, tenant_id=tenant_id, run_id=run_id, since=since, until=until
    )
    return [
        TraceCall(
            at=r["at"],
            method=r["method"],
            path=r["path"],
            query=r["query"],
            status=r["status"],
            duration_ms=round(r["duration_ms"], 2),
            transport=r["transport"],
            refs=list(r["refs"] or ()),
            shared=r["run_id"] is None,
        )
        for r in rows
    ]


async def purge_calls(tx: Tx, cutoff: datetime) -> int:
    """Drop calls older than `cutoff`, in the caller's transaction."""
    return await repository.delete_calls_before(tx.conn, cutoff)


async def record_calls(conn: Conn, rows: list[TraceRow]) -> None:
    """Calls made outside a request the recorder sees (the worker posting the simulated
    patient's SMS reply), written at once."""
    if rows:
        await repository.insert_calls(conn, rows, COLUMNS)
