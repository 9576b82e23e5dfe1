"""Captured outbound effects (docs/capture.md): a run's Twilio-compatible Messages API,
its integration stubs, and the list of what was captured on it.

The SMS routes speak Twilio (Basic auth with the run's account SID and token, form
bodies, Twilio's JSON and error shapes) so an agent on Twilio's SDK only changes its
base URL; the integration routes take the run's token or the tenant's key and answer the
scenario's stubs; the captures list is the testing API's, with the tenant's key.

The trace middleware records only the run views' FHIR calls under /api/testing/runs/, so
these routes add their own trace row (transport `sms` or `integration`) to the same
recorder, once they know the run and its tenant.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile

from app.api.deps import Tenant
from app.capture import service as capture_service
from app.capture import twilio
from app.capture.credentials import SID_HEX, same, use_secret
from app.errors import Unauthorized, Unprocessable
from app.kit import jsontext
from app.kit.clock import utcnow
from app.kit.urls import RUNS_PREFIX
from app.request_state import pool_of, root_url, scopes_of
from app.runs import service as runs_service
from app.runs.errors import RunNotFound, RunNotLive
from app.scenarios import service as scenarios_service
from app.scenarios.errors import ScenarioNotFound
from app.scenarios.schema import Integration
from app.tenants.service import authenticate
from app.trace.recorder import TraceRecorder
from app.webhooks import service as webhooks_service
from understudy_client.contract.capture import CaptureList

router = APIRouter(prefix=RUNS_PREFIX, tags=["Capture"])

SMS_MESSAGES = "/{run_id}/sms/2010-04-01/Accounts/{account_sid}/Messages"
INTEGRATION_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Twilio's Messages list: 50 a page unless asked, at most 1000.
PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
# Deep enough for any run; an offset past it is a request for nothing.
MAX_PAGE = 100_000
MAX_CAPTURES_LISTED = 500
# Twilio refuses a body longer than this (error 21617).
MAX_SMS_BODY = 1600
TOO_LONG = 21617
# Not one of Twilio's codes: the run has ended, so nothing more is captured on it.
RUN_ENDED = 20409
REQUEST_CAP = capture_service.REQUEST_CAP


# What the OpenAPI document says of the answers: the SMS routes answer Twilio's error body
# (app/openapi.py keeps a route's own error declarations when they include problem+json,
# which the edge's refusals, a 413 say, still are).
_TWILIO_ERROR = {
    "type": "object",
    "properties": {
        "code": {"type": "integer"},
        "message": {"type": "string"},
        "more_info": {"type": "string"},
        "status": {"type": "integer"},
    },
    "required": ["code", "message", "more_info", "status"],
}
_PROBLEM = {"schema": {"$ref": "#/components/schemas/Problem"}}


def _twilio_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    content = {"application/json": {"schema": _TWILIO_ERROR}, "application/problem+json": _PROBLEM}
    return {code: {"description": "Twilio's error body", "content": content} for code in codes}


_SMS_FORM = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "properties": {
                        name: {"type": "string"}
                        for name in ("To", "From", "Body", "MessagingServiceSid", "StatusCallback")
                    },
                }
            }
        },
    }
}
_INTEGRATION_ANSWERS: dict[int | str, dict[str, Any]] = {
    202: {
        "description": "Captured; no stub declared for the call",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "captured": {"type": "boolean"},
                        "id": {"type": "string"},
                        "note": {"type": "string"},
                    },
                }
            }
        },
    },
    409: {"description": "The run has ended", "content": {"application/problem+json": _PROBLEM}},
    "default": {
        "description": "The matching stub's answer: its status and JSON",
        "content": {"application/json": {"schema": {}}},
    },
}


def install_capture(app: FastAPI, secret: Callable[[], bytes]) -> None:
    """The routes, and the server's secret the run credentials are derived from (read on
    first use; `app/main.py` hands in the console's `signing_secret`)."""
    use_secret(secret)
    app.include_router(router)


class _TwilioError(Exception):
    def __init__(self, code: int, message: str, status: int) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Basic realm="Twilio API"'} if self.status == 401 else {}
        return JSONResponse(
            twilio.error(self.code, self.message, self.status), self.status, headers=headers
        )


def _basic(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


@dataclass(frozen=True, slots=True)
class _Caller:
    tenant_id: uuid.UUID
    run: runs_service.RunRow


async def _run_of(request: Request, tenant_id: uuid.UUID, run_id: str) -> runs_service.RunRow:
    async with pool_of(request).acquire() as conn:
        return await runs_service.get_run(conn, tenant_id, run_id)


async def _sms_caller(request: Request, run_id: str, account_sid: str) -> _Caller:
    """The run whose account SID and token the call's Basic credentials are."""
    refused = _TwilioError(twilio.AUTHENTICATE, "Authenticate", 401)
    basic = _basic(request.headers.get("authorization"))
    if basic is None:
        raise refused
    user, token = basic
    tenant_id = capture_service.tenant_of_token(run_id, token)
    creds = None if tenant_id is None else capture_service.run_credentials(tenant_id, run_id)
    if tenant_id is None or creds is None:
        raise refused
    if not (same(user, creds.account_sid) and same(account_sid, creds.account_sid)):
        raise refused
    try:
        run = await _run_of(request, tenant_id, run_id)
    except RunNotFound:
        raise refused from None
    return _Caller(tenant_id, run)


def _trace(
    request: Request,
    caller: _Caller,
    transport: str,
    *,
    at: datetime,
    started: float,
    status: int,
    answer: bytes | None,
    asked: str | None,
) -> None:
    """The call in the run's trace, as the trace middleware records a REST call."""
    if caller.run.status != runs_service.RunStatus.LIVE:
        return  # outside any run's window, as the middleware would not record it either
    recorder: TraceRecorder = request.app.state.recorder
    recorder.add(
        capture_service.trace_row(
            caller.tenant_id,
            caller.run.id,
            transport=transport,
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            at=at,
            started=started,
            status=status,
            answer=answer,
            asked=asked,
        )
    )


def _traced(
    request: Request,
    caller: _Caller,
    response: Response,
    *,
    at: datetime,
    started: float,
    asked: str | None = None,
    transport: str = "sms",
) -> Response:
    """`response`, once the call that got it is in the run's trace (`_trace`)."""
    _trace(
        request,
        caller,
        transport,
        at=at,
        started=started,
        status=response.status_code,
        answer=bytes(response.body),
        asked=asked,
    )
    return response


def _ended(run: runs_service.RunRow) -> str:
    return capture_service.run_ended(run.id, run.status)


async def _form(request: Request) -> dict[str, Any]:
    """The form's fields: one value each, a list where a name repeats (MediaUrl)."""
    try:
        form = await request.form()
    except Exception as exc:  # python-multipart's errors have no common base of its own
        message = f"the form could not be read: {exc}"
        raise _TwilioError(twilio.INVALID_PARAMETER, message, 400) from exc
    out: dict[str, Any] = {}
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            raise _TwilioError(twilio.INVALID_PARAMETER, f"{name}: files are not accepted", 400)
        if name in out:
            previous = out[name]
            out[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            out[name] = value
    return out


def _one(form: dict[str, Any], name: str) -> str | None:
    value = form.get(name)
    if isinstance(value, list):
        raise _TwilioError(twilio.INVALID_PARAMETER, f"{name} is given more than once", 400)
    return value.strip() if isinstance(value, str) and value.strip() else None


@router.post(
    SMS_MESSAGES + ".json",
    status_code=201,
    summary="Send an SMS (Twilio's Messages API): captured on the run, never sent",
    response_model=None,
    responses=_twilio_errors(400, 401, 409),
    openapi_extra=_SMS_FORM,
)
async def create_message(request: Request, run_id: str, account_sid: str) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    asked = (await request.body()).decode("utf-8", "replace")
    try:
        response = await _create_message(request, caller, account_sid)
    except _TwilioError as exc:
        response = exc.response()
    return _traced(request, caller, response, at=at, started=started, asked=asked)


async def _create_message(request: Request, caller: _Caller, account_sid: str) -> JSONResponse:
    run = caller.run
    if run.status != runs_service.RunStatus.LIVE:
        raise _TwilioError(RUN_ENDED, _ended(run), 409)
    form = await _form(request)
    to = _one(form, "To")
    if to is None:
        raise _TwilioError(
            twilio.MISSING_TO, "A 'To' phone number is required (the To parameter)", 400
        )
    body = _one(form, "Body")
    if body is None:
        raise _TwilioError(
            twilio.MISSING_BODY, "Message body is required (the Body parameter)", 400
        )
    if len(body) > MAX_SMS_BODY:
        raise _TwilioError(
            TOO_LONG, f"The message body exceeds the {MAX_SMS_BODY} character limit", 400
        )
    sender = _one(form, "From")
    service_sid = _one(form, "MessagingServiceSid")
    creds = capture_service.run_credentials(caller.tenant_id, run.id)
    assert creds is not None  # the caller was authenticated with them
    if sender is None and service_sid is None:
        raise _TwilioError(
            twilio.MISSING_FROM,
            "A 'From' phone number or a MessagingServiceSid is required "
            f"(this run's number is {creds.from_number})",
            400,
        )
    async with scopes_of(request).transaction() as tx:
        effect = await capture_service.record_sms(
            tx,
            caller.tenant_id,
            run.id,
            to=to,
            from_=sender or creds.from_number,
            body=body,
            params=form,
        )
        await runs_service.mark_runs_changed(tx, caller.tenant_id, {run.id})
    return JSONResponse(twilio.message(effect, account_sid), 201)


@router.get(
    SMS_MESSAGES + ".json",
    summary="The run's captured SMS, newest first (Twilio's Messages list)",
    response_model=None,
    responses=_twilio_errors(401),
)
async def list_messages(
    request: Request,
    run_id: str,
    account_sid: str,
    to: Annotated[str | None, Query(alias="To")] = None,
    from_: Annotated[str | None, Query(alias="From")] = None,
    page_size: Annotated[int, Query(alias="PageSize", ge=1, le=MAX_PAGE_SIZE)] = PAGE_SIZE,
    page: Annotated[int, Query(alias="Page", ge=0, le=MAX_PAGE)] = 0,
) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    found = await capture_service.list_messages(
        pool_of(request),
        caller.tenant_id,
        run_id,
        to=to,
        from_=from_,
        page=page,
        page_size=page_size,
    )
    filters = {k: v for k, v in (("To", to), ("From", from_)) if v is not None}
    body = twilio.page(
        found[:page_size],
        account_sid,
        page_number=page,
        page_size=page_size,
        more=len(found) > page_size,
        filters=filters,
    )
    response = JSONResponse(body)
    return _traced(request, caller, response, at=at, started=started)


@router.get(
    SMS_MESSAGES + "/{message_sid}.json",
    summary="One captured SMS (Twilio's Message resource)",
    response_model=None,
    responses=_twilio_errors(401, 404),
)
async def get_message(
    request: Request, run_id: str, account_sid: str, message_sid: str
) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    effect = None
    if message_sid.startswith(capture_service.MESSAGE_PREFIX) and len(message_sid) == 2 + SID_HEX:
        effect = await capture_service.get_effect(
            pool_of(request), caller.tenant_id, run_id, message_sid
        )
    if effect is None or effect.kind != "sms":
        response = _TwilioError(
            twilio.NOT_FOUND, f"The requested resource {request.url.path} was not found", 404
        ).response()
    else:
        response = JSONResponse(twilio.message(effect, account_sid))
    return _traced(request, caller, response, at=at, started=started)


SMS_NUMBERS = "/{run_id}/sms/2010-04-01/Accounts/{account_sid}/IncomingPhoneNumbers"
_NUMBER_FORM = {
    "requestBody": {
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "properties": {name: {"type": "string"} for name in ("SmsUrl", "SmsMethod")},
                }
            }
        },
    }
}


def _number(caller: _Caller, account_sid: str, sms_url: str | None) -> dict[str, Any]:
    creds = capture_service.run_credentials(caller.tenant_id, caller.run.id)
    assert creds is not None  # the caller was authenticated with them
    return twilio.phone_number(account_sid, creds.number_sid, creds.from_number, sms_url)


@router.get(
    SMS_NUMBERS + ".json",
    summary="The run's phone number (Twilio's IncomingPhoneNumbers list)",
    response_model=None,
    responses=_twilio_errors(401),
)
async def list_numbers(request: Request, run_id: str, account_sid: str) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    number = _number(caller, account_sid, caller.run.sms_reply_url)
    body = twilio.phone_numbers_page(account_sid, [number])
    return _traced(request, caller, JSONResponse(body), at=at, started=started)


@router.get(
    SMS_NUMBERS + "/{number_sid}.json",
    summary="The run's phone number (Twilio's IncomingPhoneNumber): its SmsUrl",
    response_model=None,
    responses=_twilio_errors(401, 404),
)
async def get_number(request: Request, run_id: str, account_sid: str, number_sid: str) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    number = _number(caller, account_sid, caller.run.sms_reply_url)
    if not same(number_sid, number["sid"]):
        response = _TwilioError(
            twilio.NOT_FOUND, f"The requested resource {request.url.path} was not found", 404
        ).response()
    else:
        response = JSONResponse(number)
    return _traced(request, caller, response, at=at, started=started)


@router.post(
    SMS_NUMBERS + "/{number_sid}.json",
    summary="Set where the patient's SMS replies are posted (the number's SmsUrl)",
    response_model=None,
    responses=_twilio_errors(400, 401, 404, 409),
    openapi_extra=_NUMBER_FORM,
)
async def update_number(
    request: Request, run_id: str, account_sid: str, number_sid: str
) -> Response:
    started, at = time.perf_counter(), utcnow()
    try:
        caller = await _sms_caller(request, run_id, account_sid)
    except _TwilioError as exc:
        return exc.response()
    asked = (await request.body()).decode("utf-8", "replace")
    try:
        response = await _update_number(request, caller, account_sid, number_sid)
    except _TwilioError as exc:
        response = exc.response()
    return _traced(request, caller, response, at=at, started=started, asked=asked)


async def _update_number(
    request: Request, caller: _Caller, account_sid: str, number_sid: str
) -> JSONResponse:
    run = caller.run
    number = _number(caller, account_sid, run.sms_reply_url)
    if not same(number_sid, number["sid"]):
        raise _TwilioError(
            twilio.NOT_FOUND, f"The requested resource {request.url.path} was not found", 404
        )
    if run.status != runs_service.RunStatus.LIVE:
        raise _TwilioError(RUN_ENDED, _ended(run), 409)
    form = await _form(request)
    method = _one(form, "SmsMethod")
    if method is not None and method.upper() != "POST":
        raise _TwilioError(twilio.INVALID_PARAMETER, "SmsMethod: only POST is supported here", 400)
    if "SmsUrl" not in form:
        return JSONResponse(number)
    url = _one(form, "SmsUrl")
    if url is not None:
        try:
            runs_service.check_sms_reply_url(url)
            await webhooks_service.check_url(
                url, allow_private=request.app.state.settings.webhook_allow_private
            )
        except Unprocessable as exc:
            message = exc.issues[0].message if exc.issues else exc.message
            raise _TwilioError(twilio.INVALID_PARAMETER, f"SmsUrl {message}", 400) from None
    async with scopes_of(request).transaction() as tx:
        if not await runs_service.set_sms_reply_url(tx, caller.tenant_id, run.id, url):
            raise _TwilioError(RUN_ENDED, _ended(run), 409)
    return JSONResponse(_number(caller, account_sid, url))


# --- integrations -----------------------------------------------------------------------


async def _integration_caller(request: Request, run_id: str) -> _Caller:
    """The run's token (Bearer, or a Basic password), or the tenant's API key."""
    authorization = request.headers.get("authorization")
    scheme, _, value = (authorization or "").partition(" ")
    token: str | None = None
    if scheme.lower() == "bearer" and value.strip() and not value.strip().startswith("usk_"):
        token = value.strip()
    elif scheme.lower() == "basic":
        basic = _basic(authorization)
        token = basic[1] if basic else ""
    if token is None:
        tenant_id = (await authenticate(pool_of(request), authorization)).id
        return _Caller(tenant_id, await _run_of(request, tenant_id, run_id))
    found = capture_service.tenant_of_token(run_id, token)
    refused = Unauthorized(
        "not this run's credentials: send its auth token (Bearer, or as the Basic "
        "password) or the tenant's API key (Bearer)"
    )
    if found is None:
        raise refused
    try:
        return _Caller(found, await _run_of(request, found, run_id))
    except RunNotFound:
        raise refused from None


async def _stubs(request: Request, run: runs_service.RunRow) -> list[Integration]:
    """The integrations the run's scenario declares (its current version's)."""
    try:
        loaded = await scenarios_service.get_scenario(
            pool_of(request), run.tenant_id, run.scenario_id
        )
    except ScenarioNotFound:
        return []
    return list(loaded.scenario.integrations or [])


def _headers(request: Request) -> dict[str, str]:
    """The call's headers as kept: no credentials, no hop-by-hop framing."""
    dropped = {"authorization", "cookie", "host", "content-length", "connection"}
    return {k: v for k, v in request.headers.items() if k.lower() not in dropped}


async def integration_call(request: Request, run_id: str, name: str, path: str) -> Response:
    """Any method on `{integrationsBase}/{name}/{path}`."""
    return await _integration_call(request, run_id, name, path)


async def integration_root_call(request: Request, run_id: str, name: str) -> Response:
    """Any method on `{integrationsBase}/{name}` itself."""
    return await _integration_call(request, run_id, name, "")


async def _integration_call(request: Request, run_id: str, name: str, path: str) -> Response:
    started, at = time.perf_counter(), utcnow()
    caller = await _integration_caller(request, run_id)
    raw = await request.body()
    text = raw.decode("utf-8", "replace") if raw else None
    # A run that has ended refuses the call (409, RunNotLive): outside any run's window,
    # so not traced, as the trace middleware would not record it either.
    response = await _integration_answer(request, caller, name, "/" + path, raw, text)
    return _traced(
        request, caller, response, at=at, started=started, asked=text, transport="integration"
    )


async def _integration_answer(
    request: Request, caller: _Caller, name: str, path: str, raw: bytes, text: str | None
) -> Response:
    run = caller.run
    if run.status != runs_service.RunStatus.LIVE:
        raise RunNotLive(_ended(run))
    parsed: Any = None
    if raw and "json" in request.headers.get("content-type", ""):
        try:
            parsed = jsontext.loads(raw)
        except ValueError:
            parsed = None  # kept as the text it is
    call = capture_service.IntegrationCall(
        name=name,
        method=request.method,
        path=path,
        query=request.url.query,
        headers=_headers(request),
        body=text[:REQUEST_CAP] if text else None,
        json=parsed,
    )
    stubs = await _stubs(request, run)
    async with scopes_of(request).transaction() as tx:
        effect, status, answer = await capture_service.record_integration_call(
            tx, caller.tenant_id, run.id, call, stubs
        )
        await runs_service.mark_runs_changed(tx, caller.tenant_id, {run.id})
    headers = {"X-Understudy-Capture": effect.id}
    if status in (204, 304) or request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    return Response(jsontext.dumpb(answer), status, headers=headers, media_type="application/json")


# One route per method, so each has an operation of its own in the OpenAPI document;
# HEAD and OPTIONS, and each integration's base path, are served but left out of it.
_DOCUMENTED = ("GET", "POST", "PUT", "PATCH", "DELETE")
for _method in INTEGRATION_METHODS:
    router.add_api_route(
        "/{run_id}/integrations/{name}/{path:path}",
        integration_call,
        methods=[_method],
        summary=f"{_method} on an integration of the run: captured, answered by its stub",
        operation_id=f"integration_{_method.lower()}",
        response_model=None,
        responses=_INTEGRATION_ANSWERS,
        include_in_schema=_method in _DOCUMENTED,
    )
    router.add_api_route(
        "/{run_id}/integrations/{name}",
        integration_root_call,
        methods=[_method],
        operation_id=f"integration_root_{_method.lower()}",
        response_model=None,
        include_in_schema=False,
    )


# --- the captures list --------------------------------------------------------------------


@router.get("/{run_id}/captures", summary="What was captured on the run, oldest first")
async def list_captures(
    request: Request,
    tenant: Tenant,
    run_id: str,
    after: Annotated[
        int, Query(ge=0, le=2**62, description="The `next` link's cursor: leave it out")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_CAPTURES_LISTED)] = 100,
) -> CaptureList:
    await _run_of(request, tenant.id, run_id)  # 404 unless the tenant has the run
    found = await capture_service.list_effects(
        pool_of(request), tenant.id, run_id, after=after, limit=limit + 1
    )
    page = found[:limit]
    next_url = None
    if len(found) > limit:
        next_url = (
            f"{root_url(request)}{RUNS_PREFIX}/{run_id}/captures?after={page[-1].seq}&limit={limit}"
        )
    return CaptureList(id=run_id, captures=[e.view() for e in page], next=next_url)
