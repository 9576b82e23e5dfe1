"""Search parameter registry: which FHIR R4 search parameters each resource type supports.

Pure data. Names, kinds and element paths follow the R4 (4.0.1) ``SearchParameter``
definitions. A path is a dotted element path relative to the resource, with JSON element
names (``for``, ``class``), walked through lists at every level. The last segment may be a
choice element written by its base name without ``[x]`` (``effective`` stands for
``effectiveDateTime | effectivePeriod | effectiveInstant``); where the spec narrows a choice
(``(Observation.value as CodeableConcept)``) the path names the concrete JSON key instead
(``valueCodeableConcept``).

Spec expressions that are more than a path are expressed declaratively:

* ``.where(resolve() is Patient)`` -> ``targets=("Patient",)``: only references whose type
  is in ``targets`` are indexed under that parameter.
* ``.where(system='phone')`` -> ``where=("system", "phone")``: only elements (reached by the
  full path) whose ``system`` equals ``"phone"`` are indexed.

Skipped on purpose: number, quantity, composite and special parameters (value-quantity,
``near``, ``code-value-*``), ``phonetic`` (no phonetic matching), ``_text``/``_content``,
``instantiates-*`` and a few uri parameters nobody searches. Uri parameters that are useful
(``_profile``, ``Questionnaire.url``) are indexed as tokens. ``_id`` and ``_lastUpdated``
are columns of the resource table and are handled by the search layer, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "COMMON_PARAMS",
    "SEARCH_PARAMS",
    "ParamKind",
    "SearchParam",
    "params_for",
]


class ParamKind(StrEnum):
    TOKEN = "token"
    REFERENCE = "reference"
    STRING = "string"
    DATE = "date"


@dataclass(frozen=True, slots=True)
class SearchParam:
    name: str
    kind: ParamKind
    # Dotted element paths relative to the resource; choice elements by their base name.
    paths: tuple[str, ...]
    # Reference target types, when the spec restricts them (`.where(resolve() is X)`).
    targets: tuple[str, ...] = ()
    description: str = ""
    # (element, value): keep only elements reached by the path whose `element` == `value`
    # (the spec's `.where(system='phone')`).
    where: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        # Fail at import time rather than silently index nothing.
        if not self.paths or any(not p or p.startswith(".") or ".." in p for p in self.paths):
            raise ValueError(f"search parameter {self.name!r}: bad paths {self.paths!r}")
        if self.targets and self.kind is not ParamKind.REFERENCE:
            raise ValueError(f"search parameter {self.name!r}: targets need a reference kind")


# --- constructors: keep the tables below one line per parameter -----------------------


def _tok(
    name: str, *paths: str, where: tuple[str, str] | None = None, description: str = ""
) -> SearchParam:
    return SearchParam(name, ParamKind.TOKEN, paths, where=where, description=description)


def _ref(
    name: str, *paths: str, targets: tuple[str, ...] = (), description: str = ""
) -> SearchParam:
    return SearchParam(name, ParamKind.REFERENCE, paths, targets=targets, description=description)


def _str(name: str, *paths: str, description: str = "") -> SearchParam:
    return SearchParam(name, ParamKind.STRING, paths, description=description)


def _date(name: str, *paths: str, description: str = "") -> SearchParam:
    return SearchParam(name, ParamKind.DATE, paths, description=description)


def _table(*params: SearchParam) -> Mapping[str, SearchParam]:
    table = {p.name: p for p in params}
    if len(table) != len(params):
        names = [p.name for p in params]
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"duplicate search parameters: {dupes}")
    return MappingProxyType(table)


_PATIENT = ("Patient",)
_PRACTITIONER = ("Practitioner",)
_LOCATION = ("Location",)


def _address(path: str = "address") -> tuple[SearchParam, ...]:
    # The spec's address-* parameters, identical on every type that has an Address.
    return (
        _str("address", path, description="any part of the address"),
        _str("address-city", f"{path}.city"),
        _str("address-country", f"{path}.country"),
        _str("address-postalcode", f"{path}.postalCode"),
        _str("address-state", f"{path}.state"),
        _tok("address-use", f"{path}.use"),
    )


def _telecom(path: str = "telecom") -> tuple[SearchParam, ...]:
    return (
        _tok("telecom", path, description="any contact point value"),
        _tok("phone", path, where=("system", "phone"), description="telecom where system=phone"),
        _tok("email", path, where=("system", "email"), description="telecom where system=email"),
    )


def _subject_patient(path: str = "subject") -> tuple[SearchParam, ...]:
    # The clinical resources' `patient` (= subject that is a Patient) + `subject` pair.
    return (
        _ref("patient", path, targets=_PATIENT, description=f"{path} when it is a Patient"),
        _ref("subject", path),
    )


COMMON_PARAMS: Mapping[str, SearchParam] = _table(
    _tok("_tag", "meta.tag", description="tags applied to the resource (meta.tag)"),
    _tok("_profile", "meta.profile", description="profiles claimed (uri, matched as a token)"),
    _tok("_security", "meta.security", description="security labels (meta.security)"),
)


SEARCH_PARAMS: Mapping[str, Mapping[str, SearchParam]] = MappingProxyType(
    {
        # --- administration ---------------------------------------------------------
        "Patient": _table(
            _tok("active", "active"),
            *_address(),
            _date("birthdate", "birthDate"),
            _date("death-date", "deceasedDateTime"),
            _str("family", "name.family"),
            _tok("gender", "gender"),
            _ref("general-practitioner", "generalPractitioner"),
            _str("given", "name.given"),
            _tok("identifier", "identifier"),
            _tok("language", "communication.language"),
            _ref("link", "link.other"),
            _str("name", "name", description="any part of the name (family, given, text, ...)"),
            _ref("organization", "managingOrganization"),
            *_telecom(),
        ),
        "Practitioner": _table(
            _tok("active", "active"),
            *_address(),
            _tok("communication", "communication"),
            _str("family", "name.family"),
            _tok("gender", "gender"),
            _str("given", "name.given"),
            _tok("identifier", "identifier"),
            _str("name", "name", description="any part of the name (family, given, text, ...)"),
            *_telecom(),
        ),
        "PractitionerRole": _table(
            _tok("active", "active"),
            _date("date", "period"),
            _ref("endpoint", "endpoint"),
            _tok("identifier", "identifier"),
            _ref("location", "location"),
            _ref("organization", "organization"),
            _ref("practitioner", "practitioner"),
            _tok("role", "code"),
            _ref("service", "healthcareService"),
            _tok("specialty", "specialty"),
            *_telecom(),
        ),
        "Organization": _table(
            _tok("active", "active"),
            *_address(),
            _ref("endpoint", "endpoint"),
            _tok("identifier", "identifier"),
            _str("name", "name", "alias"),
            _ref("partof", "partOf"),
            _tok("type", "type"),
        ),
        "Location": _table(
            *_address(),
            _ref("endpoint", "endpoint"),
            _tok("identifier", "identifier"),
            _str("name", "name", "alias"),
            _tok("operational-status", "operationalStatus"),
            _ref("organization", "managingOrganization"),
            _ref("partof", "partOf"),
            _tok("status", "status"),
            _tok("type", "type"),
        ),
        "HealthcareService": _table(
            _tok("active", "active"),
            _tok("characteristic", "characteristic"),
            _ref("coverage-area", "coverageArea"),
            _ref("endpoint", "endpoint"),
            _tok("identifier", "identifier"),
            _ref("location", "location"),
            _str("name", "name"),
            _ref("organization", "providedBy"),
            _tok("program", "program"),
            _tok("service-category", "category"),
            _tok("service-type", "type"),
            _tok("specialty", "specialty"),
        ),
        "RelatedPerson": _table(
            _tok("active", "active"),
            *_address(),
            _date("birthdate", "birthDate"),
            _tok("gender", "gender"),
            _tok("identifier", "identifier"),
            _str("name", "name", description="any part of the name (family, given, text, ...)"),
            _ref("patient", "patient"),
            _tok("relationship", "relationship"),
            *_telecom(),
        ),
        # --- scheduling -------------------------------------------------------------
        "Schedule": _table(
            _tok("active", "active"),
            _ref("actor", "actor"),
            _date("date", "planningHorizon"),
            _tok("identifier", "identifier"),
            _tok("service-category", "serviceCategory"),
            _tok("service-type", "serviceType"),
            _tok("specialty", "specialty"),
        ),
        "Slot": _table(
            _tok("appointment-type", "appointmentType"),
            _tok("identifier", "identifier"),
            _ref("schedule", "schedule"),
            _tok("service-category", "serviceCategory"),
            _tok("service-type", "serviceType"),
            _tok("specialty", "specialty"),
            _date("start", "start"),
            _tok("status", "status"),
        ),
        "Appointment": _table(
            _ref("actor", "participant.actor"),
            _tok("appointment-type", "appointmentType"),
            _ref("based-on", "basedOn"),
            _date("date", "start"),
            _tok("identifier", "identifier"),
            _ref("location", "participant.actor", targets=_LOCATION),
            _tok("part-status", "participant.status"),
            _ref("patient", "participant.actor", targets=_PATIENT),
            _ref("practitioner", "participant.actor", targets=_PRACTITIONER),
            _tok("reason-code", "reasonCode"),
            _ref("reason-reference", "reasonReference"),
            _tok("service-category", "serviceCategory"),
            _tok("service-type", "serviceType"),
            _ref("slot", "slot"),
            _tok("specialty", "specialty"),
            _tok("status", "status"),
            _ref("supporting-info", "supportingInformation"),
        ),
        "AppointmentResponse": _table(
            _ref("actor", "actor"),
            _ref("appointment", "appointment"),
            _tok("identifier", "identifier"),
            _ref("location", "actor", targets=_LOCATION),
            _tok("part-status", "participantStatus"),
            _ref("patient", "actor", targets=_PATIENT),
            _ref("practitioner", "actor", targets=_PRACTITIONER),
        ),
        # --- workflow and messaging -------------------------------------------------
        # R4 defines no `priority` parameter on Communication; none is added.
        "Communication": _table(
            _ref("based-on", "basedOn"),
            _tok("category", "category"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _tok("medium", "medium"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _date("received", "received"),
            _ref("recipient", "recipient"),
            _ref("sender", "sender"),
            _date("sent", "sent"),
            _tok("status", "status"),
        ),
        "CommunicationRequest": _table(
            _date("authored", "authoredOn"),
            _ref("based-on", "basedOn"),
            _tok("category", "category"),
            _ref("encounter", "encounter"),
            _tok("group-identifier", "groupIdentifier"),
            _tok("identifier", "identifier"),
            _tok("medium", "medium"),
            _date("occurrence", "occurrenceDateTime"),
            *_subject_patient(),
            _tok("priority", "priority"),
            _ref("recipient", "recipient"),
            _ref("replaces", "replaces"),
            _ref("requester", "requester"),
            _ref("sender", "sender"),
            _tok("status", "status"),
        ),
        "Task": _table(
            _date("authored-on", "authoredOn"),
            _ref("based-on", "basedOn"),
            _tok("business-status", "businessStatus"),
            _tok("code", "code"),
            _ref("encounter", "encounter"),
            _ref("focus", "focus"),
            _tok("group-identifier", "groupIdentifier"),
            _tok("identifier", "identifier"),
            _tok("intent", "intent"),
            _date("modified", "lastModified"),
            _ref("owner", "owner"),
            _ref("part-of", "partOf"),
            *_subject_patient("for"),
            _tok("performer", "performerType", description="performer type (a token in R4)"),
            _date("period", "executionPeriod"),
            _tok("priority", "priority"),
            _ref("requester", "requester"),
            _tok("status", "status"),
        ),
        # --- clinical ---------------------------------------------------------------
        "Observation": _table(
            _ref("based-on", "basedOn"),
            _tok("category", "category"),
            _tok("code", "code"),
            _tok("combo-code", "code", "component.code"),
            _tok("combo-data-absent-reason", "dataAbsentReason", "component.dataAbsentReason"),
            _tok(
                "combo-value-concept",
                "valueCodeableConcept",
                "component.valueCodeableConcept",
            ),
            _tok("component-code", "component.code"),
            _tok("component-data-absent-reason", "component.dataAbsentReason"),
            _tok("component-value-concept", "component.valueCodeableConcept"),
            _tok("data-absent-reason", "dataAbsentReason"),
            _date("date", "effective"),
            _ref("derived-from", "derivedFrom"),
            _ref("device", "device"),
            _ref("encounter", "encounter"),
            _ref("focus", "focus"),
            _ref("has-member", "hasMember"),
            _tok("identifier", "identifier"),
            _tok("method", "method"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _ref("performer", "performer"),
            _ref("specimen", "specimen"),
            _tok("status", "status"),
            _tok("value-concept", "valueCodeableConcept"),
            _date("value-date", "valueDateTime", "valuePeriod"),
            _str("value-string", "valueString", "valueCodeableConcept.text"),
        ),
        "DiagnosticReport": _table(
            _ref("based-on", "basedOn"),
            _tok("category", "category"),
            _tok("code", "code"),
            _tok("conclusion", "conclusionCode"),
            _date("date", "effective"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _date("issued", "issued"),
            _ref("media", "media.link"),
            *_subject_patient(),
            _ref("performer", "performer"),
            _ref("result", "result"),
            _ref("results-interpreter", "resultsInterpreter"),
            _ref("specimen", "specimen"),
            _tok("status", "status"),
        ),
        "ServiceRequest": _table(
            _date("authored", "authoredOn"),
            _ref("based-on", "basedOn"),
            _tok("body-site", "bodySite"),
            _tok("category", "category"),
            _tok("code", "code"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _tok("intent", "intent"),
            _date("occurrence", "occurrence"),
            *_subject_patient(),
            _ref("performer", "performer"),
            _tok("performer-type", "performerType"),
            _tok("priority", "priority"),
            _ref("replaces", "replaces"),
            _ref("requester", "requester"),
            _tok("requisition", "requisition"),
            _ref("specimen", "specimen"),
            _tok("status", "status"),
        ),
        "Encounter": _table(
            _ref("account", "account"),
            _ref("appointment", "appointment"),
            _ref("based-on", "basedOn"),
            _tok("class", "class"),
            _date("date", "period"),
            _ref("diagnosis", "diagnosis.condition"),
            _ref("episode-of-care", "episodeOfCare"),
            _tok("identifier", "identifier"),
            _ref("location", "location.location"),
            _date("location-period", "location.period"),
            _ref("part-of", "partOf"),
            _ref("participant", "participant.individual"),
            _tok("participant-type", "participant.type"),
            *_subject_patient(),
            _ref("practitioner", "participant.individual", targets=_PRACTITIONER),
            _tok("reason-code", "reasonCode"),
            _ref("reason-reference", "reasonReference"),
            _ref("service-provider", "serviceProvider"),
            _tok("special-arrangement", "hospitalization.specialArrangement"),
            _tok("status", "status"),
            _tok("type", "type"),
        ),
        "EpisodeOfCare": _table(
            _ref("care-manager", "careManager", targets=_PRACTITIONER),
            _ref("condition", "diagnosis.condition"),
            _date("date", "period"),
            _tok("identifier", "identifier"),
            _ref("incoming-referral", "referralRequest"),
            _ref("organization", "managingOrganization"),
            _ref("patient", "patient"),
            _tok("status", "status"),
            _tok("type", "type"),
        ),
        "Condition": _table(
            _date("abatement-date", "abatementDateTime", "abatementPeriod"),
            _str("abatement-string", "abatementString"),
            _ref("asserter", "asserter"),
            _tok("body-site", "bodySite"),
            _tok("category", "category"),
            _tok("clinical-status", "clinicalStatus"),
            _tok("code", "code"),
            _ref("encounter", "encounter"),
            _tok("evidence", "evidence.code"),
            _ref("evidence-detail", "evidence.detail"),
            _tok("identifier", "identifier"),
            _date("onset-date", "onsetDateTime", "onsetPeriod"),
            _str("onset-info", "onsetString"),
            *_subject_patient(),
            _date("recorded-date", "recordedDate"),
            _tok("severity", "severity"),
            _tok("stage", "stage.summary"),
            _tok("verification-status", "verificationStatus"),
        ),
        "AllergyIntolerance": _table(
            _ref("asserter", "asserter"),
            _tok("category", "category"),
            _tok("clinical-status", "clinicalStatus"),
            _tok("code", "code", "reaction.substance"),
            _tok("criticality", "criticality"),
            _date("date", "recordedDate"),
            _tok("identifier", "identifier"),
            _date("last-date", "lastOccurrence"),
            _tok("manifestation", "reaction.manifestation"),
            _date("onset", "reaction.onset"),
            _ref("patient", "patient"),
            _ref("recorder", "recorder"),
            _tok("route", "reaction.exposureRoute"),
            _tok("severity", "reaction.severity"),
            _tok("type", "type"),
            _tok("verification-status", "verificationStatus"),
        ),
        "Procedure": _table(
            _ref("based-on", "basedOn"),
            _tok("category", "category"),
            _tok("code", "code"),
            _date("date", "performed"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _ref("location", "location"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _ref("performer", "performer.actor"),
            _tok("reason-code", "reasonCode"),
            _ref("reason-reference", "reasonReference"),
            _tok("status", "status"),
        ),
        "Immunization": _table(
            _date("date", "occurrence"),
            _tok("identifier", "identifier"),
            _ref("location", "location"),
            _str("lot-number", "lotNumber"),
            _ref("manufacturer", "manufacturer"),
            _ref("patient", "patient"),
            _ref("performer", "performer.actor"),
            _ref("reaction", "reaction.detail"),
            _date("reaction-date", "reaction.date"),
            _tok("reason-code", "reasonCode"),
            _ref("reason-reference", "reasonReference"),
            _str("series", "protocolApplied.series"),
            _tok("status", "status"),
            _tok("status-reason", "statusReason"),
            _tok("target-disease", "protocolApplied.targetDisease"),
            _tok("vaccine-code", "vaccineCode"),
        ),
        # --- medications ------------------------------------------------------------
        "Medication": _table(
            _tok("code", "code"),
            _date("expiration-date", "batch.expirationDate"),
            _tok("form", "form"),
            _tok("identifier", "identifier"),
            _ref("ingredient", "ingredient.itemReference"),
            _tok("ingredient-code", "ingredient.itemCodeableConcept"),
            _tok("lot-number", "batch.lotNumber"),
            _ref("manufacturer", "manufacturer"),
            _tok("status", "status"),
        ),
        "MedicationRequest": _table(
            _date("authoredon", "authoredOn"),
            _tok("category", "category"),
            _tok("code", "medicationCodeableConcept"),
            _date("date", "dosageInstruction.timing.event"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _ref("intended-dispenser", "dispenseRequest.performer"),
            _ref("intended-performer", "performer"),
            _tok("intended-performertype", "performerType"),
            _tok("intent", "intent"),
            _ref("medication", "medicationReference"),
            *_subject_patient(),
            _tok("priority", "priority"),
            _ref("requester", "requester"),
            _tok("status", "status"),
        ),
        "MedicationStatement": _table(
            _tok("category", "category"),
            _tok("code", "medicationCodeableConcept"),
            _ref("context", "context"),
            _date("effective", "effective"),
            _tok("identifier", "identifier"),
            _ref("medication", "medicationReference"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _ref("source", "informationSource"),
            _tok("status", "status"),
        ),
        # --- financial --------------------------------------------------------------
        "Coverage": _table(
            _ref("beneficiary", "beneficiary"),
            _tok("class-type", "class.type"),
            _str("class-value", "class.value"),
            _str("dependent", "dependent"),
            _tok("identifier", "identifier"),
            _ref("patient", "beneficiary"),
            _ref("payor", "payor"),
            _ref("policy-holder", "policyHolder"),
            _tok("status", "status"),
            _ref("subscriber", "subscriber"),
            _tok("type", "type"),
        ),
        # --- consent ----------------------------------------------------------------
        "Consent": _table(
            _tok("action", "provision.action"),
            _ref("actor", "provision.actor.reference"),
            _tok("category", "category"),
            _ref("consentor", "performer"),
            _ref("data", "provision.data.reference"),
            _date("date", "dateTime"),
            _tok("identifier", "identifier"),
            _ref("organization", "organization"),
            _ref("patient", "patient"),
            _date("period", "provision.period"),
            _tok("purpose", "provision.purpose"),
            _tok("scope", "scope"),
            _tok("security-label", "provision.securityLabel"),
            _ref("source-reference", "sourceReference"),
            _tok("status", "status"),
        ),
        # --- documents and forms ----------------------------------------------------
        "DocumentReference": _table(
            _ref("authenticator", "authenticator"),
            _ref("author", "author"),
            _tok("category", "category"),
            _tok("contenttype", "content.attachment.contentType"),
            _ref("custodian", "custodian"),
            _date("date", "date"),
            _str("description", "description"),
            _ref("encounter", "context.encounter"),
            _tok("event", "context.event"),
            _tok("facility", "context.facilityType"),
            _tok("format", "content.format"),
            _tok("identifier", "masterIdentifier", "identifier"),
            _tok("language", "content.attachment.language"),
            *_subject_patient(),
            _date("period", "context.period"),
            _ref("related", "context.related"),
            _ref("relatesto", "relatesTo.target"),
            _tok("relation", "relatesTo.code"),
            _tok("security-label", "securityLabel"),
            _tok("setting", "context.practiceSetting"),
            _tok("status", "status"),
            _tok("type", "type"),
        ),
        "Questionnaire": _table(
            _tok("code", "item.code"),
            _date("date", "date"),
            _str("description", "description"),
            _date("effective", "effectivePeriod"),
            _tok("identifier", "identifier"),
            _str("name", "name"),
            _str("publisher", "publisher"),
            _tok("status", "status"),
            _tok("subject-type", "subjectType"),
            _str("title", "title"),
            _tok("url", "url", description="canonical url (uri, matched as a token)"),
            _tok("version", "version"),
        ),
        "QuestionnaireResponse": _table(
            _ref("author", "author"),
            _date("authored", "authored"),
            _ref("based-on", "basedOn"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _ref("questionnaire", "questionnaire", description="canonical, indexed as Type/id"),
            _ref("source", "source"),
            _tok("status", "status"),
        ),
        # --- care planning ----------------------------------------------------------
        "CarePlan": _table(
            _tok("activity-code", "activity.detail.code"),
            _date("activity-date", "activity.detail.scheduled"),
            _ref("activity-reference", "activity.reference"),
            _ref("based-on", "basedOn"),
            _ref("care-team", "careTeam"),
            _tok("category", "category"),
            _ref("condition", "addresses"),
            _date("date", "period"),
            _ref("encounter", "encounter"),
            _ref("goal", "goal"),
            _tok("identifier", "identifier"),
            _tok("intent", "intent"),
            _ref("part-of", "partOf"),
            *_subject_patient(),
            _ref("performer", "activity.detail.performer"),
            _ref("replaces", "replaces"),
            _tok("status", "status"),
        ),
        "CareTeam": _table(
            _tok("category", "category"),
            _date("date", "period"),
            _ref("encounter", "encounter"),
            _tok("identifier", "identifier"),
            _ref("participant", "participant.member"),
            *_subject_patient(),
            _tok("status", "status"),
        ),
        "Goal": _table(
            _tok("achievement-status", "achievementStatus"),
            _tok("category", "category"),
            _tok("identifier", "identifier"),
            _tok("lifecycle-status", "lifecycleStatus"),
            *_subject_patient(),
            _date("start-date", "startDate"),
            _date("target-date", "target.dueDate"),
        ),
    }
)

# params_for() is called per request: merge each type's table with the common one once.
_MERGED: Mapping[str, Mapping[str, SearchParam]] = {
    resource_type: MappingProxyType({**table, **COMMON_PARAMS})
    for resource_type, table in SEARCH_PARAMS.items()
}


def params_for(resource_type: str) -> Mapping[str, SearchParam]:
    """The search parameters of `resource_type` plus the common ones (`_tag`, `_profile`...).

    A type without a table of its own (Basic, Device...) gets only the common parameters.
    """
    return _MERGED.get(resource_type, COMMON_PARAMS)
