"""Runs: start, progress, grading, finish, cancel, data deletion.

State machine: a run starts `live` and ends exactly once in `passed`, `failed`,
`timed_out`, `cancelled` or `errored`. Every transition out of `live` is
`UPDATE run … WHERE status = 'live'` with the row count checked, so when `finish`, the
worker's tick and the deadline race, one of them writes the verdict and the others read
it.
"""

from __future__ import annotations

import asyncio
import secrets
import string
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, cast

import asyncpg
import orjson
from pydantic import TypeAdapter

from app.db import Conn, Scopes, Tx, like_prefix
from app.errors import AppError, BadRequest, Unprocessable
from app.fhir import service as fhir_service
from app.grading import snapshot as grading
from app.grading.engine import grade
from app.grading.snapshot import Call, ChangedResource, Delivery, RunSnapshot
from app.judges.service import judge_rubrics
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.urls import FHIR_PREFIX, RUNS_PREFIX, run_view_base
from app.llm.client import LlmClient
from app.patient_sim.report import revealed_facts, simulator_report
from app.runs import board as board_rules
from app.runs import provenance, repository
from app.runs.defaults import default_expectations
from app.runs.errors import LiveRunLimit, RunNotFound, RunNotLive, RunStillLive
from app.runs.fhir_writes import FHIR_WRITES
from app.scenarios import service as scenarios_service
from app.scenarios.expansion import ExpansionError, apply_variant, expand_scenario
from app.scenarios.schema import (
    TIMEOUT_MAX,
    TIMEOUT_MIN,
    Expectation,
    Scenario,
    walk_expectations,
)
from app.tenants.directory import aliases as directory_aliases
from app.tenants.directory import names as directory_names
from app.tenants.quota import RunLimits
from app.trace import service as trace_service
from app.webhooks import service as webhooks_service
from understudy_client.contract.board import Board, BoardCheck, BoardRevision
from understudy_client.contract.runs import (
    ExpectationResult,
    FinalRunView,
    FinalStatus,
    LiveRunView,
    Provenance,
    RunProgress,
    RunView,
    TraceCall,
    Verdict,
)

_ALPHABET = string.ascii_lowercase + string.digits
_EXPECTATIONS = TypeAdapter(list[Expectation])


class RunStatus(StrEnum):
    LIVE = "live"
    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    ERRORED = "errored"


FINAL = frozenset(s for s in RunStatus if s is not RunStatus.LIVE)


def _token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


@dataclass
class RunRow:
    tenant_id: uuid.UUID
    id: str
    scenario_id: str
    scenario_version: int
    scenario_hash: str
    builtin: bool
    mode: str
    variant: str | None
    label: str | None
    status: str
    brief: str | None
    fixture: dict[str, str]
    expectations: list[Any]
    started_at: datetime
    deadline: datetime
    finished_at: datetime | None
    changed_at: datetime
    graded_change_at: datetime | None
    graded_at: datetime | None
    progress: dict[str, Any] | None
    verdict: dict[str, Any] | None
    patient_driver: str = "sim"
    revision: str | None = None
    provenance: dict[str, Any] | None = None

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> RunRow:
        def js(value: Any) -> Any:
            # Our own JSON (no FHIR decimals): plain floats, so scores serialise as numbers.
            return None if value is None else orjson.loads(value)

        return cls(
            tenant_id=r["tenant_id"],
            id=r["id"],
            scenario_id=r["scenario_id"],
            scenario_version=r["scenario_version"],
            scenario_hash=r["scenario_hash"],
            builtin=r["builtin"],
            mode=r["mode"],
            variant=r["variant"],
            label=r["label"],
            status=r["status"],
            brief=r["brief"],
            fixture=js(r["fixture"]),
            expectations=js(r["expectations"]),
            started_at=r["started_at"],
            deadline=r["deadline"],
            finished_at=r["finished_at"],
            changed_at=r["changed_at"],
            graded_change_at=r["graded_change_at"],
            graded_at=r["graded_at"],
            progress=js(r["progress"]),
            verdict=js(r["verdict"]),
            patient_driver=r["patient_driver"],
            revision=r["revision"],
            provenance=js(r["provenance"]),
        )

    def view(self, root: str) -> RunView:
        common: dict[str, Any] = {
            "id": self.id,
            "mode": self.mode,
            "scenario_id": self.scenario_id,
            "scenario_version": self.scenario_version,
            "scenario_hash": self.scenario_hash,
            "variant": self.variant,
            "label": self.label,
            "revision": self.revision,
            "fixture": self.fixture,
            "fhir_base": run_view_base(root, self.id),
            "started_at": self.started_at,
            "deadline": self.deadline,
            "brief": self.brief if self.mode == "agent" else None,
            "patient_driver": self.patient_driver,
            "provenance": (
                None if self.provenance is None else Provenance.model_validate(self.provenance)
            ),
        }
        if self.status == RunStatus.LIVE:
            progress = RunProgress.model_validate(self.progress or {})
            return LiveRunView(status="live", progress=progress, **common)
        verdict = self.final_verdict()
        return FinalRunView(
            status=cast(FinalStatus, self.status),
            finished_at=self.finished_at,
            passed=verdict.passed,
            score=verdict.score,
            expectations=verdict.expectations,
            note=verdict.note,
            simulated_patient=verdict.simulated_patient,
            simulator_issues=verdict.simulator_issues,
            **common,
        )

    def final_verdict(self) -> Verdict:
        """The stored verdict of an ended run (a run ended without one: failed, score 0)."""
        if self.verdict is None:
            return Verdict(passed=False, score=0.0, expectations=[])
        return Verdict.model_validate(self.verdict)


async def get_run(conn: Conn, tenant_id: uuid.UUID, run_id: str) -> RunRow:
    row = await repository.run(conn, tenant_id=tenant_id, run_id=run_id)
    if row is None:
        raise RunNotFound(f"no run '{run_id}'")
    return RunRow.from_record(row)


async def list_runs(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    *,
    label: str | None,
    status: str | None,
    scenario_id: str | None,
    limit: int,
    before: tuple[datetime, str] | None = None,
    revision: str | None = None,
    label_prefix: str | None = None,
) -> list[RunRow]:
    """Newest first; `label` exact, `label_prefix` a prefix; `before`: the (started_at, id)
    of the last run of the previous page."""
    rows = await repository.runs(
        pool,
        tenant_id=tenant_id,
        label=label,
        label_like=like_prefix(label_prefix) if label_prefix else None,
        status=status,
        scenario_id=scenario_id,
        limit=limit,
        before=before,
        revision=revision,
    )
    return [RunRow.from_record(r) for r in rows]


async def run_scheduling(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> str:
    """The run's scheduling rules (`strict` or `lenient`, recorded at start); RunNotFound
    unless the tenant has that run."""
    setting = await repository.run_scheduling(conn, tenant_id=tenant_id, run_id=run_id)
    if setting is None:
        raise RunNotFound(f"no run '{run_id}'")
    return setting


async def runs_by_id(
    conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_ids: list[str]
) -> dict[str, RunRow]:
    """The tenant's runs among `run_ids`, by id (unknown ids are left out)."""
    if not run_ids:
        return {}
    rows = await repository.runs_by_id(conn, tenant_id=tenant_id, run_ids=run_ids)
    return {r["id"]: RunRow.from_record(r) for r in rows}


@dataclass(frozen=True, slots=True)
class LiveRunRef:
    run_id: str
    scenario_id: str
    started_at: datetime


async def live_runs(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID) -> list[LiveRunRef]:
    """The tenant's live runs, oldest first, as the database has them now."""
    rows = await repository.live_runs(conn, tenant_id=tenant_id)
    return [LiveRunRef(r["id"], r["scenario_id"], r["started_at"]) for r in rows]


async def cancel_live_runs(tx: Tx, tenant_id: uuid.UUID, run_ids: list[str]) -> list[str]:
    """Cancel those of the runs still live, in the caller's transaction (locked first, so
    a concurrent finish or grading waits). Returns the runs cancelled."""
    cancelled: list[str] = []
    for run_id in await repository.lock_live_runs(tx.conn, tenant_id=tenant_id, run_ids=run_ids):
        await cancel_run(tx, tenant_id, run_id)
        cancelled.append(run_id)
    return cancelled


class PatientDriver(StrEnum):
    """Who answers the staff's messages in a patientSim run."""

    SIM = "sim"  # the simulated patient (app.patient_sim)
    HUMAN = "human"  # a person, typing on the run page


@dataclass
class StartRequest:
    scenario_id: str
    mode: str | None
    variant: str | None
    label: str | None
    timeout_seconds: int | None
    patient_driver: str = PatientDriver.SIM
    revision: str | None = None  # the system under test's version, as the caller named it


async def lock_starts(conn: Conn, tenant_id: uuid.UUID) -> None:
    """One start at a time per tenant, until the caller's transaction ends, so the
    live-run limit holds under concurrency (re-entrant within one transaction)."""
    await repository.lock_starts(conn, tenant_id=tenant_id)


async def count_live(conn: Conn, tenant_id: uuid.UUID) -> int:
    return await repository.count_live(conn, tenant_id=tenant_id)


async def start_run(
    tx: Tx,
    tenant_id: uuid.UUID,
    request: StartRequest,
    *,
    limits: RunLimits,
    root_url: str = "",
) -> RunRow:
    """Write the fixture (silently) and the stimulus, and record the run, in the caller's
    transaction (it commits). Every start, whoever asks, is held to the tenant's live-run
    limit and daily write quota here. Once committed, the run is graded soon, its webhook
    deliveries sent and the live-run cache dropped (noted in `tx.after`)."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("start_run runs inside the caller's transaction")
    loaded = await scenarios_service.get_scenario(conn, tenant_id, request.scenario_id)
    scenario: Scenario = loaded.scenario
    modes = [str(m) for m in scenario.modes]
    mode = request.mode or modes[0]
    if mode not in modes:
        raise Unprocessable(
            f"scenario '{scenario.id}' supports mode(s) {', '.join(modes)}, not '{mode}'"
        )
    if request.variant is not None:
        try:
            scenario = apply_variant(scenario, request.variant)
        except KeyError:
            personas = ", ".join(v.persona for v in loaded.scenario.variants) or "none"
            raise Unprocessable(
                f"scenario '{loaded.scenario.id}' has no variant '{request.variant}' "
                f"(variants: {personas})"
            ) from None
    if request.patient_driver not in set(PatientDriver):
        raise Unprocessable(f"patientDriver must be sim or human, not '{request.patient_driver}'")
    if request.patient_driver == PatientDriver.HUMAN and scenario.patient_sim is None:
        raise Unprocessable(
            f"scenario '{scenario.id}' has no patientSim: there is no patient to drive"
        )
    timeout = request.timeout_seconds or scenario.timeout_seconds
    if not TIMEOUT_MIN <= timeout <= TIMEOUT_MAX:
        raise Unprocessable(f"timeoutSeconds must be {TIMEOUT_MIN} to {TIMEOUT_MAX}, not {timeout}")
    run_id = "run_" + _token(12)
    started = utcnow()
    try:
        expanded = expand_scenario(scenario, _token(8), started)
    except ExpansionError as exc:
        raise Unprocessable(f"the scenario cannot be expanded: {exc}") from None
    counted = len(expanded.stimulus) + (0 if loaded.builtin else len(expanded.fixture))
    await limits.quota.check(tenant_id, counted, conn)
    max_live = limits.max_live
    # A savepoint: a failed start leaves the caller's transaction usable.
    async with conn.transaction():
        await lock_starts(conn, tenant_id)
        live = await count_live(conn, tenant_id)
        if live >= max_live:
            raise LiveRunLimit(
                f"live run limit reached: {live} of {max_live} runs are live; finish or "
                "cancel one first"
            )
        refs = sorted(set(expanded.refs.values()))
        await repository.insert_refs(conn, tenant_id=tenant_id, run_id=run_id, refs=refs)
        versions = await _write_setup(conn, tenant_id, run_id, expanded.fixture, loaded.builtin)
        deliveries = await _write_stimulus(
            conn, tenant_id, run_id, expanded.stimulus, versions, root_url
        )
        expectations = [
            e.model_dump(mode="json", by_alias=True, exclude_none=True)
            for e in [*scenario.expectations, *default_expectations(scenario)]
        ]
        row = await repository.insert_run(
            conn,
            tenant_id=tenant_id,
            run_id=run_id,
            scenario_id=scenario.id,
            scenario_version=loaded.version,
            scenario_hash=loaded.hash,
            builtin=loaded.builtin,
            mode=mode,
            variant=request.variant,
            label=request.label,
            brief=expanded.brief if mode == "agent" else None,
            fixture_json=jsontext.dumps(expanded.refs),
            expectations_json=jsontext.dumps(expectations),
            started_at=started,
            deadline=started + timedelta(seconds=timeout),
            scheduling=scenario.scheduling,
            patient_driver=str(request.patient_driver),
            revision=request.revision,
            provenance_json=jsontext.dumps(
                provenance.at_start(
                    scenario_id=scenario.id,
                    scenario_version=loaded.version,
                    scenario_hash=loaded.hash,
                    revision=request.revision,
                    has_patient_sim=scenario.patient_sim is not None,
                    llm_model=limits.llm_model,
                    at=started,
                )
            ),
        )
    # Noted only once every write succeeded: a failed start (rolled back to the
    # savepoint) leaves nothing to send.
    tx.after.wrote(tenant_id, counted)
    tx.after.live_changed(tenant_id)
    tx.after.grade(tenant_id, run_id)
    if deliveries:
        tx.after.deliver(tenant_id)
    return RunRow.from_record(row)


async def _write_setup(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str,
    fixture: list[dict[str, Any]],
    builtin: bool,
) -> dict[tuple[str, str], int]:
    ctx = fhir_service.FhirContext(
        tenant_id=tenant_id,
        base_url="",
        run_id=run_id,
        source="setup",
        count_usage=not builtin,
        write_statement=FHIR_WRITES,
    )
    now = utcnow()
    writes = []
    for resource in fixture:
        rtype, rid = resource["resourceType"], resource["id"]
        try:
            writes.append(
                fhir_service.prepare_write(ctx, rtype, dict(resource), rid, 1, "create", now)
            )
        except AppError as exc:
            raise Unprocessable(f"fixture {rtype}/{rid} is invalid: {exc.message}") from None
    await ctx.write(conn, writes)
    return {(w.resource_type, w.id): 1 for w in writes}


async def _write_stimulus(
    conn: Conn,
    tenant_id: uuid.UUID,
    run_id: str,
    stimulus: list[dict[str, Any]],
    versions: dict[tuple[str, str], int],
    root_url: str,
) -> list[str]:
    """Stimulus resources are ordinary writes: they count and fire webhook events; one
    reusing a fixture symbol updates that resource. Returns the deliveries created."""
    ctx = fhir_service.FhirContext(
        tenant_id=tenant_id,
        base_url="",
        run_id=run_id,
        source="stimulus",
        root_url=root_url,
        write_statement=FHIR_WRITES,
    )
    for resource in stimulus:
        rtype, rid = resource["resourceType"], resource["id"]
        previous = versions.get((rtype, rid), 0)
        before = (
            await fhir_service.current_version(conn, tenant_id, rtype, rid) if previous else None
        )
        write = fhir_service.prepare_write(
            ctx,
            rtype,
            dict(resource),
            rid,
            previous + 1,
            "update" if previous else "create",
            utcnow(),
            fhir_service.previous_status(rtype, before),
        )
        await ctx.write(conn, [write])
        versions[(rtype, rid)] = previous + 1
    return ctx.deliveries


# --- grading ----------------------------------------------------------------------------


def expectations_of(run: RunRow) -> list[Expectation]:
    return _EXPECTATIONS.validate_python(run.expectations)


def _relative_path(path: str) -> str:
    """Trace paths as api_call expectations see them: FHIR calls relative to the base."""
    if path.startswith(FHIR_PREFIX):
        return path[len(FHIR_PREFIX) :] or "/"
    if path.startswith(RUNS_PREFIX + "/"):
        marker = "/fhir/r4"
        index = path.find(marker)
        if index >= 0:
            return path[index + len(marker) :] or "/"
    return path


def _resource_types(expectations: list[Expectation], scope: str) -> set[str] | None:
    """The resource types grading needs of a scope; None: every type (a `changes`
    expectation looks at everything written)."""
    out: set[str] = set()
    for e in walk_expectations(expectations):
        if e.type == "changes" and e.scope in (scope, "tenant"):
            return None
        if e.type in ("reference", "text-truth"):
            return None
        if e.type == "resource" and e.scope == scope:
            out.add(e.resource_type)
        elif e.type == "message" and scope == "patient":
            out.add("Communication")
    return out


def _has_changes(expectations: list[Expectation]) -> bool:
    """Whether grading needs each update's version from before the run."""
    return any(e.type in ("changes", "reference") for e in walk_expectations(expectations))


# What the system writes text in (messages, and `text-truth`'s staff texts).
TEXT_TYPES = frozenset(
    {
        "Communication",
        "Task",
        "ServiceRequest",
        "MedicationRequest",
        "Appointment",
        "DocumentReference",
    }
)


def needs_grounding(expectations: list[Expectation]) -> bool:
    """Whether a message check needs what the system was shown (`grounded`)."""
    return any(
        (e.type == "message" and e.grounded) or e.type == "text-truth"
        for e in walk_expectations(expectations)
    )


async def _shown(conn: Conn, run: RunRow, snapshot: RunSnapshot, until: datetime) -> list[Any]:
    """What the system under test was shown: the brief and the run's start (so "tomorrow"
    can be checked against a date), the fixture and stimulus as they read before its
    writes, the patient's messages, the resource versions its webhook deliveries carried
    (workflow mode), and the kept response bodies of its reads and operations (`GET`,
    `$`-operations, `_search`: a write's answer echoes what it wrote).
    """
    shown: list[Any] = [run.brief or "", run.started_at.date().isoformat()]
    befores = {f"{c.resource_type}/{c.id}": c.before for c in snapshot.changed}
    for symbol, ref in snapshot.fixture.items():
        body = befores.get(ref) or snapshot.current.get(symbol)
        if body is not None:
            shown.append(body)
    for patient in snapshot.patient_refs:
        for row in await fhir_service.communications_of(conn, run.tenant_id, run.id, patient):
            body = jsontext.loads(row["resource"])
            sender = (body.get("sender") or {}).get("reference")
            if sender in snapshot.patient_refs:
                shown.append(body)
    sent = await webhooks_service.run_delivered_versions(conn, run.tenant_id, run.id)
    if sent:  # a workflow was sent these versions in its webhook payloads
        wanted = {(t, i, v) for t, i, v in sent}
        for row in await fhir_service.versions_of(
            conn, run.tenant_id, sorted({(t, i) for t, i, _ in sent})
        ):
            key = (row["resource_type"], row["id"], row["version_id"])
            if key in wanted and row["resource"] is not None:
                shown.append(jsontext.loads(row["resource"]))
    for row in await trace_service.responses_of_run(
        conn, tenant_id=run.tenant_id, run_id=run.id, since=run.started_at, until=until
    ):
        path = row["path"]
        if row["method"] == "GET" or "/$" in path or path.endswith("/_search"):
            # Kept whole up to the cap, a longer Bundle as its resources, else cut text.
            shown.append(_parsed(row["response"]))
    return shown


async def build_snapshot(
    conn: Conn, run: RunRow, expectations: list[Expectation], *, final: bool
) -> RunSnapshot:
    now = utcnow()
    refs = run.fixture
    pairs = [cast(tuple[str, str], tuple(ref.split("/", 1))) for ref in refs.values()]
    rows = await fhir_service.current_or_deleted(conn, run.tenant_id, pairs)
    by_ref = {
        f"{r['resource_type']}/{r['id']}": (
            None if r["deleted"] or r["resource"] is None else jsontext.loads(r["resource"])
        )
        for r in rows
    }
    current = {symbol: by_ref.get(ref) for symbol, ref in refs.items()}
    changed = await _changed(conn, run, expectations)
    bodies = _reads_calls(expectations)
    calls = [
        Call(
            at=c["at"],
            method=c["method"],
            path=_relative_path(c["path"]),
            query=c["query"],
            status=c["status"],
            transport=c["transport"],
            refs=tuple(c["refs"] or ()),
            request=_parsed(c["request"]),
            response=_parsed(c["response"]),
        )
        for c in await trace_service.calls_for_grading(
            conn,
            tenant_id=run.tenant_id,
            run_id=run.id,
            since=run.started_at,
            until=now,
            with_bodies=bodies,
        )
    ]
    deliveries = [
        Delivery(at=at, event=event, resource_ref=ref)
        for at, event, ref in await webhooks_service.run_deliveries(conn, run.tenant_id, run.id)
    ]
    revealed, patient_replies = (
        await revealed_facts(conn, run.tenant_id, run.id) if _asks(expectations) else ([], 0)
    )
    snapshot = RunSnapshot(
        run_id=run.id,
        started_at=run.started_at,
        now=now,
        deadline=run.deadline,
        fixture=dict(refs),
        current=current,
        patient_refs=frozenset(r for r in refs.values() if r.startswith("Patient/")),
        changed=changed,
        calls=calls,
        deliveries=deliveries,
        webhooks_supported=True,
        revealed=revealed,
        patient_replies=patient_replies,
        final=final,
        aliases=directory_aliases(),
        names=directory_names(),
    )
    if needs_grounding(expectations) and any(
        c.resource_type in TEXT_TYPES and (c.via_run or c.run_id is not None) for c in changed
    ):
        # Read (and sent over the wire) only once there is a message to check: a run
        # is graded after every write, most of them before anything was said.
        snapshot.shown = await _shown(conn, run, snapshot, now)
    return snapshot


def _reads_calls(expectations: list[Expectation]) -> bool:
    """Whether an api_call expectation's `where` reads what calls asked and answered."""
    return any(e.type == "api_call" and e.where for e in walk_expectations(expectations))


def _parsed(text: str | None) -> Any:
    """A kept body as JSON, else as its text (cut at the cap, or not JSON)."""
    if text is None:
        return None
    try:
        return jsontext.loads(text)
    except ValueError:
        return text


def _asks(expectations: list[Expectation]) -> bool:
    """Whether any expectation (any_of children included) is an `asked`."""
    return any(e.type == "asked" for e in walk_expectations(expectations))


async def _changed(
    conn: Conn, run: RunRow, expectations: list[Expectation]
) -> list[ChangedResource]:
    """Resources the system under test wrote during the run, filtered in SQL to the types
    the expectations ask about: the run's own (patient scope) and, for tenant-scope
    expectations, any tenant write in the run's window not owned by another run."""
    own = _resource_types(expectations, "patient")
    tenant = _resource_types(expectations, "tenant")
    if own is not None and not own and tenant is not None and not tenant:
        return []
    with_before = _has_changes(expectations)
    rows = await fhir_service.resources_changed_by_run(
        conn,
        run.tenant_id,
        run.id,
        own_types=None if own is None else sorted(own),
        tenant_types=None if tenant is None else sorted(tenant),
        since=run.started_at,
        with_before=with_before,
    )
    out: list[ChangedResource] = []
    for r in rows:
        out.append(
            ChangedResource(
                resource_type=r["resource_type"],
                id=r["id"],
                resource=None
                if r["deleted"] or r["resource"] is None
                else jsontext.loads(r["resource"]),
                first_changed_at=r["first_at"],
                last_changed_at=r["last_at"],
                created=r["created"],
                all_refs=tuple(k.split("|", 1)[1] for k in r["all_refs"] or ()),
                run_id=r["run_id"],
                before=jsontext.loads(r["before"]) if with_before and r["before"] else None,
                via_run=r["via_run"],
            )
        )
    return out


def _verdict_of(verdict: grading.Verdict, note: str | None = None) -> Verdict:
    return Verdict(
        passed=verdict.passed,
        score=round(verdict.score, 4),
        expectations=[r.as_contract() for r in verdict.results],
        note=note,
    )


async def grade_run(
    scopes: Scopes,
    tenant_id: uuid.UUID,
    run_id: str,
    *,
    final: bool = False,
    llm: LlmClient | None = None,
    settle_seconds: float = 0.0,
    unless_graded_since: datetime | None = None,
) -> RunRow:
    """Grade a live run; end it when it passed, when `final` (finish), or at its deadline.
    With `unless_graded_since`, a run whose last grading was taken at or after that moment
    and saw its latest change is returned as it is: that grading saw every change
    committed before the moment (a regrade job names when its changes had all committed),
    and nothing changed since. A change it did not see is graded now rather than left to
    the later job that change enqueued (which may wait behind a backlog).
    A pass waits until the system under test has been quiet `settle_seconds` (no traced
    call, no write): until then the run stays live and is graded again when the quiet
    would be over, so extra work right after the job still counts against it.
    A run that already ended is returned as it is. Holds at most one connection at a
    time and no transaction across the judging (which may call a model and uses the pool
    itself); the verdict is one conditional UPDATE, and a run it ends frees a live slot
    (the live-run cache is dropped and queued eval items promoted after it commits)."""
    pool = scopes.pool
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
        if run.status != RunStatus.LIVE:
            return run
        if (
            unless_graded_since is not None
            and run.graded_at is not None
            and run.graded_at >= unless_graded_since
            and run.graded_change_at is not None
            and run.changed_at <= run.graded_change_at
        ):
            return run
        seen_change = run.changed_at
        expectations = expectations_of(run)
        snapshot = await build_snapshot(conn, run, expectations, final=final)
    verdict = grade(expectations, snapshot)
    now = snapshot.now
    status: RunStatus | None = None
    note = None
    settling = 0.0
    if verdict.passed and not final and now < run.deadline:
        settling = settle_seconds - (now - _last_activity(run, snapshot)).total_seconds()
    if verdict.passed and settling <= 0:
        status = RunStatus.PASSED
    elif final:
        status = RunStatus.FAILED
    elif now >= run.deadline:
        status = RunStatus.TIMED_OUT
        note = "the deadline passed before every required expectation held"
    if status is not None:
        # Rubrics are judged once, as the run ends (bonus: the status stands).
        judges_used: list[tuple[str, str | None, str]] = []
        verdict = await judge_rubrics(
            pool,
            llm,
            tenant_id,
            run_id,
            expectations,
            verdict,
            snapshot.patient_refs,
            used=judges_used,
        )
        ended_verdict = _verdict_of(verdict, note)
        replies, issues = await simulator_report(pool, tenant_id, run_id)
        if replies:
            ended_verdict.simulated_patient = replies
            ended_verdict.simulator_issues = issues
        judged_provenance = provenance.judged(
            run.provenance,
            patient_used=[(r.engine, r.model, r.prompt_version) for r in replies],
            judge_used=judges_used,
            at=now,
        )
        async with scopes.transaction(autocommit=True) as tx:
            ended = await repository.end_live_run(
                tx.conn,
                tenant_id=tenant_id,
                run_id=run_id,
                status=str(status),
                verdict_json=jsontext.dumps(ended_verdict.wire()),
                at=now,
                seen_change=seen_change,
                provenance_json=(
                    None if judged_provenance is None else jsontext.dumps(judged_provenance)
                ),
            )
            if ended is not None:
                _slot_freed(tx, tenant_id)
                return RunRow.from_record(ended)
            return await get_run(tx.conn, tenant_id, run_id)  # another grader ended it first
    progress = {
        "requiredTotal": verdict.required_total,
        "requiredHolding": verdict.required_holding,
        "lastGradedAt": now.isoformat(),
    }
    async with scopes.transaction(autocommit=True) as tx:
        updated = await repository.set_progress(
            tx.conn,
            tenant_id=tenant_id,
            run_id=run_id,
            progress_json=jsontext.dumps(progress),
            at=now,
            seen_change=seen_change,
            settle_until=now + timedelta(seconds=settling) if settling > 0 else None,
        )
        if updated is None:
            return await get_run(tx.conn, tenant_id, run_id)
        if settling > 0:
            tx.after.grade(tenant_id, run_id, delay=settling)
        return RunRow.from_record(updated)


async def live_checks(pool: asyncpg.Pool, run: RunRow) -> list[ExpectationResult]:
    """Each expectation of a live run graded on its snapshot now, by the same grader as
    `grade_run`, read-only: nothing is stored, no rubric is judged (pending), the run does
    not end. The console shows this to the signed-in person; the REST view of a live run
    keeps showing progress only (an agent holding the key must not read the answers)."""
    expectations = expectations_of(run)
    async with pool.acquire() as conn:
        snapshot = await build_snapshot(conn, run, expectations, final=False)
    return [r.as_contract() for r in grade(expectations, snapshot).results]


async def run_marker(conn: Conn | asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> str:
    """A short text that changes whenever what the run's page shows may have changed (a
    write or traced call of the run, a grading pass, its end), read from the run's row:
    the same in every API process. RunNotFound unless the tenant has the run."""
    row = await repository.run_marker(conn, tenant_id=tenant_id, run_id=run_id)
    if row is None:
        raise RunNotFound(f"no run '{run_id}'")
    parts = (
        row["status"],
        row["changed_at"],
        row["graded_at"],
        row["progress"],
        row["finished_at"],
    )
    return "|".join("" if p is None else str(p) for p in parts)


def _last_activity(run: RunRow, snapshot: RunSnapshot) -> datetime:
    """When the system under test last did something the run can see: a traced call, or
    a write it made."""
    moments = [run.started_at, *(c.at for c in snapshot.calls)]
    moments += [c.last_changed_at for c in snapshot.changed]
    return max(moments)


def _slot_freed(tx: Tx, tenant_id: uuid.UUID) -> None:
    tx.after.live_changed(tenant_id)
    tx.after.promote(tenant_id)


async def cancel_run(tx: Tx, tenant_id: uuid.UUID, run_id: str) -> RunRow:
    conn = tx.conn
    row = await repository.cancel_live_run(conn, tenant_id=tenant_id, run_id=run_id, at=utcnow())
    if row is None:
        run = await get_run(conn, tenant_id, run_id)
        raise RunNotLive(f"run '{run_id}' already ended as {run.status}")
    _slot_freed(tx, tenant_id)
    return RunRow.from_record(row)


async def delete_run_data(tx: Tx, tenant_id: uuid.UUID, run_id: str) -> int:
    """Remove the run's resources (its fixture patients and everything it created) with
    their history, in the caller's transaction. Returns how many resources were removed."""
    conn = tx.conn
    if not conn.is_in_transaction():
        raise RuntimeError("delete_run_data runs inside the caller's transaction")
    run = await get_run(conn, tenant_id, run_id)
    if run.status == RunStatus.LIVE:
        raise RunStillLive(f"run '{run_id}' is live: finish or cancel it before deleting its data")
    removed = await fhir_service.delete_run_resources(conn, tenant_id, run_id)
    await conn.execute(
        "DELETE FROM run_ref WHERE tenant_id = $1 AND run_id = $2", tenant_id, run_id
    )
    return removed


async def run_trace(pool: asyncpg.Pool, run: RunRow) -> list[TraceCall]:
    end = run.finished_at or utcnow()
    rows = await trace_service.calls_of_run(
        pool, tenant_id=run.tenant_id, run_id=run.id, since=run.started_at, until=end
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


async def runs_needing_grades(pool: asyncpg.Pool) -> list[tuple[uuid.UUID, str]]:
    """Live runs with something new since their last grading, or past their deadline."""
    rows = await repository.runs_due_grading(pool, now=utcnow())
    return [(r["tenant_id"], r["id"]) for r in rows]


async def mark_changed(
    tx: Tx, attributed: set[tuple[uuid.UUID, str]], shared_tenants: set[uuid.UUID]
) -> None:
    """Traced calls happened: mark the runs they belong to (a shared call: every live run
    of its tenant) as changed, to be regraded soon."""
    if not attributed and not shared_tenants:
        return
    rows = await repository.mark_changed(
        tx.conn,
        tenant_ids=[t for t, _ in attributed],
        run_ids=[r for _, r in attributed],
        shared_tenants=list(shared_tenants),
        at=utcnow(),
    )
    for r in rows:
        tx.after.grade(r["tenant_id"], r["id"])


async def mark_runs_changed(tx: Tx, tenant_id: uuid.UUID, run_ids: set[str]) -> None:
    """Something the runs' expectations watch changed outside their FHIR writes (a webhook
    delivery ended): have the live ones regraded soon."""
    rows = await repository.mark_runs_changed(tx.conn, tenant_id=tenant_id, run_ids=sorted(run_ids))
    for r in rows:
        tx.after.grade(tenant_id, r["id"])


def check_limit(value: int, low: int, high: int, name: str) -> int:
    if not low <= value <= high:
        raise BadRequest(f"'{name}' must be {low} to {high}")
    return value


# --- the scenario health board -----------------------------------------------------------

BOARD_REVISIONS = 50  # revisions the picker offers, newest first


async def load_board(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, *, mode: str, revision: str | None = None
) -> Board:
    """The board of a mode on a revision (default: that of the tenant's latest run of the
    mode). Four indexed queries and one by primary key; the rules are app.runs.board's."""
    if mode not in ("agent", "workflow"):
        raise Unprocessable(f"mode must be agent or workflow, not '{mode}'")
    scenarios = [
        board_rules.ScenarioRef(s.scenario.id, s.scenario.title, s.hash)
        for s in await scenarios_service.list_scenarios(pool, tenant_id)
        if mode in {str(m) for m in s.scenario.modes}
    ]
    ids = [s.id for s in scenarios]
    hashes = [s.hash for s in scenarios]
    # Independent reads side by side, each on a connection of its own.
    revision_rows, tally_rows = await asyncio.gather(
        repository.board_revisions(pool, tenant_id=tenant_id, mode=mode, limit=BOARD_REVISIONS),
        repository.board_tallies(
            pool, tenant_id=tenant_id, mode=mode, scenario_ids=ids, hashes=hashes
        ),
    )
    revisions = [
        BoardRevision(revision=r["revision"], last_run_at=r["last_run_at"]) for r in revision_rows
    ]
    current = revisions[0].revision if revisions else None
    shown = revision if revision is not None else current
    run_rows, failure_rows = await asyncio.gather(
        repository.board_runs(pool, tenant_id=tenant_id, mode=mode, revision=shown),
        repository.board_failures(
            pool, tenant_id=tenant_id, mode=mode, revision=shown, scenario_ids=ids, hashes=hashes
        ),
    )
    fact = board_rules.RunFact
    runs = [
        fact(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in run_rows
    ]  # id, scenario_id, scenario_hash, status, started_at, deadline, note
    details = {
        r["id"]: r
        for r in await repository.board_details(
            pool, tenant_id=tenant_id, run_ids=board_rules.recent_ids(scenarios, runs)
        )
    }
    failures = [
        board_rules.CheckFailures(
            r["scenario_id"], r["scenario_hash"], r["check_id"], r["label"] or "", r["failures"]
        )
        for r in failure_rows
    ]
    tallies = [
        board_rules.RevisionTally(
            r["scenario_id"],
            r["scenario_hash"],
            r["revision"],
            r["first_run_at"],
            r["verdicts"],
            r["passed"],
        )
        for r in tally_rows
    ]
    for i, run in enumerate(runs):
        detail = details.get(run.id)
        if detail is not None:
            checks = [
                BoardCheck(id=c[0] or "", label=c[1] or "", passed=c[2])
                for c in orjson.loads(detail["checks"])
            ]
            runs[i] = replace(run, score=detail["score"], checks=checks)
    return board_rules.build_board(
        board_rules.BoardInput(
            mode="agent" if mode == "agent" else "workflow",
            revision=shown,
            current_revision=current,
            now=utcnow(),
            scenarios=scenarios,
            runs=runs,
            tallies=tallies,
            failures=failures,
            revisions=revisions,
        )
    )
