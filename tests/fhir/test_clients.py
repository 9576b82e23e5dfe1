"""Real FHIR clients, used unchanged, against the running server.

fhirpy (async, aiohttp), fhirclient (sync, requests; run in a worker thread so the
test loop is never blocked) and plain httpx drive the same flows an agent would:
CRUD, merge-style patch, searches with date prefixes, sorting, counting, following
every page of 120+ results, conditional create and transaction Bundles whose entries
refer to each other by urn:uuid.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest
import requests
from fhirclient.client import FHIRClient
from fhirclient.models.bundle import Bundle as FCBundle
from fhirclient.models.patient import Patient as FCPatient
from fhirclient.server import FHIRNotFoundException
from fhirpy import AsyncFHIRClient
from fhirpy.base.exceptions import MultipleResourcesFound, ResourceNotFound

from tests.conftest import TenantHandle

# More than six default pages (20) and more than two pages of 50: enough to prove that
# paging walks every page and that nothing is repeated or lost at page boundaries.
MANY = 125
ID_SYSTEM = "urn:understudy:test:mrn"
ENCOUNTER_CLASS = {
    "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
    "code": "AMB",
}
LOINC_K = {"coding": [{"system": "http://loinc.org", "code": "2823-3"}], "text": "Potassium"}


def unique_family() -> str:
    # String search matches prefixes of words, so a random word keeps each test's set apart.
    return "Fam" + uuid.uuid4().hex[:10]


def birth_date(i: int) -> str:
    return (date(1940, 1, 1) + timedelta(days=173 * i)).isoformat()


def patient_json(family: str, i: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Patient",
        "name": [{"family": family, "given": [f"Given{i}"]}],
        "gender": "female" if i % 2 else "male",
        "birthDate": birth_date(i),
        **extra,
    }


async def seed_patients(client: httpx.AsyncClient, family: str, count: int) -> dict[str, str]:
    """`count` Patients of one family in a single transaction; returns id -> birthDate."""
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": patient_json(family, i), "request": {"method": "POST", "url": "Patient"}}
            for i in range(count)
        ],
    }
    r = await client.post("", json=bundle)
    assert r.status_code == 200, r.text
    out: dict[str, str] = {}
    for i, entry in enumerate(r.json()["entry"]):
        assert entry["response"]["status"].startswith("201")
        out[entry["resource"]["id"]] = birth_date(i)
    assert len(out) == count
    return out


def fhirpy_client(tenant: TenantHandle) -> AsyncFHIRClient:
    return AsyncFHIRClient(tenant.fhir_base, authorization=f"Bearer {tenant.key}")


# --- fhirpy ----------------------------------------------------------------------------


async def test_fhirpy_conditional_update(tenant: TenantHandle) -> None:
    """`searchset.update(resource)` is a conditional update: PUT [type]?criteria; fhirpy
    answers (the resource, whether it was created)."""
    fp = fhirpy_client(tenant)
    family = unique_family()
    system, mrn = "urn:test:mrn", f"MRN-{family}"
    body = {**patient_json(family, 1), "identifier": [{"system": system, "value": mrn}]}
    matching = fp.resources("Patient").search(identifier=f"{system}|{mrn}")
    # No match: created.
    made, created = await matching.update(fp.resource("Patient", **body))
    assert created is True and made.id and made["meta"]["versionId"] == "1"
    # One match: that resource is updated (the body names no id).
    changed, created = await matching.update(fp.resource("Patient", **{**body, "gender": "other"}))
    assert created is False
    assert changed.id == made.id and changed["meta"]["versionId"] == "2"
    assert (await fp.reference("Patient", made.id).to_resource())["gender"] == "other"
    async with httpx.AsyncClient(base_url=tenant.fhir_base, headers=tenant.headers) as client:
        # Two matches: 412, as FHIR's conditional update says.
        other = {**body, "name": [{"family": family, "given": ["Twin"]}]}
        assert (await client.post("/Patient", json=other)).status_code == 201
        ambiguous = await client.put(
            "/Patient", params={"identifier": f"{system}|{mrn}"}, json=body
        )
        assert ambiguous.status_code == 412, ambiguous.text
        assert "conditional update" in ambiguous.json()["issue"][0]["diagnostics"]
        # No criteria: not a conditional update.
        bare = await client.put("/Patient", json=body)
        assert bare.status_code == 400
        capability = (await client.get("/metadata")).json()
        patient_entry = next(r for r in capability["rest"][0]["resource"] if r["type"] == "Patient")
        assert patient_entry["conditionalUpdate"] is True


async def test_fhirpy_conditional_patch_and_delete(tenant: TenantHandle) -> None:
    """`searchset.patch(**fields)` is a conditional patch (PATCH [type]?criteria, a merge
    patch sent as application/json) and `searchset.delete()` a conditional delete."""
    fp = fhirpy_client(tenant)
    family = unique_family()
    system, mrn = "urn:test:mrn", f"MRN-{family}"
    body = {**patient_json(family, 1), "identifier": [{"system": system, "value": mrn}]}
    matching = fp.resources("Patient").search(identifier=f"{system}|{mrn}")
    with pytest.raises(ResourceNotFound), pytest.warns(DeprecationWarning):  # no match: 404
        await matching.patch(active=True)
    made = fp.resource("Patient", **body)
    await made.save()
    with pytest.warns(DeprecationWarning):  # fhirpy warns on every searchset.patch()
        patched = await matching.patch(active=True, gender=None)
    assert patched.id == made.id and patched["active"] is True and "gender" not in patched
    assert patched["meta"]["versionId"] == "2"
    # Several matches: 412, which fhirpy raises as MultipleResourcesFound.
    twin = fp.resource("Patient", **{**body, "name": [{"family": family, "given": ["Twin"]}]})
    await twin.save()
    with pytest.raises(MultipleResourcesFound), pytest.warns(DeprecationWarning):
        await matching.patch(active=False)
    with pytest.raises(MultipleResourcesFound):
        await matching.delete()
    await twin.delete()  # type: ignore[no-untyped-call]
    _, status = await matching.delete()
    assert status == 204
    with pytest.raises(ResourceNotFound):
        await fp.reference("Patient", made.id).to_resource()
    _, status = await matching.delete()  # nothing left to match: still a success
    assert status == 204


async def test_fhirpy_crud_and_merge_patch(tenant: TenantHandle) -> None:
    fp = fhirpy_client(tenant)
    family = unique_family()
    patient = fp.resource("Patient", **patient_json(family, 1))
    await patient.save()
    pid = patient.id
    assert pid
    assert patient["meta"]["versionId"] == "1"

    read = await fp.reference("Patient", pid).to_resource()
    assert read["name"][0]["family"] == family
    assert read["birthDate"] == birth_date(1)
    assert (await fp.get("Patient", pid))["gender"] == "female"

    patient["gender"] = "other"
    await patient.save()  # PUT, since it has an id
    assert patient["meta"]["versionId"] == "2"
    assert (await fp.reference("Patient", pid).to_resource())["gender"] == "other"

    updated = fp.resource("Patient", **{**dict(read), "active": True})
    await updated.update()
    assert updated["meta"]["versionId"] == "3"
    assert updated["active"] is True

    # fhirpy's patch is a JSON merge patch sent as plain application/json.
    await patient.patch(birthDate="1990-01-01")
    assert patient["birthDate"] == "1990-01-01"
    assert patient["meta"]["versionId"] == "4"
    assert patient["active"] is True  # the merge kept what the patch did not mention
    patched = await fp.patch("Patient", pid, gender=None)  # null removes the element
    assert "gender" not in patched
    assert patched["meta"]["versionId"] == "5"
    assert "gender" not in await fp.reference("Patient", pid).to_resource()

    # refresh() sends If-None-Match with the bare version; it must end up current.
    stale = fp.resource("Patient", **dict(read))
    await stale.refresh()
    assert stale["meta"]["versionId"] == "5"
    assert stale["birthDate"] == "1990-01-01"

    await patient.delete()  # type: ignore[no-untyped-call]
    with pytest.raises(ResourceNotFound):
        await fp.reference("Patient", pid).to_resource()
    assert await fp.resources("Patient").search(_id=pid).fetch() == []
    with pytest.raises(ResourceNotFound):
        await fp.get("Patient", "no-such-patient")


async def test_fhirpy_search_prefixes_sort_limit_count(tenant: TenantHandle) -> None:
    fp = fhirpy_client(tenant)
    family = unique_family()
    born = {
        "a": "1950-06-01",
        "b": "1965-01-15",
        "c": "1970-05-01",
        "d": "1971-03-01",
        "e": "1985-12-31",
    }
    ids: dict[str, str] = {}
    for key, day in born.items():
        p = fp.resource(
            "Patient", name=[{"family": family, "given": [key]}], birthDate=day, gender="female"
        )
        await p.save()
        ids[key] = p.id
    other = fp.resource("Patient", name=[{"family": unique_family()}], birthDate="1970-05-01")
    await other.save()

    patients = fp.resources("Patient").search(family=family)
    assert {p.id for p in await patients.fetch()} == set(ids.values())
    # Prefix and case-insensitive, as FHIR string search is.
    assert len(await fp.resources("Patient").search(family=family[:-2].lower()).fetch()) == 5

    def keys(found: list[Any]) -> list[str]:
        by_id = {v: k for k, v in ids.items()}
        return [by_id[p.id] for p in found]

    assert keys(await patients.sort("birthdate").fetch()) == ["a", "b", "c", "d", "e"]
    assert keys(await patients.sort("-birthdate").fetch()) == ["e", "d", "c", "b", "a"]
    assert keys(await patients.sort("-birthdate").limit(2).fetch()) == ["e", "d"]
    first = await patients.sort("birthdate").first()
    assert first is not None and first.id == ids["a"]

    # fhirpy counts with _count=0&_totalMethod=count.
    assert await patients.count() == 5
    assert await fp.resources("Patient").search(family="Nobody" + family).count() == 0

    single = await patients.search(birthdate="1950-06-01").get()
    assert single.id == ids["a"]
    with pytest.raises(MultipleResourcesFound):
        await patients.get()
    with pytest.raises(ResourceNotFound):
        await patients.search(birthdate="1900").get()

    # Date prefixes (fhirpy's birthdate__ge=... style).
    assert sorted(keys(await patients.search(birthdate__ge="1970").fetch())) == ["c", "d", "e"]
    assert keys(await patients.search(birthdate__lt="1965-01-15").fetch()) == ["a"]
    assert keys(await patients.search(birthdate__le="1965-01-15").sort("birthdate").fetch()) == [
        "a",
        "b",
    ]
    assert keys(await patients.search(birthdate__gt="1970-05").sort("birthdate").fetch()) == [
        "d",
        "e",
    ]
    between = patients.search(birthdate__ge="1960", birthdate__lt="1971-03-01")
    assert sorted(keys(await between.fetch())) == ["b", "c"]
    assert keys(await patients.search(birthdate="1970-05-01").fetch()) == ["c"]
    assert keys(await patients.search(birthdate__ne="1970").sort("birthdate").fetch()) == [
        "a",
        "b",
        "d",
        "e",
    ]
    assert await patients.search(birthdate__ge="1970").count() == 3


async def test_fhirpy_fetch_all_pages(tenant: TenantHandle, client: httpx.AsyncClient) -> None:
    family = unique_family()
    seeded = await seed_patients(client, family, MANY)
    fp = fhirpy_client(tenant)
    patients = fp.resources("Patient").search(family=family)

    everything = await patients.fetch_all()  # default page size: 7 pages of keyset paging
    assert len(everything) == MANY
    assert {p.id for p in everything} == set(seeded)

    by_fifty = [p.id async for p in patients.limit(50)]
    assert sorted(by_fifty) == sorted(seeded)
    assert len(by_fifty) == MANY

    # With _sort the pages are offset-based; the order must hold across page boundaries.
    ordered = await patients.sort("-birthdate").limit(40).fetch_all()
    assert [p.id for p in ordered] == sorted(seeded, key=lambda i: seeded[i], reverse=True)

    assert await patients.count() == MANY
    half = await patients.search(birthdate__ge=birth_date(MANY // 2)).fetch_all()
    assert {p.id for p in half} == {i for i, d in seeded.items() if d >= birth_date(MANY // 2)}


async def test_fhirpy_conditional_create(tenant: TenantHandle) -> None:
    fp = fhirpy_client(tenant)
    family = unique_family()
    mrn = uuid.uuid4().hex
    identifier = [{"system": ID_SYSTEM, "value": mrn}]
    criteria = fp.resources("Patient").search(identifier=f"{ID_SYSTEM}|{mrn}")

    made, created = await criteria.get_or_create(
        fp.resource("Patient", **patient_json(family, 1, identifier=identifier))
    )
    assert created is True
    again, created_again = await criteria.get_or_create(
        fp.resource("Patient", **patient_json(family, 2, identifier=identifier))
    )
    assert created_again is False
    assert again.id == made.id
    assert again["birthDate"] == birth_date(1)  # the existing one, not the new body

    # resource.create(**search_params) is fhirpy's other spelling: POST /Patient?identifier=
    third = fp.resource("Patient", **patient_json(family, 3, identifier=identifier))
    await third.create(identifier=f"{ID_SYSTEM}|{mrn}")
    assert third.id == made.id
    assert await fp.resources("Patient").search(family=family).count() == 1

    other_mrn = uuid.uuid4().hex
    fresh = fp.resource(
        "Patient", **patient_json(family, 4, identifier=[{"system": ID_SYSTEM, "value": other_mrn}])
    )
    await fresh.create(identifier=f"{ID_SYSTEM}|{other_mrn}")
    assert fresh.id != made.id
    assert await fp.resources("Patient").search(family=family).count() == 2

    # Two matches: 412, which fhirpy raises as MultipleResourcesFound.
    await fp.resource("Patient", **patient_json(family, 5, identifier=identifier)).save()
    with pytest.raises(MultipleResourcesFound):
        await criteria.get_or_create(fp.resource("Patient", **patient_json(family, 6)))
    assert await fp.resources("Patient").search(family=family).count() == 3


def linked_transaction(family: str, mrn: str, value: float = 4.1) -> dict[str, Any]:
    """Patient, Encounter and Observation referring to each other by urn:uuid."""
    p_url, e_url, o_url = (f"urn:uuid:{uuid.uuid4()}" for _ in range(3))
    return {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": o_url,
                "resource": {
                    "resourceType": "Observation",
                    "status": "final",
                    "code": LOINC_K,
                    "subject": {"reference": p_url},
                    "encounter": {"reference": e_url},
                    "valueQuantity": {"value": value, "unit": "mmol/L"},
                },
                "request": {"method": "POST", "url": "Observation"},
            },
            {
                "fullUrl": e_url,
                "resource": {
                    "resourceType": "Encounter",
                    "status": "finished",
                    "class": ENCOUNTER_CLASS,
                    "subject": {"reference": p_url},
                    "participant": [
                        {"individual": {"reference": "Practitioner/demo-canonical-prac-chen"}}
                    ],
                },
                "request": {"method": "POST", "url": "Encounter"},
            },
            {
                "fullUrl": p_url,
                "resource": patient_json(
                    family, 7, identifier=[{"system": ID_SYSTEM, "value": mrn}]
                ),
                "request": {
                    "method": "POST",
                    "url": "Patient",
                    "ifNoneExist": f"identifier={ID_SYSTEM}|{mrn}",
                },
            },
        ],
    }


async def test_fhirpy_transaction_with_urn_uuid_references(tenant: TenantHandle) -> None:
    fp = fhirpy_client(tenant)
    family = unique_family()
    mrn = uuid.uuid4().hex
    response = await fp.execute("", method="post", data=linked_transaction(family, mrn))
    assert response["resourceType"] == "Bundle"
    assert response["type"] == "transaction-response"
    obs_entry, enc_entry, pat_entry = response["entry"]  # in request order
    for entry in response["entry"]:
        assert entry["response"]["status"].startswith("201")
    pid = pat_entry["resource"]["id"]
    eid = enc_entry["resource"]["id"]
    oid = obs_entry["resource"]["id"]
    assert pat_entry["response"]["location"].startswith(f"Patient/{pid}/_history/1")

    obs = await fp.reference("Observation", oid).to_resource()
    assert obs["subject"]["reference"] == f"Patient/{pid}"
    assert obs["encounter"]["reference"] == f"Encounter/{eid}"
    assert obs["valueQuantity"]["value"] == 4.1  # a decimal, as a client sends it
    enc = await fp.reference("Encounter", eid).to_resource()
    assert enc["subject"]["reference"] == f"Patient/{pid}"

    # The references are searchable and includable like any other.
    found = await fp.resources("Observation").search(subject=f"Patient/{pid}").fetch()
    assert [o.id for o in found] == [oid]
    raw = await (
        fp.resources("Observation")
        .search(patient=pid)
        .include("Observation", "subject")
        .fetch_raw()
    )
    modes = {(e.resource.resourceType, e.resource.id): e.search.mode for e in raw.entry}
    assert modes == {("Observation", oid): "match", ("Patient", pid): "include"}
    assert len(await fp.resources("Encounter").search(patient=f"Patient/{pid}").fetch()) == 1

    # Replayed: the conditional Patient entry matches instead of creating a second one.
    again = await fp.execute("", method="post", data=linked_transaction(family, mrn))
    assert again["entry"][2]["response"]["status"].startswith("200")
    assert again["entry"][2]["resource"]["id"] == pid
    second_obs = await fp.reference(
        "Observation", again["entry"][0]["resource"]["id"]
    ).to_resource()
    assert second_obs["subject"]["reference"] == f"Patient/{pid}"
    assert await fp.resources("Patient").search(family=family).count() == 1
    assert await fp.resources("Observation").search(subject=f"Patient/{pid}").count() == 2


# --- fhirclient (sync: run in a thread) ---------------------------------------------


def fhirclient_for(tenant: TenantHandle) -> FHIRClient:
    fc = FHIRClient(settings={"app_id": "understudy-tests", "api_base": tenant.fhir_base})
    fc.server.session.headers["Authorization"] = f"Bearer {tenant.key}"
    return fc


def _fhirclient_crud(tenant: TenantHandle) -> None:
    fc = fhirclient_for(tenant)
    # prepare() reads the CapabilityStatement (strictly parsed) and sets up "no auth".
    assert fc.prepare() is True
    capability = fc.server.capabilityStatement
    assert capability.fhirVersion == "4.0.1"
    assert capability.date is not None
    assert "Patient" in {r.type for r in capability.rest[0].resource}

    family = unique_family()
    created = FCPatient(patient_json(family, 3)).create(fc.server)
    assert created is not None
    pid = created["id"]
    assert created["meta"]["versionId"] == "1"

    patient = FCPatient.read(pid, fc.server)
    assert patient.id == pid
    assert patient.name[0].family == family
    assert patient.birthDate.isostring == birth_date(3)

    patient.gender = "other"
    patient.active = True
    updated = patient.update()
    assert updated is not None
    assert updated["meta"]["versionId"] == "2"
    again = FCPatient.read(pid, fc.server)
    assert again.gender == "other"
    assert again.active is True
    assert again.meta.versionId == "2"

    found = list(FCPatient.where(struct={"family": family}).perform_resources_iter(fc.server))
    assert [p.id for p in found] == [pid]
    assert isinstance(found[0], FCPatient)

    again.delete()
    with pytest.raises(requests.HTTPError) as gone:
        FCPatient.read(pid, fc.server)
    assert gone.value.response is not None
    assert gone.value.response.status_code == 410
    with pytest.raises(FHIRNotFoundException):
        FCPatient.read("no-such-patient", fc.server)
    assert list(FCPatient.where(struct={"family": family}).perform_resources_iter(fc.server)) == []


async def test_fhirclient_crud_and_search(tenant: TenantHandle) -> None:
    await asyncio.to_thread(_fhirclient_crud, tenant)


def _fhirclient_birthdate_prefixes(tenant: TenantHandle) -> None:
    fc = fhirclient_for(tenant)
    fc.prepare()
    family = unique_family()
    ids = {}
    for key, day in {
        "a": "1960-02-02",
        "b": "1970-05-01",
        "c": "1971-03-01",
        "d": "1985-07-07",
    }.items():
        body = {"resourceType": "Patient", "name": [{"family": family}], "birthDate": day}
        ids[FCPatient(body).create(fc.server)["id"]] = key

    def search(birthdate: Any) -> list[str]:
        # fhirclient turns {"$gt": "1970"} into `birthdate=>1970` (FHIR's comparator
        # characters), and plain strings into `birthdate=ge1970` style values as given.
        s = FCPatient.where(struct={"family": family, "birthdate": birthdate})
        return sorted(ids[p.id] for p in s.perform_resources_iter(fc.server))

    assert search("ge1970-05-01") == ["b", "c", "d"]
    assert search("lt1970") == ["a"]
    assert search("1970") == ["b"]
    assert search({"$gt": "1970"}) == ["c", "d"]
    assert search({"$lt": "1970"}) == ["a"]
    assert search({"$gte": "1970-05-01"}) == ["b", "c", "d"]
    assert search({"$lte": "1970"}) == ["a", "b"]
    assert search({"$gt": "1965", "$lt": "1980"}) == ["b", "c"]


async def test_fhirclient_birthdate_prefixes(tenant: TenantHandle) -> None:
    await asyncio.to_thread(_fhirclient_birthdate_prefixes, tenant)


def _fhirclient_paging(tenant: TenantHandle, seeded: dict[str, str], family: str) -> None:
    fc = fhirclient_for(tenant)
    fc.prepare()
    search = FCPatient.where(struct={"family": family, "_count": "50"})

    pages = list(search.perform_iter(fc.server))
    assert [len(b.entry or []) for b in pages] == [50, 50, MANY - 100]
    assert all(b.total == MANY for b in pages)
    page_ids = [e.resource.id for b in pages for e in b.entry]
    assert sorted(page_ids) == sorted(seeded)

    every = list(FCPatient.where(struct={"family": family}).perform_resources_iter(fc.server))
    assert len(every) == MANY
    assert {p.id for p in every} == set(seeded)

    # Following `next` by hand: the links are absolute and work with the same session.
    bundle = pages[0]
    walked: list[str] = []
    while True:
        walked += [e.resource.id for e in bundle.entry or []]
        nxt = [link.url for link in bundle.link or [] if link.relation == "next"]
        if not nxt:
            break
        assert nxt[0].startswith(tenant.fhir_base + "/Patient?")
        bundle = FCBundle.read_from(nxt[0], fc.server)
    assert walked == page_ids

    sorted_search = FCPatient.where(struct={"family": family, "_sort": "birthdate", "_count": "30"})
    in_order = [p.id for p in sorted_search.perform_resources_iter(fc.server)]
    assert in_order == sorted(seeded, key=lambda i: seeded[i])


async def test_fhirclient_follows_every_page(
    tenant: TenantHandle, client: httpx.AsyncClient
) -> None:
    family = unique_family()
    seeded = await seed_patients(client, family, MANY)
    await asyncio.to_thread(_fhirclient_paging, tenant, seeded, family)


def _fhirclient_transaction(tenant: TenantHandle, family: str, mrn: str) -> None:
    fc = fhirclient_for(tenant)
    fc.prepare()
    response = FCBundle(linked_transaction(family, mrn)).create(fc.server)
    assert response is not None
    assert response["type"] == "transaction-response"
    pid = response["entry"][2]["resource"]["id"]
    assert response["entry"][0]["resource"]["subject"]["reference"] == f"Patient/{pid}"


async def test_fhirclient_transaction(tenant: TenantHandle, client: httpx.AsyncClient) -> None:
    family = unique_family()
    await asyncio.to_thread(_fhirclient_transaction, tenant, family, uuid.uuid4().hex)
    pid = (await client.get("/Patient", params={"family": family})).json()["entry"][0]["resource"][
        "id"
    ]
    obs = (await client.get("/Observation", params={"subject": f"Patient/{pid}"})).json()
    assert obs["total"] == 1


# --- plain httpx ---------------------------------------------------------------------


async def test_httpx_search_flows(client: httpx.AsyncClient) -> None:
    family = unique_family()
    seeded = await seed_patients(client, family, 30)

    r = await client.get("/Patient", params={"family": family, "gender": "female"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == "searchset"
    assert body["total"] == 15
    assert all(e["resource"]["gender"] == "female" for e in body["entry"])
    assert all(e["search"]["mode"] == "match" for e in body["entry"])
    assert all(e["fullUrl"].endswith(f"/Patient/{e['resource']['id']}") for e in body["entry"])

    counted = await client.get(
        "/Patient", params={"family": family, "_count": "0", "_totalMethod": "count"}
    )
    assert counted.json()["total"] == 30
    assert "entry" not in counted.json()
    summary = await client.get("/Patient", params={"family": family, "_summary": "count"})
    assert summary.json()["total"] == 30
    assert "entry" not in summary.json()

    newest = await client.get(
        "/Patient", params={"family": family, "_sort": "-birthdate", "_count": "3"}
    )
    assert [e["resource"]["id"] for e in newest.json()["entry"]] == sorted(
        seeded, key=lambda i: seeded[i], reverse=True
    )[:3]

    # POST /Patient/_search with a form body is the same search as the GET.
    posted = await client.post(
        "/Patient/_search",
        data={"family": family, "gender": "female"},
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["total"] == 15
    assert [e["resource"]["id"] for e in posted.json()["entry"]] == [
        e["resource"]["id"] for e in body["entry"]
    ]
    # ... and its next link is a GET that carries the form's criteria.
    paged = await client.post("/Patient/_search", data={"family": family, "_count": "7"})
    assert paged.json()["total"] == 30
    nxt = next(link["url"] for link in paged.json()["link"] if link["relation"] == "next")
    assert parse_qs(urlsplit(nxt).query)["family"] == [family]
    second = await client.get(nxt)
    assert second.status_code == 200
    assert len(second.json()["entry"]) == 7
    first_ids = {e["resource"]["id"] for e in paged.json()["entry"]}
    assert first_ids.isdisjoint(e["resource"]["id"] for e in second.json()["entry"])

    elements = await client.get(
        "/Patient", params={"family": family, "_elements": "birthDate", "_count": "1"}
    )
    only = elements.json()["entry"][0]["resource"]
    assert "birthDate" in only and "name" not in only

    # Date prefixes, repeated parameters ANDed; by GET and by form POST.
    fifties = {i for i, d in seeded.items() if "1950" <= d < "1960"}
    assert fifties
    criteria: list[tuple[str, str | int | float | bool | None]] = [
        ("family", family),
        ("birthdate", "ge1950"),
        ("birthdate", "lt1960"),
    ]
    r = await client.get("/Patient", params=criteria)
    assert r.status_code == 200, r.text
    assert {e["resource"]["id"] for e in r.json()["entry"]} == fifties
    assert r.json()["total"] == len(fifties)
    form = {"family": family, "birthdate": ["ge1950", "lt1960"]}
    posted = await client.post("/Patient/_search", data=form)
    assert posted.status_code == 200, posted.text
    assert {e["resource"]["id"] for e in posted.json()["entry"]} == fifties
    since = await client.get("/Patient", params={"family": family, "_lastUpdated": "gt2000-01-01"})
    assert since.status_code == 200, since.text
    assert since.json()["total"] == 30


async def test_httpx_include_and_revinclude(client: httpx.AsyncClient) -> None:
    family = unique_family()
    r = await client.post("", json=linked_transaction(family, uuid.uuid4().hex, value=5))
    assert r.status_code == 200, r.text
    oid, eid, pid = (e["resource"]["id"] for e in r.json()["entry"])

    inc = await client.get(
        "/Observation",
        params=[
            ("_id", oid),
            ("_include", "Observation:subject"),
            ("_include", "Observation:encounter"),
        ],
    )
    assert inc.status_code == 200, inc.text
    modes = {
        (e["resource"]["resourceType"], e["resource"]["id"]): e["search"]["mode"]
        for e in inc.json()["entry"]
    }
    assert modes == {
        ("Observation", oid): "match",
        ("Patient", pid): "include",
        ("Encounter", eid): "include",
    }
    assert inc.json()["total"] == 1  # includes are not counted

    targeted = await client.get(
        "/Encounter",
        params={"_id": eid, "_include": "Encounter:participant:Practitioner"},
    )
    included = [e["resource"]["id"] for e in targeted.json()["entry"][1:]]
    assert included == ["demo-canonical-prac-chen"]

    rev = await client.get(
        "/Patient",
        params=[
            ("_id", pid),
            ("_revinclude", "Observation:subject"),
            ("_revinclude", "Encounter:subject"),
        ],
    )
    assert rev.status_code == 200, rev.text
    assert {(e["resource"]["resourceType"], e["search"]["mode"]) for e in rev.json()["entry"]} == {
        ("Patient", "match"),
        ("Observation", "include"),
        ("Encounter", "include"),
    }


async def walk_forward_and_back(
    client: httpx.AsyncClient, params: dict[str, str]
) -> list[list[str]]:
    """Follow `next` to the last page, then `previous` back to the first; both walks
    must see the same pages."""
    first = await client.get("/Patient", params=params)
    assert first.status_code == 200, first.text
    pages: list[list[str]] = []
    bundle = first.json()
    url: str | None = None
    while True:
        assert bundle["total"] == first.json()["total"]
        pages.append([e["resource"]["id"] for e in bundle["entry"]])
        links = {link["relation"]: link["url"] for link in bundle["link"]}
        assert links["self"].startswith("http")
        url = links.get("next")
        if url is None:
            break
        r = await client.get(url)
        assert r.status_code == 200, r.text
        bundle = r.json()

    # Back again from the last page with the `previous` links.
    back: list[list[str]] = [pages[-1]]
    while True:
        links = {link["relation"]: link["url"] for link in bundle["link"]}
        url = links.get("previous")
        if url is None:
            break
        r = await client.get(url)
        assert r.status_code == 200, r.text
        bundle = r.json()
        back.append([e["resource"]["id"] for e in bundle["entry"]])
    assert back[::-1] == pages
    return pages


async def test_httpx_paging_forward_and_back(client: httpx.AsyncClient) -> None:
    family = unique_family()
    seeded = await seed_patients(client, family, MANY)
    # Default order: keyset cursors (_after / _before).
    pages = await walk_forward_and_back(client, {"family": family, "_count": "50"})
    assert [len(p) for p in pages] == [50, 50, MANY - 100]
    assert sorted(i for p in pages for i in p) == sorted(seeded)
    # With _sort: offsets.
    pages = await walk_forward_and_back(
        client, {"family": family, "_count": "40", "_sort": "birthdate"}
    )
    assert [i for p in pages for i in p] == sorted(seeded, key=lambda i: seeded[i])


async def test_httpx_create_with_format_parameter_is_not_conditional(
    client: httpx.AsyncClient,
) -> None:
    # `_format` / `_pretty` are allowed on every interaction; they are not search criteria,
    # so POST /Patient?_format=json is a plain create every time.
    family = unique_family()
    made = set()
    for i, query in enumerate(("_format=json", "_format=json", "_pretty=true")):
        r = await client.post(f"/Patient?{query}", json=patient_json(family, i))
        assert r.status_code == 201, (query, r.status_code, r.text)
        made.add(r.json()["id"])
    assert len(made) == 3
    count = await client.get("/Patient", params={"family": family, "_summary": "count"})
    assert count.json()["total"] == 3


async def test_httpx_conditional_create_and_transaction(client: httpx.AsyncClient) -> None:
    family = unique_family()
    mrn = uuid.uuid4().hex
    body = patient_json(family, 1, identifier=[{"system": ID_SYSTEM, "value": mrn}])
    criteria = f"identifier={ID_SYSTEM}|{mrn}"
    made = await client.post("/Patient", json=body, headers={"If-None-Exist": criteria})
    assert made.status_code == 201, made.text
    pid = made.json()["id"]
    same = await client.post("/Patient", json=body, headers={"If-None-Exist": criteria})
    assert same.status_code == 200
    assert same.json()["id"] == pid
    # fhirpy's spelling: the criteria in the query string.
    again = await client.post("/Patient", params={"identifier": f"{ID_SYSTEM}|{mrn}"}, json=body)
    assert again.status_code == 200
    assert again.json()["id"] == pid

    tx = await client.post("", json=linked_transaction(family, mrn, value=5))
    assert tx.status_code == 200, tx.text
    entries = tx.json()["entry"]
    assert entries[2]["response"]["status"].startswith("200")  # matched, not created
    assert entries[2]["resource"]["id"] == pid
    obs = await client.get(f"/Observation/{entries[0]['resource']['id']}")
    assert obs.json()["subject"]["reference"] == f"Patient/{pid}"
    assert obs.json()["encounter"]["reference"] == f"Encounter/{entries[1]['resource']['id']}"
    count = await client.get("/Patient", params={"family": family, "_summary": "count"})
    assert count.json()["total"] == 1

    dup = await client.post("/Patient", json=body)  # unconditional: a second match exists
    assert dup.status_code == 201
    ambiguous = await client.post("/Patient", json=body, headers={"If-None-Exist": criteria})
    assert ambiguous.status_code == 412
    assert ambiguous.json()["resourceType"] == "OperationOutcome"

    # A transaction that fails part-way leaves nothing behind.
    broken = linked_transaction(family, uuid.uuid4().hex, value=5)
    broken["entry"][0]["resource"]["status"] = "not-a-status"
    failed = await client.post("", json=broken)
    assert failed.status_code == 400
    count = await client.get("/Patient", params={"family": family, "_summary": "count"})
    assert count.json()["total"] == 2


async def test_on_a_runs_base_fhirpy_conditional_update_and_a_fhirpath_patch(
    tenant: TenantHandle,
) -> None:
    """An agent pointed at a run's own FHIR base, with a client unchanged: fhirpy's
    conditional update of the run's patient and a FHIRPath Patch (Parameters) of it,
    both on the run's resources and counted as the run's changes."""
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        started = await client.post(
            "/api/testing/runs", json={"scenarioId": "scheduling.book-named-practitioner"}
        )
        assert started.status_code == 201, started.text
        run = started.json()
    base, patient_ref = run["fhirBase"], run["fixture"]["patient"]
    patient_id = patient_ref.split("/")[1]
    fp = AsyncFHIRClient(base, authorization=f"Bearer {tenant.key}")
    current = await fp.reference("Patient", patient_id).to_resource()
    matching = fp.resources("Patient").search(_id=patient_id)
    updated, created = await matching.update(
        fp.resource("Patient", **{**dict(current), "gender": "other"})
    )
    assert created is False and updated.id == patient_id
    patch = {
        "resourceType": "Parameters",
        "parameter": [
            {
                "name": "operation",
                "part": [
                    {"name": "type", "valueCode": "add"},
                    {"name": "path", "valueString": "Patient"},
                    {"name": "name", "valueString": "telecom"},
                    {
                        "name": "value",
                        "part": [
                            {"name": "system", "valueCode": "phone"},
                            {"name": "value", "valueString": "555-0142"},
                        ],
                    },
                ],
            },
            {
                "name": "operation",
                "part": [
                    {"name": "type", "valueCode": "replace"},
                    {"name": "path", "valueString": "Patient.gender"},
                    {"name": "value", "valueCode": "female"},
                ],
            },
        ],
    }
    async with httpx.AsyncClient(base_url=base, headers=tenant.headers) as fhir:
        patched = await fhir.patch(
            f"/Patient/{patient_id}",
            content=orjson.dumps(patch),
            headers={"Content-Type": "application/fhir+json"},
        )
        assert patched.status_code == 200, patched.text
        after = patched.json()
        assert after["gender"] == "female"
        assert {"system": "phone", "value": "555-0142"} in after["telecom"]
        assert int(after["meta"]["versionId"]) == int(updated["meta"]["versionId"]) + 1
        assert (await fhir.get(f"/Patient/{patient_id}")).json()["gender"] == "female"
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as client:
        calls = (await client.get(f"/api/testing/runs/{run['id']}/trace")).json()["calls"]
        methods = [(c["method"], c["status"]) for c in calls if "Patient" in c["path"]]
        assert ("PUT", 200) in methods and ("PATCH", 200) in methods, methods
        await client.post(f"/api/testing/runs/{run['id']}/cancel")
