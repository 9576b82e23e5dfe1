"""View-models of the run page and the chart page: what the templates show, made from
what the run, FHIR, simulator and trace services return (the same values the REST API
sends, plus the per-check state of a live run that only the console shows)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import orjson
from markupsafe import Markup, escape

from app.fhir import service as fhir_service
from app.kit.urls import FHIR_PREFIX, run_view_base
from understudy_client.contract.capture import CapturedEffect
from understudy_client.contract.runs import (
    ExpectationResult,
    SimulatedReply,
    SimulatorIssue,
    TraceCall,
)

# "Type/id": a FHIR reference the chart can show.
_REF = re.compile(r"^([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})$")
# A reference anywhere in a text ("Appointment/abc", "/Patient/p1/_history/2"; "GET /Slot
# 200" holds none).
_REF_IN_TEXT = re.compile(r"(?<![\w.-])(?<![\w.-]/)([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})(?![\w])")
# Where a resource names its patient, in the order they are tried.
_PATIENT_FIELDS = ("subject", "patient", "for", "beneficiary", "individual")
SUMMARY_CHARS = 120


def chart_url(ref: str, run_id: str | None = None) -> str:
    """The chart page of a resource: the patient's chart for a Patient, a redirect to its
    patient's chart for a resource naming one."""
    query = f"?run={quote(run_id)}" if run_id else ""
    return f"/chart/{ref}{query}"


def anchor_of(resource_type: str, resource_id: str) -> str:
    return f"r-{resource_type}-{resource_id}"


def ref_links(text: str, run_id: str | None = None) -> Markup:
    """`text` escaped, each FHIR reference in it a link to the chart."""
    out: list[str] = []
    last = 0
    for found in _REF_IN_TEXT.finditer(text):
        out.append(str(escape(text[last : found.start()])))
        ref = found.group(0)
        out.append(
            str(
                Markup('<a href="{url}" class="ref"><code>{ref}</code></a>').format(
                    url=chart_url(ref, run_id), ref=ref
                )
            )
        )
        last = found.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def is_ref(text: str) -> bool:
    return _REF.match(text) is not None


def patient_of(resource: dict[str, Any]) -> str | None:
    """The Patient a resource is about (`Patient/id`), when one of its usual fields names
    one."""
    if resource.get("resourceType") == "Patient":
        return f"Patient/{resource.get('id')}"
    for name in _PATIENT_FIELDS:
        value = resource.get(name)
        for item in value if isinstance(value, list) else [value]:
            ref = item.get("reference") if isinstance(item, dict) else None
            if isinstance(ref, str) and ref.startswith("Patient/"):
                return ref
    for participant in resource.get("participant") or []:
        actor = participant.get("actor") if isinstance(participant, dict) else None
        ref = actor.get("reference") if isinstance(actor, dict) else None
        if isinstance(ref, str) and ref.startswith("Patient/"):
            return ref
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _name(resource: dict[str, Any]) -> str | None:
    names = resource.get("name")
    if isinstance(names, list) and names and isinstance(names[0], dict):
        n = names[0]
        given = " ".join(str(g) for g in n.get("given") or [])
        return (n.get("text") or f"{given} {n.get('family') or ''}").strip() or None
    if isinstance(names, str):
        return names
    return None


def message_text(resource: dict[str, Any]) -> str:
    return "\n".join(
        str(p.get("contentString"))
        for p in resource.get("payload") or []
        if isinstance(p, dict) and p.get("contentString")
    )


def summary_of(resource: dict[str, Any] | None) -> str:
    """One line saying what a resource is, for lists (never its whole body)."""
    if resource is None:
        return "deleted"
    parts: list[str] = []
    name = _name(resource)
    if name:
        parts.append(name)
    for key in ("status", "intent"):
        if isinstance(resource.get(key), str):
            parts.append(resource[key])
    code = resource.get("code") or resource.get("serviceType") or resource.get("type")
    if isinstance(code, list):
        code = code[0] if code else None
    if isinstance(code, dict):
        text = code.get("text") or next(
            (c.get("display") for c in code.get("coding") or [] if isinstance(c, dict)), None
        )
        if text:
            parts.append(str(text))
    for key in ("start", "effectiveDateTime", "authoredOn", "sent", "date", "birthDate"):
        if isinstance(resource.get(key), str):
            parts.append(resource[key])
            break
    text = message_text(resource) or resource.get("description")
    if isinstance(text, str) and text:
        parts.append(f"“{_short(text)}”")
    return _short(" · ".join(parts)) if parts else resource.get("resourceType", "")


def loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = orjson.loads(text)
    return value if isinstance(value, dict) else None


_FIRST_KEYS = ("resourceType", "id", "meta")


def pretty(value: Any) -> str:
    """JSON for people: a resource's type, id and meta first (the store keeps keys in
    its own order)."""
    if isinstance(value, dict) and "resourceType" in value:
        value = {
            **{k: value[k] for k in _FIRST_KEYS if k in value},
            **{k: v for k, v in value.items() if k not in _FIRST_KEYS},
        }
    return json.dumps(value, indent=2, ensure_ascii=False)


# --- the run page ------------------------------------------------------------------------


ORIGINS = {"setup": "fixture", "stimulus": "stimulus", "sim": "simulated patient"}


@dataclass(frozen=True, slots=True)
class SetupResource:
    """A fixture or stimulus resource of the run."""

    symbol: str
    ref: str
    origin: str  # fixture | stimulus | …
    summary: str
    deleted: bool
    chart: str


@dataclass(frozen=True, slots=True)
class Check:
    """An expectation as the page shows it: live (holding / not yet) or final."""

    result: ExpectationResult
    state: str  # a key of views.STATES
    children: list[Check]


def check_of(result: ExpectationResult, *, live: bool) -> Check:
    if live:
        state = "holding" if result.passed else "not_yet"
    elif result.passed is None:
        # A rubric no model judged (or skipped): neutral, its detail says why.
        state = "not_judged" if result.type == "rubric" else "not_graded"
    else:
        state = "passed" if result.passed else "failed"
    return Check(result, state, [check_of(c, live=live) for c in result.children])


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation with the patient."""

    id: str
    ref: str
    at: datetime | None
    sent: str | None
    sender: str
    from_patient: bool
    recipients: list[str]
    text: str
    in_response_to: str | None
    engine: str | None  # scripted | llm | human, for the patient's replies
    model: str | None
    engine_note: str | None
    issues: list[str] = field(default_factory=list)
    silenced: str | None = None  # why the patient did not answer this one


def thread_of(
    rows: Sequence[fhir_service.ThreadMessage],
    patient_ref: str | None,
    replies: list[SimulatedReply],
    issues: list[SimulatorIssue],
) -> list[Message]:
    """The run's Communications (oldest first) as a
    thread, each reply of the patient with the engine that wrote it, each staff message
    with the simulator's issues on its answer."""
    by_reply = {r.reply: r for r in replies if r.reply}
    silenced = {r.message: r.note for r in replies if r.reply is None}
    issues_of: dict[str, list[str]] = {}
    for issue in issues:
        issues_of.setdefault(issue.message, []).append(issue.issue)
    out: list[Message] = []
    for row in rows:
        resource = loads(row.resource) or {}
        ref = f"Communication/{row.id}"
        sender = str((resource.get("sender") or {}).get("reference", "")) or "–"
        answered = next(
            (
                str(r.get("reference"))
                for r in resource.get("inResponseTo") or []
                if isinstance(r, dict) and r.get("reference")
            ),
            None,
        )
        sim = by_reply.get(ref)
        out.append(
            Message(
                id=row.id,
                ref=ref,
                at=row.last_updated,
                sent=resource.get("sent") if isinstance(resource.get("sent"), str) else None,
                sender=sender,
                from_patient=patient_ref is not None and sender == patient_ref,
                recipients=[
                    str(r.get("reference", ""))
                    for r in resource.get("recipient") or []
                    if isinstance(r, dict)
                ],
                text=message_text(resource),
                in_response_to=answered,
                engine=sim.engine if sim else None,
                model=sim.model if sim else None,
                engine_note=sim.note if sim else None,
                issues=issues_of.get(answered or "", []) if sim else issues_of.get(ref, []),
                silenced=silenced.get(ref),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class CaptureLine:
    """A captured effect (docs/capture.md) as a system line of the conversation: what
    the system sent out of the sandbox, kept on the run."""

    id: str
    kind: str  # sms | email | integration
    at: datetime
    line: str  # e.g. "sms to +15555550123: Your visit is …"
    body: str | None  # the whole text, when the line shows only its start
    bad: bool  # an integration call answered 4xx/5xx


LINE_CHARS = 160  # an e-mail's first line, at most
FAILED = 400  # an integration answer from here on is shown as failed


def _first_line(text: str | None) -> str:
    first = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return first if len(first) <= LINE_CHARS else first[: LINE_CHARS - 1] + "…"


def capture_line(effect: CapturedEffect) -> CaptureLine:
    """`[sms to …: text]` (a patient's reply: `[sms from …: text]`), `[email to …: subject
    — first line]`, `[integration POST pharmacy /orders → 201]`; the template escapes
    every part."""
    if effect.kind == "sms" and effect.direction == "inbound":
        line, whole = f"sms from {effect.from_ or '?'}: {effect.body or ''}", None
        bad = False
    elif effect.kind == "sms":
        line, whole = f"sms to {effect.to or '?'}: {effect.body or ''}", None
        bad = False
    elif effect.kind == "email":
        first = _first_line(effect.body)
        line = f"email to {effect.to or '?'}: {effect.subject or '(no subject)'}"
        line += f" — {first}" if first else ""
        whole = effect.body if effect.body and effect.body.strip() != first else None
        bad = False
    else:
        data = effect.data or {}
        answer = data.get("answer")
        status = answer.get("status") if isinstance(answer, dict) else None
        line = (
            f"integration {data.get('method', '?')} {effect.to or '?'} "
            f"{data.get('path') or '/'} → {status if status is not None else '?'}"
        )
        whole = effect.body
        bad = isinstance(status, int) and status >= FAILED
    return CaptureLine(effect.id, effect.kind, effect.at, line, whole, bad)


@dataclass(frozen=True, slots=True)
class ConversationItem:
    """One line of the conversation view: a message, or a captured effect."""

    message: Message | None = None
    capture: CaptureLine | None = None


def conversation(thread: list[Message], captures: list[CaptureLine]) -> list[ConversationItem]:
    """The messages in their order, each capture placed before the first message written
    after it (a message without a time keeps its place)."""
    out: list[ConversationItem] = []
    pending = sorted(captures, key=lambda c: c.at)
    for m in thread:
        while pending and m.at is not None and pending[0].at <= m.at:
            out.append(ConversationItem(capture=pending.pop(0)))
        out.append(ConversationItem(message=m))
    out.extend(ConversationItem(capture=c) for c in pending)
    return out


@dataclass(frozen=True, slots=True)
class ReplyBox:
    """The human driver's reply box: which message a reply answers, and the turns."""

    answers: Message | None  # None: nothing to answer yet (or answered already)
    turns_used: int
    max_turns: int
    waiting: str | None  # what the person waits for, when there is nothing to answer


def reply_box(
    thread: list[Message], replies: list[SimulatedReply], patient_ref: str | None, max_turns: int
) -> ReplyBox:
    answered = {r.message for r in replies}
    used = len(replies)
    staff = [
        m for m in thread if not m.from_patient and patient_ref and patient_ref in m.recipients
    ]
    latest = staff[-1] if staff else None
    if used >= max_turns:
        return ReplyBox(None, used, max_turns, "The patient has used every turn (maxTurns).")
    if latest is None:
        return ReplyBox(
            None,
            used,
            max_turns,
            "No message to the patient yet: the reply box opens when "
            "the system under test writes one.",
        )
    if latest.ref in answered:
        return ReplyBox(
            None, used, max_turns, f"{latest.ref} is answered: waiting for the next message."
        )
    return ReplyBox(latest, used, max_turns, None)


@dataclass(frozen=True, slots=True)
class TraceRow:
    call: TraceCall
    base: str  # "run" (the run's view), "tenant" (the shared FHIR base) or "" (other API)
    path_html: Markup  # the path after the FHIR base, references linked to the chart


def trace_rows(calls: list[TraceCall], run_id: str) -> list[TraceRow]:
    """Each call with its FHIR path made short (the base is a badge; the whole path is the
    row's title), so a phone shows the resource, not the prefix."""
    run_base = run_view_base("", run_id)
    out = []
    for c in calls:
        base, path = "", c.path
        if path.startswith(run_base):
            base, path = "run", path[len(run_base) :] or "/"
        elif path.startswith(FHIR_PREFIX):
            base, path = "tenant", path[len(FHIR_PREFIX) :] or "/"
        out.append(TraceRow(c, base, ref_links(path, run_id)))
    return out


# --- the chart page ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Version:
    version_id: int
    at: datetime
    interaction: str
    origin: str  # client | fixture | stimulus | simulated patient
    run_id: str | None
    resource: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ChartEntry:
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    resource: dict[str, Any]
    summary: str
    mark: str | None  # what the run named by ?run= did to it
    history: list[Version]

    @property
    def ref(self) -> str:
        return f"{self.resource_type}/{self.id}"

    @property
    def anchor(self) -> str:
        return anchor_of(self.resource_type, self.id)


@dataclass(frozen=True, slots=True)
class ChartGroup:
    resource_type: str
    entries: list[ChartEntry]


def _mark(history: list[Version], run_id: str | None) -> str | None:
    """What the run did to the resource: created it (its system under test), changed it,
    or set it up (fixture, stimulus, the simulated patient's replies)."""
    if run_id is None or not history:
        return None
    ours = [v for v in history if v.run_id == run_id]
    if not ours:
        return None
    first = history[-1]
    if first.run_id == run_id and first.interaction == "create":
        return "created by this run" if first.origin == "client" else f"this run's {first.origin}"
    if any(v.origin == "client" for v in ours):
        return "changed by this run"
    return None


def chart_groups(
    rows: Sequence[fhir_service.ChartResource],
    versions: Sequence[fhir_service.StoredVersion],
    run_id: str | None,
) -> list[ChartGroup]:
    """The chart's resources grouped by type, newest first (the Patient's group first),
    each with its versions newest first."""
    history: dict[tuple[str, str], list[Version]] = {}
    for v in versions:
        history.setdefault((v.resource_type, v.id), []).append(
            Version(
                v.version_id,
                v.last_updated,
                v.interaction,
                ORIGINS.get(v.source, "client") if v.source else "client",
                v.run_id,
                loads(v.resource),
            )
        )
    groups: dict[str, list[ChartEntry]] = {}
    for r in rows:
        resource = loads(r.resource) or {}
        key = (r.resource_type, r.id)
        versions_of = history.get(key, [])
        groups.setdefault(r.resource_type, []).append(
            ChartEntry(
                r.resource_type,
                r.id,
                r.version_id,
                r.last_updated,
                resource,
                summary_of(resource),
                _mark(versions_of, run_id),
                versions_of,
            )
        )
    ordered = sorted(groups.items(), key=lambda kv: (kv[0] != "Patient", kv[0]))
    return [ChartGroup(t, entries) for t, entries in ordered]
