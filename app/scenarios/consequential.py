"""Which elements of a resource decide what a write did, per resource type: the data the
end-state comparison (`app.grading.reference`) reads.

Reviewed against the FHIR R4 element definitions (hl7.org/fhir/R4, each type's
"Detailed Descriptions"): an element is *consequential* when changing it changes what is
done, to whom, by whom, when, or what a result means — the modifiers (`status`,
`intent`, `doNotPerform`, `verificationStatus`…), the subjects and actors, the codes,
values and times. *Informational* elements are left to the text checks: narrative
`text`, `meta`, free text (`note`, `description`, `comment`, `patientInstruction`,
payload content, `conclusion`), reasons (`reasonCode`/`reasonReference`, an
Appointment's `cancelationReason`: the why is said in words and read by the text
checks), identifiers the system invents, and the moments of writing (`authoredOn`,
`created`, `sent`, `issued`…). An unlisted type compares every element but the informational basics.

Each `Element` names a top-level element (a choice type by its stem: `occurrence` for
`occurrenceDateTime`/`occurrencePeriod`/`occurrenceTiming`) and how its values are
compared (`kind`, below). `always`: compared even when the reference solution leaves it
out — the run must leave it out too, or give it a value that means the same as absent
(`absent`: a Task's `priority` of routine). Without `always`, an element the reference
leaves out may be added freely (a Location participant, a category). An update of a
resource that existed before the run is held to every element of the table: its
before-state is what the reference solution kept, so any consequential change beyond
the reference's is a deviation.

Kinds:
- `value`: a primitive, equal (with `groups`: values in one group are equal — the
  statuses that all mean "to do");
`optional`: the run may leave out an element the reference gives (a Task's `basedOn`
link, an Appointment's `serviceType`); what it gives must still agree.

- `concept`: CodeableConcept(s) or Coding(s), by system + code (display and text
  ignored): each code the reference gives must be there, and no other code of a system
  the reference uses (another laterality, another performer type);
- `reference`: Reference(s) by target, the directory's aliases resolved (a
  PractitionerRole of Dr. Chen is Dr. Chen), order ignored. One the reference solution
  leaves out may be added only if it points at something known: a resource the
  reference solution's writes name, one the run created, the fixture patients or the
  clinic's directory — never at a resource the reference solution left alone (the
  look-alike patient's order);
- `time`: an instant, a date, or a choice of dateTime / Period / Timing reduced to its
  start (and end, where the reference gives a different one), as instants;
- `duration`: an Appointment's length (end − start, or minutesDuration);
- `participant`: an Appointment's participants: actor (resolved) and whether they take
  part (declined is not), Location participants left out (where is informational);
- `deferral`: a Task's restriction or execution period: deferred (to the date it starts)
  when it starts over a day after the run did, else as good as absent;
- `dosage`: dosage instructions by dose, timing, route and as-needed (text ignored);
- `json`: anything else, as JSON without displays and narrative, list order ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal[
    "value",
    "concept",
    "reference",
    "time",
    "duration",
    "participant",
    "deferral",
    "dosage",
    "json",
]


@dataclass(frozen=True, slots=True)
class Element:
    path: str
    kind: Kind = "json"
    always: bool = False
    absent: tuple[object, ...] = ()  # normalised values that mean the same as absent
    groups: tuple[frozenset[str], ...] = ()
    # The run may leave out what the reference gives (a Task's `basedOn`, an
    # Appointment's `serviceType`): what it does give must still agree.
    optional: bool = False


# Never compared, on any type: bookkeeping, narrative and the moments of writing.
INFORMATIONAL_BASICS = frozenset(
    {
        "resourceType",
        "id",
        "meta",
        "text",
        "implicitRules",
        "language",
        "contained",
        "extension",
        "identifier",
        "note",
        "description",
        "comment",
        # The moments of writing, by their R4 names across types: each write has its own.
        "authored",
        "authoredOn",
        "created",
        "date",
        "dateAsserted",
        "issued",
        "lastModified",
        "received",
        "recorded",
        "recordedDate",
        "sent",
    }
)

# Task statuses that all mean "someone is to do this" (R4 task-status: requested,
# received, accepted, ready and in-progress are the states of work not yet done or
# being done); draft, on-hold, rejected, cancelled, failed, completed and
# entered-in-error each say something else.
_TASK_TO_DO = frozenset({"requested", "received", "accepted", "ready", "in-progress"})
# R4 request-priority: routine, then three expedited levels whose order (urgent < asap <
# stat) is local policy; routine against expedited is the consequential difference.
_EXPEDITED = (frozenset({"urgent", "asap", "stat"}),)


def _e(path: str, kind: Kind = "json", **kw: object) -> Element:
    return Element(path, kind, **kw)  # type: ignore[arg-type]


TABLE: dict[str, tuple[Element, ...]] = {
    "Appointment": (
        _e("status", "value", always=True),
        _e("serviceCategory", "concept", optional=True),
        _e("serviceType", "concept", optional=True),
        _e("specialty", "concept", optional=True),
        _e("appointmentType", "concept", optional=True),
        _e("priority", "value", always=True, absent=(0,)),
        _e("start", "time"),
        _e("duration", "duration"),
        _e("basedOn", "reference", optional=True),
        _e("participant", "participant", always=True),
        _e("requestedPeriod", "time"),
    ),
    "Slot": (
        _e("status", "value", always=True),
        _e("schedule", "reference"),
        _e("start", "time"),
        _e("end", "time"),
        _e("serviceType", "concept"),
        _e("overbooked", "value"),
    ),
    "Task": (
        _e("status", "value", always=True, groups=(_TASK_TO_DO,)),
        _e("statusReason", "concept", optional=True),
        _e("businessStatus", "concept", optional=True),
        _e("intent", "value", always=True),
        _e("priority", "value", always=True, absent=("routine",), groups=_EXPEDITED),
        _e("code", "concept", optional=True),
        _e("focus", "reference", optional=True),
        _e("for", "reference"),
        _e("basedOn", "reference", optional=True),
        _e("partOf", "reference", optional=True),
        _e("encounter", "reference", optional=True),
        _e("owner", "reference"),
        _e("performerType", "concept", optional=True),
        _e("restriction", "deferral", always=True),
        _e("executionPeriod", "deferral", always=True),
    ),
    "ServiceRequest": (
        _e("status", "value", always=True),
        _e("intent", "value", always=True),
        _e("category", "concept", optional=True),
        _e("priority", "value", always=True, absent=("routine",), groups=_EXPEDITED),
        _e("doNotPerform", "value", always=True, absent=(False,)),
        _e("code", "concept"),
        _e("orderDetail", "concept", optional=True),
        _e("quantity", "json"),
        _e("subject", "reference"),
        _e("basedOn", "reference", optional=True),
        _e("replaces", "reference", optional=True),
        _e("occurrence", "time"),
        _e("asNeeded", "json"),
        _e("requester", "reference"),
        _e("performerType", "concept", optional=True),
        _e("performer", "reference"),
        _e("locationReference", "reference", optional=True),
        _e("bodySite", "concept"),
        _e("specimen", "reference", optional=True),
    ),
    "MedicationRequest": (
        _e("status", "value", always=True),
        _e("intent", "value", always=True),
        _e("category", "concept"),
        _e("priority", "value", always=True, absent=("routine",), groups=_EXPEDITED),
        _e("doNotPerform", "value", always=True, absent=(False,)),
        _e("medication", "json"),
        _e("subject", "reference"),
        _e("requester", "reference"),
        _e("performer", "reference"),
        _e("basedOn", "reference", optional=True),
        _e("priorPrescription", "reference", optional=True),
        _e("courseOfTherapyType", "concept"),
        _e("dosageInstruction", "dosage", always=True),
        _e("dispenseRequest", "json"),
        _e("substitution", "json"),
    ),
    "Communication": (
        _e("status", "value", always=True),
        _e("category", "concept"),
        _e("priority", "value", always=True, absent=("routine",), groups=_EXPEDITED),
        _e("subject", "reference"),
        _e("recipient", "reference"),
        _e("basedOn", "reference"),
        _e("partOf", "reference"),
    ),
    "CommunicationRequest": (
        _e("status", "value", always=True),
        _e("category", "concept"),
        _e("priority", "value", always=True, absent=("routine",), groups=_EXPEDITED),
        _e("doNotPerform", "value", always=True, absent=(False,)),
        _e("medium", "concept"),
        _e("subject", "reference"),
        _e("recipient", "reference"),
        _e("basedOn", "reference"),
        _e("occurrence", "time"),
    ),
    "Observation": (
        _e("status", "value", always=True),
        _e("category", "concept"),
        _e("code", "concept", always=True),
        _e("subject", "reference"),
        _e("focus", "reference"),
        _e("effective", "time"),
        _e("value", "json", always=True),
        _e("dataAbsentReason", "concept", always=True),
        _e("interpretation", "concept", always=True),
        _e("bodySite", "concept"),
        _e("method", "concept"),
        _e("specimen", "reference"),
        _e("referenceRange", "json"),
        _e("hasMember", "reference"),
        _e("derivedFrom", "reference"),
        _e("component", "json", always=True),
        _e("basedOn", "reference"),
    ),
    "DiagnosticReport": (
        _e("status", "value", always=True),
        _e("category", "concept"),
        _e("code", "concept", always=True),
        _e("subject", "reference"),
        _e("effective", "time"),
        _e("result", "reference"),
        _e("conclusionCode", "concept", always=True),
        _e("basedOn", "reference"),
        _e("specimen", "reference"),
    ),
    "Coverage": (
        _e("status", "value", always=True),
        _e("type", "concept"),
        _e("policyHolder", "reference"),
        _e("subscriber", "reference"),
        _e("subscriberId", "value"),
        _e("beneficiary", "reference"),
        _e("dependent", "value"),
        _e("relationship", "concept"),
        _e("period", "json", always=True),
        _e("payor", "reference"),
        _e("class", "json"),
        _e("order", "value"),
        _e("network", "value"),
        _e("costToBeneficiary", "json"),
        _e("subrogation", "value"),
        _e("contract", "reference"),
    ),
    "Patient": (
        _e("identifier", "json", always=True),
        _e("active", "value", always=True),
        _e("name", "json", always=True),
        _e("telecom", "json", always=True),
        _e("gender", "value", always=True),
        _e("birthDate", "value", always=True),
        _e("deceased", "json", always=True),
        _e("address", "json", always=True),
        _e("maritalStatus", "concept"),
        _e("multipleBirth", "json"),
        _e("contact", "json", always=True),
        _e("communication", "json", always=True),
        _e("generalPractitioner", "reference"),
        _e("managingOrganization", "reference"),
        _e("link", "json", always=True),
    ),
    "Condition": (
        _e("clinicalStatus", "concept", always=True),
        _e("verificationStatus", "concept", always=True),
        _e("category", "concept"),
        _e("severity", "concept"),
        _e("code", "concept", always=True),
        _e("bodySite", "concept", always=True),
        _e("subject", "reference"),
        _e("onset", "time"),
        _e("abatement", "time", always=True),
        _e("stage", "json"),
        _e("evidence", "json"),
    ),
    "AllergyIntolerance": (
        _e("clinicalStatus", "concept", always=True),
        _e("verificationStatus", "concept", always=True),
        _e("type", "value"),
        _e("category", "json"),
        _e("criticality", "value"),
        _e("code", "concept", always=True),
        _e("patient", "reference"),
        _e("onset", "time"),
        _e("reaction", "json"),
    ),
    "DocumentReference": (
        _e("status", "value", always=True),
        _e("docStatus", "value"),
        _e("type", "concept"),
        _e("category", "concept"),
        _e("subject", "reference"),
        _e("author", "reference"),
        _e("authenticator", "reference"),
        _e("custodian", "reference"),
        _e("relatesTo", "json", always=True),
        _e("securityLabel", "concept", always=True),
        _e("context", "json"),
    ),
    "Encounter": (
        _e("status", "value", always=True),
        _e("class", "concept"),
        _e("type", "concept"),
        _e("serviceType", "concept"),
        _e("priority", "concept"),
        _e("subject", "reference"),
        _e("basedOn", "reference"),
        _e("participant", "json"),
        _e("appointment", "reference"),
        _e("period", "json"),
        _e("hospitalization", "json"),
        _e("location", "json"),
        _e("serviceProvider", "reference"),
        _e("partOf", "reference"),
    ),
    "Flag": (
        _e("status", "value", always=True),
        _e("category", "concept"),
        _e("code", "concept", always=True),
        _e("subject", "reference"),
        _e("period", "json"),
        _e("encounter", "reference"),
    ),
}

# The table's R4 choice elements (`value[x]`, `occurrence[x]` …), named by their stem.
CHOICE_STEMS = frozenset(
    {
        "value",
        "effective",
        "occurrence",
        "medication",
        "asNeeded",
        "onset",
        "abatement",
        "deceased",
        "multipleBirth",
    }
)

# Written once sent and never compared one to one: messages pair as a conversation.
MESSAGE_TYPES = frozenset({"Communication"})
# Statuses in which a message has gone out.
# R4 event-status: completed, or in-progress ("the transmission is ongoing"); not
# preparation, on-hold, not-done, stopped, entered-in-error or unknown.
SENT_STATUSES = frozenset({"completed", "in-progress"})
# Changes that follow from a booking rather than being one (a Slot marked busy or free).
DERIVED_TYPES = frozenset({"Slot"})
# Records about the work, not the work: a system that logs what it did (R4 Provenance,
# AuditEvent) changes nothing in the chart.
BOOKKEEPING_TYPES = frozenset({"Provenance", "AuditEvent"})


def elements_of(resource_type: str, *resources: dict[str, object] | None) -> tuple[Element, ...]:
    """The consequential elements of a type: the table's, or for an unlisted type every
    element (of the resources given) but the informational basics."""
    listed = TABLE.get(resource_type)
    if listed is not None:
        return listed
    keys = sorted(
        {k for r in resources if r for k in r if k not in INFORMATIONAL_BASICS and k[0] != "_"}
    )
    return tuple(Element(k, "json") for k in keys)


def element_paths(resource_type: str) -> list[str]:
    """The paths a `free` choice may name for a type (sub-paths allowed: `participant.actor`)."""
    listed = TABLE.get(resource_type)
    return [e.path for e in listed] if listed is not None else []
