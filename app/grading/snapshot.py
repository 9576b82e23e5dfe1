"""What grading sees of a run, and what it answers: plain data, no I/O.

The runs service builds a `RunSnapshot` from the database (candidates already filtered
in SQL) and hands it with the run's expanded expectations to
`app.grading.engine.grade`, which returns the contract's `Verdict` (its
`ExpectationResult`s and their `Evidence` are the contract's classes, built as grading
goes). Within a pass each expectation is `Graded`: its result, and the working data
other expectations read of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.kit.consent import ConsentAction
from understudy_client.contract import runs as contract


@dataclass(frozen=True, slots=True)
class ChangedResource:
    """A resource written during the run by the system under test (not by setup or
    stimulus), as it reads now. `resource` is None when it is now deleted."""

    resource_type: str
    id: str
    resource: dict[str, Any] | None
    first_changed_at: datetime
    last_changed_at: datetime
    created: bool  # first written during the run (not an update of an older resource)
    all_refs: tuple[str, ...]  # every "Type/id" reference in its body
    run_id: str | None  # the run it belongs to (None: tenant-wide, scope "tenant" only)
    # The version before the run's first write of it, for an update or delete of an older
    # resource (None when created during the run, or when a snapshot does not need it).
    before: dict[str, Any] | None = None
    # Written by the run (through its view, or attributed to it) — a shared directory
    # resource (a Slot, a Practitioner) edited through the run's view included.
    via_run: bool = False


SIMULATED_TAG = ("urn:understudy:source", "simulated-patient")


def is_simulated(changed: ChangedResource) -> bool:
    """Written by the simulated patient (a reply): never the system's change."""
    meta = (changed.resource or changed.before or {}).get("meta") or {}
    return any(
        isinstance(t, dict) and (t.get("system"), t.get("code")) == SIMULATED_TAG
        for t in meta.get("tag") or []
    )


@dataclass(frozen=True, slots=True)
class Call:
    """A traced API call. `path` is relative to the FHIR base for FHIR calls
    (`/Appointment/$find`, `/Patient/123`) and absolute otherwise
    (`/api/eligibility/$check`); no query string."""

    at: datetime
    method: str
    path: str
    query: str
    status: int
    transport: str  # rest | mcp
    refs: tuple[str, ...]
    # The kept request and response bodies (parsed JSON, else text), when an `api_call`
    # expectation's `where` reads them; None otherwise.
    request: Any = None
    response: Any = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """A successful webhook delivery (filled in once webhooks exist)."""

    at: datetime
    event: str
    resource_ref: str


@dataclass(frozen=True, slots=True)
class Revealed:
    """A fact the simulated patient revealed: one per topic per reply. `at` is when the
    reply was written; `asked_ref` the staff message it answers (its `inResponseTo`),
    and `asked` whether that message asked about the topic — by the fact's keywords, or as
    the model judged (False: the patient let it slip unasked)."""

    at: datetime
    topic: str
    reply_ref: str  # "Communication/<id>"
    asked_ref: str  # "Communication/<id>"
    asked: bool = True


@dataclass(frozen=True, slots=True)
class SentText:
    """A text the run's system sent out of the sandbox, which kept it instead (a captured
    SMS or e-mail, app/capture): text truth reads it like a message."""

    ref: str  # "sms:<sid>" or "email:<id>": no FHIR reference, no chart link
    kind: str  # sms | email
    at: datetime
    to: str
    body: str


@dataclass(frozen=True, slots=True)
class Decision:
    """The patient's word on one action, for `consent`: agreed (True) or declined, at
    `at`, in the patient's message `reply_ref` answering the staff message `asked_ref`
    (None: the patient's own message, unasked — "please cancel my appointment")."""

    at: datetime
    action: ConsentAction
    agreed: bool
    reply_ref: str  # "Communication/<id>"
    asked_ref: str | None = None


@dataclass(frozen=True, slots=True)
class Version:
    """One stored version of a resource the system changed, for `consent` (when a
    booking became cancelled). `by_system`: written by the system under test (not setup,
    stimulus or the simulated patient)."""

    at: datetime
    resource: dict[str, Any] | None  # None: deleted
    by_system: bool


@dataclass
class RunSnapshot:
    run_id: str
    started_at: datetime
    now: datetime
    deadline: datetime
    fixture: dict[str, str]  # symbol -> "Type/id" (fixture and stimulus resources)
    current: dict[str, dict[str, Any] | None]  # symbol -> resource as it reads now
    patient_refs: frozenset[str]  # "Patient/<id>" of the fixture patients
    changed: list[ChangedResource] = field(default_factory=list)
    # The texts it sent out that the sandbox kept (filled when a text-truth reads them).
    sent: list[SentText] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    webhooks_supported: bool = False
    revealed: list[Revealed] = field(default_factory=list)  # for `asked`
    patient_replies: int = 0  # replies the simulated patient wrote
    final: bool = False  # grading at the end (finish, deadline): rubric may be judged
    # What the system under test was shown, for a message check's `grounded` (filled only
    # when a scenario has one): the brief, fixture and stimulus resources, the patient's
    # messages, the response bodies of its calls (strings or parsed JSON).
    shown: list[Any] = field(default_factory=list)
    # The clinic's time zones (IANA names) messages may state times in, besides UTC.
    zones: tuple[str, ...] = ("UTC",)
    # References that stand for another in the tenant's directory (a PractitionerRole
    # or Schedule of a practitioner -> "Practitioner/<id>"), for `matches-reference`.
    aliases: dict[str, str] = field(default_factory=dict)
    # What a text may call the directory's practitioners, locations and organisation
    # ("Type/id" -> names: "Chen", "Sarah Chen", "Northgate"), for `text-truth`.
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # For `consent` (read only when a scenario has one): the patient's agreements and
    # refusals, oldest first; the patients whose record says no SMS (patient ref -> the
    # Consent or preference that says so); the run's captured integration calls (`to`:
    # the integration's name); every version of the Appointments and MedicationRequests
    # the system changed ("Type/id" -> versions, oldest first).
    decisions: list[Decision] = field(default_factory=list)
    opted_out: dict[str, str] = field(default_factory=dict)
    integration_calls: list[SentText] = field(default_factory=list)
    versions: dict[str, list[Version]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Graded:
    """One expectation graded: its `result` as the API shows it (the contract's
    `ExpectationResult`: an any_of's alternatives are its `children`), beside what other
    expectations of the same pass read of it and the API does not show."""

    result: contract.ExpectationResult
    # When its earliest evidence happened (for `before` and `after`); None unless it passed.
    first_at: datetime | None = None
    # Every resource ("Type/id") in its evidence, uncapped: what a `changes` expectation
    # allows when it names this one, and where a message's `mentions` reads.
    refs: frozenset[str] = frozenset()
