"""FHIR R4 REST routes at /api/fhir/r4.

Handlers take the raw request and answer with bytes: stored resources are JSON text
straight from PostgreSQL, so nothing is parsed or validated on the way out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response

from app.api.deps import Tenant
from app.db import Conn
from app.errors import PayloadTooLarge, UnsupportedMediaType
from app.fhir import bundles, operations, service
from app.fhir.capability import capability_statement
from app.fhir.outcomes import operation_outcome
from app.fhir.search.query import has_criteria
from app.kit import jsontext
from app.kit.urls import fhir_base
from app.request_state import pool_of, root_url, scopes_of
from app.runs import service as runs_service
from app.runs.fhir_writes import FHIR_WRITES
from app.runs.lenient import lenient_lookup
from app.tenants.quota import QuotaGuard
from app.tenants.service import TenantInfo
from app.trace.recorder import record_refs

FHIR_JSON = "application/fhir+json; charset=utf-8"
_JSON_TYPES = (
    "application/fhir+json",
    "application/json+fhir",  # the DSTU2 name, still sent by some clients
    "application/json",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/x-www-form-urlencoded",
    "text/plain",  # some clients send JSON without a proper type; we parse it as JSON
)


def fhir_response(
    body: bytes | str, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(content=body, status_code=status, media_type=FHIR_JSON, headers=headers)


def base_url(request: Request) -> str:
    return fhir_base(root_url(request), request.path_params.get("run_id"))


async def context(request: Request, tenant: TenantInfo) -> service.FhirContext:
    """The interaction's context: the tenant base, or a run's view (which must exist)."""
    run_id: str | None = request.path_params.get("run_id")
    setting = "strict"
    if run_id is not None:
        setting = await runs_service.run_scheduling(pool_of(request), tenant.id, run_id)
    root = root_url(request)
    ctx = service.FhirContext(
        tenant_id=tenant.id,
        base_url=fhir_base(root, run_id),
        run_id=run_id,
        root_url=root,
        write_statement=FHIR_WRITES,
        scheduling=setting,
        lenient_lookup=None if run_id is not None else lenient_lookup(tenant.id),
    )
    record_refs(request.scope, ctx.touched)
    return ctx


async def before_write(request: Request, tenant: TenantInfo, count: int) -> None:
    quota: QuotaGuard = request.app.state.quota
    await quota.check(tenant.id, count)


@asynccontextmanager
async def writing(request: Request, ctx: service.FhirContext) -> AsyncIterator[Conn]:
    """The unit of a FHIR write: its statements commit on their own (one each, or a
    transaction the service opens), so no BEGIN/COMMIT is added; once they all returned,
    the writes are counted, statistics kept fresh, the runs they touched regraded within
    about a second and their webhook deliveries sent."""
    async with scopes_of(request).transaction(autocommit=True) as tx:
        yield tx.conn
        tx.after.wrote(ctx.tenant_id, ctx.writes)
        if ctx.deliveries:
            tx.after.deliver(ctx.tenant_id)
        for run_id in ctx.changed_runs:
            tx.after.grade(ctx.tenant_id, run_id)


async def read_body(request: Request) -> bytes:
    limit: int = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit} bytes")
    content_type = request.headers.get("content-type", "application/fhir+json").split(";")[0]
    if content_type.strip().lower() not in _JSON_TYPES:
        raise UnsupportedMediaType(
            f"content type '{content_type}' is not supported: send application/fhir+json"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def query_items(request: Request) -> list[tuple[str, str]]:
    # NUL and invalid UTF-8 were refused at the edge (app/edge.py).
    return parse_qsl(request.url.query, keep_blank_values=True)


def _kept(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Result parameters a history page's links carry on, so the next page comes back
    in the format this one did."""
    return [(name, value) for name, value in items if name == "_format"]


def prefers(request: Request, token: str) -> bool:
    return token in request.headers.get("prefer", "").replace(" ", "")


def write_response(
    request: Request, ctx: service.FhirContext, result: service.WriteResult
) -> Response:
    headers = result.headers(ctx.base_url)
    if prefers(request, "return=minimal"):
        return Response(status_code=result.status, headers=headers)
    if prefers(request, "return=OperationOutcome"):
        outcome = operation_outcome([])
        return fhir_response(jsontext.dumpb(outcome), result.status, headers)
    return fhir_response(result.json or b"", result.status, headers)


# Mounted twice: at /api/fhir/r4 (the tenant base) and under each run's view.
router = APIRouter(tags=["FHIR R4"])


@router.get("/metadata", summary="CapabilityStatement (no key needed)")
async def metadata(request: Request) -> Response:
    return fhir_response(capability_statement(base_url(request)))


@router.post("", summary="Process a transaction or batch Bundle")
@router.post("/", include_in_schema=False)
async def transaction(request: Request, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    bundle = service.parse_body(await read_body(request))
    minimal = prefers(request, "return=minimal")
    entries = bundle.get("entry") if isinstance(bundle, dict) else None
    await before_write(request, tenant, len(entries) if isinstance(entries, list) else 1)
    async with writing(request, ctx) as conn:
        body = await bundles.process_bundle(ctx, conn, bundle, minimal=minimal)
    return fhir_response(body)


@router.get("/_history", summary="History of every resource in the tenant")
async def system_history(request: Request, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    items = query_items(request)
    async with pool_of(request).acquire() as conn:
        total, entries, count, offset = await service.history(ctx, conn, None, None, items)
    return fhir_response(
        bundles.history_bundle(ctx, "/_history", total, entries, count, offset, _kept(items))
    )


@router.get("/Appointment/$find", summary="Free slots of a practitioner as proposed Appointments")
async def find_appointments(request: Request, tenant: Tenant) -> Response:
    return await _find(request, tenant, dict(query_items(request)))


@router.post("/Appointment/$find", summary="$find with a Parameters body")
async def find_appointments_post(request: Request, tenant: Tenant) -> Response:
    params = dict(query_items(request))
    raw = await read_body(request)
    if raw.strip():
        params.update(operations.parameters_from_body(service.parse_body(raw)))
    return await _find(request, tenant, params)


async def _find(request: Request, tenant: TenantInfo, params: dict[str, str]) -> Response:
    ctx = await context(request, tenant)
    async with pool_of(request).acquire() as conn:
        bundle = await operations.find_appointments(ctx, conn, params)
    return fhir_response(bundle)


@router.get("/{resource_type}", summary="Search")
async def search(request: Request, resource_type: str, tenant: Tenant) -> Response:
    return await _search(request, tenant, resource_type, query_items(request))


@router.post("/{resource_type}/_search", summary="Search with form-encoded parameters")
async def search_post(request: Request, resource_type: str, tenant: Tenant) -> Response:
    raw = await read_body(request)
    items = query_items(request) + parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
    return await _search(request, tenant, resource_type, items)


async def _search(
    request: Request, tenant: TenantInfo, resource_type: str, items: list[tuple[str, str]]
) -> Response:
    ctx = await context(request, tenant)
    lenient = prefers(request, "handling=lenient")
    async with pool_of(request).acquire() as conn:
        page = await service.search(ctx, conn, resource_type, items, lenient=lenient)
    return fhir_response(bundles.search_bundle(ctx, resource_type, page))


@router.post("/{resource_type}", summary="Create (If-None-Exist or ?criteria for conditional)")
async def create(request: Request, resource_type: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    resource = service.parse_body(await read_body(request))
    # fhirpy sends conditional create as the criteria in the query string; a query of
    # result parameters only (_format, _pretty) is no condition.
    criteria = request.headers.get("if-none-exist")
    if criteria is None and has_criteria(query_items(request)):
        criteria = request.url.query
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        result = await service.create(ctx, conn, resource_type, resource, if_none_exist=criteria)
    return write_response(request, ctx, result)


@router.get("/{resource_type}/_history", summary="History of one resource type")
async def type_history(request: Request, resource_type: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    items = query_items(request)
    async with pool_of(request).acquire() as conn:
        total, entries, count, offset = await service.history(ctx, conn, resource_type, None, items)
    path = f"/{resource_type}/_history"
    return fhir_response(
        bundles.history_bundle(ctx, path, total, entries, count, offset, _kept(items))
    )


@router.get("/{resource_type}/{resource_id}", summary="Read")
async def read(request: Request, resource_type: str, resource_id: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    async with pool_of(request).acquire() as conn:
        found = await service.read(ctx, conn, resource_type, resource_id)
    return fhir_response(
        found.json or b"",
        headers={
            "ETag": f'W/"{found.version_id}"',
            "Last-Modified": service.http_date(found.last_updated),
        },
    )


@router.put(
    "/{resource_type}", summary="Conditional update (?criteria): update the one match, or create"
)
async def conditional_update(request: Request, resource_type: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    resource = service.parse_body(await read_body(request))
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        result = await service.conditional_update(
            ctx, conn, resource_type, request.url.query, resource
        )
    return write_response(request, ctx, result)


@router.put("/{resource_type}/{resource_id}", summary="Update or create with a client id")
async def update(
    request: Request, resource_type: str, resource_id: str, tenant: Tenant
) -> Response:
    ctx = await context(request, tenant)
    resource = service.parse_body(await read_body(request))
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        result = await service.update(
            ctx,
            conn,
            resource_type,
            resource_id,
            resource,
            if_match=request.headers.get("if-match"),
        )
    return write_response(request, ctx, result)


# What a PATCH body may be: JSON Patch, a JSON merge patch (plain JSON is read as one),
# or a FHIRPath Patch (a Parameters resource as FHIR JSON).
_FHIR_MEDIA = ("application/fhir+json", "application/json+fhir", "application/json")
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", *_FHIR_MEDIA)
_PATCH_FORMATS = (
    "application/json-patch+json (JSON Patch, RFC 6902), application/merge-patch+json "
    "(JSON merge patch, RFC 7396; application/json is read as one) or "
    "application/fhir+json with a Parameters resource (FHIRPath Patch)"
)


def patch_content_type(request: Request, document: Any) -> str:
    """The PATCH's format, or a 415 naming the supported ones (a text/plain or form body
    used to be applied as a merge patch). A Parameters body is a FHIRPath Patch when it
    comes as FHIR JSON (or plain JSON); as JSON Patch or merge patch it is refused."""
    content_type = request.headers.get("content-type", "application/json")
    media = content_type.split(";")[0].strip().lower()
    if media not in _PATCH_TYPES:
        raise UnsupportedMediaType(
            f"content type '{media}' is not a patch format: send {_PATCH_FORMATS}"
        )
    if (
        isinstance(document, dict)
        and document.get("resourceType") == "Parameters"
        and media not in _FHIR_MEDIA
    ):
        raise UnsupportedMediaType(
            f"a Parameters body (FHIRPath Patch) must be sent as application/fhir+json, "
            f"not {media}: send {_PATCH_FORMATS}"
        )
    return content_type


@router.patch(
    "/{resource_type}",
    summary="Conditional patch (?criteria): patch the one match (JSON Patch, merge patch or "
    "FHIRPath Patch)",
)
async def conditional_patch(request: Request, resource_type: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    document = service.parse_body(await read_body(request))
    content_type = patch_content_type(request, document)
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        result = await service.conditional_patch(
            ctx,
            conn,
            resource_type,
            request.url.query,
            document,
            content_type,
            if_match=request.headers.get("if-match"),
        )
    return write_response(request, ctx, result)


@router.patch(
    "/{resource_type}/{resource_id}", summary="JSON Patch, JSON merge patch or FHIRPath Patch"
)
async def patch(request: Request, resource_type: str, resource_id: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    document = service.parse_body(await read_body(request))
    content_type = patch_content_type(request, document)
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        result = await service.patch(
            ctx,
            conn,
            resource_type,
            resource_id,
            document,
            content_type,
            if_match=request.headers.get("if-match"),
        )
    return write_response(request, ctx, result)


@router.delete(
    "/{resource_type}",
    summary="Conditional delete (?criteria): delete the one match; none deletes nothing",
)
async def conditional_delete(request: Request, resource_type: str, tenant: Tenant) -> Response:
    ctx = await context(request, tenant)
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        await service.conditional_delete(ctx, conn, resource_type, request.url.query)
    return Response(status_code=204)


@router.delete("/{resource_type}/{resource_id}", summary="Delete (a later read answers 410)")
async def delete(
    request: Request, resource_type: str, resource_id: str, tenant: Tenant
) -> Response:
    ctx = await context(request, tenant)
    await before_write(request, tenant, 1)
    async with writing(request, ctx) as conn:
        await service.delete(ctx, conn, resource_type, resource_id)
    return Response(status_code=204)


@router.get("/{resource_type}/{resource_id}/_history", summary="History of one resource")
async def instance_history(
    request: Request, resource_type: str, resource_id: str, tenant: Tenant
) -> Response:
    ctx = await context(request, tenant)
    items = query_items(request)
    async with pool_of(request).acquire() as conn:
        total, entries, count, offset = await service.history(
            ctx, conn, resource_type, resource_id, items
        )
    path = f"/{resource_type}/{resource_id}/_history"
    return fhir_response(
        bundles.history_bundle(ctx, path, total, entries, count, offset, _kept(items))
    )


@router.get("/{resource_type}/{resource_id}/_history/{version}", summary="Read one version")
async def vread(
    request: Request, resource_type: str, resource_id: str, version: str, tenant: Tenant
) -> Response:
    ctx = await context(request, tenant)
    async with pool_of(request).acquire() as conn:
        found = await service.vread(ctx, conn, resource_type, resource_id, version)
    return fhir_response(
        found.json or b"",
        headers={
            "ETag": f'W/"{found.version_id}"',
            "Last-Modified": service.http_date(found.last_updated),
        },
    )


eligibility_router = APIRouter(prefix="/api/eligibility", tags=["Eligibility"])


@eligibility_router.post("/$check", summary="Is the patient covered on a date?")
async def eligibility_check(
    request: Request, tenant: Tenant, body: operations.EligibilityRequest
) -> operations.EligibilityResponse:
    ctx = await context(request, tenant)
    async with pool_of(request).acquire() as conn:
        return await operations.check_eligibility(ctx, conn, body)
