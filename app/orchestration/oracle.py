"""Replaying oracle calls through the app's own HTTP stack (run view, trace and all),
exactly as a client would: for reference runs and scenario checks.

In a `patientSim` scenario the replay waits for the simulated patient after each write,
as a correct agent waits for the answer to its question before acting on it: the
patient (the scripted stand-in, so a replay is reproducible and the in-memory replay of
`app.orchestration.simulation` agrees with it) answers every message written to them
before the next call is sent. No worker is needed for that (the scenario check runs
without one); where a worker also answers, the first reply to be stored wins."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from app.capture import service as capture_service
from app.db import Scopes
from app.errors import Unprocessable
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.urls import RUNS_PREFIX, run_view_base
from app.runs import service as runs_service
from app.runs import simulated_patient as patient_sim_service
from app.runs import sms_patient
from app.runs.service import RunRow
from app.scenarios.calls import bundle_urls, capture_kind, capture_text
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
    expanded: Callable[[OracleCall, Any], Any] | None = None,
    saves: Mapping[str, str] | None = None,
) -> list[int | None]:
    """Each call's status (None: not sent, it names a symbol no earlier call saved).
    `strict`: the first failing call raises a 422 naming it (a reference solution must
    work); otherwise failures are recorded and the replay goes on (a near miss may
    fail halfway, as an agent would). `expanded` rewrites each body after expansion (an
    equivalent rewrite's, `app.orchestration.rewrites`). A POST to `/` is a transaction
    Bundle, sent to the FHIR base itself; `saves` (fullUrl -> symbol) names what its
    creates save for later calls."""
    fhir_base = run_view_base("", run.id)
    refs = dict(run.fixture)
    statuses: list[int | None] = []
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": authorization}
    async with httpx.AsyncClient(transport=transport, base_url=root, headers=headers) as client:
        for index, call in enumerate(calls):
            try:
                body = (
                    bundle_urls(expand_value(call.body, refs, run.started_at), refs)
                    if call.body
                    else None
                )
                path = expand_path(call.path, refs)
            except ExpansionError as exc:
                if strict:
                    raise Unprocessable(f"oracle call {index}: {exc}") from None
                statuses.append(None)
                continue
            if expanded is not None and body is not None:
                body = expanded(call, body)
            kind = capture_kind(path)
            if kind is not None:
                response = await _send_capture(app, client, run, kind, call.method, path, body)
                statuses.append(response.status_code)
                if response.status_code < 400:
                    await _let_patient_answer(app, run)
                elif strict:
                    raise Unprocessable(
                        f"oracle call {index} ({call.method} {path}) answered "
                        f"{response.status_code}: {response.text[:300]}"
                    )
                continue
            url = path if path.startswith("/api/") else fhir_base + path.rstrip("/")
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
            if saves and isinstance(body, dict) and body.get("resourceType") == "Bundle":
                _save_entries(body, response.json(), saves, refs)
            if call.save_as and response.content:
                created = response.json()
                refs[call.save_as] = f"{created['resourceType']}/{created['id']}"
    return statuses


async def _send_capture(
    app: Any,
    client: httpx.AsyncClient,
    run: RunRow,
    kind: str,
    method: str,
    path: str,
    body: Any,
) -> httpx.Response:
    """A captured effect the reference solution sends, the way an agent sends it: an SMS
    over the run's Twilio-compatible API with its credentials (`{"to", "body"}`), an
    integration call to the run's stub (any JSON body), an e-mail (`{"to", "subject",
    "body"}`) recorded and traced as the SMTP server records one (the scenario check
    runs without an SMTP server)."""
    run_base = f"{RUNS_PREFIX}/{run.id}"
    fields = body if isinstance(body, dict) else {}
    if kind == "integration":
        return await client.request(method, run_base + path, json=body)
    if kind == "sms":
        creds = capture_service.run_credentials(run.tenant_id, run.id)
        if creds is None:
            return httpx.Response(503, text="this process has no capture secret")
        return await client.post(
            f"{run_base}/sms/2010-04-01/Accounts/{creds.account_sid}/Messages.json",
            data={
                "To": str(fields.get("to") or ""),
                "From": str(fields.get("from") or creds.from_number),
                "Body": capture_text(fields.get("body")),
            },
            auth=(creds.account_sid, creds.auth_token),
        )
    to = fields.get("to")
    recipients = [str(t) for t in to] if isinstance(to, list) else [str(to or "")]
    text = capture_text(fields.get("body"))
    if not any(recipients) or not text.strip():
        return httpx.Response(400, text="an e-mail needs 'to' and 'body'")
    started, at = time.perf_counter(), utcnow()
    scopes: Scopes = app.state.scopes
    async with scopes.transaction() as tx:
        effect = await capture_service.record_email(
            tx,
            run.tenant_id,
            run.id,
            to=[r for r in recipients if r],
            from_=f"{run.id}@understudy.invalid",
            subject=str(fields.get("subject") or "") or None,
            body=text,
            attachments=[],
            headers={"X-Understudy-Via": "reference"},
        )
        await runs_service.mark_runs_changed(tx, run.tenant_id, {run.id})
    reply = f"250 OK: captured as {effect.id}, not delivered".encode()
    app.state.recorder.add(
        capture_service.trace_row(
            run.tenant_id,
            run.id,
            transport="email",
            method="DATA",
            path="/smtp",
            query="",
            at=at,
            started=started,
            status=250,
            answer=reply,
            asked=jsontext.dumps(fields),
        )
    )
    return httpx.Response(250, content=reply)


async def _let_patient_answer(app: Any, run: RunRow) -> None:
    scopes = getattr(app.state, "scopes", None)
    if isinstance(scopes, Scopes):
        await patient_sim_service.reply_to_messages(scopes, None, run.tenant_id, run.id)
        await sms_patient.answer_texts(scopes, None, run.tenant_id, run.id)


def _save_entries(
    sent: dict[str, Any], answer: Any, saves: Mapping[str, str], refs: dict[str, str]
) -> None:
    """The symbols a transaction's creates save: each response entry answers the
    request entry at the same index."""
    answered = answer.get("entry") if isinstance(answer, dict) else None
    for entry, result in zip(sent.get("entry") or [], answered or [], strict=False):
        symbol = saves.get(entry.get("fullUrl", ""))
        location = (result.get("response") or {}).get("location", "")
        if symbol and location:
            refs[symbol] = "/".join(location.split("/")[:2])
