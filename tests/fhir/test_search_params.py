"""Search parameter registry and index extraction (app/fhir/search/params.py, index.py).

Run as a script for the extraction timings quoted in index.py's docstring:
``python -m tests.fhir.test_search_params``.
"""

from __future__ import annotations

import functools
import timeit
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.fhir.search import index as index_module
from app.fhir.search.index import (
    PERIOD_MAX,
    PERIOD_MIN,
    extract_index,
    format_sort_instant,
    normalize_reference,
    normalize_string,
    parse_date_range,
)
from app.fhir.search.params import (
    COMMON_PARAMS,
    SEARCH_PARAMS,
    ParamKind,
    SearchParam,
    params_for,
)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


# --- registry: coverage ---------------------------------------------------------------

# The parameters agents use, per type (the brief's list; CarePlan's is the spec's
# `performer`, the activity performer).
EXPECTED_PARAMS: dict[str, set[str]] = {
    "Patient": {
        "name", "family", "given", "birthdate", "gender", "identifier", "telecom", "phone",
        "email", "address", "address-city", "address-postalcode", "general-practitioner",
        "organization", "active",
    },
    "Practitioner": {"name", "family", "given", "identifier", "active", "gender", "telecom"},
    "PractitionerRole": {
        "practitioner", "organization", "location", "specialty", "role", "service", "active",
        "identifier",
    },
    "Organization": {"name", "identifier", "type", "active"},
    "Location": {"name", "address", "address-city", "status", "organization", "type",
                 "identifier"},
    "Schedule": {"actor", "active", "date", "service-type", "specialty", "identifier"},
    "Slot": {"schedule", "status", "start", "service-type", "specialty", "identifier"},
    "Appointment": {
        "patient", "practitioner", "location", "actor", "status", "date", "identifier",
        "service-type", "appointment-type", "slot", "based-on", "part-status", "specialty",
    },
    "Communication": {
        "patient", "subject", "recipient", "sender", "status", "category", "sent", "received",
        "based-on", "part-of", "encounter", "identifier",
    },
    "Task": {
        "patient", "subject", "owner", "requester", "status", "intent", "priority", "code",
        "authored-on", "based-on", "focus", "part-of", "identifier", "business-status",
        "period", "modified",
    },
    "DiagnosticReport": {
        "patient", "subject", "status", "code", "category", "date", "issued", "result",
        "based-on", "encounter", "identifier", "performer",
    },
    "Observation": {
        "patient", "subject", "status", "code", "category", "date", "value-concept",
        "based-on", "encounter", "identifier", "performer", "derived-from", "has-member",
    },
    "ServiceRequest": {
        "patient", "subject", "status", "intent", "code", "category", "priority", "authored",
        "requester", "performer", "based-on", "encounter", "identifier", "occurrence",
        "specimen",
    },
    "MedicationRequest": {
        "patient", "subject", "status", "intent", "code", "medication", "authoredon",
        "requester", "priority", "encounter", "identifier", "category", "intended-performer",
    },
    "MedicationStatement": {
        "patient", "subject", "status", "code", "medication", "effective", "category",
        "identifier", "context", "source", "part-of",
    },
    "Medication": {"code", "status", "identifier", "form", "ingredient-code"},
    "Coverage": {
        "beneficiary", "patient", "subscriber", "payor", "status", "type", "identifier",
        "policy-holder", "class-value", "class-type",
    },
    "Encounter": {
        "patient", "subject", "status", "class", "type", "date", "participant", "practitioner",
        "location", "service-provider", "identifier", "reason-code", "based-on", "appointment",
    },
    "Condition": {
        "patient", "subject", "code", "clinical-status", "verification-status", "category",
        "onset-date", "recorded-date", "encounter", "identifier", "severity", "asserter",
        "abatement-date",
    },
    "AllergyIntolerance": {
        "patient", "code", "clinical-status", "verification-status", "type", "category",
        "criticality", "date", "recorder", "asserter", "identifier", "last-date", "onset",
    },
    "DocumentReference": {
        "patient", "subject", "status", "type", "category", "date", "author", "encounter",
        "identifier", "custodian", "relatesto", "related", "period", "contenttype",
    },
    "QuestionnaireResponse": {
        "patient", "subject", "status", "questionnaire", "authored", "author", "encounter",
        "identifier", "based-on", "part-of", "source",
    },
    "CarePlan": {
        "patient", "subject", "status", "intent", "category", "date", "care-team", "encounter",
        "identifier", "based-on", "part-of", "activity-code", "condition", "goal", "performer",
    },
}  # fmt: skip


@pytest.mark.parametrize("resource_type", sorted(EXPECTED_PARAMS))
def test_listed_types_have_their_params(resource_type: str) -> None:
    params = params_for(resource_type)
    missing = EXPECTED_PARAMS[resource_type] - set(params)
    assert not missing
    assert set(COMMON_PARAMS) <= set(params)
    # _id and _lastUpdated are columns, handled by the search layer.
    assert "_id" not in params and "_lastUpdated" not in params


def test_communication_has_no_priority_as_in_r4() -> None:
    assert "priority" not in params_for("Communication")


@pytest.mark.parametrize("resource_type", ["Basic", "Device", "NoSuchType"])
def test_type_without_table_gets_common_params_only(resource_type: str) -> None:
    assert params_for(resource_type) == COMMON_PARAMS
    assert set(COMMON_PARAMS) >= {"_tag", "_profile"}


def test_registry_keys_match_param_names() -> None:
    for table in [COMMON_PARAMS, *SEARCH_PARAMS.values()]:
        for name, param in table.items():
            assert name == param.name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"paths": ()}, "bad paths"),
        ({"paths": ("a..b",)}, "bad paths"),
        ({"paths": ("subject",), "targets": ("Patient",)}, "targets need a reference kind"),
    ],
)
def test_search_param_rejects_bad_definitions(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SearchParam(name="x", kind=ParamKind.TOKEN, **kwargs)


# --- registry: every path is a real R4 element ------------------------------------------

# R4 datatypes each kind can index (what index.py knows how to read).
KIND_TYPES: dict[ParamKind, frozenset[str]] = {
    ParamKind.TOKEN: frozenset(
        {
            "Code",
            "String",
            "Boolean",
            "Uri",
            "Url",
            "Canonical",
            "Id",
            "Oid",
            "Uuid",
            "Coding",
            "CodeableConcept",
            "Identifier",
            "ContactPoint",
        }
    ),
    ParamKind.REFERENCE: frozenset({"Reference", "Canonical"}),
    ParamKind.STRING: frozenset({"String", "Markdown", "HumanName", "Address"}),
    ParamKind.DATE: frozenset({"Date", "DateTime", "Instant", "Period"}),
}


@functools.cache
def _model_fields(class_name: str) -> dict[str, Any]:
    """JSON element name -> pydantic field of an R4 (R4B model) resource or datatype."""
    # Imported lazily: loading the model package takes a while.
    from fhir.resources.R4B import get_fhir_model_class

    model = get_fhir_model_class(class_name)
    return {
        (field.alias or name): field
        for name, field in model.model_fields.items()
        if not name.endswith("__ext") and name != "fhir_comments"
    }


def _field_type(field: Any) -> str:
    """The R4 type name of a model field: "CodeableConcept", "Code", "Boolean"..."""
    annotation = field.annotation
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            meta = typing.get_args(annotation)[1]
            return type(meta).__name__
        if origin is None:
            break
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    if annotation is bool:
        return "Boolean"
    get_model = getattr(annotation, "get_model_klass", None)
    assert get_model is not None, f"unexpected annotation {field.annotation!r}"
    name: str = get_model().__name__
    return name


def _choice_variants(fields: dict[str, Any], base: str) -> dict[str, str]:
    return {
        key: _field_type(field)
        for key, field in fields.items()
        if (field.json_schema_extra or {}).get("one_of_many") == base
    }


def _registry_paths() -> list[tuple[str, SearchParam, str]]:
    cases = [("Resource", p, path) for p in COMMON_PARAMS.values() for path in p.paths]
    for resource_type, table in sorted(SEARCH_PARAMS.items()):
        cases += [(resource_type, p, path) for p in table.values() for path in p.paths]
    return cases


@pytest.mark.parametrize(
    ("resource_type", "param", "path"),
    _registry_paths(),
    ids=lambda v: v.name if isinstance(v, SearchParam) else str(v),
)
def test_every_path_resolves_to_an_r4_element(
    resource_type: str, param: SearchParam, path: str
) -> None:
    fields = _model_fields(resource_type)
    *inner, last = path.split(".")
    for segment in inner:
        assert segment in fields, f"{resource_type}.{path}: no element {segment!r}"
        fields = _model_fields(_field_type(fields[segment]))
    allowed = KIND_TYPES[param.kind]
    suffixes = index_module._CHOICE_SUFFIXES[param.kind]

    if last in fields:
        field = fields[last]
        leaf_type = _field_type(field)
        assert leaf_type in allowed, f"{path} is {leaf_type}, not indexable as {param.kind}"
        # The extractor tries `last + suffix` when `last` is absent (choice elements): no
        # other element may be named like that, or it would be indexed by mistake.
        clashes = [last + s for s in suffixes if last + s in fields]
        assert not clashes, f"{path}: {clashes} would be read as a choice of {last}"
        reference_types = (field.json_schema_extra or {}).get("enum_reference_types") or []
    else:
        variants = _choice_variants(fields, last)
        assert variants, f"{resource_type}.{path}: no element or choice {last!r}"
        usable = {key for key, kind in variants.items() if kind in allowed}
        assert usable, f"{path}: no variant of {last}[x] is indexable as {param.kind}"
        # Every usable variant must be one the extractor looks for.
        assert usable <= {last + s for s in suffixes}, usable
        leaf_type = "choice"
        reference_types = []
        for key in usable:
            extra = fields[key].json_schema_extra or {}
            reference_types += extra.get("enum_reference_types") or []

    if param.where is not None:
        element, _ = param.where
        assert leaf_type != "choice", f"{path}: `where` on a choice element"
        assert element in _model_fields(leaf_type), f"{path}: {leaf_type} has no {element}"
    for target in param.targets:
        _model_fields(target)  # a real resource type
        assert target in reference_types or "Resource" in reference_types, (
            f"{resource_type}.{path} cannot refer to {target}"
        )


# --- normalisation helpers -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Rivera", "rivera"),
        ("  Alex   J.  RIVERA ", "alex j. rivera"),
        ("Zoë", "zoe"),
        ("Núñez", "nunez"),
        ("ÉLODIE", "elodie"),
        ("Straße", "strasse"),  # casefold, not lower
        ("Müller\tvon\nBerg", "muller von berg"),
        ("ﬁnn", "finn"),  # NFKD compatibility decomposition of the ligature
        ("São Paulo", "sao paulo"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize_string(value: str, expected: str) -> None:
    assert normalize_string(value) == expected


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("Patient/1", "Patient/1"),
        ("Patient/abc-DEF.9", "Patient/abc-DEF.9"),
        ("Patient/1/_history/3", "Patient/1"),
        ("http://host/fhir/Patient/1", "Patient/1"),
        ("https://host:8443/base/r4/Patient/1/_history/2", "Patient/1"),
        ("http://example.org/Questionnaire/phq9|2.0", "Questionnaire/phq9"),
        ("#contained-1", None),
        ("urn:uuid:6d1f2a3e-0000-4000-8000-000000000001", None),
        ("urn:oid:1.2.3", None),
        ("", None),
        ("Patient", None),
        ("Patient/", None),
        ("patient/1", None),
        ("Patient?identifier=http://x|1", None),
        ("Patient/" + "x" * 65, None),
    ],
)
def test_normalize_reference(ref: str, expected: str | None) -> None:
    assert normalize_reference(ref) == expected


# --- date ranges -----------------------------------------------------------------------

T10 = utc(2025, 3, 7, 10)
H1 = timedelta(hours=1)


def us(n: int) -> timedelta:
    return timedelta(microseconds=n)


@pytest.mark.parametrize(
    ("value", "low", "high"),
    [
        ("2025", utc(2025, 1, 1), utc(2026, 1, 1)),
        ("2025-03", utc(2025, 3, 1), utc(2025, 4, 1)),
        ("2025-12", utc(2025, 12, 1), utc(2026, 1, 1)),
        ("2024-02", utc(2024, 2, 1), utc(2024, 3, 1)),
        ("2025-03-07", utc(2025, 3, 7), utc(2025, 3, 8)),
        ("2024-12-31", utc(2024, 12, 31), utc(2025, 1, 1)),
        ("2025-03-07T10:00", utc(2025, 3, 7, 10, 0), utc(2025, 3, 7, 10, 1)),
        ("2025-03-07T10:00:00Z", utc(2025, 3, 7, 10), utc(2025, 3, 7, 10, 0, 1)),
        ("2025-03-07T10:00:00", utc(2025, 3, 7, 10), utc(2025, 3, 7, 10, 0, 1)),
        ("2025-03-07T10:00:00+02:00", utc(2025, 3, 7, 8), utc(2025, 3, 7, 8, 0, 1)),
        ("2025-03-07T01:00:00+05:30", utc(2025, 3, 6, 19, 30), utc(2025, 3, 6, 19, 30, 1)),
        ("2025-03-07T22:00:00-05:00", utc(2025, 3, 8, 3), utc(2025, 3, 8, 3, 0, 1)),
        ("2025-03-07T10:00:00-00:00", utc(2025, 3, 7, 10), utc(2025, 3, 7, 10, 0, 1)),
        ("2025-03-07T10:00:00.5Z", T10 + us(500_000), T10 + us(600_000)),
        ("2025-03-07T10:00:00.123Z", T10 + us(123_000), T10 + us(124_000)),
        ("2025-03-07T10:00:00.123456Z", T10 + us(123_456), T10 + us(123_457)),
        ("2025-03-07T10:00:00.1234567Z", T10 + us(123_456), T10 + us(123_457)),  # truncated
        ("2025-03-07T10:00:00.250+01:00", T10 - H1 + us(250_000), T10 - H1 + us(251_000)),
        ("2016-12-31T23:59:60Z", utc(2016, 12, 31, 23, 59, 59), utc(2017, 1, 1)),  # leap second
        ("0001", utc(1, 1, 1), utc(2, 1, 1)),
        ("9999", utc(9999, 1, 1), datetime.max.replace(tzinfo=UTC)),
        ("9999-12-31", utc(9999, 12, 31), datetime.max.replace(tzinfo=UTC)),
        ("0001-01-01T00:30:00+01:00", PERIOD_MIN, PERIOD_MIN + timedelta(seconds=1)),
    ],
)
def test_parse_date_range(value: str, low: datetime, high: datetime) -> None:
    got_low, got_high = parse_date_range(value)
    assert (got_low, got_high) == (low, high)
    assert got_low.utcoffset() == timedelta(0) and got_high.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "25",
        "20250307",
        "2025-3-7",
        "2025-13",
        "2025-00",
        "2025-02-30",
        "2025-03-32",
        "0000",
        "2025-03-07T25:00:00Z",
        "2025-03-07T10:61:00Z",
        "2025-03-07T10:00:61Z",
        "2025-03-07T10Z",
        "2025-03-07T10:00:00+15:00",
        "2025-03-07T10:00:00+02",
        "2025-03-07T10:00:00.Z",
        "2025-03-07 10:00:00",
        "2025-03-07t10:00:00z",
        "2025-03-07+02:00",
        " 2025-03-07",
        "2025-03-07T10:00:00Zjunk",
        "yesterday",
    ],
)
def test_parse_date_range_rejects_bad_values(value: str) -> None:
    with pytest.raises(ValueError, match="invalid FHIR date"):
        parse_date_range(value)


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (utc(2025, 3, 7, 8, 0, 0, 5), "2025-03-07T08:00:00.000005Z"),
        (datetime(2025, 3, 7, 10, tzinfo=UTC).astimezone(), "2025-03-07T10:00:00.000000Z"),
        (PERIOD_MIN, "0001-01-01T00:00:00.000000Z"),
        (utc(999, 1, 2), "0999-01-02T00:00:00.000000Z"),
    ],
)
def test_format_sort_instant_is_fixed_width_utc(moment: datetime, expected: str) -> None:
    assert format_sort_instant(moment) == expected


# --- extraction: tokens ----------------------------------------------------------------


def tokens(resource: dict[str, Any]) -> list[str]:
    return extract_index(resource["resourceType"], resource).tokens


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        pytest.param(
            {"resourceType": "Appointment", "status": "booked"},
            ["status=booked", "status=|booked"],
            id="code",
        ),
        pytest.param(
            {"resourceType": "Patient", "active": False},
            ["active=false", "active=|false"],
            id="boolean",
        ),
        pytest.param(
            {"resourceType": "Encounter", "class": {"system": "http://v3", "code": "AMB"}},
            ["class=AMB", "class=http://v3|AMB", "class=http://v3|"],
            id="Coding",
        ),
        pytest.param(
            {
                "resourceType": "Observation",
                "code": {
                    "coding": [
                        {"system": "http://loinc.org", "code": "2345-7"},
                        {"code": "GLU"},
                        {"system": "http://x", "display": "no code"},
                    ],
                    "text": "Glucose",
                },
            },
            [
                "code=2345-7",
                "code=http://loinc.org|2345-7",
                "code=http://loinc.org|",
                "code=GLU",
                "code=|GLU",
                "combo-code=2345-7",
                "combo-code=http://loinc.org|2345-7",
                "combo-code=http://loinc.org|",
                "combo-code=GLU",
                "combo-code=|GLU",
            ],
            id="CodeableConcept",
        ),
        pytest.param(
            {"resourceType": "Condition", "code": {"text": "free text only"}},
            [],
            id="CodeableConcept-text-only",
        ),
        pytest.param(
            {
                "resourceType": "Patient",
                "identifier": [
                    {"system": "http://hospital/mrn", "value": "MRN1", "use": "usual"},
                    {"value": "LOCAL-7"},
                    {"system": "http://no-value"},
                ],
            },
            [
                "identifier=MRN1",
                "identifier=http://hospital/mrn|MRN1",
                "identifier=http://hospital/mrn|",
                "identifier=LOCAL-7",
                "identifier=|LOCAL-7",
            ],
            id="Identifier",
        ),
        pytest.param(
            {"resourceType": "Patient", "telecom": [{"system": "url", "value": "http://me"}]},
            ["telecom=http://me", "telecom=|http://me"],
            id="ContactPoint-system-less",
        ),
        pytest.param(
            {
                "resourceType": "Basic",
                "meta": {
                    "profile": ["http://example.org/StructureDefinition/p"],
                    "tag": [{"system": "urn:understudy:source", "code": "test-run"}],
                },
            },
            [
                "_tag=test-run",
                "_tag=urn:understudy:source|test-run",
                "_tag=urn:understudy:source|",
                "_profile=http://example.org/StructureDefinition/p",
                "_profile=|http://example.org/StructureDefinition/p",
            ],
            id="meta-common-params",
        ),
        pytest.param(
            {
                "resourceType": "Appointment",
                "participant": [{"status": "accepted"}, {"status": "declined"}],
            },
            [
                "part-status=accepted",
                "part-status=|accepted",
                "part-status=declined",
                "part-status=|declined",
            ],
            id="nested-list",
        ),
        pytest.param(
            {"resourceType": "Observation", "valueCodeableConcept": {"coding": [{"code": "POS"}]}},
            [
                "combo-value-concept=POS",
                "combo-value-concept=|POS",
                "value-concept=POS",
                "value-concept=|POS",
            ],
            id="narrowed-choice",
        ),
        pytest.param(
            {"resourceType": "Observation", "valueString": "POS", "status": 1},
            [],
            id="wrong-types-ignored",
        ),
    ],
)
def test_token_extraction(resource: dict[str, Any], expected: list[str]) -> None:
    assert sorted(tokens(resource)) == sorted(expected)


def test_phone_and_email_filter_telecom_by_system() -> None:
    patient = {
        "resourceType": "Patient",
        "telecom": [
            {"system": "phone", "value": "555-0100", "use": "home"},
            {"system": "email", "value": "a@example.org"},
            {"system": "sms", "value": "555-0199"},
        ],
    }
    got = tokens(patient)
    assert [t for t in got if t.startswith("phone=")] == ["phone=555-0100", "phone=|555-0100"]
    assert [t for t in got if t.startswith("email=")] == [
        "email=a@example.org",
        "email=|a@example.org",
    ]
    assert {"telecom=555-0100", "telecom=a@example.org", "telecom=555-0199"} <= set(got)
    # ContactPoint.system is not a code system.
    assert not any(t.startswith(("phone=phone|", "telecom=sms|")) for t in got)


# --- extraction: references ------------------------------------------------------------

APPOINTMENT = {
    "resourceType": "Appointment",
    "id": "a1",
    "status": "booked",
    "start": "2025-03-10T09:00:00-05:00",
    "end": "2025-03-10T09:30:00-05:00",
    "slot": [{"reference": "Slot/s1"}],
    "participant": [
        {"actor": {"reference": "Patient/p1", "display": "Alex"}, "status": "accepted"},
        {"actor": {"reference": "Practitioner/dr1"}, "status": "accepted"},
        {"actor": {"reference": "http://other/fhir/Location/l1/_history/4"}, "status": "accepted"},
        {"actor": {"identifier": {"value": "no-literal-reference"}}, "status": "needs-action"},
    ],
}


def test_reference_targets_restrict_by_type() -> None:
    refs = extract_index("Appointment", APPOINTMENT).refs
    by_param: dict[str, list[str]] = {}
    for entry in refs:
        name, _, value = entry.partition("=")
        by_param.setdefault(name, []).append(value)
    assert by_param["patient"] == ["Patient/p1", "p1"]
    assert by_param["practitioner"] == ["Practitioner/dr1", "dr1"]
    assert by_param["location"] == ["Location/l1", "l1"]
    assert by_param["actor"] == [
        "Patient/p1",
        "p1",
        "Practitioner/dr1",
        "dr1",
        "Location/l1",
        "l1",
    ]
    assert by_param["slot"] == ["Slot/s1", "s1"]


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        pytest.param(
            {"resourceType": "Observation", "subject": {"reference": "Group/g1"}},
            ["subject=Group/g1", "subject=g1"],
            id="patient-needs-a-Patient",
        ),
        pytest.param(
            {"resourceType": "Task", "for": {"reference": "Patient/p1"}},
            ["patient=Patient/p1", "patient=p1", "subject=Patient/p1", "subject=p1"],
            id="Task.for",
        ),
        pytest.param(
            {
                "resourceType": "Communication",
                "recipient": [
                    {"reference": "#c1"},
                    {"reference": "urn:uuid:1-2"},
                    {"display": "someone"},
                ],
            },
            [],
            id="contained-and-placeholders-skipped",
        ),
        pytest.param(
            {
                "resourceType": "QuestionnaireResponse",
                "questionnaire": "http://example.org/fhir/Questionnaire/phq9|3.1",
            },
            ["questionnaire=Questionnaire/phq9", "questionnaire=phq9"],
            id="canonical",
        ),
        pytest.param(
            {
                "resourceType": "MedicationRequest",
                "medicationReference": {"reference": "Medication/m1"},
                "subject": {"reference": "Patient/p1"},
            },
            [
                "medication=Medication/m1",
                "medication=m1",
                "patient=Patient/p1",
                "patient=p1",
                "subject=Patient/p1",
                "subject=p1",
            ],
            id="narrowed-choice",
        ),
    ],
)
def test_reference_extraction(resource: dict[str, Any], expected: list[str]) -> None:
    assert sorted(extract_index(resource["resourceType"], resource).refs) == sorted(expected)


def test_all_refs_walks_the_whole_body_in_document_order() -> None:
    resource = {
        "resourceType": "Observation",
        "contained": [
            {
                "resourceType": "Patient",
                "id": "c",
                "link": [{"other": {"reference": "RelatedPerson/rp1"}}],
            }
        ],
        "subject": {"reference": "http://host/fhir/Patient/p1/_history/2"},
        "performer": [{"reference": "#c"}, {"reference": "Practitioner/dr1"}],
        "basedOn": [{"reference": "urn:uuid:5b1c"}],
        "extension": [{"url": "http://x", "valueReference": {"reference": "Patient/p1"}}],
        "note": [{"text": "reference: Patient/zzz"}],
        "hasMember": [{"reference": "Observation/o2/_history/1"}],
    }
    assert extract_index("Observation", resource).all_refs == [
        "RelatedPerson/rp1",
        "Patient/p1",
        "Practitioner/dr1",
        "Observation/o2",
    ]


# --- extraction: strings ---------------------------------------------------------------


def strings(resource: dict[str, Any]) -> list[str]:
    return extract_index(resource["resourceType"], resource).strings


def prefixes(param: str, text: str) -> set[str]:
    return {f"{param}={text[:i]}" for i in range(1, len(text) + 1)}


def test_string_prefixes_of_value_and_each_word() -> None:
    got = strings({"resourceType": "Patient", "address": [{"city": "Las  Cruces"}]})
    expected_city = (
        prefixes("address-city", "las cruces")
        | prefixes("address-city", "cruces")
        | {"address-city:exact=Las  Cruces"}
    )
    assert {s for s in got if s.startswith("address-city")} == expected_city
    assert "address=las cruces" in got and "address=cru" in got
    assert len(got) == len(set(got))


def test_human_name_parts_are_string_values() -> None:
    patient = {
        "resourceType": "Patient",
        "name": [
            {"family": "Núñez", "given": ["Zoë", "Ann"], "prefix": ["Dr."], "suffix": ["PhD"]},
            {"text": "Zoe Nunez-Smith", "use": "usual"},
        ],
    }
    got = set(strings(patient))
    assert prefixes("family", "nunez") | {"family:exact=Núñez"} == {
        s for s in got if s.startswith("family")
    }
    assert prefixes("given", "zoe") | prefixes("given", "ann") <= got
    assert {"given:exact=Zoë", "given:exact=Ann"} <= got
    for part in ("nunez", "zoe", "ann", "dr.", "phd", "zoe nunez-smith", "nunez-smith"):
        assert f"name={part}" in got, part
    assert "name:exact=Zoe Nunez-Smith" in got
    assert "name=usual" not in got  # HumanName.use is not a string part


def test_address_parts_are_string_values() -> None:
    patient = {
        "resourceType": "Patient",
        "address": [
            {
                "use": "home",
                "line": ["12 Rue de Rivoli", "Apt 3"],
                "city": "Paris",
                "district": "1er",
                "state": "IDF",
                "postalCode": "75001",
                "country": "FR",
                "text": "12 Rue de Rivoli, Paris",
            }
        ],
    }
    got = set(strings(patient))
    for part in (
        "12 rue de rivoli",
        "rivoli",
        "apt 3",
        "paris",
        "1er",
        "idf",
        "75001",
        "fr",
        "12 rue de rivoli, paris",
    ):
        assert f"address={part}" in got, part
    assert "address=home" not in got
    assert "address-postalcode=750" in got and "address-state=idf" in got


def test_string_prefixes_stop_at_64_characters() -> None:
    long = "a" * 70 + " b"
    got = strings({"resourceType": "Organization", "name": long})
    assert f"name={'a' * 64}" in got
    assert f"name={'a' * 65}" not in got
    assert f"name:exact={long}" in got  # the exact form keeps the whole value
    assert "name=b" in got


def test_prefix_cut_at_64_after_a_word_keeps_its_trailing_space() -> None:
    # The query side truncates a long search value to 64 characters; if that cut lands
    # just after a word, the indexed prefix must still be there to match it.
    value = "x" * 63 + " tail of a long name"
    cut = normalize_string(value)[: index_module.STRING_PREFIX_MAX]
    assert cut.endswith(" ")
    assert f"name={cut}" in strings({"resourceType": "Organization", "name": value})


def test_very_long_values_are_not_indexed_whole() -> None:
    # A GIN key over ~2.7 kB makes PostgreSQL reject the row: long values get prefixes only.
    long_text = "Ü" * (index_module.EXACT_VALUE_MAX + 1)
    got = extract_index(
        "Observation",
        {
            "resourceType": "Observation",
            "valueString": long_text,
            "identifier": [{"system": "http://x", "value": "9" * 600}],
            "status": "final",
        },
    )
    assert not any(s.startswith("value-string:exact=") for s in got.strings)
    assert f"value-string={'u' * 64}" in got.strings
    assert not any(t.startswith("identifier=") for t in got.tokens)
    assert "status=final" in got.tokens
    assert len(got.sort["value-string"]) == index_module.SORT_KEY_MAX
    assert max(len(e.encode()) for e in got.tokens + got.strings + got.refs) < 2700


def test_string_choice_and_subpath() -> None:
    observation = {"resourceType": "Observation", "valueCodeableConcept": {"text": "Positive"}}
    assert "value-string=pos" in strings(observation)


# --- extraction: dates -----------------------------------------------------------------


def dates(resource: dict[str, Any]) -> list[tuple[str, datetime, datetime]]:
    return extract_index(resource["resourceType"], resource).dates


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        pytest.param(
            {"resourceType": "Observation", "effectiveDateTime": "2025-03-07T10:00:00+02:00"},
            [("date", utc(2025, 3, 7, 8), utc(2025, 3, 7, 8, 0, 1))],
            id="effectiveDateTime",
        ),
        pytest.param(
            {
                "resourceType": "Observation",
                "effectivePeriod": {"start": "2025-03-01", "end": "2025-03-07"},
            },
            [("date", utc(2025, 3, 1), utc(2025, 3, 8))],
            id="effectivePeriod",
        ),
        pytest.param(
            {"resourceType": "Observation", "effectiveInstant": "2025-03-07T10:00:00.000Z"},
            [("date", utc(2025, 3, 7, 10), utc(2025, 3, 7, 10, 0, 0, 1000))],
            id="effectiveInstant",
        ),
        pytest.param(
            {"resourceType": "Observation", "effectiveTiming": {"event": ["2025-03-07"]}},
            [],
            id="effectiveTiming-skipped",
        ),
        pytest.param(
            {"resourceType": "ServiceRequest", "occurrenceDateTime": "2025-04"},
            [("occurrence", utc(2025, 4, 1), utc(2025, 5, 1))],
            id="occurrenceDateTime",
        ),
        pytest.param(
            {"resourceType": "Encounter", "period": {"start": "2025-03-07T09:00:00Z"}},
            [("date", utc(2025, 3, 7, 9), PERIOD_MAX)],
            id="period-open-end",
        ),
        pytest.param(
            {"resourceType": "Encounter", "period": {"end": "2025-03-07"}},
            [("date", PERIOD_MIN, utc(2025, 3, 8))],
            id="period-open-start",
        ),
        pytest.param(
            {"resourceType": "Encounter", "period": {}},
            [],
            id="period-empty",
        ),
        pytest.param(
            {
                "resourceType": "Condition",
                "onsetString": "childhood",
                "abatementPeriod": {"start": "2020"},
                "recordedDate": "2021-06-01",
            },
            [
                ("abatement-date", utc(2020, 1, 1), PERIOD_MAX),
                ("recorded-date", utc(2021, 6, 1), utc(2021, 6, 2)),
            ],
            id="string-choice-not-a-date",
        ),
        pytest.param(
            {"resourceType": "Patient", "birthDate": "1980-03-07", "deceasedBoolean": True},
            [("birthdate", utc(1980, 3, 7), utc(1980, 3, 8))],
            id="date",
        ),
        pytest.param(
            {"resourceType": "Slot", "start": "not a date"},
            [],
            id="unparseable-skipped",
        ),
        pytest.param(
            {
                "resourceType": "MedicationRequest",
                "dosageInstruction": [{"timing": {"event": ["2025-03-07", "2025-03-08"]}}],
            },
            [
                ("date", utc(2025, 3, 7), utc(2025, 3, 8)),
                ("date", utc(2025, 3, 8), utc(2025, 3, 9)),
            ],
            id="list-below-list",
        ),
    ],
)
def test_date_extraction(
    resource: dict[str, Any], expected: list[tuple[str, datetime, datetime]]
) -> None:
    assert sorted(dates(resource)) == sorted(expected)


# --- extraction: sort keys, dedupe, whole resources ------------------------------------


def test_sort_keys_take_the_first_value_per_param() -> None:
    patient = {
        "resourceType": "Patient",
        "name": [{"family": "Émile", "given": ["B"]}, {"family": "Adams"}],
        "birthDate": "1980-03-07",
        "gender": "female",
        "generalPractitioner": [
            {"reference": "http://h/Practitioner/d2"},
            {"reference": "Practitioner/d1"},
        ],
        "identifier": [{"system": "http://x", "value": "Z9"}, {"value": "A1"}],
    }
    sort = extract_index("Patient", patient).sort
    assert sort["name"] == "emile"
    assert sort["family"] == "emile"
    assert sort["given"] == "b"
    assert sort["birthdate"] == "1980-03-07T00:00:00.000000Z"
    assert sort["gender"] == "female"
    assert sort["general-practitioner"] == "Practitioner/d2"
    assert sort["identifier"] == "Z9"
    assert "address" not in sort


def test_date_sort_keys_order_lexically_as_time() -> None:
    values = ["2025-03-07T23:30:00-05:00", "2025-03-08T01:00:00Z", "2025-03-08", "2025"]
    keys = [
        extract_index("Slot", {"resourceType": "Slot", "start": v}).sort["start"] for v in values
    ]
    lows = [parse_date_range(v)[0] for v in values]
    assert sorted(keys) == [format_sort_instant(low) for low in sorted(lows)]


def test_outputs_are_deduplicated() -> None:
    patient = {
        "resourceType": "Patient",
        "name": [{"family": "Lee", "given": ["Lee"]}, {"family": "Lee"}],
        "identifier": [{"system": "http://x", "value": "1"}, {"system": "http://x", "value": "1"}],
        "generalPractitioner": [
            {"reference": "Practitioner/d1"},
            {"reference": "http://h/Practitioner/d1"},
        ],
    }
    got = extract_index("Patient", patient)
    for column in (got.tokens, got.refs, got.strings, got.dates, got.all_refs):
        assert len(column) == len(set(column))
    assert got.all_refs == ["Practitioner/d1"]


def test_unknown_type_indexes_common_params_and_refs() -> None:
    got = extract_index(
        "Basic",
        {
            "resourceType": "Basic",
            "meta": {"tag": [{"code": "x"}]},
            "subject": {"reference": "Patient/p1"},
            "created": "2025-01-01",
        },
    )
    assert got.tokens == ["_tag=x", "_tag=|x"]
    assert (got.refs, got.strings, got.dates) == ([], [], [])
    assert got.all_refs == ["Patient/p1"]


def test_empty_resource() -> None:
    got = extract_index("Patient", {"resourceType": "Patient"})
    assert got == index_module.IndexValues([], [], [], [], {}, [])


# --- speed -----------------------------------------------------------------------------

PATIENT = {
    "resourceType": "Patient",
    "id": "p1",
    "meta": {
        "versionId": "1",
        "lastUpdated": "2025-03-07T10:00:00Z",
        "tag": [{"system": "urn:understudy:source", "code": "test-run"}],
    },
    "identifier": [{"system": "http://hospital/mrn", "value": "MRN456"}],
    "active": True,
    "name": [{"use": "official", "family": "Chen", "given": ["Maria", "Luisa"]}],
    "telecom": [
        {"system": "phone", "value": "+1 555 0100"},
        {"system": "email", "value": "maria.chen@example.org"},
    ],
    "gender": "female",
    "birthDate": "1975-11-02",
    "address": [
        {
            "line": ["42 Oak Avenue"],
            "city": "Portland",
            "state": "OR",
            "postalCode": "97201",
            "country": "US",
        }
    ],
    "managingOrganization": {"reference": "Organization/o1"},
}

OBSERVATION = {
    "resourceType": "Observation",
    "id": "o1",
    "status": "final",
    "category": [
        {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                    "code": "laboratory",
                }
            ]
        }
    ],
    "code": {"coding": [{"system": "http://loinc.org", "code": "2345-7"}], "text": "Glucose"},
    "subject": {"reference": "Patient/p1"},
    "effectiveDateTime": "2025-03-07T08:30:00Z",
    "issued": "2025-03-07T09:00:00.123Z",
    "valueQuantity": {
        "value": 95,
        "unit": "mg/dL",
        "system": "http://unitsofmeasure.org",
        "code": "mg/dL",
    },
}

SAMPLES: dict[str, dict[str, Any]] = {
    "Patient": PATIENT,
    "Appointment": APPOINTMENT,
    "Observation": OBSERVATION,
}


def _per_call_seconds(resource: dict[str, Any], *, cold: bool, number: int = 1000) -> float:
    resource_type = resource["resourceType"]

    def run() -> None:
        if cold:  # memoised prefixes/references start empty, as for a never-seen value
            index_module._TEXT_CACHE.clear()
            index_module._REFERENCE_CACHE.clear()
        extract_index(resource_type, resource)

    run()
    return min(timeit.repeat(run, number=number, repeat=5)) / number


if __name__ == "__main__":
    calibration = min(timeit.repeat("sum(range(1000))", number=10000, repeat=5)) / 10000
    print(f"calibration: sum(range(1000)) = {calibration * 1e6:.1f} µs")
    for name, sample in SAMPLES.items():
        warm = _per_call_seconds(sample, cold=False)
        cold = _per_call_seconds(sample, cold=True)
        print(f"{name}: {warm * 1e6:.1f} µs (memo warm), {cold * 1e6:.1f} µs (cold)")
