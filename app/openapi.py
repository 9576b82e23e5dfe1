"""The OpenAPI document, made truthful: every error code a route answers, with the
problem+json (or, under the FHIR base, OperationOutcome) schema it answers with; the
FHIR media type; the raw bodies the FHIR and scenario routes read themselves; and
links from what creates a run, eval, webhook, scenario or resource to what uses it,
so that clients (and the stateful fuzz test) can follow real ids.

The codes come from what every route shares (the edge check's 400, the key's 401, the
body limit's 413, FastAPI's 422) plus a table of what each route's services raise.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from app.fhir.validation import RESOURCE_TYPES

FHIR_BASE = "/api/fhir/r4"
FHIR_TYPES = ("application/fhir+json", "application/json")
PROBLEM_TYPE = "application/problem+json"
# The only routes answered without a tenant's key.
OPEN_PATHS = frozenset({"/health", FHIR_BASE + "/metadata"})

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "status"],
    "properties": {
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "message"],
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}
OUTCOME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["resourceType", "issue"],
    "properties": {
        "resourceType": {"const": "OperationOutcome"},
        "issue": {"type": "array", "items": {"type": "object"}},
    },
}
RESOURCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["resourceType"],
    "properties": {"resourceType": {"type": "string"}},
}
# What a client sends to create or update: a resource, e.g. these.
RESOURCE_EXAMPLES: list[dict[str, Any]] = [
    {
        "resourceType": "Patient",
        "name": [{"family": "Okoye", "given": ["Ngozi"]}],
        "gender": "female",
        "birthDate": "1988-04-12",
    },
    {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "description": "Please call the patient back today.",
    },
]
RESOURCE_BODY: dict[str, Any] = {**RESOURCE_SCHEMA, "examples": RESOURCE_EXAMPLES}

_REASONS = {
    400: "Bad request: malformed input, or text with NUL, lone surrogates or invalid UTF-8",
    404: "Not found (an unknown id, or a resource type the server does not have)",
    401: "No valid API key",
    409: "Conflict with the current state",
    410: "Deleted",
    412: "Version conflict (If-Match)",
    406: "Not acceptable: the FHIR API answers JSON only (Accept or _format asked for XML)",
    413: "Body over the size limit",
    415: "Unsupported content type",
    422: "Not valid",
    429: "A limit was reached (live runs, daily writes, eval size)",
}

# What the services behind each route raise, beyond the codes every route shares.
_ROUTE_CODES: dict[tuple[str, str], set[int]] = {
    ("POST", FHIR_BASE): {404, 409, 412, 415, 422, 429},
    ("GET", FHIR_BASE + "/_history"): set(),
    ("GET", FHIR_BASE + "/Appointment/$find"): {404},
    ("POST", FHIR_BASE + "/Appointment/$find"): {404, 415},
    ("GET", FHIR_BASE + "/{resource_type}"): set(),
    ("POST", FHIR_BASE + "/{resource_type}/_search"): {415},
    ("POST", FHIR_BASE + "/{resource_type}"): {409, 412, 415, 422, 429},
    ("GET", FHIR_BASE + "/{resource_type}/_history"): set(),
    ("GET", FHIR_BASE + "/{resource_type}/{resource_id}"): {410},
    ("PUT", FHIR_BASE + "/{resource_type}"): {409, 412, 415, 422, 429},
    ("PUT", FHIR_BASE + "/{resource_type}/{resource_id}"): {409, 412, 415, 422, 429},
    ("PATCH", FHIR_BASE + "/{resource_type}"): {404, 409, 410, 412, 415, 422, 429},
    ("PATCH", FHIR_BASE + "/{resource_type}/{resource_id}"): {409, 410, 412, 415, 422, 429},
    ("DELETE", FHIR_BASE + "/{resource_type}"): {404, 409, 412, 429},
    ("DELETE", FHIR_BASE + "/{resource_type}/{resource_id}"): {409, 412, 429},
    ("GET", FHIR_BASE + "/{resource_type}/{resource_id}/_history"): {410},
    ("GET", FHIR_BASE + "/{resource_type}/{resource_id}/_history/{version}"): {410},
    ("POST", "/api/eligibility/$check"): {404},
    ("POST", "/api/testing/scenarios"): {409},
    ("POST", "/api/testing/scenarios/{scenario_id}/check"): {409, 429},
    ("POST", "/api/testing/scenarios/{scenario_id}/reference-run"): {409, 429},
    ("POST", "/api/testing/runs"): {404, 429},
    ("POST", "/api/testing/runs/{run_id}/finish"): {409},
    ("POST", "/api/testing/runs/{run_id}/cancel"): {409},
    ("DELETE", "/api/testing/runs/{run_id}/data"): {409},
    ("POST", "/api/testing/runs/{run_id}/scenario"): {409},
    ("POST", "/api/webhooks"): {409},
    ("POST", "/api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): {409},
    ("POST", "/api/testing/evals"): {404, 429},
    ("GET", "/api/testing/evals/{eval_id}/compare"): {409},
    ("POST", "/api/testing/evals/{eval_id}/cancel"): {409},
    ("POST", "/api/testing/schedules"): {404},
}

# A small custom scenario that imports (and passes its check), for clients and generators.
SCENARIO_EXAMPLE: dict[str, Any] = {
    "id": "custom.call-back-request",
    "title": "Ask Dr. Chen to call the patient",
    "category": "inbox",
    "summary": "Create a Task for Dr. Chen about the patient.",
    "modes": ["agent"],
    "brief": "Please ask Dr. Chen to call {{patient.name}} (id {{patient.id}}) back today.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Okoye", "given": ["Ngozi"]}],
            "birthDate": {"$date": "-12000d"},
        }
    ],
    "expectations": [
        {
            "id": "task",
            "type": "resource",
            "label": "A Task for Dr. Chen about the patient",
            "resourceType": "Task",
            "where": [
                "owner.reference = 'Practitioner/demo-canonical-prac-chen'",
                "for.reference = 'Patient/' + %fixture.patient",
            ],
        },
        {
            "id": "no-prescription",
            "type": "resource",
            "label": "No prescription written",
            "resourceType": "MedicationRequest",
            "count": {"max": 0},
        },
    ],
    "oracle": [
        {
            "method": "POST",
            "path": "/Task",
            "body": {
                "resourceType": "Task",
                "status": "requested",
                "intent": "order",
                "for": {"reference": "@patient"},
                "owner": {"reference": "Practitioner/demo-canonical-prac-chen"},
                "description": "Please call the patient back today.",
            },
        }
    ],
    "variants": [{"persona": "terse", "brief": "Chen: call back {{patient.name}}."}],
}

# A PATCH: JSON Patch, JSON merge patch, or FHIRPath Patch (Parameters as FHIR JSON).
FHIRPATH_PATCH_EXAMPLE: dict[str, Any] = {
    "resourceType": "Parameters",
    "parameter": [
        {
            "name": "operation",
            "part": [
                {"name": "type", "valueCode": "replace"},
                {"name": "path", "valueString": "Patient.birthDate"},
                {"name": "value", "valueDate": "1988-04-12"},
            ],
        }
    ],
}
PATCH_BODY: tuple[tuple[str, ...], dict[str, Any]] = (
    ("application/json-patch+json", "application/merge-patch+json", "application/fhir+json"),
    {"examples": [FHIRPATH_PATCH_EXAMPLE]},
)

# Routes that read their body themselves: what they expect, for clients and generators.
_RAW_BODIES: dict[tuple[str, str], tuple[tuple[str, ...], dict[str, Any]]] = {
    ("POST", FHIR_BASE): (FHIR_TYPES, RESOURCE_SCHEMA),
    ("POST", FHIR_BASE + "/Appointment/$find"): (FHIR_TYPES, RESOURCE_SCHEMA),
    ("POST", FHIR_BASE + "/{resource_type}"): (FHIR_TYPES, RESOURCE_BODY),
    ("PUT", FHIR_BASE + "/{resource_type}"): (FHIR_TYPES, RESOURCE_BODY),
    ("PUT", FHIR_BASE + "/{resource_type}/{resource_id}"): (FHIR_TYPES, RESOURCE_BODY),
    ("PATCH", FHIR_BASE + "/{resource_type}"): PATCH_BODY,
    ("PATCH", FHIR_BASE + "/{resource_type}/{resource_id}"): PATCH_BODY,
    ("POST", FHIR_BASE + "/{resource_type}/_search"): (
        ("application/x-www-form-urlencoded",),
        {"type": "object", "additionalProperties": {"type": "string"}},
    ),
    ("POST", "/api/testing/scenarios"): (
        ("application/json",),
        {"type": "object", "examples": [SCENARIO_EXAMPLE]},
    ),
}

_RUN = "/api/testing/runs/{run_id}"
_WEBHOOK = "/api/webhooks/{webhook_id}"
_EVAL = "/api/testing/evals/{eval_id}"
_SCENARIO = "/api/testing/scenarios/{scenario_id}"
_SCHEDULE = "/api/testing/schedules/{schedule_id}"
_RESOURCE = FHIR_BASE + "/{resource_type}/{resource_id}"
_RUN_ID = {"run_id": "$response.body#/id"}
_WEBHOOK_ID = {"webhook_id": "$response.body#/id"}
_EVAL_ID = {"eval_id": "$response.body#/id"}
_SCENARIO_ID = {"scenario_id": "$response.body#/id"}
_SCHEDULE_ID = {"schedule_id": "$response.body#/id"}
_RESOURCE_ID = {
    "resource_type": "$response.body#/resourceType",
    "resource_id": "$response.body#/id",
}
_FIRST_SCENARIO = "$response.body#/scenarios/0/id"

# (source method, path, status) -> [(link name, target method, path, parameters, body)]
Link = tuple[str, str, str, dict[str, str], dict[str, Any] | None]
_LINKS: dict[tuple[str, str, str], list[Link]] = {
    ("POST", "/api/testing/runs", "201"): [
        ("GetRun", "GET", _RUN, _RUN_ID, None),
        ("FinishRun", "POST", _RUN + "/finish", _RUN_ID, None),
        ("CancelRun", "POST", _RUN + "/cancel", _RUN_ID, None),
        ("RunTrace", "GET", _RUN + "/trace", _RUN_ID, None),
        ("DeleteRunData", "DELETE", _RUN + "/data", _RUN_ID, None),
    ],
    ("GET", "/api/testing/runs", "200"): [
        ("GetFirstRun", "GET", _RUN, {"run_id": "$response.body#/runs/0/id"}, None),
    ],
    ("POST", "/api/webhooks", "201"): [
        ("GetWebhook", "GET", _WEBHOOK, _WEBHOOK_ID, None),
        ("WebhookDeliveries", "GET", _WEBHOOK + "/deliveries", _WEBHOOK_ID, None),
        ("TestWebhook", "POST", _WEBHOOK + "/test", _WEBHOOK_ID, None),
        ("DeleteWebhook", "DELETE", _WEBHOOK, _WEBHOOK_ID, None),
    ],
    ("GET", "/api/webhooks", "200"): [
        ("GetFirstWebhook", "GET", _WEBHOOK, {"webhook_id": "$response.body#/webhooks/0/id"}, None),
        (
            "DeliveriesOfFirst",
            "GET",
            _WEBHOOK + "/deliveries",
            {"webhook_id": "$response.body#/webhooks/0/id"},
            None,
        ),
    ],
    ("GET", _WEBHOOK + "/deliveries", "200"): [
        (
            "Redeliver",
            "POST",
            _WEBHOOK + "/deliveries/{delivery_id}/redeliver",
            {
                "webhook_id": "$request.path.webhook_id",
                "delivery_id": "$response.body#/deliveries/0/id",
            },
            None,
        ),
    ],
    ("POST", "/api/testing/evals", "201"): [
        ("GetEval", "GET", _EVAL, _EVAL_ID, None),
        (
            "CompareEval",
            "GET",
            _EVAL + "/compare",
            {**_EVAL_ID, "baseline": "$response.body#/id"},
            None,
        ),
        ("CancelEval", "POST", _EVAL + "/cancel", _EVAL_ID, None),
    ],
    ("GET", "/api/testing/evals", "200"): [
        ("GetFirstEval", "GET", _EVAL, {"eval_id": "$response.body#/evals/0/id"}, None),
        (
            "CompareFirstTwo",
            "GET",
            _EVAL + "/compare",
            {"eval_id": "$response.body#/evals/0/id", "baseline": "$response.body#/evals/1/id"},
            None,
        ),
    ],
    ("POST", "/api/testing/schedules", "201"): [
        ("GetSchedule", "GET", _SCHEDULE, _SCHEDULE_ID, None),
        ("PauseSchedule", "POST", _SCHEDULE + "/pause", _SCHEDULE_ID, None),
        ("ResumeSchedule", "POST", _SCHEDULE + "/resume", _SCHEDULE_ID, None),
        ("DeleteSchedule", "DELETE", _SCHEDULE, _SCHEDULE_ID, None),
    ],
    ("GET", "/api/testing/schedules", "200"): [
        (
            "GetFirstSchedule",
            "GET",
            _SCHEDULE,
            {"schedule_id": "$response.body#/schedules/0/id"},
            None,
        ),
    ],
    ("POST", "/api/testing/scenarios", "201"): [
        ("GetScenario", "GET", _SCENARIO, _SCENARIO_ID, None),
        ("CheckScenario", "POST", _SCENARIO + "/check", _SCENARIO_ID, None),
        ("ReferenceRun", "POST", _SCENARIO + "/reference-run", _SCENARIO_ID, None),
        (
            "StartRunOfScenario",
            "POST",
            "/api/testing/runs",
            {},
            {"scenarioId": "$response.body#/id"},
        ),
        (
            "EvalOfScenario",
            "POST",
            "/api/testing/evals",
            {},
            {
                "mode": "$response.body#/modes/0",
                "label": "linked",
                "scenarios": ["$response.body#/id"],
            },
        ),
    ],
    ("GET", "/api/testing/scenarios", "200"): [
        ("GetFirstScenario", "GET", _SCENARIO, {"scenario_id": _FIRST_SCENARIO}, None),
        ("StartRunOfFirst", "POST", "/api/testing/runs", {}, {"scenarioId": _FIRST_SCENARIO}),
        (
            "EvalOfFirst",
            "POST",
            "/api/testing/evals",
            {},
            {
                "mode": "$response.body#/scenarios/0/modes/0",
                "label": "linked",
                "scenarios": [_FIRST_SCENARIO],
            },
        ),
    ],
    ("POST", FHIR_BASE + "/{resource_type}", "201"): [
        ("ReadResource", "GET", _RESOURCE, _RESOURCE_ID, None),
        ("UpdateResource", "PUT", _RESOURCE, _RESOURCE_ID, None),
        ("PatchResource", "PATCH", _RESOURCE, _RESOURCE_ID, None),
        ("DeleteResource", "DELETE", _RESOURCE, _RESOURCE_ID, None),
        ("ResourceHistory", "GET", _RESOURCE + "/_history", _RESOURCE_ID, None),
        (
            "ReadVersion",
            "GET",
            _RESOURCE + "/_history/{version}",
            {**_RESOURCE_ID, "version": "$response.body#/meta/versionId"},
            None,
        ),
    ],
}


# FHIR routes answer a Response of their own: their success codes, by route.
_FHIR_SUCCESS: dict[tuple[str, str], dict[str, str]] = {
    ("POST", FHIR_BASE + "/{resource_type}"): {
        "201": "Created",
        "200": "An existing match of If-None-Exist",
    },
    ("PUT", FHIR_BASE + "/{resource_type}"): {
        "200": "The one match updated",
        "201": "No match: created",
    },
    ("PUT", FHIR_BASE + "/{resource_type}/{resource_id}"): {
        "200": "Updated",
        "201": "Created with the client's id",
    },
    ("DELETE", FHIR_BASE + "/{resource_type}/{resource_id}"): {"204": "Deleted"},
    ("PATCH", FHIR_BASE + "/{resource_type}"): {"200": "The one match patched"},
    ("DELETE", FHIR_BASE + "/{resource_type}"): {
        "204": "The one match deleted, or nothing matched"
    },
}


def _error_response(status: int, fhir: bool) -> dict[str, Any]:
    if fhir:
        content = {
            t: {"schema": {"$ref": "#/components/schemas/OperationOutcome"}} for t in FHIR_TYPES
        }
    else:
        content = {PROBLEM_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    return {"description": _REASONS.get(status, "Error"), "content": content}


def _error_codes(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    codes = {400} | _ROUTE_CODES.get((method, path), set())
    if path not in OPEN_PATHS:
        codes.add(401)
    if "{" in path:
        codes.add(404)
    if method in ("POST", "PUT", "PATCH"):
        codes.add(413)
    if path.startswith(FHIR_BASE):
        codes.add(406)  # content negotiation (app/fhir/negotiation.py)
    if "422" in operation.get("responses", {}):
        codes.add(422)
    return codes


def _finish_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    fhir = path.startswith(FHIR_BASE)
    if path not in OPEN_PATHS:
        operation["security"] = [{"bearerKey": []}]
    for parameter in operation.get("parameters", []):
        if fhir and parameter["name"] == "resource_type":
            parameter["schema"] = {"type": "string", "enum": sorted(RESOURCE_TYPES)}
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if fhir:
        success = _FHIR_SUCCESS.get((method, path))
        if success is not None:
            for status in [s for s in responses if s.startswith("2")]:
                del responses[status]
            for status, description in success.items():
                responses[status] = {"description": description}
                if status != "204":
                    content = {t: {"schema": RESOURCE_SCHEMA} for t in FHIR_TYPES}
                    responses[status]["content"] = content
        for status, response in responses.items():
            if status.startswith("2") and "content" in response:
                schema = response["content"].get("application/json", {}).get("schema", {})
                response["content"] = {t: {"schema": schema} for t in FHIR_TYPES}
    if (method, path) == ("POST", "/api/testing/scenarios") and "200" not in responses:
        # ?dryRun=true validates without storing: 200 rather than 201.
        responses["200"] = {
            "description": "Valid (a dry run)",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    for code in sorted(_error_codes(method, path, operation)):
        declared = responses.get(str(code), {}).get("content", {})
        if PROBLEM_TYPE in declared:
            continue  # the route declares its own problem body (e.g. errors + warnings)
        responses[str(code)] = _error_response(code, fhir)
    raw = _RAW_BODIES.get((method, path))
    if raw is not None and "requestBody" not in operation:
        types, schema = raw
        operation["requestBody"] = {
            "required": True,
            "content": {t: {"schema": schema} for t in types},
        }


def _operation_ids(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (method.upper(), path): op["operationId"]
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if "operationId" in op
    }


def _add_links(document: dict[str, Any]) -> None:
    ids = _operation_ids(document)
    for (method, path, status), links in _LINKS.items():
        response = document["paths"][path][method.lower()]["responses"][status]
        declared = response.setdefault("links", {})
        for name, target_method, target_path, parameters, body in links:
            link: dict[str, Any] = {"operationId": ids[(target_method, target_path)]}
            if parameters:
                link["parameters"] = parameters
            if body is not None:
                link["requestBody"] = body
            declared[name] = link


def install_openapi(app: FastAPI) -> None:
    """Replace `app.openapi` with one that finishes FastAPI's document as above."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = plain()
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas["Problem"] = PROBLEM_SCHEMA
        schemas["OperationOutcome"] = OUTCOME_SCHEMA
        for schema_name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(schema_name, None)
        document["components"]["securitySchemes"] = {
            "bearerKey": {"type": "http", "scheme": "bearer", "description": "A tenant API key"}
        }
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                _finish_operation(method.upper(), path, operation)
        _add_links(document)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
