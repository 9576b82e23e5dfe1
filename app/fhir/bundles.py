"""Bundles: searchset and history rendering, and transaction/batch processing.

Stored resources come back from PostgreSQL as JSON text; bundles embed that text as
`orjson.Fragment`s instead of parsing and re-serialising every resource.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson

from app.db import Conn
from app.errors import AppError, BadRequest, Issue, NotFound
from app.fhir import repository, service
from app.fhir.outcomes import operation_outcome
from app.fhir.search.query import has_criteria
from app.kit import jsontext
from app.kit.clock import fhir_instant, utcnow
from app.kit.ids import new_resource_id
from app.kit.text import BadText, check_form

_STATUS_TEXT = {200: "200 OK", 201: "201 Created", 204: "204 No Content"}
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Process order inside a transaction, per the FHIR spec (DELETE, POST, PUT or PATCH, GET);
# a PATCH after every PUT, so it patches what a PUT of the same resource wrote.
_TRANSACTION_ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 3, "GET": 4}
MAX_ENTRIES = 10_000


def _fragment(text: str | None) -> orjson.Fragment | None:
    return None if text is None else orjson.Fragment(text)


def _subset(text: str, elements: tuple[str, ...]) -> orjson.Fragment:
    data = jsontext.loads(text)
    keep = {"resourceType", "id", "meta", *elements}
    subset = {k: v for k, v in data.items() if k in keep}
    meta = dict(subset.get("meta") or {})
    meta["tag"] = [
        *meta.get("tag", []),
        {
            "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue",
            "code": "SUBSETTED",
        },
    ]
    subset["meta"] = meta
    return orjson.Fragment(jsontext.dumpb(subset))


def search_bundle(ctx: service.FhirContext, resource_type: str, page: service.SearchPage) -> bytes:
    type_url = f"{ctx.base_url}/{resource_type}"

    def link(relation: str, params: list[tuple[str, str]]) -> dict[str, str]:
        query = urlencode(params)
        return {"relation": relation, "url": f"{type_url}?{query}" if query else type_url}

    links = [link("self", [*page.query.used, *_cursor(page)])]
    if page.next_params is not None:
        links.append(link("next", page.next_params))
    if page.previous_params is not None:
        links.append(link("previous", page.previous_params))
    entries: list[dict[str, Any]] = []
    elements = page.query.elements
    for row in page.rows:
        text = row.resource
        entries.append(
            {
                "fullUrl": f"{type_url}/{row.id}",
                "resource": _subset(text, elements) if elements else orjson.Fragment(text),
                "search": {"mode": "match"},
            }
        )
    for inc in page.included:
        entries.append(
            {
                "fullUrl": f"{ctx.base_url}/{inc.resource_type}/{inc.id}",
                "resource": _fragment(inc.json),
                "search": {"mode": "include"},
            }
        )
    bundle: dict[str, Any] = {
        "resourceType": "Bundle",
        "id": str(uuid.uuid4()),
        "meta": {"lastUpdated": fhir_instant(utcnow())},
        "type": "searchset",
        "total": page.total,
        "link": links,
    }
    if entries:
        bundle["entry"] = entries
    return orjson.dumps(bundle)


def _cursor(page: service.SearchPage) -> list[tuple[str, str]]:
    if page.query.after is not None:
        return [("_after", page.query.after)]
    if page.query.before is not None:
        return [("_before", page.query.before)]
    if page.query.offset:
        return [("_offset", str(page.query.offset))]
    return []


def history_bundle(
    ctx: service.FhirContext,
    path: str,
    total: int,
    entries: list[repository.HistoryEntry],
    count: int,
    offset: int,
    keep: list[tuple[str, str]] | None = None,
) -> bytes:
    """`keep`: result parameters the paging links carry on (`_format`)."""
    url = f"{ctx.base_url}{path}"
    kept = f"&{urlencode(keep)}" if keep else ""
    links = [{"relation": "self", "url": f"{url}?_count={count}&_offset={offset}{kept}"}]
    if offset + count < total:
        links.append(
            {"relation": "next", "url": f"{url}?_count={count}&_offset={offset + count}{kept}"}
        )
    if offset > 0:
        prev = max(0, offset - count)
        links.append({"relation": "previous", "url": f"{url}?_count={count}&_offset={prev}{kept}"})
    out: list[dict[str, Any]] = []
    for e in entries:
        method = {"create": "POST", "update": "PUT", "delete": "DELETE"}[e.interaction]
        item: dict[str, Any] = {
            "fullUrl": f"{ctx.base_url}/{e.resource_type}/{e.id}",
            "request": {
                "method": method,
                "url": e.resource_type if method == "POST" else f"{e.resource_type}/{e.id}",
            },
            "response": {
                "status": {"POST": "201", "PUT": "200", "DELETE": "204"}[method],
                "etag": f'W/"{e.version_id}"',
                "lastModified": fhir_instant(e.last_updated),
            },
        }
        if e.json is not None:
            item["resource"] = orjson.Fragment(e.json)
        out.append(item)
    bundle: dict[str, Any] = {
        "resourceType": "Bundle",
        "id": str(uuid.uuid4()),
        "type": "history",
        "total": total,
        "link": links,
    }
    if out:
        bundle["entry"] = out
    return orjson.dumps(bundle)


# --- transaction and batch --------------------------------------------------------------


@dataclass
class _Entry:
    index: int
    method: str
    resource_type: str
    resource_id: str | None
    query: str
    resource: Any
    full_url: str | None
    if_none_exist: str | None
    if_match: str | None

    @property
    def conditional(self) -> bool:
        """A PUT, PATCH or DELETE of `Type?criteria` (not yet resolved to an id)."""
        return self.method in ("PUT", "PATCH", "DELETE") and self.resource_id is None


async def _resolve_conditional(
    ctx: service.FhirContext, conn: Conn, e: _Entry
) -> dict[str, Any] | None:
    """Turn a transaction's conditional entry into the plain one on its match (`e` is
    changed): a PUT of no match creates (with the body's id, if any, as PUT with an id
    does); a DELETE of no match is answered now (nothing to delete); a PATCH of no match
    is a 404; several matches are a 412. The answer when there is nothing to write."""
    interaction = {"PUT": "conditional update", "PATCH": "conditional patch"}.get(
        e.method, "conditional delete"
    )
    found = await service.conditional_match(ctx, conn, e.resource_type, e.query, interaction)
    if found is not None:
        body_id = e.resource.get("id") if isinstance(e.resource, dict) else None
        if e.method == "PUT" and body_id is not None and body_id != found.id:
            raise BadRequest(
                f"the body's id '{body_id}' is not the matching {e.resource_type}'s ({found.id})"
            )
        e.resource_id = found.id
        if e.method == "PUT" and isinstance(e.resource, dict):
            e.resource = {**e.resource, "id": found.id}
        return None
    if e.method == "DELETE":
        return {"response": {"status": "204 No Content"}}
    if e.method == "PATCH":
        raise NotFound(f"conditional patch: no {e.resource_type} matches '{e.query}'")
    body_id = e.resource.get("id") if isinstance(e.resource, dict) else None
    if isinstance(body_id, str):
        e.resource_id = body_id
    else:
        e.method = "POST"  # created with an id given out with the other POSTs'
    return None


def _entry_error(index: int, exc: AppError) -> AppError:
    issues = [
        Issue(
            f"entry[{index}]: {i.message}",
            expression=f"Bundle.entry[{index}]"
            + (f".resource.{i.expression}" if i.expression else ""),
            code=i.code,
        )
        for i in exc.issues
    ]
    error = type(exc)(f"entry[{index}]: {exc.message}", issues)
    return error


def _check_query_text(field: str, query: str) -> None:
    """An entry's query (its url's, its ifNoneExist) reaches a search just as a request's
    query string does, but inside the JSON body, out of the edge check's sight."""
    try:
        check_form(query.encode("utf-8", "surrogatepass"), "", field)
    except BadText as exc:
        raise BadRequest(exc.message, [Issue(exc.message, field)]) from None


def _parse_entries(ctx: service.FhirContext, bundle: dict[str, Any]) -> list[_Entry]:
    raw = bundle.get("entry") or []
    if not isinstance(raw, list):
        raise BadRequest("Bundle.entry must be a list", [Issue("not a list", "Bundle.entry")])
    if len(raw) > MAX_ENTRIES:
        raise BadRequest(f"a Bundle may hold at most {MAX_ENTRIES} entries, this has {len(raw)}")
    entries: list[_Entry] = []
    for i, item in enumerate(raw):
        where = f"Bundle.entry[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise BadRequest(f"{where}.request is missing", [Issue("missing", f"{where}.request")])
        request = item["request"]
        method = str(request.get("method", "")).upper()
        if method not in _METHODS:
            raise BadRequest(
                f"{where}.request.method must be one of {', '.join(_METHODS)}",
                [Issue("invalid method", f"{where}.request.method")],
            )
        url = request.get("url")
        if not isinstance(url, str) or not url:
            raise BadRequest(
                f"{where}.request.url is missing", [Issue("missing", f"{where}.request.url")]
            )
        if url.startswith(ctx.base_url):
            url = url[len(ctx.base_url) :]
        url = url.lstrip("/")
        path, _, query = url.partition("?")
        _check_query_text(f"{where}.request.url", query)
        if_none_exist = request.get("ifNoneExist")
        if isinstance(if_none_exist, str):
            _check_query_text(f"{where}.request.ifNoneExist", if_none_exist.rpartition("?")[2])
        parts = path.split("/")
        resource_type = parts[0]
        resource_id = parts[1] if len(parts) > 1 and parts[1] else None
        if len(parts) > 2 and method != "GET":
            raise BadRequest(f"{where}.request.url '{url}' is not Type or Type/id")
        resource = item.get("resource")
        if method in ("POST", "PUT") and resource is None:
            raise BadRequest(
                f"{where}.resource is missing", [Issue("missing", f"{where}.resource")]
            )
        if (
            method in ("PUT", "PATCH", "DELETE")
            and resource_id is None
            and not has_criteria(parse_qsl(query, keep_blank_values=True))
        ):
            raise BadRequest(
                f"{where}: {method} needs a url of the form Type/id, or Type?criteria for "
                "the conditional form",
                [Issue("no id and no criteria", f"{where}.request.url")],
            )
        entries.append(
            _Entry(
                i,
                method,
                resource_type,
                resource_id,
                query,
                resource,
                item.get("fullUrl") if isinstance(item.get("fullUrl"), str) else None,
                request.get("ifNoneExist"),
                request.get("ifMatch"),
            )
        )
    return entries


def _rewrite_references(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "reference" and isinstance(item, str) and item in mapping:
                out[key] = mapping[item]
            else:
                out[key] = _rewrite_references(item, mapping)
        return out
    if isinstance(value, list):
        return [_rewrite_references(v, mapping) for v in value]
    return value


def _unresolved(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "reference" and isinstance(item, str) and item.startswith("urn:uuid:"):
                return item
            found = _unresolved(item)
            if found:
                return found
    elif isinstance(value, list):
        for v in value:
            found = _unresolved(v)
            if found:
                return found
    return None


def _response_entry(
    ctx: service.FhirContext, result: service.WriteResult, minimal: bool
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "fullUrl": f"{ctx.base_url}/{result.resource_type}/{result.id}",
        "response": {
            "status": _STATUS_TEXT.get(result.status, str(result.status)),
            "location": f"{result.resource_type}/{result.id}/_history/{result.version_id}",
            "etag": f'W/"{result.version_id}"',
            "lastModified": fhir_instant(result.last_updated),
        },
    }
    if not minimal and result.json is not None:
        entry["resource"] = orjson.Fragment(result.json)
    return entry


async def process_bundle(
    ctx: service.FhirContext, conn: Conn, bundle: Any, *, minimal: bool
) -> bytes:
    if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
        raise BadRequest(
            "POST to the base expects a Bundle of type transaction or batch",
            [Issue("not a Bundle", "resourceType")],
        )
    kind = bundle.get("type")
    if kind not in ("transaction", "batch"):
        raise BadRequest(
            f"Bundle.type must be 'transaction' or 'batch', not {kind!r}",
            [Issue("unsupported Bundle.type", "Bundle.type")],
        )
    entries = _parse_entries(ctx, bundle)
    if kind == "transaction":
        async with conn.transaction():
            out = await _transaction(ctx, conn, entries, minimal)
    else:
        out = await _batch(ctx, conn, entries, minimal)
    return orjson.dumps(
        {
            "resourceType": "Bundle",
            "id": str(uuid.uuid4()),
            "type": f"{kind}-response",
            "entry": out,
        }
    )


async def _transaction(
    ctx: service.FhirContext, conn: Conn, entries: list[_Entry], minimal: bool
) -> list[dict[str, Any]]:
    """Every entry through the same service interaction as a single request, in the
    caller's transaction; the writes are held back and go in one statement before the
    GETs (which see them)."""
    mapping: dict[str, str] = {}
    results: dict[int, dict[str, Any]] = {}
    # Ids first, so every entry can refer to every other by its fullUrl: a conditional
    # create's match is found now, every other POST gets its id now.
    new_ids: dict[int, str] = {}
    # Conditional creates with the same condition are one resource: the first one that
    # matched nothing creates it, the others resolve to it (ifNoneExist key -> its entry).
    conditional: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    same_as: dict[int, int] = {}
    for e in entries:
        try:
            service.check_type(e.resource_type)
            found = None
            if e.method == "POST" and e.if_none_exist:
                found = await service.conditional_match(ctx, conn, e.resource_type, e.if_none_exist)
            elif e.conditional:
                # A conditional PUT, PATCH or DELETE is resolved now, against what was
                # there before the transaction, into the plain form on its match.
                early = await _resolve_conditional(ctx, conn, e)
                if early is not None:
                    results[e.index] = early
                    continue
        except AppError as exc:
            raise _entry_error(e.index, exc) from None
        condition = (
            (e.resource_type, tuple(sorted(parse_qsl(e.if_none_exist.rpartition("?")[2]))))
            if e.method == "POST" and e.if_none_exist
            else None
        )
        if found is not None:
            results[e.index] = _response_entry(ctx, found, minimal)
            if e.full_url:
                mapping[e.full_url] = f"{e.resource_type}/{found.id}"
        elif condition is not None and condition in conditional:
            first = conditional[condition]
            same_as[e.index] = first
            if e.full_url:
                mapping[e.full_url] = f"{e.resource_type}/{new_ids[first]}"
        elif e.method == "POST":
            if condition is not None:
                conditional[condition] = e.index
            new_ids[e.index] = new_resource_id()
            if e.full_url:
                mapping[e.full_url] = f"{e.resource_type}/{new_ids[e.index]}"
        elif e.method == "PUT" and e.full_url and e.resource_id:
            mapping[e.full_url] = f"{e.resource_type}/{e.resource_id}"
    deferred = service.Deferred()
    seen: set[tuple[str, str]] = set()
    gets: list[_Entry] = []
    for e in sorted(entries, key=lambda x: _TRANSACTION_ORDER[x.method]):
        if e.index in results or e.index in same_as:
            continue
        if e.method == "GET":
            gets.append(e)
            continue
        try:
            results[e.index] = await _transaction_write(
                ctx, conn, e, mapping, new_ids, seen, deferred, minimal
            )
        except AppError as exc:
            raise _entry_error(e.index, exc) from None
    await service.flush(ctx, conn, deferred)
    for index, first in same_as.items():
        # The resource the first of them created, answered as a match (200, not 201).
        response = dict(results[first].get("response") or {})
        response["status"] = "200 OK"
        results[index] = {**results[first], "response": response}
    for e in gets:
        try:
            results[e.index] = await _get_entry(ctx, conn, e)
        except AppError as exc:
            raise _entry_error(e.index, exc) from None
    return [results[e.index] for e in entries]


async def _transaction_write(
    ctx: service.FhirContext,
    conn: Conn,
    e: _Entry,
    mapping: dict[str, str],
    new_ids: dict[int, str],
    seen: set[tuple[str, str]],
    deferred: service.Deferred,
    minimal: bool,
) -> dict[str, Any]:
    if e.method in ("PUT", "DELETE"):
        assert e.resource_id is not None
        key = (e.resource_type, e.resource_id)
        if key in seen:
            raise BadRequest(f"{e.resource_type}/{e.resource_id} appears twice")
        seen.add(key)
    resource = e.resource
    if e.method in ("POST", "PUT"):
        resource = _rewrite_references(resource, mapping)
        dangling = _unresolved(resource)
        if dangling:
            raise BadRequest(f"reference '{dangling}' matches no fullUrl in the Bundle")
    # The conditional creates were matched when the ids were given out.
    return await _write_entry(
        ctx,
        conn,
        e,
        resource,
        minimal,
        if_none_exist=None,
        resource_id=new_ids.get(e.index),
        deferred=deferred,
    )


async def _write_entry(
    ctx: service.FhirContext,
    conn: Conn,
    e: _Entry,
    resource: Any,
    minimal: bool,
    *,
    if_none_exist: str | None,
    resource_id: str | None = None,
    deferred: service.Deferred | None = None,
) -> dict[str, Any]:
    """A write entry by the service interaction its method names, as a single request
    would make it (`deferred`: held back for the transaction's one statement)."""
    if e.method == "POST":
        result = await service.create(
            ctx,
            conn,
            e.resource_type,
            resource,
            if_none_exist=if_none_exist,
            resource_id=resource_id,
            deferred=deferred,
        )
        return _response_entry(ctx, result, minimal)
    assert e.resource_id is not None
    if e.method == "PUT":
        result = await service.update(
            ctx,
            conn,
            e.resource_type,
            e.resource_id,
            resource,
            if_match=e.if_match,
            deferred=deferred,
        )
        return _response_entry(ctx, result, minimal)
    if e.method == "PATCH":
        document, content_type = _patch_document(resource)
        result = await service.patch(
            ctx,
            conn,
            e.resource_type,
            e.resource_id,
            document,
            content_type,
            if_match=e.if_match,
            deferred=deferred,
        )
        return _response_entry(ctx, result, minimal)
    assert e.method == "DELETE"
    await service.delete(ctx, conn, e.resource_type, e.resource_id, deferred=deferred)
    return {"response": {"status": "204 No Content"}}


async def _conditional_entry(
    ctx: service.FhirContext, conn: Conn, e: _Entry, minimal: bool
) -> dict[str, Any]:
    """A batch's conditional PUT, PATCH or DELETE, as the single request would make it."""
    if e.method == "PUT":
        result = await service.conditional_update(ctx, conn, e.resource_type, e.query, e.resource)
        return _response_entry(ctx, result, minimal)
    if e.method == "PATCH":
        document, content_type = _patch_document(e.resource)
        result = await service.conditional_patch(
            ctx, conn, e.resource_type, e.query, document, content_type, if_match=e.if_match
        )
        return _response_entry(ctx, result, minimal)
    await service.conditional_delete(ctx, conn, e.resource_type, e.query)
    return {"response": {"status": "204 No Content"}}


def _patch_document(resource: Any) -> tuple[Any, str]:
    """A PATCH entry's patch and its format: a Parameters resource (FHIRPath Patch, what
    FHIR R4 puts in a Bundle), a Binary holding a JSON Patch (base64), or a raw JSON
    Patch list for convenience."""
    if isinstance(resource, list):
        return resource, "application/json-patch+json"
    if isinstance(resource, dict) and resource.get("resourceType") == "Parameters":
        return resource, "application/fhir+json"
    if isinstance(resource, dict) and resource.get("resourceType") == "Binary":
        import base64

        try:
            return (
                jsontext.loads(base64.b64decode(resource.get("data", ""))),
                "application/json-patch+json",
            )
        except ValueError as exc:
            raise BadRequest(f"the Binary does not hold a JSON Patch: {exc}") from None
    raise BadRequest(
        "a PATCH entry needs a Parameters resource (FHIRPath Patch) or a Binary holding a "
        "JSON Patch document"
    )


async def _get_entry(ctx: service.FhirContext, conn: Conn, e: _Entry) -> dict[str, Any]:
    if e.resource_id is not None and not e.query:
        found = await service.read(ctx, conn, e.resource_type, e.resource_id)
        return {
            "resource": _fragment(found.json),
            "response": {
                "status": "200 OK",
                "etag": f'W/"{found.version_id}"',
                "lastModified": fhir_instant(found.last_updated),
            },
        }
    items = parse_qsl(e.query, keep_blank_values=True)
    page = await service.search(ctx, conn, e.resource_type, items)
    return {
        "resource": orjson.Fragment(search_bundle(ctx, e.resource_type, page)),
        "response": {"status": "200 OK"},
    }


async def _batch(
    ctx: service.FhirContext, conn: Conn, entries: list[_Entry], minimal: bool
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in entries:
        # Each entry is what the same single request would be: its own transaction
        # where the interaction needs one, committed on its own.
        try:
            out.append(await _batch_entry(ctx, conn, e, minimal))
        except AppError as exc:
            out.append(
                {
                    "response": {
                        "status": str(exc.status),
                        "outcome": operation_outcome(exc.issues),
                    }
                }
            )
    return out


async def _batch_entry(
    ctx: service.FhirContext, conn: Conn, e: _Entry, minimal: bool
) -> dict[str, Any]:
    if e.method == "GET":
        return await _get_entry(ctx, conn, e)
    dangling = _unresolved(e.resource) if e.method in ("POST", "PUT") else None
    if dangling:
        # Batch entries are independent: one cannot point at another's fullUrl.
        raise BadRequest(
            f"reference '{dangling}' cannot be resolved: batch entries may not refer to "
            "each other (use a transaction)"
        )
    if e.conditional:
        return await _conditional_entry(ctx, conn, e, minimal)
    return await _write_entry(ctx, conn, e, e.resource, minimal, if_none_exist=e.if_none_exist)
