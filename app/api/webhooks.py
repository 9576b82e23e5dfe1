"""Webhook subscriptions API (`/api/webhooks…`)."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from app.api.deps import RequestBody, Tenant
from app.request_state import pool_of, scopes_of
from app.webhooks import service

router = APIRouter(prefix="/api/webhooks", tags=["Webhooks"])


# The shape the service checks (`service.check_headers`), declared for the OpenAPI.
StaticHeaders = Annotated[
    dict[str, str],
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": service.MAX_HEADERS,
            "propertyNames": {
                "pattern": service.HEADER_NAME_PATTERN,
                "minLength": 1,
                "maxLength": service.MAX_HEADER_NAME_CHARS,
            },
            "additionalProperties": {
                "type": "string",
                "pattern": service.HEADER_VALUE_PATTERN,
                "minLength": 1,
                "maxLength": service.MAX_HEADER_VALUE_CHARS,
            },
        }
    ),
]


# The names the service accepts (`service.event_names`) and the types it knows, declared so
# that clients and generators see them.
EventName = Annotated[str, WithJsonSchema({"type": "string", "enum": service.event_names()})]
ResourceTypeName = Annotated[
    str, WithJsonSchema({"type": "string", "enum": sorted(service.RESOURCE_TYPES)})
]


class SubscriptionBody(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://receiver.example.com/hooks/understudy",
                    "events": ["Patient.created"],
                },
                {
                    "url": "https://receiver.example.com/hooks/patients",
                    "events": ["*"],
                    "resourceTypes": ["Patient"],
                    "headers": {"Authorization": "Bearer receiver-token"},
                },
            ]
        },
    )

    url: str = Field(description="http(s) URL that receives POSTed events")
    events: list[EventName] = Field(
        min_length=1,
        description="Event names (Patient.created, message.received, eval.completed, …) or "
        "'*' for all. eval.completed (an eval's runs have all ended: its counts and pass rate "
        "with its 95% interval) and eval.regressed (its compare with its baseline has a "
        "regressed cell: those cells) carry an `eval` object, and a `compare` for the second, "
        "instead of runId, fhirBase and resource",
    )
    resource_types: list[ResourceTypeName] | None = Field(
        default=None,
        description="Only events about these resource types; it filters resource events "
        "only: eval.completed and eval.regressed are sent to a subscription that names them "
        "(or '*') whatever this says",
    )
    secret: str | None = Field(
        default=None,
        description="Signing secret: base64, optionally prefixed 'whsec_'; generated when left out",
        examples=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    )
    enabled: bool = True
    headers: StaticHeaders | None = Field(
        default=None,
        description="Static headers sent with every delivery, e.g. {'Authorization': "
        "'Bearer …'} for a receiver that checks a header; shown once, masked afterwards. "
        "Not allowed: webhook-*, content-type, content-length, host, user-agent and other "
        "headers the delivery or HTTP itself sets",
    )


class SubscriptionView(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    url: str
    events: list[str]
    resource_types: list[str] | None
    enabled: bool
    disabled_reason: str | None
    created_at: str = Field(description="ISO 8601 instant")
    headers: dict[str, str] = Field(
        description="Static delivery headers; values masked as '••••' plus, for values of "
        f"{service.MASK_KEEPS_TAIL_FROM}+ characters, their last {service.MASK_TAIL}"
    )


class CreatedSubscription(SubscriptionView):
    secret: str = Field(description="The signing secret: shown only in this answer")
    headers: dict[str, str] = Field(
        description="Static delivery headers in clear: shown only in this answer"
    )


class SubscriptionList(BaseModel):
    webhooks: list[SubscriptionView]


def _client(request: Request) -> httpx.AsyncClient:
    client: httpx.AsyncClient = request.app.state.http
    return client


@router.post(
    "",
    status_code=201,
    summary="Subscribe a URL to events (the secret and headers are shown once)",
    response_model=CreatedSubscription,
)
async def create(request: Request, tenant: Tenant, body: SubscriptionBody) -> dict[str, Any]:
    # One statement: no BEGIN/COMMIT around it.
    async with scopes_of(request).transaction(autocommit=True) as tx:
        subscription, secret = await service.create_subscription(
            tx,
            tenant.id,
            url=body.url,
            events=body.events,
            resource_types=body.resource_types,
            secret=body.secret,
            enabled=body.enabled,
            allow_private=request.app.state.settings.webhook_allow_private,
            headers=body.headers,
        )
    return {**subscription.view(reveal_headers=True), "secret": secret}


@router.get("", summary="List subscriptions", response_model=SubscriptionList)
async def list_all(request: Request, tenant: Tenant) -> dict[str, Any]:
    found = await service.list_subscriptions(pool_of(request), tenant.id)
    return {"webhooks": [s.view() for s in found]}


@router.get("/{webhook_id}", summary="One subscription", response_model=SubscriptionView)
async def get_one(request: Request, tenant: Tenant, webhook_id: str) -> dict[str, Any]:
    return (await service.get_subscription(pool_of(request), tenant.id, webhook_id)).view()


@router.delete("/{webhook_id}", status_code=204, summary="Delete a subscription")
async def delete(request: Request, tenant: Tenant, webhook_id: str) -> None:
    async with scopes_of(request).transaction(autocommit=True) as tx:
        await service.delete_subscription(tx, tenant.id, webhook_id)


@router.get("/{webhook_id}/deliveries", summary="Deliveries with every attempt, newest first")
async def deliveries(
    request: Request,
    tenant: Tenant,
    webhook_id: str,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    found = await service.list_deliveries(pool_of(request), tenant.id, webhook_id, limit)
    return {"deliveries": found}


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    status_code=202,
    summary="Send a delivery again, with the same id",
)
async def redeliver(
    request: Request, tenant: Tenant, webhook_id: str, delivery_id: str
) -> dict[str, Any]:
    async with scopes_of(request).transaction() as tx:
        await service.redeliver(tx, tenant.id, webhook_id, delivery_id)
    return {"id": delivery_id, "status": "pending"}


@router.post("/{webhook_id}/test", summary="Send a signed ping now")
async def test(request: Request, tenant: Tenant, webhook_id: str) -> dict[str, Any]:
    return await service.ping(
        pool_of(request),
        _client(request),
        tenant.id,
        webhook_id,
        request.app.state.settings.webhook_timeout_seconds,
    )
