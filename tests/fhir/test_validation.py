"""Tests for app.fhir.validation."""

from __future__ import annotations

import copy
import random
from typing import Any

import pydantic
import pytest

from app.fhir import validation
from app.fhir.validation import ValidationIssue, is_known_type, validate_resource

PATIENT_REF = {"reference": "Patient/example", "display": "Peter Chalmers"}
PRACTITIONER_REF = {"reference": "Practitioner/dr-adams", "display": "Dr. Adam Careful"}
ORGANIZATION_REF = {"reference": "Organization/acme-clinic"}

# Small, realistic R4 resources: every type the server serves, and every
# element of the binding table filled in so that each row can be mutated.
EXAMPLES: dict[str, dict[str, Any]] = {
    "Patient": {
        "resourceType": "Patient",
        "id": "example",
        "meta": {"versionId": "1", "lastUpdated": "2024-05-01T10:00:00.000+00:00"},
        "extension": [
            {
                "url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex",
                "valueCode": "M",
            }
        ],
        "identifier": [
            {
                "use": "usual",
                "type": {
                    "coding": [
                        {"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "MR"}
                    ]
                },
                "system": "urn:oid:1.2.36.146.595.217.0.1",
                "value": "12345",
            }
        ],
        "active": True,
        "name": [
            {"use": "official", "family": "Chalmers", "given": ["Peter", "James"]},
            {"use": "usual", "given": ["Jim"]},
        ],
        "telecom": [
            {"system": "phone", "value": "(03) 5555 6473", "use": "work", "rank": 1},
            {"system": "email", "value": "jim@example.org", "use": "home"},
        ],
        "gender": "male",
        "birthDate": "1974-12-25",
        "_birthDate": {
            "extension": [
                {
                    "url": "http://hl7.org/fhir/StructureDefinition/patient-birthTime",
                    "valueDateTime": "1974-12-25T14:35:45-05:00",
                }
            ]
        },
        "deceasedBoolean": False,
        "address": [
            {
                "use": "home",
                "type": "both",
                "line": ["534 Erewhon St"],
                "city": "PleasantVille",
                "state": "Vic",
                "postalCode": "3999",
                "period": {"start": "1974-12-25"},
            }
        ],
        "maritalStatus": {"text": "Married"},
        "multipleBirthInteger": 1,
        "contact": [
            {
                "relationship": [
                    {
                        "coding": [
                            {"system": "http://terminology.hl7.org/CodeSystem/v2-0131", "code": "N"}
                        ]
                    }
                ],
                "name": {"use": "official", "family": "du Marché", "given": ["Bénédicte"]},
                "telecom": [{"system": "phone", "value": "+33 (237) 998327", "use": "home"}],
                "address": {"use": "home", "type": "physical", "city": "Paris"},
                "gender": "female",
            }
        ],
        "communication": [{"language": {"text": "English"}, "preferred": True}],
        "managingOrganization": ORGANIZATION_REF,
        "link": [{"other": {"reference": "Patient/pat2"}, "type": "seealso"}],
    },
    "Practitioner": {
        "resourceType": "Practitioner",
        "id": "dr-adams",
        "identifier": [
            {"use": "official", "system": "http://hl7.org/fhir/sid/us-npi", "value": "1234567893"}
        ],
        "active": True,
        "name": [{"use": "official", "family": "Careful", "given": ["Adam"], "prefix": ["Dr"]}],
        "telecom": [{"system": "phone", "value": "555-555-1003", "use": "work"}],
        "address": [{"use": "work", "type": "postal", "line": ["1003 Healthcare Drive"]}],
        "gender": "male",
        "birthDate": "1971-11-07",
        "qualification": [
            {
                "identifier": [
                    {"use": "official", "system": "http://example.org/md", "value": "12345"}
                ],
                "code": {"text": "Doctor of Medicine"},
                "period": {"start": "1995"},
                "issuer": {"display": "Example University"},
            }
        ],
    },
    "PractitionerRole": {
        "resourceType": "PractitionerRole",
        "identifier": [
            {"use": "secondary", "system": "http://www.acme.org/practitioners", "value": "23"}
        ],
        "active": True,
        "period": {"start": "2012-01-01", "end": "2012-03-31"},
        "practitioner": PRACTITIONER_REF,
        "organization": ORGANIZATION_REF,
        "code": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/practitioner-role",
                        "code": "doctor",
                    }
                ]
            }
        ],
        "specialty": [{"coding": [{"system": "http://snomed.info/sct", "code": "408443003"}]}],
        "telecom": [{"system": "email", "value": "adam.southern@example.org", "use": "work"}],
        "availableTime": [
            {
                "daysOfWeek": ["mon", "tue", "wed"],
                "availableStartTime": "09:00:00",
                "availableEndTime": "16:30:00",
            }
        ],
    },
    "Organization": {
        "resourceType": "Organization",
        "id": "acme-clinic",
        "identifier": [
            {"use": "official", "system": "http://hl7.org/fhir/sid/us-npi", "value": "1144221847"}
        ],
        "active": True,
        "type": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/organization-type",
                        "code": "prov",
                    }
                ]
            }
        ],
        "name": "ACME Clinic",
        "telecom": [{"system": "url", "value": "https://acme.example.org", "use": "work"}],
        "address": [
            {"use": "work", "type": "both", "line": ["3300 Washtenaw Avenue"], "country": "USA"}
        ],
        "contact": [
            {
                "purpose": {"text": "Billing"},
                "name": {"use": "official", "text": "Billing Department"},
                "telecom": [{"system": "fax", "value": "+1 555 234 1234", "use": "work"}],
                "address": {"use": "billing", "type": "postal", "line": ["PO Box 1"]},
            }
        ],
    },
    "Location": {
        "resourceType": "Location",
        "id": "room-1",
        "identifier": [{"use": "official", "value": "B1-S.F2"}],
        "status": "active",
        "name": "South Wing, second floor",
        "mode": "instance",
        "type": [{"text": "Examination room"}],
        "telecom": [{"system": "phone", "value": "2328", "use": "work"}],
        "address": {
            "use": "work",
            "type": "physical",
            "line": ["Galapagosweg 91"],
            "city": "Den Burg",
        },
        "position": {"longitude": -83.6945691, "latitude": 42.25475478, "altitude": 0},
        "managingOrganization": ORGANIZATION_REF,
        "hoursOfOperation": [
            {
                "daysOfWeek": ["mon"],
                "allDay": False,
                "openingTime": "08:00:00",
                "closingTime": "17:00:00",
            }
        ],
    },
    "Schedule": {
        "resourceType": "Schedule",
        "active": True,
        "serviceType": [{"text": "General practice"}],
        "actor": [PRACTITIONER_REF],
        "planningHorizon": {"start": "2025-03-01T08:00:00Z", "end": "2025-03-31T17:00:00Z"},
        "comment": "Mornings only",
    },
    "Slot": {
        "resourceType": "Slot",
        "schedule": {"reference": "Schedule/dr-adams"},
        "status": "free",
        "start": "2025-03-07T09:00:00Z",
        "end": "2025-03-07T09:30:00Z",
        "overbooked": False,
    },
    "Appointment": {
        "resourceType": "Appointment",
        "status": "booked",
        "serviceType": [{"text": "General practice"}],
        "description": "Follow-up of blood pressure",
        "start": "2025-03-07T09:00:00Z",
        "end": "2025-03-07T09:30:00Z",
        "minutesDuration": 30,
        "slot": [{"reference": "Slot/1"}],
        "created": "2025-03-01",
        "participant": [
            {"actor": PATIENT_REF, "required": "required", "status": "accepted"},
            {"actor": PRACTITIONER_REF, "required": "required", "status": "accepted"},
        ],
    },
    "Encounter": {
        "resourceType": "Encounter",
        "status": "finished",
        "class": {
            "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
            "code": "AMB",
            "display": "ambulatory",
        },
        "type": [{"text": "Office visit"}],
        "subject": PATIENT_REF,
        "participant": [{"individual": PRACTITIONER_REF}],
        "appointment": [{"reference": "Appointment/1"}],
        "period": {"start": "2025-03-07T09:00:00Z", "end": "2025-03-07T09:25:00Z"},
        "length": {
            "value": 25,
            "unit": "min",
            "system": "http://unitsofmeasure.org",
            "code": "min",
        },
    },
    "Task": {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "priority": "routine",
        "code": {"text": "Call patient back"},
        "description": "Call back about lab results",
        "for": PATIENT_REF,
        "authoredOn": "2025-03-07T10:00:00+01:00",
        "lastModified": "2025-03-07T10:00:00+01:00",
        "requester": PRACTITIONER_REF,
        "owner": {"reference": "PractitionerRole/nurse"},
        "restriction": {"period": {"end": "2025-03-08T17:00:00Z"}},
        "input": [{"type": {"text": "attempt"}, "valueInteger": 1}],
    },
    "Communication": {
        "resourceType": "Communication",
        "status": "completed",
        "category": [{"text": "notification"}],
        "priority": "routine",
        "subject": PATIENT_REF,
        "sent": "2025-03-07T10:00:00Z",
        "recipient": [PATIENT_REF],
        "sender": PRACTITIONER_REF,
        "payload": [{"contentString": "Your results are normal."}],
    },
    "ServiceRequest": {
        "resourceType": "ServiceRequest",
        "status": "active",
        "intent": "order",
        "priority": "routine",
        "code": {
            "coding": [{"system": "http://loinc.org", "code": "24331-1", "display": "Lipid panel"}]
        },
        "subject": PATIENT_REF,
        "occurrenceDateTime": "2025-03-10",
        "authoredOn": "2025-03-07T10:00:00Z",
        "requester": PRACTITIONER_REF,
        "reasonCode": [{"text": "Hyperlipidaemia follow-up"}],
    },
    "MedicationRequest": {
        "resourceType": "MedicationRequest",
        "status": "active",
        "intent": "order",
        "priority": "routine",
        "medicationCodeableConcept": {
            "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "314076"}],
            "text": "lisinopril 10 MG Oral Tablet",
        },
        "subject": PATIENT_REF,
        "authoredOn": "2025-03-07",
        "requester": PRACTITIONER_REF,
        "dosageInstruction": [
            {
                "text": "1 tablet daily",
                "timing": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}},
                "doseAndRate": [{"doseQuantity": {"value": 1, "unit": "tablet"}}],
            }
        ],
        "dispenseRequest": {
            "numberOfRepeatsAllowed": 3,
            "quantity": {"value": 30, "unit": "tablet"},
        },
    },
    "MedicationStatement": {
        "resourceType": "MedicationStatement",
        "status": "active",
        "medicationReference": {"reference": "Medication/lisinopril"},
        "subject": PATIENT_REF,
        "effectivePeriod": {"start": "2024-01-01"},
        "dateAsserted": "2025-03-07",
        "dosage": [{"text": "10 mg daily", "asNeededBoolean": False}],
    },
    "Medication": {
        "resourceType": "Medication",
        "id": "lisinopril",
        "code": {
            "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "314076"}]
        },
        "status": "active",
        "form": {"text": "tablet"},
        "ingredient": [
            {
                "itemCodeableConcept": {"text": "lisinopril"},
                "isActive": True,
                "strength": {
                    "numerator": {"value": 10, "unit": "mg"},
                    "denominator": {"value": 1, "unit": "tablet"},
                },
            }
        ],
    },
    "Observation": {
        "resourceType": "Observation",
        "status": "final",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                        "code": "vital-signs",
                    }
                ]
            }
        ],
        "code": {
            "coding": [{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}]
        },
        "subject": PATIENT_REF,
        "effectiveDateTime": "2025-03-07T09:10:00Z",
        "valueQuantity": {
            "value": 72.5,
            "unit": "beats/minute",
            "system": "http://unitsofmeasure.org",
            "code": "/min",
        },
        "referenceRange": [{"low": {"value": 60}, "high": {"value": 100}}],
    },
    "DiagnosticReport": {
        "resourceType": "DiagnosticReport",
        "status": "final",
        "category": [{"text": "Laboratory"}],
        "code": {"coding": [{"system": "http://loinc.org", "code": "24331-1"}]},
        "subject": PATIENT_REF,
        "effectiveDateTime": "2025-03-07",
        "issued": "2025-03-08T10:00:00.000Z",
        "performer": [ORGANIZATION_REF],
        "result": [{"reference": "Observation/chol"}],
        "conclusion": "Normal lipid panel",
    },
    "Condition": {
        "resourceType": "Condition",
        "clinicalStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                    "code": "active",
                }
            ]
        },
        "verificationStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                    "code": "confirmed",
                }
            ]
        },
        "category": [{"text": "Problem list item"}],
        "code": {
            "coding": [{"system": "http://snomed.info/sct", "code": "38341003"}],
            "text": "Hypertension",
        },
        "subject": PATIENT_REF,
        "onsetDateTime": "2019-06",
        "recordedDate": "2019-06-15",
    },
    "AllergyIntolerance": {
        "resourceType": "AllergyIntolerance",
        "clinicalStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical",
                    "code": "active",
                }
            ]
        },
        "verificationStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification",
                    "code": "confirmed",
                }
            ]
        },
        "type": "allergy",
        "category": ["medication"],
        "criticality": "high",
        "code": {
            "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "7980"}],
            "text": "Penicillin G",
        },
        "patient": PATIENT_REF,
        "recordedDate": "2020-01-10T12:00:00+00:00",
        "reaction": [{"manifestation": [{"text": "Hives"}], "severity": "moderate"}],
    },
    "DocumentReference": {
        "resourceType": "DocumentReference",
        "status": "current",
        "docStatus": "final",
        "type": {
            "coding": [
                {"system": "http://loinc.org", "code": "11506-3", "display": "Progress note"}
            ]
        },
        "subject": PATIENT_REF,
        "date": "2025-03-07T10:00:00Z",
        "author": [PRACTITIONER_REF],
        "content": [
            {
                "attachment": {
                    "contentType": "text/plain",
                    "data": "UGF0aWVudCBkb2luZyB3ZWxsLg==",
                    "title": "Progress note",
                }
            }
        ],
    },
    "QuestionnaireResponse": {
        "resourceType": "QuestionnaireResponse",
        "questionnaire": "http://example.org/Questionnaire/phq-2",
        "status": "completed",
        "subject": PATIENT_REF,
        "authored": "2025-03-07T09:05:00Z",
        "item": [
            {
                "linkId": "1",
                "text": "Little interest or pleasure in doing things?",
                "answer": [{"valueCoding": {"code": "LA6568-5", "display": "Not at all"}}],
            },
            {"linkId": "2", "answer": [{"valueInteger": 0}]},
        ],
    },
    "CarePlan": {
        "resourceType": "CarePlan",
        "status": "active",
        "intent": "plan",
        "title": "Hypertension management",
        "subject": PATIENT_REF,
        "period": {"start": "2025-03-07"},
        "addresses": [{"reference": "Condition/htn"}],
        "activity": [
            {"detail": {"status": "in-progress", "description": "Home blood pressure monitoring"}}
        ],
    },
    "Coverage": {
        "resourceType": "Coverage",
        "status": "active",
        "subscriberId": "AB9876",
        "beneficiary": PATIENT_REF,
        "relationship": {"coding": [{"code": "self"}]},
        "period": {"start": "2025-01-01", "end": "2025-12-31"},
        "payor": [{"reference": "Organization/insurer", "display": "Example Health"}],
        "class": [{"type": {"text": "Group"}, "value": "CB135"}],
    },
}


def example(resource_type: str) -> dict[str, Any]:
    return copy.deepcopy(EXAMPLES[resource_type])


def expressions(issues: list[ValidationIssue]) -> list[str]:
    return [issue.expression for issue in issues]


def only_issue(issues: list[ValidationIssue]) -> ValidationIssue:
    assert len(issues) == 1, issues
    return issues[0]


# --------------------------------------------------------------------------
# Valid content
# --------------------------------------------------------------------------


@pytest.mark.parametrize("resource_type", sorted(EXAMPLES))
def test_valid_examples_pass(resource_type: str) -> None:
    assert validate_resource(resource_type, example(resource_type)) == []


@pytest.mark.parametrize("resource_type", sorted(EXAMPLES))
def test_valid_examples_are_valid_r4b_models(resource_type: str) -> None:
    # Keeps the examples honest: fhir.resources must accept them as well.
    validation.model_class(resource_type).model_validate(example(resource_type))


@pytest.mark.parametrize(
    ("resource_type", "resource"),
    [
        ("Patient", {"resourceType": "Patient"}),
        ("Schedule", {"resourceType": "Schedule", "actor": [PRACTITIONER_REF]}),
        ("Organization", {"resourceType": "Organization", "name": "Acme"}),
        ("PractitionerRole", {"resourceType": "PractitionerRole"}),
        (
            "Patient",  # a data-absent-reason extension may stand in for a value
            {
                "resourceType": "Patient",
                "name": [
                    {
                        "given": ["Jo", None],
                        "_given": [None, {"extension": [{"url": "x", "valueCode": "masked"}]}],
                    }
                ],
            },
        ),
        (
            "Slot",  # a required primitive may be replaced by its extension
            {
                "resourceType": "Slot",
                "schedule": {"reference": "Schedule/1"},
                "_status": {
                    "extension": [
                        {
                            "url": "http://hl7.org/fhir/StructureDefinition/data-absent-reason",
                            "valueCode": "unknown",
                        }
                    ]
                },
                "start": "2025-03-07T09:00:00.123+05:30",
                "end": "2025-03-07T09:30:00-14:00",
            },
        ),
        (
            "Observation",
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "x"},
                "valueBoolean": True,
                "effectiveInstant": "2016-12-31T23:59:60Z",  # leap second
                "contained": [{"resourceType": "Patient", "id": "p1", "gender": "other"}],
                "subject": {"reference": "#p1"},
            },
        ),
        (
            "Condition",  # codings of other systems are translations, not checked
            {
                "resourceType": "Condition",
                "subject": PATIENT_REF,
                "clinicalStatus": {
                    "coding": [
                        {"system": "http://example.org/local", "code": "bogus"},
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                            "code": "remission",
                        },
                    ]
                },
            },
        ),
        (
            "Task",
            {
                "resourceType": "Task",
                "status": "draft",
                "intent": "unknown",
                "input": [
                    {
                        "type": {"text": "id"},
                        "valueUuid": "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                    },
                    {"type": {"text": "n"}, "valueDecimal": 1},
                    {"type": {"text": "t"}, "valueTime": "10:00:00"},
                    {"type": {"text": "b"}, "valueBase64Binary": "aGVsbG8="},
                ],
            },
        ),
        (
            "Bundle",
            {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [
                    {
                        "fullUrl": "urn:uuid:1",
                        "resource": {"resourceType": "Patient", "gender": "female"},
                    }
                ],
            },
        ),
    ],
)
def test_other_valid_content_passes(resource_type: str, resource: dict[str, Any]) -> None:
    assert validate_resource(resource_type, resource) == []


def test_nulls_and_empty_arrays_are_tolerated() -> None:
    resource: dict[str, Any] = {
        "resourceType": "Patient",
        "gender": None,
        "name": [],
        "telecom": None,
    }
    assert validate_resource("Patient", resource) == []


# --------------------------------------------------------------------------
# Missing required elements
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "remove", "expected"),
    [
        ("Appointment", ["participant"], ["Appointment.participant"]),
        ("Appointment", ["status"], ["Appointment.status"]),
        (
            "Slot",
            ["schedule", "start", "end", "status"],
            ["Slot.schedule", "Slot.start", "Slot.end", "Slot.status"],
        ),
        ("Task", ["intent", "status"], ["Task.intent", "Task.status"]),
        ("Observation", ["code", "status"], ["Observation.code", "Observation.status"]),
        ("Encounter", ["class"], ["Encounter.class"]),
        ("Encounter", ["status"], ["Encounter.status"]),
        (
            "ServiceRequest",
            ["subject", "intent"],
            ["ServiceRequest.subject", "ServiceRequest.intent"],
        ),
        (
            "MedicationRequest",
            ["medicationCodeableConcept"],
            ["MedicationRequest.medication"],
        ),
        ("MedicationStatement", ["medicationReference"], ["MedicationStatement.medication"]),
        ("Condition", ["subject"], ["Condition.subject"]),
        ("AllergyIntolerance", ["patient"], ["AllergyIntolerance.patient"]),
        (
            "DocumentReference",
            ["content", "status"],
            ["DocumentReference.content", "DocumentReference.status"],
        ),
        ("QuestionnaireResponse", ["status"], ["QuestionnaireResponse.status"]),
        (
            "CarePlan",
            ["intent", "status", "subject"],
            ["CarePlan.intent", "CarePlan.status", "CarePlan.subject"],
        ),
        ("Coverage", ["payor", "beneficiary"], ["Coverage.payor", "Coverage.beneficiary"]),
        ("Communication", ["status"], ["Communication.status"]),
        ("DiagnosticReport", ["code"], ["DiagnosticReport.code"]),
    ],
)
def test_missing_required_elements(
    resource_type: str, remove: list[str], expected: list[str]
) -> None:
    resource = example(resource_type)
    for key in remove:
        del resource[key]
    issues = validate_resource(resource_type, resource)
    assert sorted(expressions(issues)) == sorted(expected)
    for issue in issues:
        assert issue.code == "required"
        assert issue.expression in issue.message
        assert "required" in issue.message


def test_required_elements_reported_alongside_other_errors() -> None:
    # fhir.resources alone reports the missing status only once nothing else is wrong
    resource = {"resourceType": "Slot", "schedule": {"reference": "Schedule/1"}, "start": "bad"}
    issues = validate_resource("Slot", resource)
    assert sorted(expressions(issues)) == ["Slot.end", "Slot.start", "Slot.status"]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"participant": []}, "Appointment.participant"),
        ({"participant": [{"actor": PATIENT_REF}]}, "Appointment.participant[0].status"),
        (
            {"participant": [{"status": "accepted", "actor": PATIENT_REF}, {"actor": PATIENT_REF}]},
            "Appointment.participant[1].status",
        ),
    ],
)
def test_missing_required_nested(patch: dict[str, Any], expected: str) -> None:
    resource = example("Appointment") | patch
    issue = only_issue(validate_resource("Appointment", resource))
    assert (issue.expression, issue.code) == (expected, "required")


def test_contained_resource_without_resource_type() -> None:
    resource = example("Patient") | {"contained": [{"id": "x"}]}
    issue = only_issue(validate_resource("Patient", resource))
    assert (issue.expression, issue.code) == ("Patient.contained[0].resourceType", "required")


# --------------------------------------------------------------------------
# Wrong JSON types, bad formats, unknown elements
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "patch", "expected", "code"),
    [
        ("Patient", {"birthDate": 12}, "Patient.birthDate", "structure"),
        ("Patient", {"birthDate": 0}, "Patient.birthDate", "structure"),  # pydantic: 1970-01-01
        ("Patient", {"active": "true"}, "Patient.active", "structure"),  # pydantic: True
        ("Patient", {"active": 1}, "Patient.active", "structure"),
        ("Patient", {"multipleBirthInteger": "3"}, "Patient.multipleBirthInteger", "structure"),
        ("Patient", {"multipleBirthInteger": 3.5}, "Patient.multipleBirthInteger", "structure"),
        ("Patient", {"multipleBirthInteger": True}, "Patient.multipleBirthInteger", "structure"),
        ("Patient", {"gender": 1}, "Patient.gender", "structure"),
        ("Patient", {"id": 5}, "Patient.id", "structure"),
        ("Patient", {"name": {"family": "Doe"}}, "Patient.name", "structure"),
        ("Patient", {"name": [{"given": "Jim"}]}, "Patient.name[0].given", "structure"),
        ("Patient", {"name": ["Jim"]}, "Patient.name[0]", "structure"),
        ("Patient", {"name": [None]}, "Patient.name[0]", "structure"),
        (
            "Patient",
            {"managingOrganization": "Organization/1"},
            "Patient.managingOrganization",
            "structure",
        ),
        ("Patient", {"birthDate": "1990-13-45"}, "Patient.birthDate", "value"),
        ("Patient", {"birthDate": "1990-02-30"}, "Patient.birthDate", "value"),
        ("Patient", {"birthDate": "1990-1-5"}, "Patient.birthDate", "value"),
        ("Patient", {"birthDate": "1990-01-01T00:00:00Z"}, "Patient.birthDate", "value"),
        ("Patient", {"birthDate": ""}, "Patient.birthDate", "value"),
        (
            "Patient",
            {"deceasedBoolean": None, "deceasedDateTime": "2020-01-01T10:00:00"},
            "Patient.deceasedDateTime",
            "value",
        ),
        (
            "Patient",
            {"deceasedBoolean": None, "deceasedDateTime": "2020-01-01T10:00Z"},
            "Patient.deceasedDateTime",
            "value",
        ),
        ("Patient", {"meta": {"lastUpdated": "2024-05-01"}}, "Patient.meta.lastUpdated", "value"),
        ("Patient", {"id": "a b"}, "Patient.id", "value"),
        ("Patient", {"id": "x" * 65}, "Patient.id", "value"),
        ("Patient", {"gender": " male"}, "Patient.gender", "value"),
        (
            "Patient",
            {"identifier": [{"system": "http://example.org/a b"}]},
            "Patient.identifier[0].system",
            "value",
        ),
        ("Patient", {"identifier": [{"value": ""}]}, "Patient.identifier[0].value", "value"),
        ("Patient", {"photo": [{"data": "!!!"}]}, "Patient.photo[0].data", "value"),
        ("Patient", {"photo": [{"size": -1}]}, "Patient.photo[0].size", "value"),
        ("Patient", {"telecom": [{"rank": 0}]}, "Patient.telecom[0].rank", "value"),
        ("Patient", {"multipleBirthInteger": 2**31}, "Patient.multipleBirthInteger", "value"),
        ("Slot", {"start": "2025-03-07T09:00:00"}, "Slot.start", "value"),
        ("Slot", {"start": "2025-03-07"}, "Slot.start", "value"),
        ("Appointment", {"minutesDuration": 0}, "Appointment.minutesDuration", "value"),
        (
            "Observation",
            {"valueQuantity": {"value": "72"}},
            "Observation.valueQuantity.value",
            "structure",
        ),
        (
            "Observation",
            {"valueQuantity": {"value": True}},
            "Observation.valueQuantity.value",
            "structure",
        ),
        (
            "Task",
            {"input": [{"type": {"text": "t"}, "valueTime": "25:00:00"}]},
            "Task.input[0].valueTime",
            "value",
        ),
        (
            "Task",
            {"input": [{"type": {"text": "u"}, "valueUuid": "6ba7b810"}]},
            "Task.input[0].valueUuid",
            "value",
        ),
        ("Encounter", {"class": {"code": 1}}, "Encounter.class.code", "structure"),
        (
            "Practitioner",
            {"qualification": [{"code": {"text": 5}}]},
            "Practitioner.qualification[0].code.text",
            "structure",
        ),
        ("Patient", {"foo": 1}, "Patient.foo", "structure"),
        (
            "Patient",
            {"name": [{"family": "Doe", "surname": "Doe"}]},
            "Patient.name[0].surname",
            "structure",
        ),
        (
            "Patient",
            {"contact": [{"gender": "female", "nickname": "Bee"}]},
            "Patient.contact[0].nickname",
            "structure",
        ),
        (
            "Patient",
            {"identifier": [{"resourceType": "Identifier"}]},
            "Patient.identifier[0].resourceType",
            "structure",
        ),
        ("Patient", {"_birthDate": {}}, "Patient.birthDate", "structure"),
        ("Patient", {"_birthDate": {"extension": None}}, "Patient.birthDate", "structure"),
        (
            "Patient",
            {"_birthDate": {"extension": [{"url": 3}]}},
            "Patient.birthDate.extension[0].url",
            "structure",
        ),
        ("Encounter", {"class_": {"code": "AMB"}}, "Encounter.class_", "structure"),
    ],
)
def test_invalid_content(
    resource_type: str, patch: dict[str, Any], expected: str, code: str
) -> None:
    resource = example(resource_type) | patch
    issue = only_issue(validate_resource(resource_type, resource))
    assert (issue.expression, issue.code) == (expected, code)
    assert issue.message.startswith(f"{expected}: ")


def test_messages_name_the_problem() -> None:
    issues = validate_resource(
        "Patient", example("Patient") | {"birthDate": "1990-13-45", "active": "true"}
    )
    messages = {issue.expression: issue.message for issue in issues}
    assert "invalid date '1990-13-45'" in messages["Patient.birthDate"]
    assert "expected boolean" in messages["Patient.active"]
    assert "string 'true'" in messages["Patient.active"]


def test_all_errors_are_returned() -> None:
    resource = example("Patient") | {
        "birthDate": 12,
        "foo": 1,
        "gender": "robot",
        "name": [{"family": 3, "given": "x"}],
        "contained": [{"resourceType": "Observation", "status": "bogus"}],
    }
    assert sorted(expressions(validate_resource("Patient", resource))) == [
        "Patient.birthDate",
        "Patient.contained[0].code",
        "Patient.contained[0].status",
        "Patient.foo",
        "Patient.gender",
        "Patient.name[0].family",
        "Patient.name[0].given",
    ]


@pytest.mark.parametrize(
    ("resource_type", "patch", "expected", "code"),
    [
        ("Patient", {"deceasedDateTime": "2020"}, "Patient.deceased", "structure"),
        (
            "MedicationRequest",
            {"medicationReference": {"reference": "Medication/1"}},
            "MedicationRequest.medication",
            "structure",
        ),
        (
            "Patient",
            {"extension": [{"url": "http://x", "valueString": "a", "valueBoolean": True}]},
            "Patient.extension[0].value",
            "structure",
        ),
    ],
)
def test_choice_elements(
    resource_type: str, patch: dict[str, Any], expected: str, code: str
) -> None:
    issue = only_issue(validate_resource(resource_type, example(resource_type) | patch))
    assert (issue.expression, issue.code) == (expected, code)
    assert "only one of" in issue.message


@pytest.mark.parametrize(
    ("patch", "expected", "code"),
    [
        (
            {"contained": [{"resourceType": "Foo"}]},
            "Patient.contained[0].resourceType",
            "structure",
        ),
        (
            {"contained": [{"resourceType": "HumanName"}]},
            "Patient.contained[0].resourceType",
            "structure",
        ),
        ({"contained": [1]}, "Patient.contained[0]", "structure"),
        (
            {"contained": [{"resourceType": "Organization", "name": 1}]},
            "Patient.contained[0].name",
            "structure",
        ),
        (
            {
                "contained": [
                    {"resourceType": "Organization"},
                    {"resourceType": "Patient", "gender": "robot"},
                ]
            },
            "Patient.contained[1].gender",
            "code-invalid",
        ),
    ],
)
def test_contained_resources(patch: dict[str, Any], expected: str, code: str) -> None:
    issue = only_issue(validate_resource("Patient", example("Patient") | patch))
    assert (issue.expression, issue.code) == (expected, code)


def test_bundle_entries_are_validated() -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": example("Patient")},
            {"resource": example("Slot") | {"status": "open", "start": "tomorrow"}},
        ],
    }
    issues = validate_resource("Bundle", bundle)
    assert sorted(expressions(issues)) == [
        "Bundle.entry[1].resource.start",
        "Bundle.entry[1].resource.status",
    ]


# --------------------------------------------------------------------------
# Required bindings
# --------------------------------------------------------------------------

BINDING_ROWS = [
    (resource_type, path, value_set)
    for resource_type, rows in validation.REQUIRED_BINDINGS.items()
    for path, value_set in rows
]


def _set_code(resource: dict[str, Any], path: str, value_set: Any, code: str) -> str:
    """Put ``code`` at the first occurrence of ``path``; return its expression."""
    node: Any = resource
    expr = resource["resourceType"]
    steps = path.split(".")
    for step in steps[:-1]:
        node, expr = node[step], f"{expr}.{step}"
        if isinstance(node, list):
            node, expr = node[0], f"{expr}[0]"
    last = steps[-1]
    expr = f"{expr}.{last}"
    if value_set.system is not None:
        node[last][0]["code"] = code
        return f"{expr}[0].code"
    if isinstance(node[last], list):
        node[last][0] = code
        return f"{expr}[0]"
    node[last] = code
    return expr


@pytest.mark.parametrize(
    ("resource_type", "path", "value_set"),
    BINDING_ROWS,
    ids=[f"{rt}.{path}" for rt, path, _ in BINDING_ROWS],
)
def test_binding_rejects_bad_code(resource_type: str, path: str, value_set: Any) -> None:
    resource = example(resource_type)
    expected = _set_code(resource, path, value_set, "bogus")
    issue = only_issue(validate_resource(resource_type, resource))
    assert (issue.expression, issue.code) == (expected, "code-invalid")
    assert issue.message.startswith(f"'bogus' is not a valid code for {expected} ")
    assert ", ".join(value_set.codes) in issue.message


@pytest.mark.parametrize(
    ("resource_type", "path", "value_set"),
    BINDING_ROWS,
    ids=[f"{rt}.{path}" for rt, path, _ in BINDING_ROWS],
)
def test_binding_accepts_every_code(resource_type: str, path: str, value_set: Any) -> None:
    for code in value_set.codes:
        resource = example(resource_type)
        _set_code(resource, path, value_set, code)
        assert validate_resource(resource_type, resource) == [], code


@pytest.mark.parametrize(
    ("resource_type", "element", "codes"),
    [
        (
            "Appointment",
            "status",
            "proposed pending booked arrived fulfilled"
            " cancelled noshow entered-in-error checked-in waitlist",
        ),
        ("Slot", "status", "busy free busy-unavailable busy-tentative entered-in-error"),
        (
            "Task",
            "intent",
            "unknown proposal plan order"
            " original-order reflex-order filler-order instance-order option",
        ),
        ("CarePlan", "intent", "proposal plan order option"),
        (
            "ServiceRequest",
            "intent",
            "proposal plan directive order"
            " original-order reflex-order filler-order instance-order option",
        ),
        (
            "Encounter",
            "status",
            "planned arrived triaged in-progress"
            " onleave finished cancelled entered-in-error unknown",
        ),
        (
            "MedicationStatement",
            "status",
            "active completed entered-in-error intended stopped on-hold unknown not-taken",
        ),
        ("Patient", "gender", "male female other unknown"),
    ],
)
def test_binding_code_lists_match_r4(resource_type: str, element: str, codes: str) -> None:
    rows = dict(validation.REQUIRED_BINDINGS[resource_type])
    assert rows[element].codes == tuple(codes.split())


def test_codes_are_case_sensitive() -> None:
    issue = only_issue(
        validate_resource("Appointment", example("Appointment") | {"status": "Booked"})
    )
    assert (issue.expression, issue.code) == ("Appointment.status", "code-invalid")


@pytest.mark.parametrize(
    ("resource_type", "patch", "expected"),
    [
        (
            "Appointment",
            {
                "participant": [
                    {"actor": PATIENT_REF, "status": "accepted"},
                    {"actor": PATIENT_REF, "status": "maybe"},
                ]
            },
            ["Appointment.participant[1].status"],
        ),
        (
            "Patient",
            {"name": [{"use": "official"}, {"use": "usual"}, {"use": "nick"}]},
            ["Patient.name[2].use"],
        ),
        (
            "Patient",
            {
                "contact": [
                    {"gender": "female"},
                    {
                        "telecom": [{"system": "phone"}, {"system": "pigeon", "use": "office"}],
                        "address": {"type": "home"},
                    },
                ]
            },
            [
                "Patient.contact[1].address.type",
                "Patient.contact[1].telecom[1].system",
                "Patient.contact[1].telecom[1].use",
            ],
        ),
        (
            "Condition",
            {
                "clinicalStatus": {
                    "coding": [
                        {"system": "http://example.org/local", "code": "x"},
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                            "code": "cured",
                        },
                    ]
                }
            },
            ["Condition.clinicalStatus.coding[1].code"],
        ),
        (
            "AllergyIntolerance",
            {"category": ["food", "medication", "pollen"]},
            ["AllergyIntolerance.category[2]"],
        ),
        (
            "Practitioner",
            {
                "qualification": [
                    {"code": {"text": "MD"}},
                    {"code": {"text": "PhD"}, "identifier": [{"use": "main"}]},
                ]
            },
            ["Practitioner.qualification[1].identifier[0].use"],
        ),
    ],
)
def test_binding_nested_indices(
    resource_type: str, patch: dict[str, Any], expected: list[str]
) -> None:
    issues = validate_resource(resource_type, example(resource_type) | patch)
    assert sorted(expressions(issues)) == expected
    assert {issue.code for issue in issues} == {"code-invalid"}


def test_binding_skips_non_string_values() -> None:
    # the type error is the one problem to report, not an invalid code as well
    issue = only_issue(validate_resource("Appointment", example("Appointment") | {"status": 3}))
    assert (issue.expression, issue.code) == ("Appointment.status", "structure")


def test_binding_table_is_well_formed() -> None:
    for resource_type, rows in validation.REQUIRED_BINDINGS.items():
        assert is_known_type(resource_type)
        assert len({path for path, _ in rows}) == len(rows), resource_type
        for _, value_set in rows:
            assert value_set.codes
            assert len(set(value_set.codes)) == len(value_set.codes)
            assert value_set.allowed == frozenset(value_set.codes)


# --------------------------------------------------------------------------
# Envelope: resourceType, non-dict input, unknown types, robustness
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "resource", "fragment"),
    [
        ("Patient", {"resourceType": "Practitioner"}, "'Practitioner'"),
        ("Patient", {"name": [{"family": "Doe"}]}, "missing"),
        ("Patient", {"resourceType": "patient"}, "'patient'"),
        ("Patient", {"resourceType": 1}, "1"),
    ],
)
def test_resource_type_mismatch(
    resource_type: str, resource: dict[str, Any], fragment: str
) -> None:
    issue = only_issue(validate_resource(resource_type, resource))
    assert issue.expression == "Patient"
    assert issue.code in ("structure", "invalid")
    assert fragment in issue.message


@pytest.mark.parametrize("resource", [None, [], "Patient", 1, b"{}", [{"resourceType": "Patient"}]])
def test_non_dict_input(resource: Any) -> None:
    issue = only_issue(validate_resource("Patient", resource))
    assert (issue.expression, issue.code) == ("Patient", "structure")


def test_unknown_resource_type() -> None:
    issue = only_issue(validate_resource("Foo", {"resourceType": "Foo"}))
    assert issue.expression == "Foo"
    assert "Foo" in issue.message


@pytest.mark.parametrize(
    "resource",
    [
        {"resourceType": "Patient", 1: "x"},
        {"resourceType": "Patient", "multipleBirthInteger": float("nan")},
        {"resourceType": "Patient", "multipleBirthInteger": 10**100},
        {"resourceType": "Patient", "name": [{"given": [1, None, {}]}]},
        {
            "resourceType": "Patient",
            "extension": [{"url": "a", "extension": [{"url": "b", "extension": [{"url": 3}]}]}],
        },
        {"resourceType": "Patient", "contained": [{"resourceType": ["Patient"]}]},
        {
            "resourceType": "Patient",
            "contained": [{"resourceType": "Patient", "contained": [{"resourceType": "Foo"}]}],
        },
        {"resourceType": "Patient", "text": {"status": "generated", "div": object()}},
    ],
)
def test_never_raises_and_reports(resource: dict[str, Any]) -> None:
    issues = validate_resource("Patient", resource)
    assert issues
    assert all(isinstance(issue, ValidationIssue) for issue in issues)


def test_absurd_nesting_becomes_an_issue() -> None:
    extension: dict[str, Any] = {"url": "x"}
    for _ in range(5000):
        extension = {"url": "x", "extension": [extension]}
    issues = validate_resource("Patient", {"resourceType": "Patient", "extension": [extension]})
    assert issues
    assert issues[-1].expression == "Patient"


def test_validation_issue_is_frozen() -> None:
    issue = ValidationIssue("Patient.gender", "bad")
    assert issue.code == "invalid"
    with pytest.raises(AttributeError):
        issue.code = "value"  # type: ignore[misc]


# --------------------------------------------------------------------------
# Agreement with fhir.resources: whatever the R4B model rejects, we reject
# --------------------------------------------------------------------------

MUTATIONS: list[Any] = [
    12345,
    -1,
    1.5,
    True,
    "x y",
    "",
    " a",
    "2020-13-01",
    "2020-01-01T10:00:00",
    {},
    [],
    [{}],
    [None],
    {"foo": 1},
    ["a"],
    {"extension": None},
]


def _model_rejects(resource_type: str, resource: dict[str, Any]) -> bool:
    try:
        validation.model_class(resource_type).model_validate(copy.deepcopy(resource))
    except (pydantic.ValidationError, ValueError, TypeError, AttributeError, KeyError):
        return True
    return False


def _locations(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if key != "resourceType":
            found.append((*prefix, key))
            if isinstance(value, dict | list):
                found.extend(_locations(value, (*prefix, key)))
    return found


@pytest.mark.parametrize("resource_type", sorted(EXAMPLES))
def test_rejects_whatever_the_r4b_model_rejects_top_level(resource_type: str) -> None:
    base = example(resource_type)
    rejected = 0
    for key in [k for k in base if k != "resourceType"]:
        for mutation in ["<delete>", *MUTATIONS]:
            resource = copy.deepcopy(base)
            if mutation == "<delete>":
                del resource[key]
            else:
                resource[key] = copy.deepcopy(mutation)
            if _model_rejects(resource_type, resource):
                rejected += 1
                assert validate_resource(resource_type, resource), (key, mutation)
    assert rejected


def test_rejects_whatever_the_r4b_model_rejects_nested() -> None:
    rng = random.Random(20250307)
    rejected = 0
    for _ in range(600):
        resource_type = rng.choice(sorted(EXAMPLES))
        resource = example(resource_type)
        location = rng.choice(_locations(resource))
        parent: Any = resource
        for step in location[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and rng.random() < 0.2:
            del parent[location[-1]]
        else:
            parent[location[-1]] = copy.deepcopy(rng.choice(MUTATIONS))
        if _model_rejects(resource_type, resource):
            rejected += 1
            assert validate_resource(resource_type, resource), location
    assert rejected > 300


# --------------------------------------------------------------------------
# is_known_type
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("Patient", True),
        ("Slot", True),
        ("Bundle", True),
        ("Parameters", True),
        ("OperationOutcome", True),
        ("Binary", True),
        ("SubscriptionTopic", True),  # R4B
        ("Foo", False),
        ("patient", False),
        ("PATIENT", False),
        ("", False),
        ("Resource", False),
        ("DomainResource", False),
        ("HumanName", False),
        ("BackboneElement", False),
        ("MedicinalProduct", False),  # R4 only; no R4B model
    ],
)
def test_is_known_type(name: str, known: bool) -> None:
    assert is_known_type(name) is known


def test_known_types_match_the_r4b_package() -> None:
    # Imports every R4B model (~1.5 s): the hard-coded list must not drift.
    import fhir.resources.R4B as r4b
    from fhir.resources.R4B import fhirtypes

    found = set()
    for name in dir(fhirtypes):
        if not name.endswith("Type") or name[0] == "_":
            continue
        try:
            model = r4b.get_fhir_model_class(name.removesuffix("Type"))
        except (ValueError, KeyError, ImportError):
            continue
        if model.has_resource_base() and model.__name__ not in ("Resource", "DomainResource"):
            found.add(model.__name__)
    assert found == set(validation.RESOURCE_TYPES)
