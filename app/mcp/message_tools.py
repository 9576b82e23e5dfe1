"""The patient-message tools: send a message to the run's patient (a FHIR Communication,
as POST /Communication would write it) and read the thread, waiting briefly for the
simulated patient's reply."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from app.kit.clock import fhir_instant, utcnow
from app.kit.urls import run_view_base
from app.mcp.schemas import Message, MessageSent, Thread
from app.mcp.tool_call import RESOURCE_ID, RunIdArg, ToolCall, checked, run_view, split_reference
from app.runs import simulated_patient as patient_sim_service
from app.scenarios import service as scenarios_service
from app.scenarios.schema import symbol_name
from understudy_client.contract.runs import RunView

# Longest a get_patient_messages call waits for the simulated patient's reply.
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.25
THREAD_PAGE = 500  # messages read per direction; a test thread is a handful


async def _run_patient(call: ToolCall, run: str, patient: str | None) -> tuple[RunView, str, bool]:
    """The run's view, the patient to talk to (given, the simulated patient, or the
    fixture's `patient`) and whether a simulated patient answers in this run."""
    view = run_view(await call.request("GET", f"/api/testing/runs/{run}"))
    pool = call.caller.app.state.db.pool
    loaded = await scenarios_service.get_scenario(pool, call.tenant_id, view.scenario_id)
    sim = loaded.scenario.patient_sim
    if patient is not None:
        resource_type, resource_id = split_reference(
            patient if "/" in patient else f"Patient/{patient}", "patient"
        )
        if resource_type != "Patient":
            raise ToolError("patient must be a Patient id or 'Patient/<id>'")
        return view, f"Patient/{resource_id}", sim is not None
    ref = view.fixture.get(symbol_name(sim.patient) if sim is not None else "patient")
    if ref is None:
        raise ToolError("this run has no patient in its fixture: pass patient")
    return view, ref, sim is not None


async def message_patient(
    ctx: Context,
    text: Annotated[str, Field(description="The message, as the patient will read it.")],
    in_response_to: Annotated[
        str | None,
        Field(description="Id of the patient's message you are answering, if any."),
    ] = None,
    sender: Annotated[
        str | None,
        Field(
            description="Who signs the message, e.g. 'Practitioner/<id>' or "
            "'Organization/<id>'; default: none."
        ),
    ] = None,
    patient: Annotated[
        str | None, Field(description="Patient id; default: the run's patient.")
    ] = None,
    run_id: RunIdArg = None,
) -> MessageSent:
    """Send a message to the run's patient (a FHIR Communication addressed to them, the
    same as POST /Communication). A simulated patient answers within a few seconds: read
    the answer with get_patient_messages."""
    call = ToolCall(ctx)
    if not text.strip():
        raise ToolError("text: the message is empty")
    run = await call.required_run(run_id)
    _, patient_ref, _ = await _run_patient(call, run, patient)
    communication: dict[str, Any] = {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": patient_ref},
        "recipient": [{"reference": patient_ref}],
        "sent": fhir_instant(utcnow()),
        "payload": [{"contentString": text}],
    }
    if in_response_to is not None:
        message_id = checked(
            in_response_to.removeprefix("Communication/"), RESOURCE_ID, "in_response_to"
        )
        communication["inResponseTo"] = [{"reference": f"Communication/{message_id}"}]
    if sender is not None:
        sender_type, sender_id = split_reference(sender, "sender")
        communication["sender"] = {"reference": f"{sender_type}/{sender_id}"}
    path = run_view_base("", run) + "/Communication"
    reply = await call.request("POST", path, body=communication)
    written = reply.json()
    return MessageSent(
        message_id=written["id"],
        reference=f"Communication/{written['id']}",
        patient=patient_ref,
        sent=communication["sent"],
        hint="Call get_patient_messages to read the answer (it waits for it).",
    )


def _message_of(resource: dict[str, Any], patient_ref: str) -> Message:
    sender = str((resource.get("sender") or {}).get("reference", ""))
    recipients = [str(r.get("reference", "")) for r in resource.get("recipient") or []]
    direction: Literal["from_patient", "to_patient", "other"] = (
        "from_patient"
        if sender == patient_ref
        else "to_patient"
        if patient_ref in recipients
        else "other"
    )
    text = " ".join(
        str(p.get("contentString", ""))
        for p in resource.get("payload") or []
        if isinstance(p, dict)
    ).strip()
    return Message(
        id=str(resource.get("id")),
        direction=direction,
        sent=resource.get("sent") or (resource.get("meta") or {}).get("lastUpdated"),
        text=text,
        in_response_to=[
            str(r.get("reference"))
            for r in resource.get("inResponseTo") or []
            if r.get("reference")
        ],
    )


async def _read_thread(call: ToolCall, run: str, patient_ref: str) -> list[Message]:
    path = run_view_base("", run) + "/Communication"
    found: dict[str, dict[str, Any]] = {}
    for param in ("subject", "recipient"):
        reply = await call.request(
            "GET", path, query=[(param, patient_ref), ("_count", str(THREAD_PAGE))]
        )
        for entry in reply.json().get("entry") or []:
            resource = entry.get("resource") or {}
            found[str(resource.get("id"))] = resource
    messages = [_message_of(r, patient_ref) for r in found.values()]
    messages.sort(key=lambda m: (m.sent or "", m.id))
    return messages


async def _answered(call: ToolCall, run: str, message_id: str) -> tuple[bool, str | None]:
    """Whether the simulated patient has dealt with a message, and any note."""
    pool = call.caller.app.state.db.pool
    return await patient_sim_service.answer_to(pool, call.tenant_id, run, message_id)


async def get_patient_messages(
    ctx: Context,
    wait_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="When your latest message is not answered yet, wait up to this long "
            "for the simulated patient's reply (0: don't wait).",
        ),
    ] = 15,
    patient: Annotated[
        str | None, Field(description="Patient id; default: the run's patient.")
    ] = None,
    run_id: RunIdArg = None,
) -> Thread:
    """The message thread with the run's patient, oldest first: what they wrote and what
    was sent to them (the same as GET /Communication?subject=…). Waits briefly for the
    reply to your latest message."""
    call = ToolCall(ctx)
    run = await call.required_run(run_id)
    view, patient_ref, has_sim = await _run_patient(call, run, patient)
    messages = await _read_thread(call, run, patient_ref)
    note: str | None = None
    last = messages[-1] if messages else None
    if (
        last is not None
        and last.direction == "to_patient"
        and has_sim
        and wait_seconds > 0
        and view.status == "live"
    ):
        # Wait on the simulator's own record of the message, then read the thread again.
        started = time.monotonic()
        answered = False
        # Said at once: a client sees the wait begin even when the first look finds it.
        await ctx.report_progress(0, wait_seconds, "waiting for the patient's reply")
        while time.monotonic() - started < wait_seconds:
            answered, note = await _answered(call, run, last.id)
            if answered:
                break
            elapsed = time.monotonic() - started
            await ctx.report_progress(elapsed, wait_seconds, "waiting for the patient's reply")
            await asyncio.sleep(POLL_SECONDS)
        if answered:
            messages = await _read_thread(call, run, patient_ref)
    last = messages[-1] if messages else None
    awaiting = last is not None and last.direction == "to_patient" and note is None
    return Thread(
        patient=patient_ref,
        messages=messages,
        awaiting_reply=awaiting,
        note=note,
    )
