"""Webhook subscriptions API (`/api/webhooks…`)."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.jobs import Jobs
from app.tenants.auth import Tenant, pool_of
from app.webhooks import service

router = APIRouter(prefix="/api/webhooks", tags=["Webhooks"])


class SubscriptionBody(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    url: str = Field(description="http(s) URL that receives POSTed events")
    events: list[str] = Field(
        min_length=1,
        description="Event names (Patient.created, message.received, …) or '*' for all",
    )
    resource_types: list[str] | None = Field(
        default=None, description="Only events about these resource types"
    )
    secret: str | None = Field(
        default=None, description="Signing secret (whsec_…); generated when left out"
    )
    enabled: bool = True


def _client(request: Request) -> httpx.AsyncClient:
    client: httpx.AsyncClient = request.app.state.http
    return client


@router.post("", status_code=201, summary="Subscribe a URL to events (the secret is shown once)")
async def create(request: Request, tenant: Tenant, body: SubscriptionBody) -> dict[str, Any]:
    subscription, secret = await service.create_subscription(
        pool_of(request),
        tenant.id,
        url=body.url,
        events=body.events,
        resource_types=body.resource_types,
        secret=body.secret,
        enabled=body.enabled,
        allow_private=request.app.state.settings.webhook_allow_private,
    )
    return {**subscription.view(), "secret": secret}


@router.get("", summary="List subscriptions")
async def list_all(request: Request, tenant: Tenant) -> dict[str, Any]:
    found = await service.list_subscriptions(pool_of(request), tenant.id)
    return {"webhooks": [s.view() for s in found]}


@router.get("/{webhook_id}", summary="One subscription")
async def get_one(request: Request, tenant: Tenant, webhook_id: str) -> dict[str, Any]:
    return (await service.get_subscription(pool_of(request), tenant.id, webhook_id)).view()


@router.delete("/{webhook_id}", status_code=204, summary="Delete a subscription")
async def delete(request: Request, tenant: Tenant, webhook_id: str) -> None:
    await service.delete_subscription(pool_of(request), tenant.id, webhook_id)


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
    await service.redeliver(pool_of(request), tenant.id, webhook_id, delivery_id)
    jobs: Jobs | None = request.app.state.jobs
    if jobs is not None:
        await jobs.deliver_soon(tenant.id)
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
