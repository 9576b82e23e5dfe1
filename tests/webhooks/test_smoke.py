from __future__ import annotations

import json

import httpx
from standardwebhooks import Webhook

from tests.conftest import TenantHandle
from tests.webhooks.receiver import Receiver


async def test_patient_created_is_delivered_and_signed(tenant: TenantHandle) -> None:
    receiver = Receiver()
    receiver.start()
    try:
        async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
            sub = (
                await client.post(
                    "/api/webhooks", json={"url": receiver.url, "events": ["Patient.created"]}
                )
            ).json()
            r = await client.post(
                "/api/fhir/r4/Patient", json={"resourceType": "Patient", "gender": "male"}
            )
            assert r.status_code == 201
            got = await receiver.wait_for(1)
            assert len(got) == 1
            payload = Webhook(sub["secret"]).verify(got[0].body, got[0].headers)
            assert payload["type"] == "Patient.created"
            assert payload["resource"]["id"] == r.json()["id"]
            deliveries = (await client.get(f"/api/webhooks/{sub['id']}/deliveries")).json()[
                "deliveries"
            ]
            print(json.dumps(deliveries, indent=1)[:600])
    finally:
        receiver.stop()
