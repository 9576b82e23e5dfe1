"""Webhooks over real HTTP to a real receiver on 127.0.0.1: signatures and payloads,
event names and filters, retries, timeouts, exhaustion, 410, redelivery, ordering per
resource, setup writes, the sweeper, validation and tenant isolation.

The test settings (tests/conftest.py) retry after 0.2 s (five times) and time an attempt
out after 1 s, so the retry and failure paths take about a second."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.db import Database
from app.fhir import service as fhir_service
from app.jobs import connect_jobs
from app.runs.fhir_writes import FHIR_WRITES
from app.settings import Settings
from app.webhooks.service import SWEEP_GRACE_SECONDS
from app.worker import build_worker
from tests.conftest import TenantHandle, make_tenant
from tests.webhooks.receiver import Received, Receiver

PAYLOAD_FIELDS = {"id", "eventId", "type", "occurredAt", "tenant", "runId", "fhirBase", "resource"}


def api(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=30)


async def subscribe(client: httpx.AsyncClient, url: str, events: list[str], **extra: Any) -> Any:
    r = await client.post("/api/webhooks", json={"url": url, "events": events, **extra})
    assert r.status_code == 201, r.text
    return r.json()


async def write(client: httpx.AsyncClient, method: str, path: str, body: Any = None) -> Any:
    r = await client.request(method, f"/api/fhir/r4/{path}", json=body)
    assert r.status_code in (200, 201, 204), r.text
    return r.json() if r.content else None


async def deliveries(client: httpx.AsyncClient, sub_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/api/webhooks/{sub_id}/deliveries")
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["deliveries"]
    return found


async def wait_deliveries(
    client: httpx.AsyncClient,
    sub_id: str,
    done: Callable[[list[dict[str, Any]]], bool],
    within: float = 10,
) -> list[dict[str, Any]]:
    """Poll the deliveries listing until `done` holds (or time runs out)."""
    deadline = time.monotonic() + within
    while True:
        found = await deliveries(client, sub_id)
        if done(found) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


def settled(found: list[dict[str, Any]]) -> bool:
    return bool(found) and all(d["status"] != "pending" for d in found)


async def quiet(client: httpx.AsyncClient, *sub_ids: str) -> int:
    """Wait until every delivery of the subscriptions has settled (none pending, so none
    is due or in flight: nothing more can be sent) and return their attempts, which is
    what the receiver must have got: absence shown by a condition, not a sleep. A
    delivery's row is written with its event, so the listing is complete already."""
    attempts = 0
    for sub_id in sub_ids:
        found = await wait_deliveries(
            client, sub_id, lambda f: all(d["status"] != "pending" for d in f)
        )
        assert all(d["status"] != "pending" for d in found), found
        attempts += sum(len(d["attempts"]) for d in found)
    return attempts


def verify(secret: str, got: Received) -> dict[str, Any]:
    payload: dict[str, Any] = Webhook(secret).verify(got.body, got.headers)
    assert payload["id"] == got.headers["webhook-id"]
    return payload


def events_of(found: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((d["event"], d["resource"]) for d in found)


def patient(family: str = "Hook") -> dict[str, Any]:
    return {"resourceType": "Patient", "name": [{"family": family}], "gender": "female"}


# --- 1. signature and payload ---------------------------------------------------------


async def test_payload_is_signed_and_carries_the_resource_as_written(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["*"])
        assert sub["secret"].startswith("whsec_")
        created = await write(client, "POST", "Patient", patient())
        updated = await write(
            client, "PUT", f"Patient/{created['id']}", {**patient("Hooked"), "id": created["id"]}
        )
        got = await receiver.wait_for(2)
        assert len(got) == 2
        first, second = (verify(sub["secret"], g) for g in got)
        listed = await wait_deliveries(client, sub["id"], lambda f: len(f) == 2 and settled(f))

    assert set(first) == PAYLOAD_FIELDS
    assert first["type"] == "Patient.created"
    assert first["resource"] == created
    assert first["resource"]["meta"]["versionId"] == "1"
    assert first["tenant"] == str(tenant.id)
    assert first["runId"] is None
    assert first["fhirBase"] == tenant.fhir_base
    assert first["occurredAt"] == created["meta"]["lastUpdated"]
    assert first["id"].startswith("msg_") and first["eventId"].startswith("evt_")
    assert second["type"] == "Patient.updated"
    assert second["resource"] == updated
    assert second["resource"]["meta"]["versionId"] == "2"
    assert second["id"] != first["id"] and second["eventId"] != first["eventId"]
    headers = got[0].headers
    assert headers["content-type"] == "application/json"
    assert headers["webhook-signature"].startswith("v1,")
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60

    # The listing names each delivery by the id the receiver saw.
    by_id = {d["id"]: d for d in listed}
    assert by_id[first["id"]]["eventId"] == first["eventId"]
    assert by_id[first["id"]]["event"] == "Patient.created"
    assert by_id[first["id"]]["resource"] == f"Patient/{created['id']}"
    assert by_id[first["id"]]["status"] == "delivered"

    # A tampered body, or the wrong secret, does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook(sub["secret"]).verify(got[0].body.replace(b"Hook", b"Hack"), got[0].headers)
    other = "whsec_" + "A" * 43 + "="
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(got[0].body, got[0].headers)


async def test_a_secret_given_at_subscription_signs_the_deliveries(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"], secret=secret)
        assert sub["secret"] == secret
        view = (await client.get(f"/api/webhooks/{sub['id']}")).json()
        listing = (await client.get("/api/webhooks")).json()["webhooks"]
        await write(client, "POST", "Patient", patient())
        got = await receiver.wait_for(1)
    assert verify(secret, got[0])["type"] == "Patient.created"
    # The secret is shown once, at creation.
    assert "secret" not in view
    assert [w["id"] for w in listing] == [sub["id"]]
    assert "secret" not in listing[0]
    assert view["url"] == receiver.url and view["enabled"] is True
    assert view["events"] == ["Patient.created"] and view["resourceTypes"] is None


# --- 2. event names and filters -------------------------------------------------------


async def test_star_exact_names_and_resource_type_filters(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        every = await subscribe(client, receiver.url_for("every"), ["*"])
        created_only = await subscribe(client, receiver.url_for("created"), ["Patient.created"])
        observations = await subscribe(
            client, receiver.url_for("obs"), ["*"], resourceTypes=["Observation"]
        )
        p = await write(client, "POST", "Patient", patient())
        await write(client, "PUT", f"Patient/{p['id']}", {**patient("Two"), "id": p["id"]})
        await write(client, "DELETE", f"Patient/{p['id']}")
        obs = await write(
            client,
            "POST",
            "Observation",
            {"resourceType": "Observation", "status": "preliminary", "code": {"text": "K"}},
        )
        # Deliveries are rows written with the resource: the listing is complete at once.
        all_events = events_of(await deliveries(client, every["id"]))
        created_events = events_of(await deliveries(client, created_only["id"]))
        obs_events = events_of(await deliveries(client, observations["id"]))
        got_every = await receiver.wait_for(4, path="every")
        got_created = await receiver.wait_for(1, path="created")
        got_obs = await receiver.wait_for(1, path="obs")
        sent = await quiet(client, every["id"], created_only["id"], observations["id"])
    assert sent == len(receiver.received) == 6  # nothing extra

    pref, oref = f"Patient/{p['id']}", f"Observation/{obs['id']}"
    assert all_events == Counter(
        {
            ("Patient.created", pref): 1,
            ("Patient.updated", pref): 1,
            ("Patient.deleted", pref): 1,
            ("Observation.created", oref): 1,
        }
    )
    assert created_events == Counter({("Patient.created", pref): 1})
    assert obs_events == Counter({("Observation.created", oref): 1})
    assert len(receiver.on("every")) == 4
    assert len(receiver.on("created")) == 1 and len(receiver.on("obs")) == 1
    payloads = [verify(every["secret"], g) for g in got_every]
    # In order per resource (other resources may go out in between).
    patient_events = [x["type"] for x in payloads if x["type"].startswith("Patient.")]
    assert patient_events == ["Patient.created", "Patient.updated", "Patient.deleted"]
    deleted = next(x for x in payloads if x["type"] == "Patient.deleted")
    assert deleted["resource"] is None  # a delete has no resource body
    assert verify(created_only["secret"], got_created[0])["resource"]["id"] == p["id"]
    assert verify(observations["secret"], got_obs[0])["resource"]["id"] == obs["id"]


async def test_named_events(tenant: TenantHandle, receiver: Receiver) -> None:
    named = ["message.received", "appointment.noshow", "result.final"]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url_for("named"), named)
        every = await subscribe(client, receiver.url_for("every"), ["*"])
        p = await write(client, "POST", "Patient", patient())
        pref = f"Patient/{p['id']}"
        doctor = "Practitioner/demo-canonical-prac-chen"

        def message(sender: str, recipient: str) -> dict[str, Any]:
            return {
                "resourceType": "Communication",
                "status": "completed",
                "sender": {"reference": sender},
                "recipient": [{"reference": recipient}],
                "payload": [{"contentString": "Hello"}],
            }

        from_patient = await write(client, "POST", "Communication", message(pref, doctor))
        from_doctor = await write(client, "POST", "Communication", message(doctor, pref))

        appointment: dict[str, Any] = {
            "resourceType": "Appointment",
            "status": "booked",
            "participant": [
                {"actor": {"reference": pref}, "status": "accepted"},
                {"actor": {"reference": doctor}, "status": "accepted"},
            ],
        }
        appt = await write(client, "POST", "Appointment", appointment)
        appointment["id"] = appt["id"]
        appointment["status"] = "noshow"
        await write(client, "PUT", f"Appointment/{appt['id']}", appointment)
        # Still a no-show after another change: no second appointment.noshow.
        appointment["comment"] = "Called twice, no answer."
        await write(client, "PUT", f"Appointment/{appt['id']}", appointment)
        # Created no-show straight away: the status became noshow with that write.
        direct = await write(
            client, "POST", "Appointment", {k: v for k, v in appointment.items() if k != "id"}
        )

        report = await write(
            client,
            "POST",
            "DiagnosticReport",
            {"resourceType": "DiagnosticReport", "status": "final", "code": {"text": "BMP"}},
        )
        observation: dict[str, Any] = {
            "resourceType": "Observation",
            "status": "preliminary",
            "code": {"text": "Potassium"},
            "subject": {"reference": pref},
        }
        obs = await write(client, "POST", "Observation", observation)
        observation["id"] = obs["id"]
        observation["status"] = "final"
        await write(client, "PUT", f"Observation/{obs['id']}", observation)
        # Final again (a note added): not a second result.final.
        observation["note"] = [{"text": "checked"}]
        await write(client, "PUT", f"Observation/{obs['id']}", observation)

        found = events_of(await deliveries(client, sub["id"]))
        all_events = events_of(await deliveries(client, every["id"]))
        got = await receiver.wait_for(5, path="named")

    aref = f"Appointment/{appt['id']}"
    assert found == Counter(
        {
            ("message.received", f"Communication/{from_patient['id']}"): 1,
            ("appointment.noshow", aref): 1,
            ("appointment.noshow", f"Appointment/{direct['id']}"): 1,
            ("result.final", f"DiagnosticReport/{report['id']}"): 1,
            ("result.final", f"Observation/{obs['id']}"): 1,
        }
    )
    assert len(got) == 5
    assert sorted(verify(sub["secret"], g)["type"] for g in got) == sorted(
        [
            "message.received",
            "appointment.noshow",
            "appointment.noshow",
            "result.final",
            "result.final",
        ]
    )
    # A named event comes with the write's own event, not instead of it.
    assert all_events[("Communication.created", f"Communication/{from_patient['id']}")] == 1
    assert all_events[("Communication.created", f"Communication/{from_doctor['id']}")] == 1
    assert ("message.received", f"Communication/{from_doctor['id']}") not in all_events
    assert all_events[("Appointment.updated", aref)] == 2
    assert all_events[("appointment.noshow", aref)] == 1
    assert all_events[("Observation.updated", f"Observation/{obs['id']}")] == 2


async def test_a_transaction_emits_per_entry(tenant: TenantHandle, receiver: Receiver) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a",
                "resource": patient("Entry"),
                "request": {"method": "POST", "url": "Patient"},
            },
            {"resource": patient("Other"), "request": {"method": "POST", "url": "Patient"}},
            {
                "resource": {
                    "resourceType": "Observation",
                    "status": "final",
                    "code": {"text": "Sodium"},
                    "subject": {"reference": "urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a"},
                },
                "request": {"method": "POST", "url": "Observation"},
            },
        ],
    }
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["*"])
        r = await client.post("/api/fhir/r4", json=bundle)
        assert r.status_code == 200, r.text
        locations = [e["response"]["location"] for e in r.json()["entry"]]
        refs = ["/".join(loc.split("/_history")[0].split("/")[-2:]) for loc in locations]
        found = events_of(await deliveries(client, sub["id"]))
        got = await receiver.wait_for(4)
    assert found == Counter(
        {
            ("Patient.created", refs[0]): 1,
            ("Patient.created", refs[1]): 1,
            ("Observation.created", refs[2]): 1,
            ("result.final", refs[2]): 1,
        }
    )
    payloads = [verify(sub["secret"], g) for g in got]
    observation = next(x["resource"] for x in payloads if x["type"] == "result.final")
    # The resource as written: the urn:uuid reference resolved to the new Patient.
    assert observation["subject"]["reference"] == refs[0]


WAYS = ("single", "transaction", "batch")


async def write_in_view(
    client: httpx.AsyncClient, base: str, way: str, method: str, url: str, body: Any = None
) -> str:
    """One write through a run's view, as a single request or a one-entry Bundle of `way`;
    returns the written resource's `Type/id`."""
    if way == "single":
        headers = {"Content-Type": "application/json-patch+json"} if method == "PATCH" else {}
        r = await client.request(method, f"{base}/{url}", json=body, headers=headers)
        assert r.status_code in (200, 201, 204), r.text
        return url if method != "POST" else f"{url}/{r.json()['id']}"
    item: dict[str, Any] = {"request": {"method": method, "url": url}}
    if body is not None:
        item["resource"] = body
    r = await client.post(base, json={"resourceType": "Bundle", "type": way, "entry": [item]})
    assert r.status_code == 200, r.text
    response = r.json()["entry"][0]["response"]
    assert response["status"][:3] in ("200", "201", "204"), response
    return url if method != "POST" else "/".join(response["location"].split("/")[:2])


async def test_bundle_writes_in_a_run_view_are_the_runs_like_single_writes(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    """The same writes through run A's view as single requests, one-entry transactions and
    one-entry batches: each belongs to run A (hidden from run B's view, tagged, events
    carrying A's id) and emits the same events."""
    async with api(tenant) as client:
        started = []
        for _ in range(2):
            r = await client.post(
                "/api/testing/runs", json={"scenarioId": "scheduling.book-named-practitioner"}
            )
            assert r.status_code == 201, r.text
            started.append(r.json())
        run_a, run_b = started
        base_a, base_b = run_a["fhirBase"], run_b["fhirBase"]
        patient_ref = run_a["fixture"]["patient"]
        sub = await subscribe(client, receiver.url, ["*"])
        observation = {
            "resourceType": "Observation",
            "status": "preliminary",
            "code": {"text": "Potassium"},
            "subject": {"reference": patient_ref},
        }
        message = {
            "resourceType": "Communication",
            "status": "completed",
            "sender": {"reference": patient_ref},
            "payload": [{"contentString": "Can I move my visit?"}],
        }
        written: dict[str, dict[str, str]] = {}
        for way in WAYS:
            obs = await write_in_view(client, base_a, way, "POST", "Observation", observation)
            msg = await write_in_view(client, base_a, way, "POST", "Communication", message)
            written[way] = {"obs": obs, "msg": msg}
            for ref in (obs, msg):
                mine = await client.get(f"{base_a}/{ref}")
                assert mine.status_code == 200, (way, mine.text)
                assert {"system": "urn:understudy:source", "code": "test-run"} in mine.json()[
                    "meta"
                ]["tag"]
                assert (await client.get(f"{base_b}/{ref}")).status_code == 404, (way, ref)
            final = {**observation, "id": obs.split("/")[1], "status": "final"}
            await write_in_view(client, base_a, way, "PUT", obs, final)
            amend = [{"op": "replace", "path": "/status", "value": "amended"}]
            await write_in_view(client, base_a, way, "PATCH", obs, amend)
            await write_in_view(client, base_a, way, "DELETE", obs)
        expected = 3 * 7
        found = await wait_deliveries(client, sub["id"], lambda d: len(d) >= expected)
        for run in started:
            await client.post(f"/api/testing/runs/{run['id']}/cancel")

    assert len(found) == expected
    assert {d["runId"] for d in found} == {run_a["id"]}

    def emitted(ref: str) -> Counter[str]:
        return Counter(d["event"] for d in found if d["resource"] == ref)

    for way in WAYS:
        assert emitted(written[way]["obs"]) == Counter(
            {
                "Observation.created": 1,
                "Observation.updated": 2,  # the PUT to final and the PATCH to amended
                "result.final": 1,  # only the PUT made it final
                "Observation.deleted": 1,
            }
        ), way
        assert emitted(written[way]["msg"]) == Counter(
            {"Communication.created": 1, "message.received": 1}
        ), way


# --- 3. retries, timeouts, exhaustion, 410 --------------------------------------------


async def test_retries_after_500s_then_delivers(tenant: TenantHandle, receiver: Receiver) -> None:
    receiver.script = [500, 500, 200]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        found = await wait_deliveries(client, sub["id"], settled)
    assert len(found) == 1
    delivery = found[0]
    assert delivery["status"] == "delivered", delivery
    attempts = delivery["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert [a["statusCode"] for a in attempts] == [500, 500, 200]
    assert all(isinstance(a["latencyMs"], float | int) and a["latencyMs"] >= 0 for a in attempts)
    assert [a["responseExcerpt"] for a in attempts] == [
        "receiver says 500",
        "receiver says 500",
        "receiver says 200",
    ]
    assert all(a["error"] is None for a in attempts)
    assert delivery["deliveredAt"] == attempts[2]["at"]
    assert delivery["nextAttemptAt"] is None
    got = receiver.received
    assert len(got) == 3
    assert len({g.headers["webhook-id"] for g in got}) == 1  # one delivery, one id
    assert {verify(sub["secret"], g)["id"] for g in got} == {delivery["id"]}
    times = [datetime.fromisoformat(a["at"]) for a in attempts]
    assert times == sorted(times)
    # The retry waits are about 0.2 s each (±20% jitter).
    assert (times[2] - times[0]).total_seconds() >= 2 * 0.2 * 0.8


async def test_a_timeout_is_recorded_and_retried(tenant: TenantHandle, receiver: Receiver) -> None:
    receiver.script = [("sleep", 1.6)]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        found = await wait_deliveries(client, sub["id"], settled)
    delivery = found[0]
    assert delivery["status"] == "delivered", delivery
    first, second = delivery["attempts"]
    assert first["statusCode"] is None
    assert first["error"] is not None and "timed out" in first["error"]
    assert first["latencyMs"] >= 900  # the 1 s timeout of the test settings
    assert second["statusCode"] == 200 and second["error"] is None
    assert len(receiver.received) == 2


async def test_always_failing_ends_failed_after_six_attempts(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    receiver.default_status = 500
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        found = await wait_deliveries(client, sub["id"], settled, within=15)
        assert await quiet(client, sub["id"]) == 6  # failed for good: no seventh attempt
        view = (await client.get(f"/api/webhooks/{sub['id']}")).json()
    delivery = found[0]
    assert delivery["status"] == "failed", delivery
    assert [a["statusCode"] for a in delivery["attempts"]] == [500] * 6
    assert delivery["nextAttemptAt"] is None and delivery["deliveredAt"] is None
    assert len(receiver.received) == 6
    # Failing deliveries do not disable the subscription; only 410 does.
    assert view["enabled"] is True


async def test_410_disables_the_subscription(tenant: TenantHandle, receiver: Receiver) -> None:
    receiver.script = [410]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        found = await wait_deliveries(client, sub["id"], settled)
        view = (await client.get(f"/api/webhooks/{sub['id']}")).json()
        await write(client, "POST", "Patient", patient("After"))
        after = await deliveries(client, sub["id"])
        assert await quiet(client, sub["id"]) == 1
    assert found[0]["status"] == "failed"
    assert [a["statusCode"] for a in found[0]["attempts"]] == [410]
    assert view["enabled"] is False
    assert view["disabledReason"] and "410" in view["disabledReason"]
    assert len(after) == 1  # the new write made no delivery
    assert len(receiver.received) == 1


# --- 4. redelivery ---------------------------------------------------------------------


async def test_redelivery_keeps_the_id(tenant: TenantHandle, receiver: Receiver) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        [first] = await receiver.wait_for(1)
        found = await wait_deliveries(client, sub["id"], settled)
        delivery_id = found[0]["id"]
        r = await client.post(f"/api/webhooks/{sub['id']}/deliveries/{delivery_id}/redeliver")
        assert r.status_code == 202, r.text
        assert r.json() == {"id": delivery_id, "status": "pending"}
        got = await receiver.wait_for(2)
        after = await wait_deliveries(
            client, sub["id"], lambda f: settled(f) and len(f[0]["attempts"]) == 2
        )
        missing = await client.post(f"/api/webhooks/{sub['id']}/deliveries/msg_nope/redeliver")
    assert len(got) == 2
    second = got[1]
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery_id
    one, two = verify(sub["secret"], first), verify(sub["secret"], second)
    assert one == two  # the same event, the same body
    assert after[0]["status"] == "delivered"
    assert [a["attempt"] for a in after[0]["attempts"]] == [1, 2]
    assert missing.status_code == 404


# --- 5. order per subscription and resource -------------------------------------------


async def test_versions_of_a_resource_arrive_in_order(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    receiver.script = [500]  # the first delivery (version 1) fails once
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created", "Patient.updated"])
        p = await write(client, "POST", "Patient", patient())
        for n in range(5):
            await write(
                client, "PUT", f"Patient/{p['id']}", {**patient(f"V{n + 2}"), "id": p["id"]}
            )
        got = await receiver.wait_for(7, within=15)
        found = await wait_deliveries(client, sub["id"], settled)
    assert len(got) == 7, [(g.status, g.json()["resource"]["meta"]["versionId"]) for g in got]
    versions = [int(verify(sub["secret"], g)["resource"]["meta"]["versionId"]) for g in got]
    # The failed first attempt, its retry, then every later version in order.
    assert versions == [1, 1, 2, 3, 4, 5, 6]
    assert [g.status for g in got] == [500] + [200] * 6
    delivered = sorted(
        (d for d in found if d["status"] == "delivered"), key=lambda d: d["deliveredAt"]
    )
    assert len(delivered) == 6
    assert [d["event"] for d in delivered] == ["Patient.created"] + ["Patient.updated"] * 5


async def test_order_is_per_resource_not_global(tenant: TenantHandle, receiver: Receiver) -> None:
    """A failing delivery for one resource does not hold back another resource's."""
    receiver.decide = lambda path, body: 500 if b'"Slow"' in body else None
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        slow = await write(client, "POST", "Patient", patient("Slow"))
        await receiver.wait_for(1)
        fast = await write(client, "POST", "Patient", patient("Fast"))
        found = await wait_deliveries(
            client, sub["id"], lambda f: len(f) == 2 and settled(f), within=15
        )
    ids = [verify(sub["secret"], g)["resource"]["id"] for g in receiver.received]
    assert ids.count(slow["id"]) == 6 and ids.count(fast["id"]) == 1
    # Fast went out while slow was still being retried.
    assert ids.index(fast["id"]) < len(ids) - 1
    assert {d["resource"]: d["status"] for d in found} == {
        f"Patient/{slow['id']}": "failed",
        f"Patient/{fast['id']}": "delivered",
    }


# --- 6. setup writes emit nothing; the stimulus does ----------------------------------


async def test_setup_writes_emit_nothing_and_the_stimulus_does(
    tenant: TenantHandle, receiver: Receiver
) -> None:
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["*"])
        r = await client.post(
            "/api/testing/runs", json={"scenarioId": "scheduling.book-named-practitioner"}
        )
        assert r.status_code == 201, r.text
        agent_run = r.json()
        assert await deliveries(client, sub["id"]) == []
        r = await client.post(
            "/api/testing/runs",
            json={"scenarioId": "results.critical-lab", "mode": "workflow"},
        )
        assert r.status_code == 201, r.text
        run = r.json()
        found = await deliveries(client, sub["id"])
        got = await receiver.wait_for(6)
        assert await quiet(client, sub["id"]) == 6
        for run_id in (agent_run["id"], run["id"]):
            await client.post(f"/api/testing/runs/{run_id}/cancel")

    fixture = run["fixture"]
    potassium, creatinine, report = (
        fixture["potassium"],
        fixture["creatinine"],
        fixture["report"],
    )
    assert events_of(found) == Counter(
        {
            ("Observation.created", potassium): 1,
            ("result.final", potassium): 1,
            ("Observation.created", creatinine): 1,
            ("result.final", creatinine): 1,
            ("DiagnosticReport.created", report): 1,
            ("result.final", report): 1,
        }
    )
    assert {d["runId"] for d in found} == {run["id"]}
    assert len(receiver.received) == 6
    payloads = [verify(sub["secret"], g) for g in got]
    assert {x["runId"] for x in payloads} == {run["id"]}
    assert {x["fhirBase"] for x in payloads} == {run["fhirBase"]}
    # Nothing about the fixture (Patient, Condition, MedicationRequest, ServiceRequest).
    refs = {f"{x['resource']['resourceType']}/{x['resource']['id']}" for x in payloads}
    assert refs == {potassium, creatinine, report}
    final_report = next(
        x for x in payloads if x["type"] == "result.final" and x["resource"]["id"] in report
    )
    assert final_report["resource"]["basedOn"] == [{"reference": fixture["order"]}]
    assert final_report["resource"]["subject"] == {"reference": fixture["patient"]}


# --- 7. committed but never enqueued: the sweeper ---------------------------------------


async def test_the_sweeper_sends_a_delivery_whose_job_was_never_enqueued(
    tenant: TenantHandle, receiver: Receiver, db: Database, settings: Settings
) -> None:
    """Models a crash between commit and enqueue honestly: the write goes through
    `app.fhir.service.create` with a `FhirContext` — the same code and the same SQL
    statement as `POST /Patient`, which commits the resource, its event and its delivery
    — and then nothing enqueues the delivery's job (the API enqueues when its unit of work
    flushes, after the commit; here that step never happens, as if the process had died). Redis
    holds no job for it, and nothing arrives until the sweeper runs.

    The session's worker runs the sweeper (`sweep_deliveries`) on its cron every 5 s; the
    cron's name carries the queue name, so another session on the same Redis cannot take
    this one's ticks. The test waits for that real tick."""
    worker = build_worker(settings, handle_signals=False)
    cron = next(c for c in worker.cron_jobs if c.name.startswith("cron:sweep_deliveries:"))
    assert cron.name.endswith(settings.queue_name)
    assert cron.second == set(range(0, 60, 5))
    assert settings.redis_url is not None
    jobs = await connect_jobs(settings.redis_url, settings.queue_name)
    try:
        async with api(tenant) as client:
            sub = await subscribe(client, receiver.url, ["Patient.created"])
            ctx = fhir_service.FhirContext(
                tenant_id=tenant.id,
                base_url=tenant.fhir_base,
                root_url=tenant.server,
                write_statement=FHIR_WRITES,
            )
            async with db.pool.acquire() as conn:
                result = await fhir_service.create(ctx, conn, "Patient", patient("Orphan"))
            committed = time.monotonic()
            [delivery_id] = ctx.deliveries
            job_keys = await jobs.redis.keys(f"arq:job:deliver:{delivery_id}:*")
            queued = await jobs.redis.zrange(settings.queue_name, 0, -1)
            assert job_keys == []
            assert not any(delivery_id.encode() in j for j in queued)
            [pending] = await deliveries(client, sub["id"])
            assert pending["status"] == "pending" and pending["attempts"] == []

            # Committed, never enqueued: nothing is sent during the grace period.
            await asyncio.sleep(SWEEP_GRACE_SECONDS + 0.1 - (time.monotonic() - committed))
            before_sweep = len(receiver.received)
            got = await receiver.wait_for(1, within=8)  # the next 5 s tick sends it
            found = await wait_deliveries(client, sub["id"], settled)
    finally:
        await jobs.close()
    assert before_sweep == 0
    assert len(got) == 1
    payload = verify(sub["secret"], got[0])
    assert payload["id"] == delivery_id
    assert payload["resource"]["id"] == result.id
    assert payload["fhirBase"] == tenant.fhir_base
    assert found[0]["status"] == "delivered"
    assert len(found[0]["attempts"]) == 1


# --- 8. validation, not found, isolation, auth, ping ----------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/hook",
        "http:///hook",
        "http://",
        "example.org/hook",
        "",
        "http://[::1/x",
        "http://127.0.0.1:8891:1/x",
        "http://127.0.0.1:99999/x",
    ],
)
async def test_a_bad_url_is_422_naming_url(tenant: TenantHandle, url: str) -> None:
    async with api(tenant) as client:
        r = await client.post("/api/webhooks", json={"url": url, "events": ["*"]})
    assert r.status_code == 422, r.text
    assert "url" in r.text


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"events": ["Patinet.created"]}, "events[0]"),
        ({"events": [""]}, "events[0]"),
        ({"events": ["Patient.created", "Patient.exploded"]}, "events[1]"),
        ({"events": ["*"], "resourceTypes": ["Nope"]}, "resourceTypes[0]"),
        ({"events": ["*"], "resourceTypes": []}, "resourceTypes"),
    ],
)
async def test_events_that_could_never_fire_are_rejected(
    tenant: TenantHandle, receiver: Receiver, body: dict[str, Any], path: str
) -> None:
    async with api(tenant) as client:
        r = await client.post("/api/webhooks", json={"url": receiver.url, **body})
    assert r.status_code == 422, r.text
    assert path in [e["path"] for e in r.json()["errors"]]


async def test_subscription_body_validation(tenant: TenantHandle, receiver: Receiver) -> None:
    async with api(tenant) as client:
        no_events = await client.post("/api/webhooks", json={"url": receiver.url, "events": []})
        missing = await client.post("/api/webhooks", json={"url": receiver.url})
        bad_secret = await client.post(
            "/api/webhooks", json={"url": receiver.url, "events": ["*"], "secret": "not base64!"}
        )
        unknown_field = await client.post(
            "/api/webhooks", json={"url": receiver.url, "events": ["*"], "colour": "red"}
        )
        listing = (await client.get("/api/webhooks")).json()
    assert no_events.status_code == 422 and "events" in no_events.text
    assert missing.status_code == 422 and "events" in missing.text
    assert bad_secret.status_code == 422 and "secret" in bad_secret.text
    assert unknown_field.status_code == 422 and "colour" in unknown_field.text
    assert listing == {"webhooks": []}


async def test_unknown_ids_are_404(tenant: TenantHandle) -> None:
    async with api(tenant) as client:
        calls = [
            await client.get("/api/webhooks/wh_missing"),
            await client.delete("/api/webhooks/wh_missing"),
            await client.get("/api/webhooks/wh_missing/deliveries"),
            await client.post("/api/webhooks/wh_missing/deliveries/msg_x/redeliver"),
            await client.post("/api/webhooks/wh_missing/test"),
        ]
    assert [r.status_code for r in calls] == [404] * 5
    assert all("wh_missing" in r.text for r in calls)


async def test_another_tenant_cannot_see_or_touch_a_subscription(
    tenant: TenantHandle, receiver: Receiver, db: Database, server_url: str
) -> None:
    other = await make_tenant(db, server_url)
    async with api(tenant) as client, api(other) as intruder:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        await write(client, "POST", "Patient", patient())
        [delivery] = await wait_deliveries(client, sub["id"], settled)
        base = f"/api/webhooks/{sub['id']}"
        tries = [
            await intruder.get(base),
            await intruder.delete(base),
            await intruder.get(f"{base}/deliveries"),
            await intruder.post(f"{base}/deliveries/{delivery['id']}/redeliver"),
            await intruder.post(f"{base}/test"),
        ]
        theirs = (await intruder.get("/api/webhooks")).json()
        # The other tenant's writes do not reach this tenant's subscription.
        await write(intruder, "POST", "Patient", patient("Elsewhere"))
        still = await client.get(base)
        mine = await deliveries(client, sub["id"])
        assert await quiet(client, sub["id"]) == 1
        deleted = await client.delete(base)
        gone = await client.get(base)
    assert [r.status_code for r in tries] == [404] * 5
    assert theirs == {"webhooks": []}
    assert still.status_code == 200
    assert len(mine) == 1 and mine[0]["attempts"][0]["attempt"] == 1
    assert len(mine[0]["attempts"]) == 1  # the intruder's redeliver did nothing
    assert len(receiver.received) == 1
    assert deleted.status_code == 204 and gone.status_code == 404


async def test_a_key_is_required(tenant: TenantHandle, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, timeout=30) as anonymous:
        calls = [
            await anonymous.post("/api/webhooks", json={"url": receiver.url, "events": ["*"]}),
            await anonymous.get("/api/webhooks"),
            await anonymous.get("/api/webhooks/wh_x"),
            await anonymous.get(
                "/api/webhooks", headers={"Authorization": "Bearer us_not_a_real_key"}
            ),
        ]
    assert [r.status_code for r in calls] == [401] * 4


async def test_ping_sends_a_signed_ping(tenant: TenantHandle, receiver: Receiver) -> None:
    receiver.script = [202]
    async with api(tenant) as client:
        sub = await subscribe(client, receiver.url, ["Patient.created"])
        r = await client.post(f"/api/webhooks/{sub['id']}/test")
        assert r.status_code == 200, r.text
        answer = r.json()
        listed = await deliveries(client, sub["id"])
    assert answer["statusCode"] == 202
    assert answer["responseExcerpt"] == "receiver says 202"
    assert answer["latencyMs"] >= 0
    [got] = receiver.received  # the answer came back after the receiver recorded it
    payload = verify(sub["secret"], got)
    assert payload["type"] == "ping"
    assert payload["id"] == answer["id"] == got.headers["webhook-id"]
    assert payload["tenant"] == str(tenant.id)
    assert listed == []  # a ping is not a delivery


async def test_ping_to_a_dead_receiver_says_so(tenant: TenantHandle) -> None:
    dead = Receiver()  # never started: nothing listens on its port
    async with api(tenant) as client:
        sub = await subscribe(client, dead.url, ["*"])
        r = await client.post(f"/api/webhooks/{sub['id']}/test")
    assert r.status_code == 400, r.text
    assert "ping could not be delivered" in r.text
