"""A scenario drafted from an ended run (docs/scenarios.md "A scenario from a run"): the
run's starting point (fixture and stimulus, as the scenario it ran had them, its
variant applied), the brief, the system's successful writes as the reference solution,
and expectations derived from what it did. Nothing is stored: the author edits the draft
and imports it like any scenario.

Here: loading the run's calls and sent effects, assembling the draft and linting it. The
oracle (the system's calls in scenario terms) is `app.runs.draft_oracle`'s, the
expectations derived from it `app.runs.draft_expectations`'.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.capture import service as capture_service
from app.db import Conn
from app.kit import jsontext
from app.kit.date_mentions import scan_mentions
from app.kit.phrases import fold
from app.runs.draft_expectations import (
    asked_first,
    changes_guard,
    fixture_patients,
    integration_calls,
    lookup_glob,
    lookups,
    message_words,
    messages,
    patient_addresses,
    pinned_codes,
    written_types,
)
from app.runs.draft_oracle import (
    Clock,
    SentEffect,
    Symbols,
    SystemCall,
    build_oracle,
    is_lookup,
    relative_path,
)
from app.runs.errors import RunStillLive
from app.runs.reads import get_run
from app.runs.row import RunStatus
from app.scenarios import service as scenarios_service
from app.scenarios.calls import EMAIL_PATH, INTEGRATIONS_PREFIX, SMS_PATH
from app.scenarios.expansion import apply_variant
from app.scenarios.free import free_choices
from app.scenarios.schema import Scenario
from app.scenarios.validation import Problem, validate_scenario
from app.trace import service as trace_service

# The names tests and callers import from here, wherever they live.
__all__ = [
    "DATED_TEXT",
    "Draft",
    "SentEffect",
    "SystemCall",
    "build_draft",
    "dated_texts",
    "draft_id",
    "draft_of_run",
    "lookup_glob",
    "message_words",
    "relative_path",
    "sent_effects",
    "system_calls",
]

HTTP_ERROR = 400
# The transports of the system's API calls; captured SMS, e-mail and integration calls
# are not oracle calls (yet).
API_TRANSPORTS = frozenset({"rest", "mcp"})
ID_MAX = 100
EFFECTS_PAGE = 500


@dataclass(frozen=True, slots=True)
class Draft:
    document: dict[str, Any]
    problems: list[Problem]  # block the import
    warnings: list[Problem]  # legal, but worth a look


def draft_id(scenario_id: str, run_id: str) -> str:
    """`<scenario id>.from-<short run id>`, within the schema's id pattern and length."""
    short = re.sub(r"[^a-z0-9]", "", run_id.lower().removeprefix("run_"))[:10] or "run"
    suffix = f".from-{short}"
    return scenario_id[: ID_MAX - len(suffix)] + suffix


def build_draft(
    scenario: Scenario,
    *,
    run_id: str,
    started_at: datetime,
    fixture: dict[str, str],
    calls: list[SystemCall],
    effects: Sequence[SentEffect] = (),
) -> dict[str, Any]:
    """The draft scenario (JSON) from the scenario as the run used it (variant applied),
    the run's fixture map, the system's successful calls in order and the effects it
    sent (captured SMS, e-mail and integration calls)."""
    symbols = Symbols(fixture)
    oracle = build_oracle(calls, list(effects), symbols, Clock(started_at))
    writes = [c for c in oracle if not is_lookup(c["method"], str(c["path"]).split("?")[0])]
    patients = fixture_patients(symbols, fixture)
    expectations = [
        changes_guard(oracle, symbols, fixture),
        *lookups(calls, required=not writes),
        *messages(oracle, patients, patient_addresses(scenario, patients)),
        *(asked_first(oracle, patients) if scenario.patient_sim is not None else []),
        *pinned_codes(oracle, symbols),
        *integration_calls(oracle),
    ]
    original = scenario.model_dump(by_alias=True, exclude_none=True, mode="python")
    document: dict[str, Any] = {
        "id": draft_id(scenario.id, run_id),
        "title": f"{scenario.title} (from run {run_id})",
        "category": scenario.category,
        "summary": f"Drafted from run {run_id} of {scenario.id}: the system's writes in that "
        "run are the reference solution. Edit the expectations before saving.",
        "modes": original["modes"],
        "fixture": original.get("fixture") or [],
        "stimulus": original.get("stimulus") or [],
        "expectations": expectations,
        "timeoutSeconds": scenario.timeout_seconds,
        "oracle": oracle,
    }
    for key in ("brief", "workflow", "patientSim", "integrations"):
        if original.get(key) is not None:
            document[key] = original[key]
    if scenario.scheduling != "strict":
        document["scheduling"] = scenario.scheduling
    strict = {k: v for k, v in (original.get("strict") or {}).items() if k != "off"}
    if strict:
        document["strict"] = strict
    created, _ = written_types(oracle, symbols)
    updated_types = {symbols.types[s] for s in written_types(oracle, symbols)[1]}
    free = [
        f.model_dump(by_alias=True, exclude_none=True)
        for f in free_choices(scenario)[0]
        if f.resource_type in created | updated_types
    ]
    # Declared even when empty: the draft's own `resource` checks (pinned codes) are not
    # to be read as free choices (`app.scenarios.free`).
    document["free"] = free
    return document


async def system_calls(conn: Conn | asyncpg.Pool, run: Any) -> list[SystemCall]:
    """The run's own successful API calls, oldest first, with their kept bodies."""
    until = run.finished_at or run.deadline
    if isinstance(conn, asyncpg.Pool):
        async with conn.acquire() as c:
            kept = await _kept(c, run, until)
    else:
        kept = await _kept(conn, run, until)
    return [
        SystemCall(
            method=k.method,
            path=relative_path(k.path),
            query=k.query,
            request=_parsed(k.request),
            response=_parsed(k.response),
            at=k.at,
            refs=k.refs,
            status=k.status,
        )
        for k in kept
        if not k.shared and k.status < HTTP_ERROR and k.transport in API_TRANSPORTS
    ]


async def sent_effects(conn: Conn, run: Any) -> list[SentEffect]:
    """What the run's system sent that the sandbox captured, oldest first, as oracle
    calls send it (an integration call the stub refused is left out, like a failed
    call)."""
    out: list[SentEffect] = []
    after = 0
    while True:
        page = await capture_service.list_effects(
            conn, run.tenant_id, run.id, after=after, limit=EFFECTS_PAGE
        )
        for e in page:
            if e.direction != "outbound":
                continue
            if e.kind == "sms":
                out.append(SentEffect(e.at, "POST", SMS_PATH, {"to": e.to_address, "body": e.body}))
            elif e.kind == "email":
                to = e.data.get("to") or e.to_address
                body = {"to": to, "subject": e.subject or "", "body": e.body or ""}
                out.append(SentEffect(e.at, "POST", EMAIL_PATH, body))
            elif e.kind == "integration":
                answer = e.data.get("answer") or {}
                if int(answer.get("status") or 0) >= HTTP_ERROR:
                    continue
                path = f"{INTEGRATIONS_PREFIX}{e.to_address}{e.data.get('path') or ''}"
                method = str(e.data.get("method") or "POST")
                out.append(SentEffect(e.at, method, path, e.data.get("body")))
        if len(page) < EFFECTS_PAGE:
            return out
        after = page[-1].seq


async def _kept(conn: Conn, run: Any, until: datetime) -> list[trace_service.KeptCall]:
    return await trace_service.calls_for_grading(
        conn,
        tenant_id=run.tenant_id,
        run_id=run.id,
        since=run.started_at,
        until=until,
        with_bodies=True,
    )


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return jsontext.loads(text)
    except ValueError:
        return None


async def draft_of_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: str) -> Draft:
    """The draft of an ended run of the tenant, with what the lint says of it. Raises
    RunNotFound (another tenant's run too) and RunStillLive."""
    async with pool.acquire() as conn:
        run = await get_run(conn, tenant_id, run_id)
        if run.status == RunStatus.LIVE:
            raise RunStillLive(
                f"run '{run_id}' is still live: finish or cancel it, then save it as a scenario"
            )
        loaded = await scenarios_service.get_scenario_version(
            conn, tenant_id, run.scenario_id, run.scenario_version
        )
        calls = await system_calls(conn, run)
        effects = await sent_effects(conn, run)
    scenario = loaded.scenario
    if run.variant:
        scenario = apply_variant(scenario, run.variant)
    document = build_draft(
        scenario,
        run_id=run.id,
        started_at=run.started_at,
        fixture=dict(run.fixture),
        calls=calls,
        effects=effects,
    )
    _, problems, warnings = validate_scenario(document)
    return Draft(document, problems, [*warnings, *dated_texts(document)])


def dated_texts(document: dict[str, Any]) -> list[Problem]:
    """A warning per message text of the oracle that states a date or a weekday as the
    run wrote it: right on the day of the run, wrong once the draft replays on another
    day (the booking moves with its time token, the words do not)."""
    out: list[Problem] = []
    for i, call in enumerate(document.get("oracle") or []):
        body = call.get("body")
        if not isinstance(body, dict):
            continue
        parts: list[tuple[str, Any]] = []
        if body.get("resourceType") == "Communication":
            parts = [
                (f"/oracle/{i}/body/payload/{j}/contentString", p.get("contentString"))
                for j, p in enumerate(body.get("payload") or [])
                if isinstance(p, dict)
            ]
        elif call.get("path") in (SMS_PATH, EMAIL_PATH):
            parts = [(f"/oracle/{i}/body/body", body.get("body"))]
        for where, text in parts:
            if not isinstance(text, str):
                continue
            mentions = scan_mentions(fold(text), text)
            if any(m.date is not None or m.weekday is not None for m in mentions):
                out.append(Problem(where, DATED_TEXT))
    return out


DATED_TEXT = (
    "states a date or weekday as the run wrote it: replayed on another day it no longer "
    "matches what is booked then; write the moment as a time token of its own "
    '(a payload part {"contentString": {"$time": "+2wd@10:00"}}, or in an SMS or e-mail '
    "body a list of strings and tokens)"
)
