"""CRUD, versioning and error handling over real HTTP."""

from __future__ import annotations

import httpx

PATIENT = {
    "resourceType": "Patient",
    "name": [{"family": "Rivera", "given": ["Alex"]}],
    "gender": "female",
    "birthDate": "1985-04-12",
}


async def test_create_read_update_delete(client: httpx.AsyncClient) -> None:
    created = await client.post("/Patient", json=PATIENT)
    assert created.status_code == 201, created.text
    body = created.json()
    pid = body["id"]
    assert body["meta"]["versionId"] == "1"
    assert created.headers["etag"] == 'W/"1"'
    assert created.headers["location"].endswith(f"/Patient/{pid}/_history/1")

    read = await client.get(f"/Patient/{pid}")
    assert read.status_code == 200
    assert read.headers["content-type"].startswith("application/fhir+json")
    assert read.json()["name"][0]["family"] == "Rivera"

    updated = await client.put(
        f"/Patient/{pid}",
        json={**PATIENT, "id": pid, "gender": "other"},
        headers={"If-Match": 'W/"1"'},
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["meta"]["versionId"] == "2"

    stale = await client.put(
        f"/Patient/{pid}", json={**PATIENT, "id": pid}, headers={"If-Match": 'W/"1"'}
    )
    assert stale.status_code == 412
    assert stale.json()["resourceType"] == "OperationOutcome"

    v1 = await client.get(f"/Patient/{pid}/_history/1")
    assert v1.json()["gender"] == "female"
    hist = await client.get(f"/Patient/{pid}/_history")
    assert hist.json()["type"] == "history"
    assert hist.json()["total"] == 2

    deleted = await client.delete(f"/Patient/{pid}")
    assert deleted.status_code == 204
    gone = await client.get(f"/Patient/{pid}")
    assert gone.status_code == 410
    hist = await client.get(f"/Patient/{pid}/_history")
    assert hist.json()["total"] == 3
    assert hist.json()["entry"][0]["request"]["method"] == "DELETE"


async def test_update_creates_with_client_id(client: httpx.AsyncClient) -> None:
    r = await client.put("/Patient/my-own-id.1", json={**PATIENT, "id": "my-own-id.1"})
    assert r.status_code == 201
    assert (await client.get("/Patient/my-own-id.1")).status_code == 200


async def test_decimal_scale_is_kept(client: httpx.AsyncClient) -> None:
    obs = {
        "resourceType": "Observation",
        "status": "final",
        "code": {"text": "Potassium"},
        "valueQuantity": {"value": 4.50, "unit": "mmol/L"},
    }
    raw = httpx.Request("POST", "x", json=obs).content.replace(b"4.5", b"4.50")
    created = await client.post(
        "/Observation", content=raw, headers={"Content-Type": "application/fhir+json"}
    )
    assert created.status_code == 201, created.text
    read = await client.get(f"/Observation/{created.json()['id']}")
    assert b"4.50" in read.content


async def test_patch_json_patch_and_merge(client: httpx.AsyncClient) -> None:
    pid = (await client.post("/Patient", json=PATIENT)).json()["id"]
    r = await client.patch(
        f"/Patient/{pid}",
        content=b'[{"op": "replace", "path": "/gender", "value": "male"}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["gender"] == "male"
    r = await client.patch(
        f"/Patient/{pid}",
        json={"birthDate": "1990-01-01"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200
    assert r.json()["birthDate"] == "1990-01-01"
    assert r.json()["meta"]["versionId"] == "3"
    bad = await client.patch(
        f"/Patient/{pid}",
        json={"gender": "robot"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert bad.status_code == 400
    assert bad.json()["issue"][0]["expression"] == ["Patient.gender"]


async def test_a_write_that_changes_nothing_makes_no_version(client: httpx.AsyncClient) -> None:
    made = (await client.post("/Patient", json=PATIENT)).json()
    pid = made["id"]
    again = await client.put(f"/Patient/{pid}", json=made)  # what was read, sent back
    assert again.status_code == 200, again.text
    assert again.json()["meta"] == made["meta"]
    assert again.headers["etag"] == 'W/"1"'
    same = await client.patch(
        f"/Patient/{pid}",
        json={"gender": made.get("gender")} if made.get("gender") else {"id": pid},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert same.status_code == 200 and same.json()["meta"]["versionId"] == "1"
    history = (await client.get(f"/Patient/{pid}/_history")).json()
    assert history["total"] == 1
    changed = await client.put(f"/Patient/{pid}", json={**made, "birthDate": "1970-01-01"})
    assert changed.json()["meta"]["versionId"] == "2"


async def test_a_patch_in_no_patch_format_is_415_naming_the_formats(
    client: httpx.AsyncClient,
) -> None:
    pid = (await client.post("/Patient", json=PATIENT)).json()["id"]
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        r = await client.patch(
            f"/Patient/{pid}", content=b'{"gender": "male"}', headers={"Content-Type": content_type}
        )
        assert r.status_code == 415, (content_type, r.text)
        text = r.json()["issue"][0]["diagnostics"]
        assert "application/json-patch+json" in text and "application/merge-patch+json" in text
        assert "application/fhir+json" in text and "FHIRPath Patch" in text
    fhirpath_patch = {
        "resourceType": "Parameters",
        "parameter": [{"name": "operation", "part": [{"name": "type", "valueCode": "delete"}]}],
    }
    # A FHIRPath Patch comes as FHIR JSON; sent as a merge patch it is refused.
    r = await client.patch(
        f"/Patient/{pid}",
        json=fhirpath_patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 415 and "FHIRPath Patch" in r.json()["issue"][0]["diagnostics"]
    # Nothing was written by the refused patches.
    assert (await client.get(f"/Patient/{pid}")).json()["meta"]["versionId"] == "1"


async def test_errors_are_operation_outcomes(client: httpx.AsyncClient) -> None:
    cases = [
        (
            await client.post(
                "/Patient", content=b"{not json", headers={"Content-Type": "application/fhir+json"}
            ),
            400,
        ),
        (
            await client.post(
                "/Patient", json={"resourceType": "Patient", "birthDate": "1990-13-45"}
            ),
            400,
        ),
        (await client.post("/Patient", json={"resourceType": "Observation"}), 400),
        (await client.post("/Frobnicator", json={"resourceType": "Frobnicator"}), 404),
        (await client.get("/Patient/does-not-exist"), 404),
        (await client.put("/Patient/abc", json={**PATIENT, "id": "xyz"}), 400),
        (await client.put("/Patient/bad id!", json={**PATIENT}), 400),
        (await client.get("/Patient?bogus=1"), 400),
        (
            await client.post(
                "/Patient",
                content=b"{" + b" " * (1024 * 1024 + 10) + b"}",
                headers={"Content-Type": "application/fhir+json"},
            ),
            413,
        ),
        (
            await client.post(
                "/Patient", content=b"<Patient/>", headers={"Content-Type": "application/xml"}
            ),
            415,
        ),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        outcome = response.json()
        assert outcome["resourceType"] == "OperationOutcome"
        assert outcome["issue"][0]["diagnostics"]


async def test_invalid_resource_names_element(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/Appointment",
        json={
            "resourceType": "Appointment",
            "status": "bogus",
            "participant": [
                {
                    "actor": {"reference": "Practitioner/demo-canonical-prac-chen"},
                    "status": "accepted",
                }
            ],
        },
    )
    assert r.status_code == 400
    assert ["Appointment.status"] in [i.get("expression") for i in r.json()["issue"]]


async def test_lenient_search_ignores_unknown(client: httpx.AsyncClient) -> None:
    r = await client.get("/Patient?bogus=1", headers={"Prefer": "handling=lenient"})
    assert r.status_code == 200


async def test_auth_required(tenant_server: str) -> None:
    async with httpx.AsyncClient(base_url=tenant_server) as anon:
        assert (await anon.get("/api/fhir/r4/Patient")).status_code == 401
        assert (
            await anon.get("/api/fhir/r4/Patient", headers={"Authorization": "Bearer nope"})
        ).status_code == 401
        assert (await anon.get("/api/fhir/r4/metadata")).status_code == 200
        assert (await anon.get("/health")).status_code == 200
        assert (await anon.get("/openapi.json")).status_code == 200
        r = await anon.post("/api/eligibility/$check", json={})
        assert r.status_code == 401
