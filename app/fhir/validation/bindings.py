"""The REQUIRED terminology bindings checked (FHIR R4 4.0.1 value sets), as a trie of
path steps per resource type; fhir.resources checks no codes."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Final

from app.fhir.validation.issues import ValidationIssue


@dataclass(frozen=True, slots=True)
class _ValueSet:
    name: str
    codes: tuple[str, ...]  # spec order, for messages
    allowed: frozenset[str]
    # Set for CodeableConcept bindings: only codings of this system are checked
    # (others may be translations), and the binding path ends at ``coding``.
    system: str | None = None


def _vs(name: str, codes: str, system: str | None = None) -> _ValueSet:
    listed = tuple(codes.split())
    return _ValueSet(name, listed, frozenset(listed), system)


_GENDER = _vs("administrative-gender", "male female other unknown")


_NAME_USE = _vs("name-use", "usual official temp nickname anonymous old maiden")


_CONTACT_POINT_SYSTEM = _vs("contact-point-system", "phone fax email pager url sms other")


_CONTACT_POINT_USE = _vs("contact-point-use", "home work temp old mobile")


_ADDRESS_USE = _vs("address-use", "home work temp old billing")


_ADDRESS_TYPE = _vs("address-type", "postal physical both")


_IDENTIFIER_USE = _vs("identifier-use", "usual official temp secondary old")


_LINK_TYPE = _vs("link-type", "replaced-by replaces refer seealso")


_APPOINTMENT_STATUS = _vs(
    "appointmentstatus",
    "proposed pending booked arrived fulfilled cancelled noshow entered-in-error"
    " checked-in waitlist",
)


_PARTICIPATION_STATUS = _vs("participationstatus", "accepted declined tentative needs-action")


_PARTICIPANT_REQUIRED = _vs("participantrequired", "required optional information-only")


_SLOT_STATUS = _vs("slotstatus", "busy free busy-unavailable busy-tentative entered-in-error")


_LOCATION_STATUS = _vs("location-status", "active suspended inactive")


_LOCATION_MODE = _vs("location-mode", "instance kind")


_TASK_STATUS = _vs(
    "task-status",
    "draft requested received accepted rejected ready cancelled in-progress on-hold failed"
    " completed entered-in-error",
)


_TASK_INTENT = _vs(
    "task-intent",
    "unknown proposal plan order original-order reflex-order filler-order instance-order option",
)


_REQUEST_PRIORITY = _vs("request-priority", "routine urgent asap stat")


_EVENT_STATUS = _vs(
    "event-status",
    "preparation in-progress not-done on-hold stopped completed entered-in-error unknown",
)


_REQUEST_STATUS = _vs(
    "request-status", "draft active on-hold revoked completed entered-in-error unknown"
)


_REQUEST_INTENT = _vs(
    "request-intent",
    "proposal plan directive order original-order reflex-order filler-order instance-order option",
)


_CARE_PLAN_INTENT = _vs("care-plan-intent", "proposal plan order option")


_MEDICATIONREQUEST_STATUS = _vs(
    "medicationrequest-status",
    "active on-hold cancelled completed entered-in-error stopped draft unknown",
)


_MEDICATIONREQUEST_INTENT = _vs(
    "medicationrequest-intent",
    "proposal plan order original-order reflex-order filler-order instance-order option",
)


_MEDICATION_STATEMENT_STATUS = _vs(
    "medication-statement-status",
    "active completed entered-in-error intended stopped on-hold unknown not-taken",
)


_MEDICATION_STATUS = _vs("medication-status", "active inactive entered-in-error")


_OBSERVATION_STATUS = _vs(
    "observation-status",
    "registered preliminary final amended corrected cancelled entered-in-error unknown",
)


_DIAGNOSTIC_REPORT_STATUS = _vs(
    "diagnostic-report-status",
    "registered partial preliminary final amended corrected appended cancelled"
    " entered-in-error unknown",
)


_FM_STATUS = _vs("fm-status", "active cancelled draft entered-in-error")


_ENCOUNTER_STATUS = _vs(
    "encounter-status",
    "planned arrived triaged in-progress onleave finished cancelled entered-in-error unknown",
)


_CONDITION_CLINICAL = _vs(
    "condition-clinical",
    "active recurrence relapse inactive remission resolved",
    "http://terminology.hl7.org/CodeSystem/condition-clinical",
)


_CONDITION_VER_STATUS = _vs(
    "condition-ver-status",
    "unconfirmed provisional differential confirmed refuted entered-in-error",
    "http://terminology.hl7.org/CodeSystem/condition-ver-status",
)


_ALLERGY_CLINICAL = _vs(
    "allergyintolerance-clinical",
    "active inactive resolved",
    "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical",
)


_ALLERGY_VERIFICATION = _vs(
    "allergyintolerance-verification",
    "unconfirmed confirmed refuted entered-in-error",
    "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification",
)


_ALLERGY_TYPE = _vs("allergy-intolerance-type", "allergy intolerance")


_ALLERGY_CATEGORY = _vs("allergy-intolerance-category", "food medication environment biologic")


_ALLERGY_CRITICALITY = _vs("allergy-intolerance-criticality", "low high unable-to-assess")


_DOCUMENT_REFERENCE_STATUS = _vs("document-reference-status", "current superseded entered-in-error")


_COMPOSITION_STATUS = _vs("composition-status", "preliminary final amended entered-in-error")


_QUESTIONNAIRE_ANSWERS_STATUS = _vs(
    "questionnaire-answers-status", "in-progress completed amended entered-in-error stopped"
)


_Rows = tuple[tuple[str, _ValueSet], ...]


# Datatype bindings, spliced into every resource element of that type below.
_HUMAN_NAME: _Rows = (("use", _NAME_USE),)


_CONTACT_POINT: _Rows = (("system", _CONTACT_POINT_SYSTEM), ("use", _CONTACT_POINT_USE))


_ADDRESS: _Rows = (("use", _ADDRESS_USE), ("type", _ADDRESS_TYPE))


_IDENTIFIER: _Rows = (("use", _IDENTIFIER_USE),)


def _at(prefix: str, rows: _Rows) -> _Rows:
    return tuple((f"{prefix}.{path}", vs) for path, vs in rows)


# resource type -> (dotted path, value set). A path step that holds an array
# fans out over all items, so "participant.status" covers every participant.
REQUIRED_BINDINGS: Final[dict[str, _Rows]] = {
    "Patient": (
        ("gender", _GENDER),
        *_at("identifier", _IDENTIFIER),
        *_at("name", _HUMAN_NAME),
        *_at("telecom", _CONTACT_POINT),
        *_at("address", _ADDRESS),
        ("contact.gender", _GENDER),
        *_at("contact.name", _HUMAN_NAME),
        *_at("contact.telecom", _CONTACT_POINT),
        *_at("contact.address", _ADDRESS),
        ("link.type", _LINK_TYPE),
    ),
    "Practitioner": (
        ("gender", _GENDER),
        *_at("identifier", _IDENTIFIER),
        *_at("name", _HUMAN_NAME),
        *_at("telecom", _CONTACT_POINT),
        *_at("address", _ADDRESS),
        *_at("qualification.identifier", _IDENTIFIER),
    ),
    "PractitionerRole": (
        *_at("identifier", _IDENTIFIER),
        *_at("telecom", _CONTACT_POINT),
    ),
    "Organization": (
        *_at("identifier", _IDENTIFIER),
        *_at("telecom", _CONTACT_POINT),
        *_at("address", _ADDRESS),
        *_at("contact.name", _HUMAN_NAME),
        *_at("contact.telecom", _CONTACT_POINT),
        *_at("contact.address", _ADDRESS),
    ),
    "Location": (
        ("status", _LOCATION_STATUS),
        ("mode", _LOCATION_MODE),
        *_at("identifier", _IDENTIFIER),
        *_at("telecom", _CONTACT_POINT),
        *_at("address", _ADDRESS),
    ),
    "Appointment": (
        ("status", _APPOINTMENT_STATUS),
        ("participant.status", _PARTICIPATION_STATUS),
        ("participant.required", _PARTICIPANT_REQUIRED),
    ),
    "Slot": (("status", _SLOT_STATUS),),
    "Task": (
        ("status", _TASK_STATUS),
        ("intent", _TASK_INTENT),
        ("priority", _REQUEST_PRIORITY),
    ),
    "Communication": (
        ("status", _EVENT_STATUS),
        ("priority", _REQUEST_PRIORITY),
    ),
    "ServiceRequest": (
        ("status", _REQUEST_STATUS),
        ("intent", _REQUEST_INTENT),
        ("priority", _REQUEST_PRIORITY),
    ),
    "MedicationRequest": (
        ("status", _MEDICATIONREQUEST_STATUS),
        ("intent", _MEDICATIONREQUEST_INTENT),
        ("priority", _REQUEST_PRIORITY),
    ),
    "MedicationStatement": (("status", _MEDICATION_STATEMENT_STATUS),),
    "Medication": (("status", _MEDICATION_STATUS),),
    "Observation": (("status", _OBSERVATION_STATUS),),
    "DiagnosticReport": (("status", _DIAGNOSTIC_REPORT_STATUS),),
    "Coverage": (("status", _FM_STATUS),),
    "Encounter": (("status", _ENCOUNTER_STATUS),),
    "Condition": (
        ("clinicalStatus.coding", _CONDITION_CLINICAL),
        ("verificationStatus.coding", _CONDITION_VER_STATUS),
    ),
    "AllergyIntolerance": (
        ("clinicalStatus.coding", _ALLERGY_CLINICAL),
        ("verificationStatus.coding", _ALLERGY_VERIFICATION),
        ("type", _ALLERGY_TYPE),
        ("category", _ALLERGY_CATEGORY),
        ("criticality", _ALLERGY_CRITICALITY),
    ),
    "DocumentReference": (
        ("status", _DOCUMENT_REFERENCE_STATUS),
        ("docStatus", _COMPOSITION_STATUS),
    ),
    "QuestionnaireResponse": (("status", _QUESTIONNAIRE_ANSWERS_STATUS),),
    "CarePlan": (
        ("status", _REQUEST_STATUS),
        ("intent", _CARE_PLAN_INTENT),
    ),
}


@dataclass(frozen=True, slots=True)
class _BindingNode:
    """The binding table of one resource type as a trie of path steps.

    Shared prefixes ("contact.name.use", "contact.telecom.system") are then
    looked up once per write rather than once per row.
    """

    children: dict[str, _BindingNode]
    value_sets: tuple[_ValueSet, ...]  # bindings whose path ends here


def _trie(
    rows: typing.Iterable[tuple[str, _ValueSet]], value_sets: tuple[_ValueSet, ...] = ()
) -> _BindingNode:
    deeper: dict[str, list[tuple[str, _ValueSet]]] = {}
    ending: dict[str, list[_ValueSet]] = {}
    for path, vs in rows:
        step, _, rest = path.partition(".")
        deeper.setdefault(step, [])
        ending.setdefault(step, [])
        if rest:
            deeper[step].append((rest, vs))
        else:
            ending[step].append(vs)
    return _BindingNode(
        {step: _trie(deeper[step], tuple(ending[step])) for step in deeper}, value_sets
    )


BINDING_TRIES: Final[dict[str, _BindingNode]] = {
    rt: _trie(rows) for rt, rows in REQUIRED_BINDINGS.items()
}


def check_bindings(
    resource_type: str, resource: dict[str, Any], root: str, out: list[ValidationIssue]
) -> None:
    trie = BINDING_TRIES.get(resource_type)
    if trie is not None:
        _check_node(trie, resource, root, out)


def _check_node(
    trie: _BindingNode, node: dict[str, Any], expr: str, out: list[ValidationIssue]
) -> None:
    for step, child in trie.children.items():
        value = node.get(step)
        if value is None:
            continue
        sub = f"{expr}.{step}"
        items = (
            [(item, f"{sub}[{i}]") for i, item in enumerate(value)]
            if isinstance(value, list)
            else [(value, sub)]
        )
        for item, where in items:
            for vs in child.value_sets:
                _check_code(vs, item, where, out)
            if child.children and isinstance(item, dict):
                _check_node(child, item, where, out)


def _check_code(vs: _ValueSet, value: Any, expr: str, out: list[ValidationIssue]) -> None:
    if vs.system is not None:
        if not isinstance(value, dict) or value.get("system") != vs.system:
            return
        value, expr = value.get("code"), f"{expr}.code"
    # Non-strings are type errors, reported by the structural walk.
    if isinstance(value, str) and value not in vs.allowed:
        out.append(
            ValidationIssue(
                expr,
                f"{value!r} is not a valid code for {expr} "
                f"(value set {vs.name}; allowed: {', '.join(vs.codes)})",
                "code-invalid",
            )
        )


def required_codes(resource_type: str, element: str) -> tuple[str, ...]:
    """The codes a top-level element's required binding allows, in spec order; () when
    the element has no required binding we check (scenario mutants pick wrong values
    from here so they stay valid FHIR)."""
    node = BINDING_TRIES.get(resource_type)
    child = node.children.get(element) if node is not None else None
    if child is None:
        return ()
    return tuple(code for vs in child.value_sets for code in vs.codes)
