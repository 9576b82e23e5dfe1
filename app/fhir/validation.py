"""Structural and terminology validation of incoming FHIR R4 resources.

Pure module: no app imports, no I/O. ``validate_resource`` returns every
problem found, as ``ValidationIssue``s ready for an OperationOutcome.

Timing (Python 3.11, this machine; min of 5 x 20,000 runs, after first use):

- typical Patient (meta, extension, identifier, 2 names, 2 telecoms,
  address, contact, birthDate + extension, link; ~45 primitives): ~52 µs
- minimal Patient: ~6 µs; Appointment with 2 participants: ~13 µs
- the typical Patient with 3 errors: ~53 µs
- for comparison, fhir.resources ``Patient.model_validate`` of the same
  Patient alone: ~240 µs (``model_validate_json`` ~300 µs)
- first use of a type imports its R4B models lazily: ~150 ms for the first
  Patient (loads fhir.resources' type registry), a few ms per further type.

How: the R4B model classes of fhir.resources supply the element tables (JSON
names, FHIR types, arrays, required elements, choice groups, contained
resources), read once per class; a walk over the parsed JSON checks it
against them, checks primitives against the R4 datatype regexes, and then
checks the REQUIRED bindings in ``_REQUIRED_BINDINGS`` (fhir.resources checks
no codes). ``model_validate`` is deliberately not run, because

- it is too slow for every write: fhir_core runs Python validators
  (null checks, choice and required checks) on every nested element;
- it is lax: ``"birthDate": 0`` becomes 1970-01-01, ``"active": "true"``
  becomes True, ``"multipleBirthInteger": "3"`` becomes 3, and
  ``strict=True`` is not passed down to nested models;
- it hides errors: a missing required primitive (``Slot.status``) is only
  reported once everything else in the resource is valid, and choice errors
  point at the parent rather than the element;
- it raises non-pydantic exceptions on some input (``KeyError`` for an
  unknown contained resourceType, ``AttributeError`` for a number as an
  Extension url).

The tests mutate realistic resources (top level and nested, seeded) and
require that whatever ``model_validate`` rejects is rejected here too; an
ad-hoc run of 20,000 random mutations found no miss.

R4 vs R4B: R4 (4.0.1) models are not shipped, so the R4B (4.3.0) ones are used.
Compared element by element with the R4 definitions that ship with fhirpathpy,
the resources this server serves (Patient, Practitioner, PractitionerRole,
Organization, Location, Schedule, Slot, Appointment, Encounter, Task,
Communication, ServiceRequest, MedicationRequest, MedicationStatement,
Medication, Observation, DiagnosticReport, Condition, AllergyIntolerance,
DocumentReference, QuestionnaireResponse, CarePlan, Coverage and ~60 more) have
the same element names and types. Differences found:

- ``Extension.valueMeta`` is R4 only: rejected as an unknown element.
  ``Extension.valueCodeableReference``/``valueRatioRange`` are R4B only and
  accepted.
- R4-only resource types (MedicinalProduct*, EffectEvidenceSynthesis,
  RiskEvidenceSynthesis, Substance{Specification,Polymer,Protein,NucleicAcid,
  ReferenceInformation,SourceMaterial}) are unknown; R4B-only types
  (Citation, Ingredient, SubscriptionTopic, ...) are known. Evidence and
  EvidenceVariable were reworked in R4B; ActivityDefinition and
  PlanDefinition gained ``subjectCanonical``.
- Cardinalities could not be compared mechanically (fhirpathpy has none);
  the common resources' required elements match R4.
- fhir.resources types ``uuid`` as a version-4 UUID; FHIR allows any
  version, and this module checks the FHIR ``urn:uuid:`` form instead.

Accepted on purpose: ``null`` values and empty arrays (invalid FHIR JSON, but
harmless and sent by some clients; an empty array of a required element
counts as missing). Not checked: xhtml content, invariants (FHIRPath
constraints), reference targets, extensible/preferred bindings.
"""

from __future__ import annotations

import datetime
import re
import types
import typing
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

__all__ = ["Element", "ValidationIssue", "elements_of", "is_known_type", "validate_resource"]


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    expression: str  # FHIRPath-style location: "Appointment.participant[0].status"
    message: str  # names the element and the problem
    code: str = "invalid"  # OperationOutcome issue.code: invalid, code-invalid, required,
    # structure (wrong JSON type, unknown element) or value (bad primitive format)


# Resource types of fhir.resources.R4B (FHIR 4.3.0), minus the abstract
# Resource and DomainResource. Hard-coded so that answering "is this a type?"
# never imports the 141 model modules; tests keep it in sync with the package.
_RESOURCE_TYPES: Final = frozenset(
    {
        "Account",
        "ActivityDefinition",
        "AdministrableProductDefinition",
        "AdverseEvent",
        "AllergyIntolerance",
        "Appointment",
        "AppointmentResponse",
        "AuditEvent",
        "Basic",
        "Binary",
        "BiologicallyDerivedProduct",
        "BodyStructure",
        "Bundle",
        "CapabilityStatement",
        "CarePlan",
        "CareTeam",
        "CatalogEntry",
        "ChargeItem",
        "ChargeItemDefinition",
        "Citation",
        "Claim",
        "ClaimResponse",
        "ClinicalImpression",
        "ClinicalUseDefinition",
        "CodeSystem",
        "Communication",
        "CommunicationRequest",
        "CompartmentDefinition",
        "Composition",
        "ConceptMap",
        "Condition",
        "Consent",
        "Contract",
        "Coverage",
        "CoverageEligibilityRequest",
        "CoverageEligibilityResponse",
        "DetectedIssue",
        "Device",
        "DeviceDefinition",
        "DeviceMetric",
        "DeviceRequest",
        "DeviceUseStatement",
        "DiagnosticReport",
        "DocumentManifest",
        "DocumentReference",
        "Encounter",
        "Endpoint",
        "EnrollmentRequest",
        "EnrollmentResponse",
        "EpisodeOfCare",
        "EventDefinition",
        "Evidence",
        "EvidenceReport",
        "EvidenceVariable",
        "ExampleScenario",
        "ExplanationOfBenefit",
        "FamilyMemberHistory",
        "Flag",
        "Goal",
        "GraphDefinition",
        "Group",
        "GuidanceResponse",
        "HealthcareService",
        "ImagingStudy",
        "Immunization",
        "ImmunizationEvaluation",
        "ImmunizationRecommendation",
        "ImplementationGuide",
        "Ingredient",
        "InsurancePlan",
        "Invoice",
        "Library",
        "Linkage",
        "List",
        "Location",
        "ManufacturedItemDefinition",
        "Measure",
        "MeasureReport",
        "Media",
        "Medication",
        "MedicationAdministration",
        "MedicationDispense",
        "MedicationKnowledge",
        "MedicationRequest",
        "MedicationStatement",
        "MedicinalProductDefinition",
        "MessageDefinition",
        "MessageHeader",
        "MolecularSequence",
        "NamingSystem",
        "NutritionOrder",
        "NutritionProduct",
        "Observation",
        "ObservationDefinition",
        "OperationDefinition",
        "OperationOutcome",
        "Organization",
        "OrganizationAffiliation",
        "PackagedProductDefinition",
        "Parameters",
        "Patient",
        "PaymentNotice",
        "PaymentReconciliation",
        "Person",
        "PlanDefinition",
        "Practitioner",
        "PractitionerRole",
        "Procedure",
        "Provenance",
        "Questionnaire",
        "QuestionnaireResponse",
        "RegulatedAuthorization",
        "RelatedPerson",
        "RequestGroup",
        "ResearchDefinition",
        "ResearchElementDefinition",
        "ResearchStudy",
        "ResearchSubject",
        "RiskAssessment",
        "Schedule",
        "SearchParameter",
        "ServiceRequest",
        "Slot",
        "Specimen",
        "SpecimenDefinition",
        "StructureDefinition",
        "StructureMap",
        "Subscription",
        "SubscriptionStatus",
        "SubscriptionTopic",
        "Substance",
        "SubstanceDefinition",
        "SupplyDelivery",
        "SupplyRequest",
        "Task",
        "TerminologyCapabilities",
        "TestReport",
        "TestScript",
        "ValueSet",
        "VerificationResult",
        "VisionPrescription",
    }
)


def is_known_type(resource_type: str) -> bool:
    return resource_type in _RESOURCE_TYPES


# --------------------------------------------------------------------------
# Required bindings (FHIR R4 4.0.1 value sets)
# --------------------------------------------------------------------------


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
_REQUIRED_BINDINGS: Final[dict[str, _Rows]] = {
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


_BINDING_TRIES: Final[dict[str, _BindingNode]] = {
    rt: _trie(rows) for rt, rows in _REQUIRED_BINDINGS.items()
}


def _check_bindings(
    resource_type: str, resource: dict[str, Any], root: str, out: list[ValidationIssue]
) -> None:
    trie = _BINDING_TRIES.get(resource_type)
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


# --------------------------------------------------------------------------
# Primitive formats (FHIR R4 datatype regexes)
# --------------------------------------------------------------------------

_YEAR = r"([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?"
_ZONE = r"(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"
_DAY = r"(0[1-9]|[1-2][0-9]|3[0-1])"
_MONTH = r"(0[1-9]|1[0-2])"

# fhir_type -> (pattern, what a valid value looks like)
_PATTERNS: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "date": (
        re.compile(rf"{_YEAR}(-{_MONTH}(-{_DAY})?)?"),
        "expected YYYY, YYYY-MM or YYYY-MM-DD",
    ),
    "dateTime": (
        re.compile(rf"{_YEAR}(-{_MONTH}(-{_DAY}(T{_TIME}{_ZONE})?)?)?"),
        "expected YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss[.fff] with Z or ±hh:mm;"
        " a time needs seconds and a timezone",
    ),
    "instant": (
        re.compile(rf"{_YEAR}-{_MONTH}-{_DAY}T{_TIME}{_ZONE}"),
        "expected YYYY-MM-DDThh:mm:ss[.fff] with Z or ±hh:mm",
    ),
    "time": (re.compile(_TIME), "expected hh:mm:ss[.fff]"),
    "code": (
        re.compile(r"[^\s]+(\s[^\s]+)*"),
        "no leading, trailing or repeated whitespace allowed",
    ),
    "id": (re.compile(r"[A-Za-z0-9\-.]{1,64}"), "expected 1-64 of A-Z, a-z, 0-9, '-' and '.'"),
    "oid": (re.compile(r"urn:oid:[0-2](\.(0|[1-9][0-9]*))+"), "expected urn:oid:1.2.3"),
    "uuid": (
        re.compile(r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I),
        "expected urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
    ),
    "uri": (re.compile(r"\S*"), "whitespace is not allowed"),
    "url": (re.compile(r"\S*"), "whitespace is not allowed"),
    "canonical": (re.compile(r"\S*"), "whitespace is not allowed"),
    "base64Binary": (re.compile(r"(\s*([0-9a-zA-Z+/=]){4}\s*)+"), "expected base64"),
}
_CALENDAR_TYPES: Final = frozenset({"date", "dateTime", "instant"})
_INTEGER_RANGES: Final = {
    "integer": (-2147483648, 2147483647),
    "unsignedInt": (0, 2147483647),
    "positiveInt": (1, 2147483647),
}
_MAX_STRING = 1024 * 1024


def _format_problem(fhir_type: str, value: Any) -> str | None:
    """What is wrong with a primitive whose JSON type is already right, if anything."""
    if isinstance(value, str):
        if not value:
            return "empty strings are not allowed"
        if len(value) > _MAX_STRING:
            return "longer than 1,048,576 characters"
        entry = _PATTERNS.get(fhir_type)
        if entry is not None and entry[0].fullmatch(value) is None:
            return entry[1]
        if fhir_type in _CALENDAR_TYPES and len(value) >= 10:
            try:
                datetime.date.fromisoformat(value[:10])
            except ValueError:
                return "no such day in the calendar"
        return None
    bounds = _INTEGER_RANGES.get(fhir_type)
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        return f"out of range {bounds[0]}..{bounds[1]}"
    return None


# --------------------------------------------------------------------------
# Element tables ("shapes") read from the R4B models
# --------------------------------------------------------------------------

# JSON kinds of a field's value
_ANY, _STRING, _BOOLEAN, _INTEGER, _DECIMAL, _OBJECT, _RESOURCE = range(7)
_KIND_NAMES: Final = {
    _STRING: "string",
    _BOOLEAN: "boolean",
    _INTEGER: "number without a fraction",
    _DECIMAL: "number",
    _OBJECT: "object",
    _RESOURCE: "object",
}
_PRIMITIVE_KINDS: Final = frozenset({_STRING, _BOOLEAN, _INTEGER, _DECIMAL})


@dataclass(frozen=True, slots=True)
class _Field:
    element: str  # FHIRPath name: the JSON key without the "_" of primitive extensions
    kind: int
    fhir_type: str  # primitive type name ("date", "boolean", ...) or the model name
    is_list: bool
    # Arrays of primitives and of their "_" extensions use null as a
    # placeholder to keep the two arrays aligned; other arrays may not.
    nulls_allowed: bool
    choice: str | None  # "value" for valueString etc.
    target: Any  # fhir_core FhirBase type of a complex field, resolved lazily


@dataclass(frozen=True, slots=True)
class _Shape:
    fields: dict[str, _Field]  # by JSON key
    required: tuple[tuple[str, str | None], ...]  # (key, key of its "_" extension)
    # Required choice elements as (element, its JSON keys), e.g. MedicationRequest
    # ("medication", ("medicationCodeableConcept", "medicationReference")).
    required_choices: tuple[tuple[str, tuple[str, ...]], ...]
    is_resource: bool


_SHAPES: dict[Any, _Shape] = {}
_MODEL_CLASSES: dict[str, Any] = {}


def _model_class(resource_type: str) -> Any:
    cls = _MODEL_CLASSES.get(resource_type)
    if cls is None:
        # Lazy: importing fhir.resources.R4B as a whole costs ~1.5 s and ~110 MB.
        from fhir.resources.R4B import get_fhir_model_class

        cls = get_fhir_model_class(resource_type)
        _MODEL_CLASSES[resource_type] = cls
    return cls


def _strip_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return annotation


def _classify(annotation: Any) -> tuple[int, str, bool, Any]:
    from fhir_core.types import FhirBase, FhirElementOrResourceBase

    ann = _strip_none(annotation)
    is_list = typing.get_origin(ann) is list
    if is_list:
        ann = _strip_none(typing.get_args(ann)[0])
    if ann is bool:
        return _BOOLEAN, "boolean", is_list, None
    if typing.get_origin(ann) is typing.Annotated:
        if typing.get_args(ann)[0] is uuid.UUID:  # fhir_core maps uuid to pydantic's UUID4
            return _STRING, "uuid", is_list, None
        for meta in ann.__metadata__:
            cls = type(meta)
            if cls.__module__ == "fhir_core.types":
                name = cls.__name__[0].lower() + cls.__name__[1:]
                if name in _INTEGER_RANGES:
                    return _INTEGER, name, is_list, None
                if name == "decimal":
                    return _DECIMAL, name, is_list, None
                if name == "integer64":  # a JSON string in R5; absent from R4B
                    return _ANY, name, is_list, None
                return _STRING, name, is_list, None
        return _ANY, "", is_list, None
    if isinstance(ann, type) and issubclass(ann, FhirBase):
        model_name = ann._model_klass.rsplit(".", 1)[-1]
        if issubclass(ann, FhirElementOrResourceBase) and model_name == "Resource":
            return _RESOURCE, "Resource", is_list, None
        return _OBJECT, model_name, is_list, ann
    return _ANY, "", is_list, None


def _build_shape(cls: Any) -> _Shape:
    # Instance methods that return per-class constants.
    probe = cls.model_construct()
    choice_of = {
        member: element
        for element, members in probe.get_one_of_many_fields().items()
        for member in members
    }
    fields: dict[str, _Field] = {}
    keys: dict[str, str] = {}  # python field name -> JSON key (class_fhir -> class)
    for name, info in cls.model_fields.items():
        key = info.alias or name
        keys[name] = key
        kind, fhir_type, is_list, target = _classify(info.annotation)
        is_extension = key.startswith("_")
        fields[key] = _Field(
            element=key[1:] if is_extension else key,
            kind=kind,
            fhir_type=fhir_type,
            is_list=is_list,
            nulls_allowed=is_extension or kind in _PRIMITIVE_KINDS,
            choice=choice_of.get(name),
            target=target,
        )

    required = [(keys[name], None) for name, info in cls.model_fields.items() if info.is_required()]
    for name, ext in probe.get_required_fields():
        required.append((keys.get(name, name), keys.get(ext, ext) if ext else None))
    required_choices = tuple(
        (element, tuple(keys.get(m, m) for m in members))
        for element, members in probe.get_one_of_many_fields().items()
        if (cls.model_fields[members[0]].json_schema_extra or {}).get("one_of_many_required")
        is True
    )
    return _Shape(
        fields, tuple(dict.fromkeys(required)), required_choices, bool(cls.has_resource_base())
    )


def _shape(cls: Any) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _build_shape(cls)
    return shape


@dataclass(frozen=True, slots=True)
class Element:
    """One child element of a resource or complex type, for code that edits resources
    by element (FHIRPath Patch): its JSON key, its FHIRPath name (the choice group's
    for `valueQuantity` and the like), whether it repeats, and its type."""

    key: str
    name: str
    is_list: bool
    fhir_type: str  # "HumanName", "date", "Resource", a backbone's model name; "" unknown
    choice: bool
    # Pass to `elements_of` for this element's own children (None: a primitive, a
    # contained resource (look at its resourceType) or unknown).
    owner: Any


_ELEMENTS: dict[Any, dict[str, Element]] = {}


def elements_of(owner: Any) -> dict[str, Element] | None:
    """The child elements (by JSON key, "_" extension keys left out) of a resource type
    (its name) or of a complex element (the `owner` of an `Element`); None if unknown."""
    if owner is None:
        return None
    if isinstance(owner, str):
        if owner not in _RESOURCE_TYPES:
            return None
        owner = _model_class(owner)
    elif hasattr(owner, "get_model_klass"):
        owner = owner.get_model_klass()
    found = _ELEMENTS.get(owner)
    if found is None:
        found = {
            key: Element(
                key,
                field.choice or field.element,
                field.is_list,
                field.fhir_type,
                field.choice is not None,
                field.target,
            )
            for key, field in _shape(owner).fields.items()
            if not key.startswith("_")
        }
        _ELEMENTS[owner] = found
    return found


# --------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, dict | list) or value is None:
        return _json_type(value)
    text = repr(value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"{_json_type(value)} {shown}"


def _kind_ok(kind: int, value: Any) -> bool:
    if kind == _STRING:
        return type(value) is str
    if kind == _BOOLEAN:
        return type(value) is bool
    if kind == _INTEGER:
        return type(value) is int
    if kind == _DECIMAL:
        # The store parses fractions as Decimal to keep their scale (app.kit.jsontext).
        return type(value) is int or type(value) is float or type(value) is Decimal
    if kind in (_OBJECT, _RESOURCE):
        return isinstance(value, dict)
    return True


class _Walk:
    __slots__ = ("flagged", "issues")

    def __init__(self) -> None:
        self.issues: list[ValidationIssue] = []
        self.flagged: set[str] = set()

    def add(self, expr: str, message: str, code: str) -> None:
        self.issues.append(ValidationIssue(expr, f"{expr}: {message}", code))
        self.flagged.add(expr)

    def resource(self, node: dict[str, Any], expr: str, resource_type: str) -> None:
        self.element(node, _shape(_model_class(resource_type)), expr)
        codes: list[ValidationIssue] = []
        _check_bindings(resource_type, node, expr, codes)
        # ' male' is one problem (bad code format), not two
        self.issues.extend(issue for issue in codes if issue.expression not in self.flagged)

    def element(self, node: dict[str, Any], shape: _Shape, expr: str) -> None:
        fields = shape.fields
        chosen: dict[str, list[str]] | None = None
        for key, value in node.items():
            field = fields.get(key)
            if field is None:
                if not (key == "resourceType" and shape.is_resource):
                    self.add(f"{expr}.{key}", "unknown element", "structure")
                continue
            if value is None:
                continue  # invalid FHIR JSON, but harmless: treated as absent
            if field.choice is not None:
                if chosen is None:
                    chosen = {}
                chosen.setdefault(field.choice, []).append(key)
            sub = f"{expr}.{field.element}"
            if not field.is_list:
                self.value(value, field, sub)
            elif not isinstance(value, list):
                self._wrong_type(sub, field, value, "array")
            else:
                for i, item in enumerate(value):
                    if item is not None:
                        self.value(item, field, f"{sub}[{i}]")
                    elif not field.nulls_allowed:
                        self.add(f"{sub}[{i}]", "null is not allowed here", "structure")

        for key, ext in shape.required:
            value = node.get(key)
            if value is None or value == []:
                extension = node.get(ext) if ext else None
                if isinstance(extension, dict) and extension.get("extension"):
                    continue  # e.g. a data-absent-reason extension stands in for the value
                element = key[1:] if key.startswith("_") else key
                self.add(f"{expr}.{element}", "required element is missing", "required")
        if chosen is not None:
            for element, present in chosen.items():
                if len(present) > 1:
                    self.add(
                        f"{expr}.{element}",
                        f"only one of {', '.join(present)} may be present",
                        "structure",
                    )
        for element, keys in shape.required_choices:
            if chosen is None or element not in chosen:
                self.add(
                    f"{expr}.{element}",
                    f"required element is missing (one of {', '.join(keys)})",
                    "required",
                )

    def value(self, value: Any, field: _Field, expr: str) -> None:
        kind = field.kind
        if not _kind_ok(kind, value):
            self._wrong_type(expr, field, value, _KIND_NAMES[kind])
        elif kind == _OBJECT:
            if field.fhir_type == "FHIRPrimitiveExtension" and all(
                v is None for v in value.values()
            ):
                # "_birthDate": {} says nothing; fhir.resources rejects it too
                self.add(expr, "primitive extension needs an id or extension", "structure")
            self.element(value, _shape(field.target.get_model_klass()), expr)
        elif kind in _PRIMITIVE_KINDS:
            problem = _format_problem(field.fhir_type, value)
            if problem is not None:
                self.add(expr, f"invalid {field.fhir_type} {value!r} ({problem})", "value")
        elif kind == _RESOURCE:
            resource_type = value.get("resourceType")
            if resource_type is None:
                self.add(f"{expr}.resourceType", "required element is missing", "required")
            elif not isinstance(resource_type, str) or not is_known_type(resource_type):
                self.add(
                    f"{expr}.resourceType",
                    f"unknown resource type ({_show(resource_type)})",
                    "structure",
                )
            else:
                self.resource(value, expr, resource_type)

    def _wrong_type(self, expr: str, field: _Field, value: Any, expected: str) -> None:
        what = f"{field.fhir_type} " if field.fhir_type else ""
        if expected == "array":
            what = f"an array of {what}"
        self.add(expr, f"expected {what}(JSON {expected}), got {_show(value)}", "structure")


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def validate_resource(resource_type: str, resource: dict[str, Any]) -> list[ValidationIssue]:
    """Validate parsed FHIR JSON as ``resource_type``; an empty list means valid."""
    if not isinstance(resource, dict):
        return [
            ValidationIssue(
                str(resource_type),
                f"expected a {resource_type} resource (JSON object), got {_json_type(resource)}",
                "structure",
            )
        ]
    found = resource.get("resourceType")
    if found != resource_type:
        what = "is missing" if found is None else f"is {_show(found)}"
        return [
            ValidationIssue(
                str(resource_type), f"resourceType {what}, expected {resource_type!r}", "invalid"
            )
        ]
    if not is_known_type(resource_type):
        return [
            ValidationIssue(resource_type, f"unknown resource type {resource_type!r}", "structure")
        ]
    walk = _Walk()
    try:
        walk.resource(resource, resource_type, resource_type)
    except Exception as exc:  # a validator bug (or absurd nesting) must not become a 500
        walk.add(resource_type, f"could not be validated ({type(exc).__name__}: {exc})", "invalid")
    return walk.issues


def required_codes(resource_type: str, element: str) -> tuple[str, ...]:
    """The codes a top-level element's required binding allows, in spec order; () when
    the element has no required binding we check (scenario mutants pick wrong values
    from here so they stay valid FHIR)."""
    node = _BINDING_TRIES.get(resource_type)
    child = node.children.get(element) if node is not None else None
    if child is None:
        return ()
    return tuple(code for vs in child.value_sets for code in vs.codes)
