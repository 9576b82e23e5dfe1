"""Conditional patch and delete (`PATCH|DELETE [type]?criteria`), alone and in Bundles:
no match, one match, several (412), and the same tenant and run scoping, trace, webhook
events and history as the plain interactions."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx

from tests.conftest import TenantHandle, make_tenant
from tests.runs.test_run_flow import api, start

SYSTEM = "urn:test:conditional"
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def patient(mrn: str, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": SYSTEM, "value": mrn}],
        "name": [{"family": "Cond" + mrn[-6:]}],
        **extra,
    }


def mrn() -> str:
    return "MRN-" + uuid.uuid4().hex[:12]


def criteria(value: str) -> dict[str, str]:
    return {"identifier": f"{SYSTEM}|{value}"}


async def test_conditional_patch_none_one_many(client: httpx.AsyncClient) -> None:
    m = mrn()
    none = await client.patch(
        "/Patient",
        params=criteria(m),
        json=[{"op": "add", "path": "/active", "value": True}],
        headers=JSON_PATCH,
    )
    assert none.status_code == 404, none.text
    assert "conditional patch" in none.json()["issue"][0]["diagnostics"]
    made = (await client.post("/Patient", json=patient(m))).json()
    one = await client.patch(
        "/Patient",
        params=criteria(m),
        json=[{"op": "add", "path": "/active", "value": True}],
        headers=JSON_PATCH,
    )
    assert one.status_code == 200, one.text
    assert one.json()["id"] == made["id"] and one.json()["active"] is True
    assert one.json()["meta"]["versionId"] == "2"
    assert one.headers["location"].endswith(f"/Patient/{made['id']}/_history/2")
    # Merge patch and FHIRPath Patch work conditionally too.
    merged = await client.patch(
        "/Patient",
        params=criteria(m),
        json={"gender": "female"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert merged.status_code == 200 and merged.json()["gender"] == "female"
    fhirpath = await client.patch(
        "/Patient",
        params=criteria(m),
        json={
            "resourceType": "Parameters",
            "parameter": [
                {
                    "name": "operation",
                    "part": [
                        {"name": "type", "valueCode": "replace"},
                        {"name": "path", "valueString": "Patient.gender"},
                        {"name": "value", "valueCode": "male"},
                    ],
                }
            ],
        },
        headers={"Content-Type": "application/fhir+json"},
    )
    assert fhirpath.status_code == 200, fhirpath.text
    assert fhirpath.json()["gender"] == "male" and fhirpath.json()["meta"]["versionId"] == "4"
    # A stale If-Match on the match is a 412, as on PATCH [type]/[id].
    stale = await client.patch(
        "/Patient", params=criteria(m), json={"active": False}, headers={"If-Match": 'W/"1"'}
    )
    assert stale.status_code == 412
    # Several matches: 412, nothing written.
    await client.post("/Patient", json=patient(m))
    many = await client.patch("/Patient", params=criteria(m), json={"active": False})
    assert many.status_code == 412, many.text
    assert "2 Patient resources match" in many.json()["issue"][0]["diagnostics"]
    assert (await client.get(f"/Patient/{made['id']}")).json()["active"] is True
    # No criteria: not a conditional patch.
    bare = await client.patch("/Patient", json={"active": False})
    assert bare.status_code == 400
    # Text is no patch format.
    plain = await client.patch(
        "/Patient", params=criteria(m), content=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert plain.status_code == 415


async def test_conditional_delete_none_one_many(client: httpx.AsyncClient) -> None:
    m = mrn()
    none = await client.delete("/Patient", params=criteria(m))
    assert none.status_code == 204, none.text
    made = (await client.post("/Patient", json=patient(m))).json()
    keep = (await client.post("/Patient", json=patient(mrn()))).json()
    one = await client.delete("/Patient", params=criteria(m))
    assert one.status_code == 204, one.text
    assert (await client.get(f"/Patient/{made['id']}")).status_code == 410
    assert (await client.get(f"/Patient/{keep['id']}")).status_code == 200
    history = (await client.get(f"/Patient/{made['id']}/_history")).json()
    assert history["total"] == 2 and history["entry"][0]["request"]["method"] == "DELETE"
    # The deleted one no longer matches: deleting again deletes nothing.
    assert (await client.delete("/Patient", params=criteria(m))).status_code == 204
    assert (await client.get(f"/Patient/{made['id']}/_history")).json()["total"] == 2
    # Several matches: 412 (R4's single-match conditional delete), nothing deleted.
    twins = [(await client.post("/Patient", json=patient(m))).json()["id"] for _ in range(2)]
    many = await client.delete("/Patient", params=criteria(m))
    assert many.status_code == 412, many.text
    assert "conditional delete" in many.json()["issue"][0]["diagnostics"]
    for pid in twins:
        assert (await client.get(f"/Patient/{pid}")).status_code == 200
    # No criteria (or only result parameters) never deletes every Patient.
    assert (await client.delete("/Patient")).status_code == 400
    assert (await client.delete("/Patient", params={"_format": "json"})).status_code == 400
    assert (await client.delete("/Patient", params={"bogus": "1"})).status_code == 400
    assert (await client.delete("/Frobnicator", params={"_id": "x"})).status_code == 404
    capability = (await client.get("/metadata")).json()
    entry = next(r for r in capability["rest"][0]["resource"] if r["type"] == "Patient")
    assert entry["conditionalDelete"] == "single"
    assert entry["conditionalUpdate"] is True
    assert {"code": "patch"} in entry["interaction"]
    assert "application/fhir+json" in capability["patchFormat"]


async def test_conditional_patch_and_delete_see_only_the_tenants_data(
    client: httpx.AsyncClient, tenant: TenantHandle, db: Any
) -> None:
    other = await make_tenant(db, tenant.server)
    m = mrn()
    async with httpx.AsyncClient(base_url=other.fhir_base, headers=other.headers) as theirs:
        their_id = (await theirs.post("/Patient", json=patient(m))).json()["id"]
        # Invisible to this tenant: no match.
        r = await client.patch("/Patient", params=criteria(m), json={"active": True})
        assert r.status_code == 404
        assert (await client.delete("/Patient", params=criteria(m))).status_code == 204
        # This tenant's own match is the one match (theirs does not make it two).
        mine = (await client.post("/Patient", json=patient(m))).json()["id"]
        patched = await client.patch("/Patient", params=criteria(m), json={"active": True})
        assert patched.status_code == 200 and patched.json()["id"] == mine
        assert (await client.delete("/Patient", params=criteria(m))).status_code == 204
        theirs_now = (await theirs.get(f"/Patient/{their_id}")).json()
        assert theirs_now["meta"]["versionId"] == "1" and "active" not in theirs_now


async def test_conditional_patch_and_delete_in_a_run_view(tenant: TenantHandle) -> None:
    """A run's view sees the tenant's shared data and its own resources, never another
    run's; writes through it are the run's (tagged, in its trace)."""
    first, second = await asyncio.gather(start(tenant), start(tenant))
    m = mrn()
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as client:
        one, two = first["fhirBase"], second["fhirBase"]
        mine = (await client.post(f"{one}/Patient", json=patient(m))).json()["id"]
        # The second run does not see the first run's Patient.
        r = await client.patch(f"{two}/Patient", params=criteria(m), json={"active": True})
        assert r.status_code == 404, r.text
        assert (await client.delete(f"{two}/Patient", params=criteria(m))).status_code == 204
        assert (await client.get(f"{one}/Patient/{mine}")).status_code == 200
        # The second run's own Patient with the same identifier is its one match.
        theirs = (await client.post(f"{two}/Patient", json=patient(m))).json()["id"]
        patched = await client.patch(f"{two}/Patient", params=criteria(m), json={"active": True})
        assert patched.status_code == 200 and patched.json()["id"] == theirs
        tags = patched.json()["meta"]["tag"]
        assert {"system": "urn:understudy:source", "code": "test-run"} in tags
        # The first run deletes its own, and only its own.
        assert (await client.delete(f"{one}/Patient", params=criteria(m))).status_code == 204
        assert (await client.get(f"{one}/Patient/{mine}")).status_code == 410
        assert (await client.get(f"{two}/Patient/{theirs}")).status_code == 200
    async with api(tenant) as testing:
        deadline = time.monotonic() + 10
        while True:
            calls = (await testing.get(f"/runs/{first['id']}/trace")).json()["calls"]
            deletes = [c for c in calls if c["method"] == "DELETE" and c["status"] == 204]
            if deletes or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    assert any(c["path"].endswith("/fhir/r4/Patient") for c in deletes), calls


async def test_conditional_writes_emit_the_plain_events(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        hook = await client.post(
            "/api/webhooks",
            json={
                "url": "http://127.0.0.1:9/hook",
                "events": ["Patient.updated", "Patient.deleted"],
            },
        )
        assert hook.status_code == 201, hook.text
        m = mrn()
        base = "/api/fhir/r4"
        made = (await client.post(f"{base}/Patient", json=patient(m))).json()
        assert (
            await client.patch(f"{base}/Patient", params=criteria(m), json={"active": True})
        ).status_code == 200
        # A patch that changes nothing: no version, no event.
        same = await client.patch(f"{base}/Patient", params=criteria(m), json={"active": True})
        assert same.status_code == 200 and same.json()["meta"]["versionId"] == "2"
        assert (await client.delete(f"{base}/Patient", params=criteria(m))).status_code == 204
        deadline = time.monotonic() + 10
        while True:
            found = (await client.get(f"/api/webhooks/{hook.json()['id']}/deliveries")).json()
            types = sorted(d["event"] for d in found["deliveries"])
            if len(types) >= 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    assert types == ["Patient.deleted", "Patient.updated"], found
    assert made["id"]


def _entry(method: str, url: str, resource: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"request": {"method": method, "url": url}}
    if resource is not None:
        out["resource"] = resource
    return out


def _fhirpath_replace(path: str, **value: Any) -> dict[str, Any]:
    return {
        "resourceType": "Parameters",
        "parameter": [
            {
                "name": "operation",
                "part": [
                    {"name": "type", "valueCode": "replace"},
                    {"name": "path", "valueString": path},
                    {"name": "value", **value},
                ],
            }
        ],
    }


async def test_conditional_entries_in_a_transaction(client: httpx.AsyncClient) -> None:
    a, b, c, d = mrn(), mrn(), mrn(), mrn()
    pa = (await client.post("/Patient", json=patient(a, gender="male"))).json()["id"]
    pb = (await client.post("/Patient", json=patient(b))).json()["id"]
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            _entry(
                "PATCH",
                f"Patient?identifier={SYSTEM}|{a}",
                _fhirpath_replace("Patient.gender", valueCode="female"),
            ),
            _entry("DELETE", f"Patient?identifier={SYSTEM}|{b}"),
            _entry("DELETE", f"Patient?identifier={SYSTEM}|{c}"),  # no match: nothing
            _entry("PUT", f"Patient?identifier={SYSTEM}|{d}", patient(d, active=True)),
        ],
    }
    r = await client.post("", json=bundle)
    assert r.status_code == 200, r.text
    entries = r.json()["entry"]
    assert entries[0]["response"]["status"] == "200 OK"
    assert entries[0]["resource"]["id"] == pa and entries[0]["resource"]["gender"] == "female"
    assert entries[1]["response"]["status"] == "204 No Content"
    assert entries[2]["response"]["status"] == "204 No Content"
    assert entries[3]["response"]["status"] == "201 Created"
    created = entries[3]["resource"]["id"]
    assert (await client.get(f"/Patient/{pb}")).status_code == 410
    assert (await client.get(f"/Patient/{created}")).json()["active"] is True
    # Several matches fail the whole transaction with a 412 naming the entry.
    await client.post("/Patient", json=patient(a))
    failing = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            _entry("POST", "Patient", patient(mrn())),
            _entry("DELETE", f"Patient?identifier={SYSTEM}|{a}"),
        ],
    }
    r = await client.post("", json=failing)
    assert r.status_code == 412, r.text
    assert "entry[1]" in r.json()["issue"][0]["diagnostics"]
    # A conditional patch of nothing is a 404 for the transaction.
    missing = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            _entry(
                "PATCH",
                f"Patient?identifier={SYSTEM}|{mrn()}",
                _fhirpath_replace("Patient.gender", valueCode="male"),
            )
        ],
    }
    assert (await client.post("", json=missing)).status_code == 404
    # Neither an id nor criteria.
    bare = {"resourceType": "Bundle", "type": "transaction", "entry": [_entry("DELETE", "Patient")]}
    assert (await client.post("", json=bare)).status_code == 400


async def test_conditional_entries_in_a_batch(client: httpx.AsyncClient) -> None:
    a, b = mrn(), mrn()
    pa = (await client.post("/Patient", json=patient(a))).json()["id"]
    await client.post("/Patient", json=patient(b))
    await client.post("/Patient", json=patient(b))
    bundle = {
        "resourceType": "Bundle",
        "type": "batch",
        "entry": [
            _entry(
                "PATCH",
                f"Patient?identifier={SYSTEM}|{a}",
                _fhirpath_replace("Patient.name[0].family", valueString="Batched"),
            ),
            _entry("DELETE", f"Patient?identifier={SYSTEM}|{b}"),  # two: 412
            _entry("PUT", f"Patient?identifier={SYSTEM}|{a}", patient(a, active=False)),
            _entry(
                "PATCH",
                f"Patient?identifier={SYSTEM}|{mrn()}",
                [{"op": "add", "path": "/active", "value": True}],
            ),
        ],
    }
    r = await client.post("", json=bundle)
    assert r.status_code == 200, r.text
    entries = r.json()["entry"]
    assert entries[0]["response"]["status"] == "200 OK"
    assert entries[0]["resource"]["name"][0]["family"] == "Batched"
    assert entries[1]["response"]["status"] == "412"
    assert entries[2]["response"]["status"] == "200 OK"
    assert entries[2]["resource"]["id"] == pa and entries[2]["resource"]["active"] is False
    assert entries[3]["response"]["status"] == "404"
