"""The FHIR tools: read, search, create, update, patch and delete FHIR resources, free
appointment times and insurance eligibility. Each makes the REST call in process on the
base the call acts on (the current run's view, the run named by run_id, else the tenant's
base) and says in `acted_on` which base that was."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from app.mcp import bridge
from app.mcp.schemas import (
    ActedOn,
    Deleted,
    Eligibility,
    FhirResource,
    FreeTimes,
    SearchResults,
    WriteOutcome,
)
from app.mcp.sessions import LiveRun, StoreUnavailable
from app.mcp.tool_call import RESOURCE_TYPE, RunIdArg, ToolCall, checked

TypeArg = Annotated[str, Field(description="FHIR resource type, e.g. Patient, Appointment")]
IdArg = Annotated[str, Field(description="The resource's id (without the type)")]


def _written(
    reply: bridge.Reply,
    resource_type: str,
    outcome: Literal["created", "updated", "existing"],
    acted_on: ActedOn,
) -> WriteOutcome:
    """What a write answered: the reference and version from Location (else the body)."""
    body = reply.json()
    location = reply.headers.get("location", "")
    match = re.search(r"/([A-Za-z]+)/([A-Za-z0-9\-.]+)/_history/([^/]+)$", location)
    if match:
        reference, version = f"{match.group(1)}/{match.group(2)}", match.group(3)
    else:
        reference = f"{resource_type}/{(body or {}).get('id')}"
        version = ((body or {}).get("meta") or {}).get("versionId")
    return WriteOutcome(
        outcome=outcome,
        reference=reference,
        version_id=version,
        resource=body,
        acted_on=acted_on,
    )


async def fhir_read(
    ctx: Context, resource_type: TypeArg, id: IdArg, run_id: RunIdArg = None
) -> FhirResource:
    """Read one FHIR resource by type and id (GET /{type}/{id})."""
    call = ToolCall(ctx)
    resource_type, resource_id, path, acted_on = await call.instance_path(run_id, resource_type, id)
    reply = await call.request("GET", path)
    resource = reply.json()
    return FhirResource(
        reference=f"{resource_type}/{resource_id}",
        version_id=(resource.get("meta") or {}).get("versionId"),
        resource=resource,
        acted_on=acted_on,
    )


async def fhir_search(
    ctx: Context,
    resource_type: TypeArg,
    params: Annotated[
        dict[str, str | list[str]] | None,
        Field(
            description='FHIR search parameters, e.g. {"family": "Rivera", "birthdate": '
            '"1980-04-02"}; a list repeats a parameter (both must hold: {"date": '
            '["ge2026-01-01", "lt2026-02-01"]}); a comma inside a value means OR. '
            "Also _count, _sort, _include, _revinclude, _elements, _summary."
        ),
    ] = None,
    page_url: Annotated[
        str | None,
        Field(description="next_page_url from an earlier fhir_search, to read the next page."),
    ] = None,
    run_id: RunIdArg = None,
) -> SearchResults:
    """Search FHIR resources of one type (GET /{type}?params) and return the matches and
    the total."""
    call = ToolCall(ctx)
    resource_type = checked(resource_type, RESOURCE_TYPE, "resource_type")
    query: list[tuple[str, str]] = []
    if page_url is not None:
        parts = urlsplit(page_url)
        if not (
            parts.path.startswith("/api/") and parts.path.endswith(f"/fhir/r4/{resource_type}")
        ):
            raise ToolError("page_url must be a next_page_url this tool returned for that type")
        path = parts.path
        query = parse_qsl(parts.query, keep_blank_values=True)
        acted_on = await call.paged_base(path)
    else:
        base, acted_on = await call.base(run_id)
        path = f"{base}/{resource_type}"
        for name, value in (params or {}).items():
            values = value if isinstance(value, list) else [value]
            query.extend((name, str(v)) for v in values)
    reply = await call.request("GET", path, query=query)
    bundle = reply.json()
    matches: list[dict[str, Any]] = []
    included: list[dict[str, Any]] = []
    for entry in bundle.get("entry") or []:
        resource = entry.get("resource")
        if not isinstance(resource, dict):
            continue
        mode = (entry.get("search") or {}).get("mode", "match")
        (included if mode == "include" else matches).append(resource)
    next_url = next(
        (link.get("url") for link in bundle.get("link") or [] if link.get("relation") == "next"),
        None,
    )
    return SearchResults(
        resource_type=resource_type,
        total=bundle.get("total"),
        resources=matches,
        included=included,
        next_page_url=next_url,
        acted_on=acted_on,
    )


async def fhir_create(
    ctx: Context,
    resource: Annotated[
        dict[str, Any],
        Field(description="The FHIR resource as JSON, with resourceType (and no id)."),
    ],
    if_none_exist: Annotated[
        str | None,
        Field(
            description="Conditional create: search parameters such as 'identifier=x|1'; "
            "when one resource matches, it is returned and nothing is written."
        ),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Create a FHIR resource (POST /{type}). It is validated as FHIR R4: an error names
    the element that is wrong."""
    call = ToolCall(ctx)
    declared = resource.get("resourceType")
    if not declared:
        raise ToolError('resource.resourceType is missing: say the type, e.g. "Patient"')
    resource_type = checked(str(declared), RESOURCE_TYPE, "resource.resourceType")
    base, acted_on = await call.base(run_id)
    query = parse_qsl(if_none_exist, keep_blank_values=True) if if_none_exist else None
    reply = await call.request("POST", f"{base}/{resource_type}", body=resource, query=query)
    outcome: Literal["created", "existing"] = "created" if reply.status == 201 else "existing"
    return _written(reply, resource_type, outcome, acted_on)


async def fhir_update(
    ctx: Context,
    resource_type: TypeArg,
    id: IdArg,
    resource: Annotated[
        dict[str, Any], Field(description="The whole new resource (PUT replaces it).")
    ],
    if_match: Annotated[
        str | None,
        Field(description="Only update if the current version is this one (version_id)."),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Replace a FHIR resource with a new version (PUT /{type}/{id}). Send the whole
    resource: fields you leave out are removed. To change a few fields use fhir_patch."""
    call = ToolCall(ctx)
    resource_type, _, path, acted_on = await call.instance_path(run_id, resource_type, id)
    reply = await call.request("PUT", path, body=resource, if_match=if_match)
    outcome: Literal["created", "updated"] = "created" if reply.status == 201 else "updated"
    return _written(reply, resource_type, outcome, acted_on)


async def fhir_patch(
    ctx: Context,
    resource_type: TypeArg,
    id: IdArg,
    patch: Annotated[
        list[dict[str, Any]] | dict[str, Any],
        Field(
            description='Either a JSON Patch (a list of operations such as [{"op": '
            '"replace", "path": "/status", "value": "cancelled"}]) or a JSON merge '
            "patch (an object with the fields to change, null to remove one)."
        ),
    ],
    if_match: Annotated[
        str | None,
        Field(description="Only patch if the current version is this one (version_id)."),
    ] = None,
    run_id: RunIdArg = None,
) -> WriteOutcome:
    """Change some fields of a FHIR resource (PATCH /{type}/{id}); the result is validated
    as FHIR R4."""
    call = ToolCall(ctx)
    resource_type, _, path, acted_on = await call.instance_path(run_id, resource_type, id)
    content_type = (
        "application/json-patch+json" if isinstance(patch, list) else "application/merge-patch+json"
    )
    reply = await call.request(
        "PATCH", path, body=patch, content_type=content_type, if_match=if_match
    )
    return _written(reply, resource_type, "updated", acted_on)


async def fhir_delete(
    ctx: Context, resource_type: TypeArg, id: IdArg, run_id: RunIdArg = None
) -> Deleted:
    """Delete a FHIR resource (DELETE /{type}/{id}). Prefer a status change (e.g. an
    Appointment to 'cancelled') when the record should stay."""
    call = ToolCall(ctx)
    resource_type, resource_id, path, acted_on = await call.instance_path(run_id, resource_type, id)
    await call.request("DELETE", path)
    return Deleted(deleted=f"{resource_type}/{resource_id}", acted_on=acted_on)


async def find_appointments(
    ctx: Context,
    practitioner: Annotated[str, Field(description="The practitioner: id or 'Practitioner/<id>'.")],
    start: Annotated[
        str | None,
        Field(
            description="Earliest start, a date (2026-12-01) or date-time with offset; "
            "default: now."
        ),
    ] = None,
    end: Annotated[
        str | None,
        Field(description="Latest end (a bare date includes that day); default: 14 days on."),
    ] = None,
    duration_minutes: Annotated[
        int | None, Field(ge=5, le=480, description="Length of the visit; default 30.")
    ] = None,
    run_id: RunIdArg = None,
) -> FreeTimes:
    """Free times of a practitioner (GET /Appointment/$find), as proposed Appointments
    built from free Slots and not clashing with booked visits."""
    call = ToolCall(ctx)
    ref = practitioner.strip()
    if "/" not in ref:
        ref = f"Practitioner/{ref}"
    query = [("practitioner", ref)]
    if start is not None:
        query.append(("start", start))
    if end is not None:
        query.append(("end", end))
    if duration_minutes is not None:
        query.append(("duration", str(duration_minutes)))
    base, acted_on = await call.base(run_id)
    bundle = (await call.request("GET", f"{base}/Appointment/$find", query=query)).json()
    proposals = [e["resource"] for e in bundle.get("entry") or [] if "resource" in e]
    return FreeTimes(practitioner=ref, total=len(proposals), proposals=proposals, acted_on=acted_on)


async def check_eligibility(
    ctx: Context,
    patient: Annotated[str, Field(description="Patient id or 'Patient/<id>'.")],
    date: Annotated[str, Field(description="Date of service, YYYY-MM-DD.")],
    service_type: Annotated[str | None, Field(description="Optional service type code.")] = None,
) -> Eligibility:
    """Is the patient covered by insurance on that date (POST /api/eligibility/$check)?
    Answers eligible, the Coverage used and the reason."""
    call = ToolCall(ctx)
    body: dict[str, Any] = {"patient": patient, "date": date}
    if service_type is not None:
        body["serviceType"] = service_type
    reply = await call.request(
        "POST", "/api/eligibility/$check", body=body, content_type="application/json"
    )
    live: list[LiveRun] | None = None
    why = call.no_current_run
    try:
        current = await call.run_id(None)
    except StoreUnavailable as unknown:
        current, live = None, unknown.live
        why = "the session store is unavailable, so your current run is unknown"
    if current is None:
        acted_on = await call.tenant_base(
            f"the tenant base: {why}; give a run's patient id (from its fixture) to check "
            "that run's patient",
            live=live,
        )
    else:
        acted_on = await call.tenant_base(
            "the tenant's coverage data (eligibility has no run view): the patient id "
            f"picks whose coverage; use your current run {current}'s fixture patient",
            list_live=False,
        )
    return Eligibility(**reply.json(), acted_on=acted_on)
