"""Starting a run: the request checked against its scenario, the scenario expanded, the
fixture written silently (setup) and the stimulus as ordinary writes, and the run's row
recorded, all in the caller's transaction and held to the tenant's live-run limit and
daily write quota.
"""

from __future__ import annotations

import secrets
import string
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from app.db import Conn, Tx
from app.errors import AppError, Issue, Unprocessable
from app.fhir import service as fhir_service
from app.kit.clock import utcnow
from app.runs import provenance, repository
from app.runs.defaults import default_expectations
from app.runs.errors import LiveRunLimit
from app.runs.fhir_writes import FHIR_WRITES
from app.runs.row import PatientDriver, RunRow, RunStatus
from app.scenarios import service as scenarios_service
from app.scenarios.expansion import (
    ExpandedScenario,
    ExpansionError,
    apply_variant,
    expand_scenario,
)
from app.scenarios.schema import TIMEOUT_MAX, TIMEOUT_MIN, Scenario
from app.scenarios.service import LoadedScenario
from app.tenants.quota import RunLimits

_ALPHABET = string.ascii_lowercase + string.digits


def _token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


@dataclass
class StartRequest:
    scenario_id: str
    mode: str | None
    variant: str | None
    label: str | None
    timeout_seconds: int | None
    patient_driver: str = PatientDriver.SIM
    revision: str | None = None  # the system under test's version, as the caller named it
    sms_reply_url: str | None = None  # where the simulated patient's SMS replies are posted


async def lock_starts(conn: Conn, tenant_id: uuid.UUID) -> None:
    """One start at a time per tenant, until the caller's transaction ends, so the
    live-run limit holds under concurrency (re-entrant within one transaction)."""
    await repository.lock_starts(conn, tenant_id=tenant_id)


async def count_live(conn: Conn, tenant_id: uuid.UUID) -> int:
    return await repository.count_live(conn, tenant_id=tenant_id)


@dataclass(frozen=True)
class _Plan:
    """What a start request asks for, checked against its scenario."""

    loaded: LoadedScenario
    scenario: Scenario  # the variant applied
    mode: str
    timeout: int


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
    plan = await _plan(conn, tenant_id, request)
    run_id = "run_" + _token(12)
    started = utcnow()
    try:
        expanded = expand_scenario(plan.scenario, _token(8), started)
    except ExpansionError as exc:
        raise Unprocessable(f"the scenario cannot be expanded: {exc}") from None
    counted = len(expanded.stimulus) + (0 if plan.loaded.builtin else len(expanded.fixture))
    await limits.quota.check(tenant_id, counted, conn)
    # A savepoint: a failed start leaves the caller's transaction usable.
    async with conn.transaction():
        await _hold_live_limit(conn, tenant_id, limits.max_live)
        await repository.insert_refs(
            conn, tenant_id=tenant_id, run_id=run_id, refs=sorted(set(expanded.refs.values()))
        )
        versions = await _write_setup(
            conn, tenant_id, run_id, expanded.fixture, plan.loaded.builtin
        )
        deliveries = await _write_stimulus(
            conn, tenant_id, run_id, expanded.stimulus, versions, root_url
        )
        new = _new_row(tenant_id, run_id, request, plan, expanded, started, limits.llm_model)
        row = await repository.insert_run(conn, new)
    # Noted only once every write succeeded: a failed start (rolled back to the
    # savepoint) leaves nothing to send.
    tx.after.wrote(tenant_id, counted)
    tx.after.live_changed(tenant_id)
    tx.after.grade(tenant_id, run_id)
    if deliveries:
        tx.after.deliver(tenant_id)
    return RunRow.from_record(row)


async def _plan(conn: Conn, tenant_id: uuid.UUID, request: StartRequest) -> _Plan:
    """The scenario, mode, variant, patient driver and timeout the request names, or
    Unprocessable saying which does not fit."""
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
    if request.sms_reply_url is not None:
        check_sms_reply_url(request.sms_reply_url)
    if request.patient_driver not in set(PatientDriver):
        raise Unprocessable(f"patientDriver must be sim or human, not '{request.patient_driver}'")
    if request.patient_driver == PatientDriver.HUMAN and scenario.patient_sim is None:
        raise Unprocessable(
            f"scenario '{scenario.id}' has no patientSim: there is no patient to drive"
        )
    timeout = request.timeout_seconds or scenario.timeout_seconds
    if not TIMEOUT_MIN <= timeout <= TIMEOUT_MAX:
        raise Unprocessable(f"timeoutSeconds must be {TIMEOUT_MIN} to {TIMEOUT_MAX}, not {timeout}")
    return _Plan(loaded, scenario, mode, timeout)


# A URL longer than this is not one a receiver would be reached at.
MAX_URL_CHARS = 2048


def check_sms_reply_url(url: str) -> str:
    """An absolute http(s) URL with a host, or a 422 naming `smsReplyUrl`."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number 0-65535
    except ValueError as exc:
        problem = f"not a valid URL: {exc}"
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "must be an absolute http or https URL with a host"
        elif port == 0:
            problem = "its port must be 1-65535"
        elif len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 0x20 for c in url):
            problem = f"must be at most {MAX_URL_CHARS} characters, with no spaces"
        elif parts.fragment:
            problem = "must have no #fragment (Twilio signs the URL as it is posted to)"
        else:
            return url
    raise Unprocessable(f"smsReplyUrl {problem}", [Issue(problem, expression="smsReplyUrl")])


async def _hold_live_limit(conn: Conn, tenant_id: uuid.UUID, max_live: int) -> None:
    """Take the tenant's start lock and refuse the start when the limit is reached."""
    await lock_starts(conn, tenant_id)
    live = await count_live(conn, tenant_id)
    if live >= max_live:
        raise LiveRunLimit(
            f"live run limit reached: {live} of {max_live} runs are live; finish or "
            "cancel one first"
        )


def _new_row(
    tenant_id: uuid.UUID,
    run_id: str,
    request: StartRequest,
    plan: _Plan,
    expanded: ExpandedScenario,
    started: datetime,
    llm_model: str | None,
) -> RunRow:
    """The run's row as it starts: live, changed as it starts, not graded yet."""
    scenario, loaded = plan.scenario, plan.loaded
    expectations = [
        e.model_dump(mode="json", by_alias=True, exclude_none=True)
        for e in [*scenario.expectations, *default_expectations(scenario)]
    ]
    return RunRow(
        tenant_id=tenant_id,
        id=run_id,
        scenario_id=scenario.id,
        scenario_version=loaded.version,
        scenario_hash=loaded.hash,
        builtin=loaded.builtin,
        mode=plan.mode,
        variant=request.variant,
        label=request.label,
        status=RunStatus.LIVE,
        brief=expanded.brief if plan.mode == "agent" else None,
        fixture=expanded.refs,
        expectations=expectations,
        started_at=started,
        deadline=started + timedelta(seconds=plan.timeout),
        finished_at=None,
        changed_at=started,
        graded_change_at=None,
        graded_at=None,
        progress=None,
        verdict=None,
        patient_driver=str(request.patient_driver),
        revision=request.revision,
        sms_reply_url=request.sms_reply_url,
        provenance=provenance.at_start(
            scenario_id=scenario.id,
            scenario_version=loaded.version,
            scenario_hash=loaded.hash,
            revision=request.revision,
            has_patient_sim=scenario.patient_sim is not None,
            llm_model=llm_model,
            at=started,
        ),
        scheduling=scenario.scheduling,
    )


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
