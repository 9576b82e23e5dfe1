"""Tenant isolation: tenant B never sees, counts or changes tenant A's resources.

Ids are per tenant, so B writing "A's id" makes B's own resource and leaves A's alone.
Every interaction is tried from B against ids that exist only in A (404 for B), and
with the same id in both tenants (each sees only its own content).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.db import Database
from tests.conftest import TenantHandle, make_tenant

ID_SYSTEM = "urn:understudy:test:mrn"
CHEN = "Practitioner/demo-canonical-prac-chen"


@dataclass
class Pair:
    a: httpx.AsyncClient
    b: httpx.AsyncClient
    tenant_a: TenantHandle
    tenant_b: TenantHandle


@pytest.fixture
async def pair(tenant: TenantHandle, db: Database, server_url: str) -> AsyncIterator[Pair]:
    other = await make_tenant(db, server_url, prefix="b")
    async with (
        httpx.AsyncClient(base_url=tenant.fhir_base, headers=tenant.headers, timeout=30) as a,
        httpx.AsyncClient(base_url=other.fhir_base, headers=other.headers, timeout=30) as b,
    ):
        yield Pair(a, b, tenant, other)


def patient(family: str, mrn: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Patient",
        "name": [{"family": family, "given": ["Ada"]}],
        "gender": "female",
        "birthDate": "1980-02-03",
        **extra,
    }
    if mrn:
        body["identifier"] = [{"system": ID_SYSTEM, "value": mrn}]
    return body


def observation(subject: str) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4"}], "text": "Pulse"},
        "subject": {"reference": subject},
        "valueQuantity": {"value": 72, "unit": "/min"},
    }


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await client.post(f"/{body['resourceType']}", json=body)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


async def a_patient_with_history(pair: Pair) -> tuple[str, str, str]:
    """A's Patient at version 2 (family, mrn); returns (id, family, mrn)."""
    family, mrn = "Alpha" + uuid.uuid4().hex[:8], uuid.uuid4().hex
    pid = (await create(pair.a, patient(family, mrn)))["id"]
    r = await pair.a.put(
        f"/Patient/{pid}", json={**patient(family, mrn), "id": pid, "active": True}
    )
    assert r.status_code == 200, r.text
    return pid, family, mrn


async def assert_a_unchanged(pair: Pair, pid: str, family: str, version: str = "2") -> None:
    r = await pair.a.get(f"/Patient/{pid}")
    assert r.status_code == 200, r.text
    assert r.json()["name"][0]["family"] == family
    assert r.json()["meta"]["versionId"] == version
    hist = await pair.a.get(f"/Patient/{pid}/_history")
    assert hist.json()["total"] == int(version)


def ids_in(bundle: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (e["resource"]["resourceType"], e["resource"]["id"])
        for e in bundle.get("entry", [])
        if "resource" in e
    }


async def test_b_cannot_read_or_vread(pair: Pair) -> None:
    pid, _, _ = await a_patient_with_history(pair)
    oid = (await create(pair.a, observation(f"Patient/{pid}")))["id"]

    assert (await pair.b.get(f"/Patient/{pid}")).status_code == 404
    assert (await pair.b.get(f"/Observation/{oid}")).status_code == 404
    for version in ("1", "2"):
        r = await pair.b.get(f"/Patient/{pid}/_history/{version}")
        assert r.status_code == 404, r.text
        assert r.json()["resourceType"] == "OperationOutcome"
        assert "Alpha" not in r.text
    # A still reads its own, so the 404s are about the tenant, not the id.
    assert (await pair.a.get(f"/Patient/{pid}/_history/1")).status_code == 200


async def test_b_cannot_search_or_count(pair: Pair) -> None:
    pid, family, mrn = await a_patient_with_history(pair)
    oid = (await create(pair.a, observation(f"Patient/{pid}")))["id"]

    searches: list[dict[str, str]] = [
        {"family": family},
        {"name": family},
        {"identifier": f"{ID_SYSTEM}|{mrn}"},
        {"identifier": mrn},
        {"_id": pid},
        {"_id": f"{pid},not-there"},
        {"birthdate": "1980-02-03", "family": family},
        {"gender": "female", "family": family},
    ]
    for params in searches:
        mine = await pair.a.get("/Patient", params=params)
        assert mine.status_code == 200, (params, mine.text)
        assert pid in {i for _, i in ids_in(mine.json())}, params
        theirs = await pair.b.get("/Patient", params=params)
        assert theirs.status_code == 200, (params, theirs.text)
        assert theirs.json()["total"] == 0, params
        assert "entry" not in theirs.json()
        counted = await pair.b.get("/Patient", params={**params, "_summary": "count"})
        assert counted.json()["total"] == 0, params

    b_patients = await pair.b.get("/Patient", params={"_count": "0", "_totalMethod": "count"})
    assert b_patients.json()["total"] == 0  # B has written no Patient at all
    posted = await pair.b.post("/Patient/_search", data={"family": family})
    assert posted.json()["total"] == 0
    for params in (
        {"subject": f"Patient/{pid}"},
        {"patient": pid},
        {"_id": oid},
        {"code": "http://loinc.org|8867-4"},
    ):
        r = await pair.b.get("/Observation", params=params)
        assert r.status_code == 200, r.text
        assert r.json()["total"] == 0, params


async def test_history_shows_only_own_versions(pair: Pair) -> None:
    pid, _, _ = await a_patient_with_history(pair)
    b_pid = (await create(pair.b, patient("Beta")))["id"]

    instance = await pair.b.get(f"/Patient/{pid}/_history")
    assert instance.status_code == 404, instance.text

    for path in ("/Patient/_history", "/_history"):
        r = await pair.b.get(path, params={"_count": "500"})
        assert r.status_code == 200, r.text
        entries = r.json().get("entry", [])
        seen = {e["fullUrl"].rsplit("/", 1)[-1] for e in entries}
        assert pid not in seen, path
        assert b_pid in seen, path
        assert all("Alpha" not in str(e.get("resource", {})) for e in entries)
    b_type = await pair.b.get("/Patient/_history")
    assert b_type.json()["total"] == 1  # only B's one create
    a_type = await pair.a.get("/Patient/_history")
    assert a_type.json()["total"] == 2
    assert b_pid not in a_type.text

    since = await pair.b.get("/_history", params={"_since": "2000-01-01", "_count": "500"})
    assert pid not in since.text


async def test_b_update_of_a_id_creates_b_own(pair: Pair) -> None:
    pid, family, _ = await a_patient_with_history(pair)

    r = await pair.b.put(f"/Patient/{pid}", json={**patient("Beta"), "id": pid})
    assert r.status_code == 201, r.text  # created in B: ids are per tenant
    assert r.json()["meta"]["versionId"] == "1"
    assert r.json()["name"][0]["family"] == "Beta"

    await assert_a_unchanged(pair, pid, family)
    b_read = await pair.b.get(f"/Patient/{pid}")
    assert b_read.json()["name"][0]["family"] == "Beta"
    assert (await pair.b.get(f"/Patient/{pid}/_history")).json()["total"] == 1

    # An If-Match from A's version history means nothing in B.
    stale = await pair.b.put(
        f"/Patient/{pid}", json={**patient("Beta2"), "id": pid}, headers={"If-Match": 'W/"2"'}
    )
    assert stale.status_code == 412
    await assert_a_unchanged(pair, pid, family)

    # PATCH of an id only A has is a 404 in B.
    a_only, a_family, _ = await a_patient_with_history(pair)
    for content_type, doc in (
        ("application/json-patch+json", b'[{"op": "replace", "path": "/gender", "value": "male"}]'),
        ("application/merge-patch+json", b'{"gender": "male"}'),
        ("application/json", b'{"gender": "male"}'),  # fhirpy's spelling
    ):
        patched = await pair.b.patch(
            f"/Patient/{a_only}", content=doc, headers={"Content-Type": content_type}
        )
        assert patched.status_code == 404, (content_type, patched.text)
    await assert_a_unchanged(pair, a_only, a_family)
    assert (await pair.a.get(f"/Patient/{a_only}")).json()["gender"] == "female"


async def test_b_delete_does_not_touch_a(pair: Pair) -> None:
    pid, family, _ = await a_patient_with_history(pair)
    r = await pair.b.delete(f"/Patient/{pid}")
    assert r.status_code in (200, 204), r.text
    await assert_a_unchanged(pair, pid, family)
    assert (await pair.b.get(f"/Patient/{pid}")).status_code == 404
    # B's delete left no trace in A's history, nor a tombstone of A's resource in B.
    a_system = await pair.a.get("/_history", params={"_count": "500"})
    assert [e["request"]["method"] for e in a_system.json()["entry"] if pid in e["fullUrl"]] == [
        "PUT",
        "POST",
    ]


async def test_transaction_by_b_cannot_reach_a(pair: Pair) -> None:
    pid, family, mrn = await a_patient_with_history(pair)
    other, other_family, _ = await a_patient_with_history(pair)
    gone, gone_family, _ = await a_patient_with_history(pair)

    # PUT to A's id + a reference to it + DELETE of another A id + a conditional create
    # whose criteria match only in A.
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": {**patient("Beta"), "id": pid},
                "request": {"method": "PUT", "url": f"Patient/{pid}"},
            },
            {
                "resource": observation(f"Patient/{pid}"),
                "request": {"method": "POST", "url": "Observation"},
            },
            {"request": {"method": "DELETE", "url": f"Patient/{gone}"}},
            {
                "fullUrl": "urn:uuid:" + str(uuid.uuid4()),
                "resource": patient("BetaCond", mrn),
                "request": {
                    "method": "POST",
                    "url": "Patient",
                    "ifNoneExist": f"identifier={ID_SYSTEM}|{mrn}",
                },
            },
        ],
    }
    r = await pair.b.post("", json=bundle)
    assert r.status_code == 200, r.text
    put, post, delete, cond = r.json()["entry"]
    assert put["response"]["status"].startswith("201")
    assert post["response"]["status"].startswith("201")
    assert cond["response"]["status"].startswith("201")  # A's match is invisible to B
    assert cond["resource"]["id"] != pid
    assert delete["response"]["status"].startswith("204")

    await assert_a_unchanged(pair, pid, family)
    await assert_a_unchanged(pair, gone, gone_family)
    a_obs = await pair.a.get("/Observation", params={"subject": f"Patient/{pid}"})
    assert a_obs.json()["total"] == 0  # B's Observation points at B's Patient/{pid}
    b_obs = await pair.b.get("/Observation", params={"subject": f"Patient/{pid}"})
    assert b_obs.json()["total"] == 1
    a_cond = await pair.a.get("/Patient", params={"identifier": f"{ID_SYSTEM}|{mrn}"})
    assert ids_in(a_cond.json()) == {("Patient", pid)}

    # A transaction from B that reads or patches an A-only id fails as a whole.
    for entry in (
        {"request": {"method": "GET", "url": f"Patient/{other}"}},
        {
            "resource": [{"op": "replace", "path": "/gender", "value": "male"}],
            "request": {"method": "PATCH", "url": f"Patient/{other}"},
        },
    ):
        failing = {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {"resource": patient("BetaTx"), "request": {"method": "POST", "url": "Patient"}},
                entry,
            ],
        }
        r = await pair.b.post("", json=failing)
        assert r.status_code == 404, r.text
        assert other_family not in r.text
    await assert_a_unchanged(pair, other, other_family)
    assert (await pair.b.get("/Patient", params={"family": "BetaTx"})).json()["total"] == 0

    # In a batch, each such entry is its own 404 and nothing of A's leaks.
    batch = {
        "resourceType": "Bundle",
        "type": "batch",
        "entry": [
            {"request": {"method": "GET", "url": f"Patient/{other}"}},
            {"request": {"method": "GET", "url": f"Patient?family={other_family}"}},
            {
                "resource": [{"op": "replace", "path": "/gender", "value": "male"}],
                "request": {"method": "PATCH", "url": f"Patient/{other}"},
            },
            {"request": {"method": "DELETE", "url": f"Patient/{other}"}},
        ],
    }
    r = await pair.b.post("", json=batch)
    assert r.status_code == 200, r.text
    read, search, patch, _ = r.json()["entry"]
    assert read["response"]["status"].startswith("404")
    assert search["resource"]["total"] == 0
    assert "entry" not in search["resource"]
    assert patch["response"]["status"].startswith("404")
    await assert_a_unchanged(pair, other, other_family)


async def test_include_never_pulls_a_resources(pair: Pair) -> None:
    pid, family, _ = await a_patient_with_history(pair)
    a_obs = (await create(pair.a, observation(f"Patient/{pid}")))["id"]

    # B's Observation names A's patient id; B has no such Patient.
    b_obs = (await create(pair.b, observation(f"Patient/{pid}")))["id"]
    r = await pair.b.get("/Observation", params={"_id": b_obs, "_include": "Observation:subject"})
    assert r.status_code == 200, r.text
    assert ids_in(r.json()) == {("Observation", b_obs)}
    assert family not in r.text

    # Now B has a Patient with that id: the include is B's, not A's.
    made = await pair.b.put(f"/Patient/{pid}", json={**patient("Beta"), "id": pid})
    assert made.status_code == 201, made.text
    r = await pair.b.get(
        "/Observation", params={"_id": b_obs, "_include": "Observation:subject:Patient"}
    )
    assert ids_in(r.json()) == {("Observation", b_obs), ("Patient", pid)}
    included = next(e["resource"] for e in r.json()["entry"] if e["search"]["mode"] == "include")
    assert included["name"][0]["family"] == "Beta"

    # Reverse include from B's Patient must not bring A's Observation.
    rev = await pair.b.get("/Patient", params={"_id": pid, "_revinclude": "Observation:subject"})
    assert ids_in(rev.json()) == {("Patient", pid), ("Observation", b_obs)}
    assert a_obs not in rev.text
    a_rev = await pair.a.get("/Patient", params={"_id": pid, "_revinclude": "Observation:subject"})
    assert ids_in(a_rev.json()) == {("Patient", pid), ("Observation", a_obs)}


async def test_eligibility_is_per_tenant(pair: Pair) -> None:
    pid, _, _ = await a_patient_with_history(pair)
    coverage = {
        "resourceType": "Coverage",
        "status": "active",
        "beneficiary": {"reference": f"Patient/{pid}"},
        "payor": [{"display": "Acme Health"}],
        "period": {"start": "2000-01-01"},
    }
    cov_id = (await create(pair.a, coverage))["id"]
    today = datetime.now(UTC).date().isoformat()
    url = pair.tenant_a.server + "/api/eligibility/$check"

    async with httpx.AsyncClient(timeout=30) as raw:
        mine = await raw.post(
            url, json={"patient": pid, "date": today}, headers=pair.tenant_a.headers
        )
        assert mine.status_code == 200, mine.text
        assert mine.json()["eligible"] is True
        assert mine.json()["coverage"] == f"Coverage/{cov_id}"

        for who in (pid, f"Patient/{pid}"):
            theirs = await raw.post(
                url, json={"patient": who, "date": today}, headers=pair.tenant_b.headers
            )
            assert theirs.status_code == 404, theirs.text
            assert "Acme" not in theirs.text

        # B's own patient with the same id is not covered by A's Coverage.
        made = await pair.b.put(f"/Patient/{pid}", json={**patient("Beta"), "id": pid})
        assert made.status_code == 201, made.text
        theirs = await raw.post(
            url, json={"patient": pid, "date": today}, headers=pair.tenant_b.headers
        )
        assert theirs.status_code == 200, theirs.text
        assert theirs.json()["eligible"] is False
        assert theirs.json()["coverage"] is None


async def test_find_is_per_tenant(pair: Pair) -> None:
    # Tomorrow on: every canonical Slot in the window is in the future for the whole test.
    today = datetime.now(UTC).date()
    window = {
        "start": (today + timedelta(days=1)).isoformat(),
        "end": (today + timedelta(days=8)).isoformat(),
    }
    chen = {**window, "practitioner": CHEN}
    # A's own practitioner does not exist for B.
    prac = await create(pair.a, {"resourceType": "Practitioner", "name": [{"family": "OnlyInA"}]})
    assert (
        await pair.b.get("/Appointment/$find", params={"practitioner": prac["id"]})
    ).status_code == 404
    assert (
        await pair.a.get("/Appointment/$find", params={"practitioner": prac["id"]})
    ).status_code == 200

    # A books Dr. Chen's first free time; B's calendar for Dr. Chen is untouched.
    a_free = await pair.a.get("/Appointment/$find", params=chen)
    assert a_free.status_code == 200, a_free.text
    first = a_free.json()["entry"][0]["resource"]
    booked = {
        "resourceType": "Appointment",
        "status": "booked",
        "start": first["start"],
        "end": first["end"],
        "slot": first["slot"],
        "participant": [{"actor": {"reference": CHEN}, "status": "accepted"}],
    }
    await create(pair.a, booked)

    def starts(bundle: dict[str, Any]) -> list[str]:
        return [e["resource"]["start"] for e in bundle.get("entry", [])]

    after_a = await pair.a.get("/Appointment/$find", params=chen)
    assert first["start"] not in starts(after_a.json())
    b_free = await pair.b.get("/Appointment/$find", params=chen)
    assert b_free.status_code == 200, b_free.text
    assert first["start"] in starts(b_free.json())
    assert starts(b_free.json()) == starts(a_free.json())
    posted = await pair.b.post(
        "/Appointment/$find",
        json={
            "resourceType": "Parameters",
            "parameter": [
                {"name": "practitioner", "valueString": CHEN},
                {"name": "start", "valueDate": window["start"]},
                {"name": "end", "valueDate": window["end"]},
            ],
        },
    )
    assert first["start"] in starts(posted.json())
    assert starts(posted.json()) == starts(b_free.json())
    b_appts = await pair.b.get("/Appointment", params={"practitioner": CHEN})
    assert b_appts.json()["total"] == 0
    a_appts = await pair.a.get("/Appointment", params={"practitioner": CHEN})
    assert a_appts.json()["total"] == 1


async def test_same_id_in_both_tenants_is_independent(pair: Pair) -> None:
    shared = "shared-" + uuid.uuid4().hex[:12]
    ra = await pair.a.put(f"/Patient/{shared}", json={**patient("Alpha"), "id": shared})
    rb = await pair.b.put(
        f"/Patient/{shared}", json={**patient("Beta"), "id": shared, "gender": "male"}
    )
    assert ra.status_code == 201, ra.text
    assert rb.status_code == 201, rb.text  # not 200: B did not update A's resource

    a_read = (await pair.a.get(f"/Patient/{shared}")).json()
    b_read = (await pair.b.get(f"/Patient/{shared}")).json()
    assert (a_read["name"][0]["family"], a_read["gender"]) == ("Alpha", "female")
    assert (b_read["name"][0]["family"], b_read["gender"]) == ("Beta", "male")
    assert a_read["meta"]["versionId"] == b_read["meta"]["versionId"] == "1"

    up = await pair.a.put(
        f"/Patient/{shared}", json={**patient("Alpha"), "id": shared, "active": False}
    )
    assert up.json()["meta"]["versionId"] == "2"
    assert (await pair.b.get(f"/Patient/{shared}")).json()["meta"]["versionId"] == "1"
    assert (await pair.b.get(f"/Patient/{shared}/_history/2")).status_code == 404
    assert (await pair.b.get(f"/Patient/{shared}/_history")).json()["total"] == 1

    for client, family, other in ((pair.a, "Alpha", "Beta"), (pair.b, "Beta", "Alpha")):
        found = await client.get("/Patient", params={"_id": shared})
        assert found.json()["total"] == 1
        assert found.json()["entry"][0]["resource"]["name"][0]["family"] == family
        assert (await client.get("/Patient", params={"family": other})).json()["total"] == 0

    # Deleting in A leaves B's.
    assert (await pair.a.delete(f"/Patient/{shared}")).status_code in (200, 204)
    assert (await pair.a.get(f"/Patient/{shared}")).status_code == 410
    assert (await pair.b.get(f"/Patient/{shared}")).status_code == 200
    assert (await pair.b.get("/Patient", params={"_id": shared})).json()["total"] == 1


async def test_keys_are_not_interchangeable(pair: Pair) -> None:
    pid, _, _ = await a_patient_with_history(pair)
    # A key names its tenant; nothing in the URL or headers can point it at another one.
    async with httpx.AsyncClient(base_url=pair.tenant_a.fhir_base, timeout=30) as c:
        as_b = await c.get(f"/Patient/{pid}", headers=pair.tenant_b.headers)
        assert as_b.status_code == 404
        spoof = await c.get(
            f"/Patient/{pid}",
            headers={**pair.tenant_b.headers, "X-Tenant-Id": str(pair.tenant_a.id)},
        )
        assert spoof.status_code == 404
        assert (await c.get(f"/Patient/{pid}", headers=pair.tenant_a.headers)).status_code == 200


async def test_conditional_create_ignores_a_matches(pair: Pair) -> None:
    pid, family, mrn = await a_patient_with_history(pair)
    criteria = f"identifier={ID_SYSTEM}|{mrn}"
    r = await pair.b.post(
        "/Patient", json=patient("Beta", mrn), headers={"If-None-Exist": criteria}
    )
    assert r.status_code == 201, r.text  # not 200 with A's resource
    assert r.json()["id"] != pid
    assert family not in r.text
    # fhirpy's spelling, criteria in the query string.
    again = await pair.b.post(
        "/Patient", params={"identifier": f"{ID_SYSTEM}|{mrn}"}, json=patient("Beta", mrn)
    )
    assert again.status_code == 200, again.text
    assert again.json()["id"] == r.json()["id"]
    await assert_a_unchanged(pair, pid, family)
    a_matches = await pair.a.get("/Patient", params={"identifier": f"{ID_SYSTEM}|{mrn}"})
    assert ids_in(a_matches.json()) == {("Patient", pid)}


# --- run views --------------------------------------------------------------------------
#
# Runs of one tenant share its database; each run's view (`/api/testing/runs/{id}/fhir/r4`)
# hides the other runs' resources. A Bundle posted to run A's view must not reach run B's
# fixture by any entry method, in a transaction or a batch.

SCENARIO = "scheduling.book-named-practitioner"
FIXTURE_MRN = "https://riversidefamilyhealth.example/fhir/sid/mrn|RFH-204817"


@dataclass
class Runs:
    http: httpx.AsyncClient
    a_base: str
    b_base: str
    a_patient: str  # the id of run A's fixture Patient
    b_patient: str


async def start_run(tenant: TenantHandle) -> dict[str, Any]:
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    ) as api:
        r = await api.post("/runs", json={"scenarioId": SCENARIO})
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    return run


@pytest.fixture
async def runs(tenant: TenantHandle) -> AsyncIterator[Runs]:
    a, b = await start_run(tenant), await start_run(tenant)
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        yield Runs(
            http,
            a["fhirBase"],
            b["fhirBase"],
            a["fixture"]["patient"].split("/")[1],
            b["fixture"]["patient"].split("/")[1],
        )


async def b_patient_as_started(runs: Runs) -> dict[str, Any]:
    r = await runs.http.get(f"{runs.b_base}/Patient/{runs.b_patient}")
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    assert found["meta"]["versionId"] == "1"
    assert (found["name"][0]["family"], found["gender"]) == ("Rivera", "male")
    history = await runs.http.get(f"{runs.b_base}/Patient/{runs.b_patient}/_history")
    assert history.json()["total"] == 1
    return found


def run_entry(method: str, url: str, resource: Any = None, **request: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"request": {"method": method, "url": url, **request}}
    if resource is not None:
        item["resource"] = resource
    return item


def reaching_b(b_patient: str) -> list[tuple[str, dict[str, Any]]]:
    """An entry of each method that would read or change run B's fixture Patient."""
    ref = f"Patient/{b_patient}"
    return [
        ("read", run_entry("GET", ref)),
        ("update", run_entry("PUT", ref, {**patient("Overwritten"), "id": b_patient})),
        (
            "update-if-match",
            run_entry("PUT", ref, {**patient("Stale"), "id": b_patient}, ifMatch='W/"1"'),
        ),
        (
            "patch",
            run_entry("PATCH", ref, [{"op": "replace", "path": "/gender", "value": "female"}]),
        ),
        ("delete", run_entry("DELETE", ref)),
    ]


@pytest.mark.parametrize("kind", ["transaction", "batch"])
async def test_bundle_in_a_run_view_cannot_reach_another_run(runs: Runs, kind: str) -> None:
    before = await b_patient_as_started(runs)
    marker = "Marker" + uuid.uuid4().hex[:8]
    for name, bad in reaching_b(runs.b_patient):
        body = {
            "resourceType": "Bundle",
            "type": kind,
            "entry": [
                run_entry("POST", "Patient", patient(marker)),
                bad,
            ],
        }
        r = await runs.http.post(runs.a_base, json=body)
        if kind == "transaction":
            # B's Patient is not there for A: the whole transaction is a 404.
            assert r.status_code == 404, (name, r.text)
            assert r.json()["issue"][0]["expression"][0].startswith("Bundle.entry[1]"), name
        else:
            assert r.status_code == 200, (name, r.text)
            good, failed = r.json()["entry"]
            assert good["response"]["status"].startswith("201"), name
            assert failed["response"]["status"].startswith("404"), (name, failed)
            assert "resource" not in failed
        assert "Rivera" not in r.text, name
        assert await b_patient_as_started(runs) == before, name
    # A transaction that failed wrote nothing; each batch wrote its good entry.
    made = await runs.http.get(f"{runs.a_base}/Patient", params={"family": marker})
    assert made.json()["total"] == (0 if kind == "transaction" else 5)


@pytest.mark.parametrize("kind", ["transaction", "batch"])
async def test_bundle_search_and_conditional_create_see_one_run(runs: Runs, kind: str) -> None:
    before = await b_patient_as_started(runs)
    body = {
        "resourceType": "Bundle",
        "type": kind,
        "entry": [
            # Both runs' Patients carry the fixture's MRN: in A's view it matches only A's
            # (a 200 with A's, not a 412 for two matches, nor B's).
            run_entry(
                "POST", "Patient", patient("CondMrn"), ifNoneExist=f"identifier={FIXTURE_MRN}"
            ),
            # B's id matches nothing in A's view: this creates.
            run_entry("POST", "Patient", patient("CondId"), ifNoneExist=f"_id={runs.b_patient}"),
            run_entry("GET", f"Patient?_id={runs.b_patient}"),
            run_entry("GET", f"Patient?identifier={FIXTURE_MRN}"),
            run_entry("GET", f"Patient?_id={runs.b_patient},{runs.a_patient}&_summary=count"),
        ],
    }
    r = await runs.http.post(runs.a_base, json=body)
    assert r.status_code == 200, r.text
    by_mrn, by_id, search_b, search_mrn, count_both = r.json()["entry"]
    assert by_mrn["response"]["status"].startswith("200")
    assert by_mrn["response"]["location"].startswith(f"Patient/{runs.a_patient}/")
    assert by_id["response"]["status"].startswith("201")
    created = by_id["response"]["location"].split("/")[1]
    assert created not in (runs.a_patient, runs.b_patient)
    assert search_b["resource"]["total"] == 0
    assert "entry" not in search_b["resource"]
    assert ids_in(search_mrn["resource"]) == {("Patient", runs.a_patient)}
    assert count_both["resource"]["total"] == 1
    # (B's id is in the searchsets' self links, the criteria; never in a resource.)
    assert all(
        runs.b_patient not in str(e.get("resource", {}).get("entry", [])) for e in r.json()["entry"]
    )
    assert await b_patient_as_started(runs) == before


async def test_transaction_in_a_run_view_keeps_its_own_writes(runs: Runs) -> None:
    """The visibility check does not get in the way of a run changing its own fixture."""
    ref = f"Patient/{runs.a_patient}"
    body = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            run_entry(
                "PATCH",
                ref,
                [{"op": "replace", "path": "/telecom/0/value", "value": "+1-555-0199"}],
            ),
            run_entry("GET", ref),
        ],
    }
    r = await runs.http.post(runs.a_base, json=body)
    assert r.status_code == 200, r.text
    patched, read = r.json()["entry"]
    assert patched["response"]["etag"] == 'W/"2"'
    assert read["resource"]["telecom"][0]["value"] == "+1-555-0199"
    await b_patient_as_started(runs)
