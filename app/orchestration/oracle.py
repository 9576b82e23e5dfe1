"""Replaying oracle calls through the app's own HTTP stack (run view, trace and all),
exactly as a client would: for reference runs and scenario checks.

In a `patientSim` scenario the replay waits for the simulated patient after each write,
as a correct agent waits for the answer to its question before acting on it: the
patient (the scripted stand-in, so a replay is reproducible and the in-memory replay of
`app.orchestration.simulation` agrees with it) answers every message written to them
before the next call is sent. No worker is needed for that (the scenario check runs
without one); where a worker also answers, the first reply to be stored wins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from app.db import Scopes
from app.errors import Unprocessable
from app.kit.urls import run_view_base
from app.patient_sim import service as patient_sim_service
from app.runs.service import RunRow
from app.scenarios.expansion import ExpansionError, expand_path, expand_value
from app.scenarios.schema import OracleCall


async def replay(
    app: Any,
    root: str,
    authorization: str,
    run: RunRow,
    calls: Sequence[OracleCall],
    *,
    strict: bool = True,
) -> list[int | None]:
    """Each call's status (None: not sent, it names a symbol no earlier call saved).
    `strict`: the first failing call raises a 422 naming it (a reference solution must
    work); otherwise failures are recorded and the replay goes on (a near miss may
    fail halfway, as an agent would)."""
    fhir_base = run_view_base("", run.id)
    refs = dict(run.fixture)
    statuses: list[int | None] = []
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": authorization}
    async with httpx.AsyncClient(transport=transport, base_url=root, headers=headers) as client:
        for index, call in enumerate(calls):
            try:
                body = expand_value(call.body, refs, run.started_at) if call.body else None
                path = expand_path(call.path, refs)
            except ExpansionError as exc:
                if strict:
                    raise Unprocessable(f"oracle call {index}: {exc}") from None
                statuses.append(None)
                continue
            url = path if path.startswith("/api/") else fhir_base + path
            content_type = (
                "application/json-patch+json"
                if call.method == "PATCH" and isinstance(body, list)
                else "application/fhir+json"
            )
            response = await client.request(
                call.method, url, json=body, headers={"Content-Type": content_type}
            )
            statuses.append(response.status_code)
            if call.method != "GET" and response.status_code < 400:
                await _let_patient_answer(app, run)
            if response.status_code >= 400:
                if strict:
                    raise Unprocessable(
                        f"oracle call {index} ({call.method} {path}) answered "
                        f"{response.status_code}: {response.text[:300]}"
                    )
                continue
            if call.save_as and response.content:
                created = response.json()
                refs[call.save_as] = f"{created['resourceType']}/{created['id']}"
    return statuses


async def _let_patient_answer(app: Any, run: RunRow) -> None:
    scopes = getattr(app.state, "scopes", None)
    if isinstance(scopes, Scopes):
        await patient_sim_service.reply_to_messages(scopes, None, run.tenant_id, run.id)
