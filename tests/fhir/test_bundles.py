"""Transaction and batch Bundles (`POST /`) over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

CHEN = "Practitioner/demo-canonical-prac-chen"


def _next_weekday() -> str:
    """The first weekday after today: Dr. Chen has free Slots on it (the scheduling rules
    refuse bookings off her free time)."""
    day = datetime.now(UTC).date() + timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return day.isoformat()


DAY = _next_weekday()
MRN = "http://hospital.example.org/mrn"


def patient(family: str, *, mrn: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Patient",
        "name": [{"family": family, "given": ["Test"]}],
        **extra,
    }
    if mrn is not None:
        body["identifier"] = [{"system": MRN, "value": mrn}]
    return body


def appointment(
    patient_ref: str, start: str = f"{DAY}T09:00:00Z", status: str = "booked"
) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": start,
        "end": start.replace(":00:00Z", ":30:00Z"),
        "participant": [
            {"actor": {"reference": patient_ref}, "status": "accepted"},
            {"actor": {"reference": CHEN}, "status": "accepted"},
        ],
    }


def task(patient_ref: str, focus_ref: str) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "description": "Call the patient to confirm the visit",
        "for": {"reference": patient_ref},
        "focus": {"reference": focus_ref},
        "owner": {"reference": CHEN},
    }


def entry(
    method: str, url: str, resource: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    item: dict[str, Any] = {"request": {"method": method, "url": url}}
    if resource is not None:
        item["resource"] = resource
    full_url = extra.pop("full_url", None)
    if full_url is not None:
        item["fullUrl"] = full_url
    item["request"].update(extra)
    return item


def bundle(kind: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


async def post_bundle(client: httpx.AsyncClient, body: Any) -> httpx.Response:
    return await client.post("", json=body, headers={"Content-Type": "application/fhir+json"})


async def count(client: httpx.AsyncClient, resource_type: str, **params: str) -> int:
    r = await client.get(f"/{resource_type}", params={**params, "_summary": "count"})
    assert r.status_code == 200, r.text
    total: int = r.json()["total"]
    return total


def location_id(item: dict[str, Any], resource_type: str) -> str:
    location = item["response"]["location"]
    parts = location.split("/")
    # [base/]Type/id/_history/vid
    assert parts[-4] == resource_type, location
    assert parts[-2] == "_history", location
    return str(parts[-3])


# --- transaction ----------------------------------------------------------------------


async def test_transaction_resolves_urn_uuid_references(client: httpx.AsyncClient) -> None:
    p_urn = "urn:uuid:7f0e4c3a-8a53-4c1e-9d6b-2f0a1b2c3d4e"
    a_urn = "urn:uuid:0b9d6a52-1f7e-4c5b-8a3d-9e8f7a6b5c4d"
    body = bundle(
        "transaction",
        # The Task comes first: every entry may refer to every other, whatever the order.
        entry("POST", "Task", task(p_urn, a_urn)),
        entry("POST", "Patient", patient("Okafor", mrn="TX-1"), full_url=p_urn),
        entry("POST", "Appointment", appointment(p_urn), full_url=a_urn),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["resourceType"] == "Bundle"
    assert out["type"] == "transaction-response"
    assert len(out["entry"]) == 3
    for item in out["entry"]:
        assert item["response"]["status"].startswith("201")
        assert item["response"]["etag"] == 'W/"1"'
    task_id = location_id(out["entry"][0], "Task")
    pid = location_id(out["entry"][1], "Patient")
    aid = location_id(out["entry"][2], "Appointment")

    # The stored resources carry the real references, and are found by them.
    stored_task = (await client.get(f"/Task/{task_id}")).json()
    assert stored_task["for"]["reference"] == f"Patient/{pid}"
    assert stored_task["focus"]["reference"] == f"Appointment/{aid}"
    assert stored_task["owner"]["reference"] == CHEN
    stored_appt = (await client.get(f"/Appointment/{aid}")).json()
    actors = [p["actor"]["reference"] for p in stored_appt["participant"]]
    assert actors == [f"Patient/{pid}", CHEN]
    assert (await client.get(f"/Patient/{pid}")).json()["name"][0]["family"] == "Okafor"
    assert "urn:uuid" not in (await client.get(f"/Task/{task_id}")).text

    found = await client.get("/Appointment", params={"patient": pid})
    assert [e["resource"]["id"] for e in found.json()["entry"]] == [aid]
    found = await client.get("/Task", params={"patient": f"Patient/{pid}", "focus": aid})
    assert [e["resource"]["id"] for e in found.json()["entry"]] == [task_id]

    # The response entries carry the stored resources (ids assigned, references rewritten).
    returned = out["entry"][0]["resource"]
    assert returned["id"] == task_id
    assert returned["for"]["reference"] == f"Patient/{pid}"


async def test_transaction_put_delete_get(client: httpx.AsyncClient) -> None:
    assert (
        await client.put("/Patient/tx-old", json={**patient("Old"), "id": "tx-old"})
    ).status_code == 201
    assert (
        await client.put("/Patient/tx-existing", json={**patient("Before"), "id": "tx-existing"})
    ).status_code == 201
    body = bundle(
        "transaction",
        entry("GET", "Patient/tx-new"),  # GETs run last: they see the bundle's writes
        entry("PUT", "Patient/tx-new", {**patient("Newman"), "id": "tx-new"}),
        entry("PUT", "Patient/tx-existing", {**patient("After"), "id": "tx-existing"}),
        entry("DELETE", "Patient/tx-old"),
        entry("GET", "Patient?family=newman"),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["type"] == "transaction-response"
    get_new, put_new, put_existing, delete_old, search = out["entry"]

    assert get_new["response"]["status"].startswith("200")
    assert get_new["resource"]["name"][0]["family"] == "Newman"
    assert put_new["response"]["status"].startswith("201")
    assert location_id(put_new, "Patient") == "tx-new"
    assert put_existing["response"]["status"].startswith("200")
    assert put_existing["response"]["etag"] == 'W/"2"'
    assert delete_old["response"]["status"][:3] in ("200", "204")
    assert search["response"]["status"].startswith("200")
    assert search["resource"]["type"] == "searchset"
    assert [e["resource"]["id"] for e in search["resource"]["entry"]] == ["tx-new"]

    assert (await client.get("/Patient/tx-new")).status_code == 200
    existing = (await client.get("/Patient/tx-existing")).json()
    assert existing["name"][0]["family"] == "After"
    assert existing["meta"]["versionId"] == "2"
    assert (await client.get("/Patient/tx-old")).status_code == 410


async def test_transaction_put_then_patch_of_one_resource(client: httpx.AsyncClient) -> None:
    """The PATCH sees the PUT before it in the same transaction (two versions, both kept)."""
    r = await client.put("/Patient/tx-twice", json={**patient("Once"), "id": "tx-twice"})
    assert r.status_code == 201, r.text
    body = bundle(
        "transaction",
        {
            "request": {"method": "PATCH", "url": "Patient/tx-twice"},
            "resource": [{"op": "add", "path": "/gender", "value": "female"}],
        },
        entry("PUT", "Patient/tx-twice", {**patient("Twice"), "id": "tx-twice"}),
        entry("GET", "Patient/tx-twice"),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    patched, put, read = r.json()["entry"]
    assert put["response"]["etag"] == 'W/"2"'
    assert patched["response"]["etag"] == 'W/"3"'
    assert (read["resource"]["name"][0]["family"], read["resource"]["gender"]) == (
        "Twice",
        "female",
    )
    history = (await client.get("/Patient/tx-twice/_history")).json()
    assert history["total"] == 3


async def _nothing_changed(client: httpx.AsyncClient) -> None:
    """The state `_seed_for_atomicity` left: one Patient `keep`, no Appointment or Task."""
    assert await count(client, "Patient") == 1
    kept = await client.get("/Patient/keep")
    assert kept.status_code == 200
    assert kept.json()["meta"]["versionId"] == "1"
    assert kept.json()["name"][0]["family"] == "Keeper"
    assert await count(client, "Appointment") == 0
    assert await count(client, "Task") == 0
    assert (await client.get("/Patient/tx-put")).status_code == 404


async def _seed_for_atomicity(client: httpx.AsyncClient) -> None:
    r = await client.put("/Patient/keep", json={**patient("Keeper"), "id": "keep"})
    assert r.status_code == 201


P_URN = "urn:uuid:5d1f3f59-3a0c-4b39-9f5b-3c9b2d7f0e11"


@pytest.mark.parametrize(
    ("bad", "status"),
    [
        # An invalid resource (a bad code)…
        (
            entry("POST", "Task", {**task(P_URN, "Patient/keep"), "status": "sort-of-done"}),
            400,
        ),
        # …one with no resourceType match…
        (entry("POST", "Task", patient("Mismatch")), 400),
        # …an unknown type…
        (entry("POST", "Frobnicator", {"resourceType": "Frobnicator"}), 404),
        # …a GET of something that is not there (GETs run after every write)…
        (entry("GET", "Patient/no-such-patient"), 404),
        # …a stale ifMatch…
        (
            entry("PUT", "Task/t-1", {**task(P_URN, "Patient/keep"), "id": "t-1"}, ifMatch='W/"7"'),
            412,
        ),
    ],
)
async def test_transaction_is_all_or_nothing(
    client: httpx.AsyncClient, bad: dict[str, Any], status: int
) -> None:
    await _seed_for_atomicity(client)
    good = [
        entry("POST", "Patient", patient("Alpha"), full_url=P_URN),
        entry("POST", "Appointment", appointment(P_URN)),
        entry("PUT", "Patient/tx-put", {**patient("Putnam"), "id": "tx-put"}),
        entry("DELETE", "Patient/keep"),
    ]
    body = bundle("transaction", good[0], good[1], good[2], bad, good[3])
    r = await post_bundle(client, body)
    assert r.status_code == status, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    issue = outcome["issue"][0]
    assert issue["severity"] == "error"
    assert issue["expression"][0].startswith("Bundle.entry[3]"), issue
    assert "entry[3]" in issue["diagnostics"]
    await _nothing_changed(client)


async def test_transaction_invalid_entry_names_the_element(client: httpx.AsyncClient) -> None:
    body = bundle(
        "transaction",
        entry("POST", "Patient", patient("Fine")),
        entry("POST", "Patient", patient("Wrong", gender="robot")),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 400
    expressions = [e for i in r.json()["issue"] for e in i.get("expression", [])]
    assert any(e.startswith("Bundle.entry[1]") and "gender" in e for e in expressions), expressions
    assert await count(client, "Patient") == 0


async def test_transaction_unresolved_urn_uuid(client: httpx.AsyncClient) -> None:
    body = bundle(
        "transaction",
        entry(
            "POST",
            "Patient",
            patient("Present"),
            full_url="urn:uuid:11111111-1111-1111-1111-111111111111",
        ),
        entry("POST", "Appointment", appointment("urn:uuid:22222222-2222-2222-2222-222222222222")),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 400, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert "urn:uuid:22222222-2222-2222-2222-222222222222" in outcome["issue"][0]["diagnostics"]
    assert outcome["issue"][0]["expression"][0].startswith("Bundle.entry[1]")
    assert await count(client, "Patient") == 0
    assert await count(client, "Appointment") == 0


async def test_the_same_if_none_exist_twice_in_a_transaction_is_one_resource(
    client: httpx.AsyncClient,
) -> None:
    first_urn = "urn:uuid:bbbbbbbb-0000-4000-8000-000000000001"
    second_urn = "urn:uuid:bbbbbbbb-0000-4000-8000-000000000002"
    body = bundle(
        "transaction",
        entry(
            "POST",
            "Patient",
            patient("Once", mrn="MRN-99"),
            full_url=first_urn,
            ifNoneExist=f"identifier={MRN}|MRN-99",
        ),
        entry(
            "POST",
            "Patient",
            patient("Once", mrn="MRN-99"),
            full_url=second_urn,
            ifNoneExist=f"Patient?identifier={MRN}|MRN-99",  # the same condition, spelled out
        ),
        entry("POST", "Appointment", appointment(second_urn, f"{DAY}T11:00:00Z", "proposed")),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    made, again, appt = r.json()["entry"]
    assert made["response"]["status"].startswith("201")
    assert again["response"]["status"].startswith("200")
    assert location_id(made, "Patient") == location_id(again, "Patient")
    found = await client.get("/Patient", params={"identifier": f"{MRN}|MRN-99"})
    assert found.json()["total"] == 1
    booked = (await client.get(f"/Appointment/{location_id(appt, 'Appointment')}")).json()
    patients = [p["actor"]["reference"] for p in booked["participant"] if "actor" in p]
    assert f"Patient/{location_id(made, 'Patient')}" in patients


async def test_transaction_if_none_exist(client: httpx.AsyncClient) -> None:
    existing = await client.post("/Patient", json=patient("Existing", mrn="MRN-77"))
    existing_id = existing.json()["id"]
    known_urn = "urn:uuid:aaaaaaaa-0000-4000-8000-000000000001"
    new_urn = "urn:uuid:aaaaaaaa-0000-4000-8000-000000000002"
    body = bundle(
        "transaction",
        entry(
            "POST",
            "Patient",
            patient("Duplicate", mrn="MRN-77"),
            full_url=known_urn,
            ifNoneExist=f"identifier={MRN}|MRN-77",
        ),
        entry(
            "POST",
            "Patient",
            patient("Fresh", mrn="MRN-78"),
            full_url=new_urn,
            ifNoneExist=f"identifier={MRN}|MRN-78",
        ),
        # Proposed: posting the Bundle twice (below) would double-book booked ones.
        entry("POST", "Appointment", appointment(known_urn, f"{DAY}T09:00:00Z", "proposed")),
        entry("POST", "Appointment", appointment(new_urn, f"{DAY}T10:00:00Z", "proposed")),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    known, fresh, appt_known, appt_fresh = r.json()["entry"]
    assert known["response"]["status"].startswith("200")  # matched: nothing created
    assert location_id(known, "Patient") == existing_id
    assert fresh["response"]["status"].startswith("201")
    fresh_id = location_id(fresh, "Patient")
    assert fresh_id != existing_id

    assert await count(client, "Patient") == 2
    stored = (await client.get(f"/Patient/{existing_id}")).json()
    assert stored["name"][0]["family"] == "Existing"  # not overwritten
    assert stored["meta"]["versionId"] == "1"
    a1 = (await client.get(f"/Appointment/{location_id(appt_known, 'Appointment')}")).json()
    assert a1["participant"][0]["actor"]["reference"] == f"Patient/{existing_id}"
    a2 = (await client.get(f"/Appointment/{location_id(appt_fresh, 'Appointment')}")).json()
    assert a2["participant"][0]["actor"]["reference"] == f"Patient/{fresh_id}"

    # Posting the same bundle again creates nothing new.
    again = await post_bundle(client, body)
    assert again.status_code == 200, again.text
    assert [e["response"]["status"][:3] for e in again.json()["entry"]] == [
        "200",
        "200",
        "201",
        "201",
    ]
    assert await count(client, "Patient") == 2


# --- batch ----------------------------------------------------------------------------


async def test_batch_mixes_good_and_bad_entries(client: httpx.AsyncClient) -> None:
    assert (
        await client.put("/Patient/b-old", json={**patient("Old"), "id": "b-old"})
    ).status_code == 201
    body = bundle(
        "batch",
        entry("POST", "Patient", patient("Good")),
        entry("POST", "Patient", patient("Bad", gender="robot")),
        entry("GET", "Patient/does-not-exist"),
        entry("PUT", "Patient/b-put", {**patient("Putnam"), "id": "b-put"}),
        entry("POST", "Frobnicator", {"resourceType": "Frobnicator"}),
        entry("DELETE", "Patient/b-old"),
        entry("GET", "Patient/b-put"),
        entry("GET", "Patient?family=good"),
        entry("PUT", "Patient/b-put", {**patient("Putnam"), "id": "other-id"}),
        entry("GET", "Patient?bogus=1"),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["resourceType"] == "Bundle"
    assert out["type"] == "batch-response"
    statuses = [e["response"]["status"][:3] for e in out["entry"]]
    assert statuses[0] == "201"
    assert statuses[1] == "400"
    assert statuses[2] == "404"
    assert statuses[3] == "201"
    assert statuses[4] == "404"
    assert statuses[5] in ("200", "204")
    assert statuses[6] == "200"
    assert statuses[7] == "200"
    assert statuses[8] == "400"
    assert statuses[9] == "400"
    assert len(statuses) == 10

    for index in (1, 2, 4, 8, 9):
        outcome = out["entry"][index]["response"]["outcome"]
        assert outcome["resourceType"] == "OperationOutcome"
        assert outcome["issue"][0]["severity"] == "error"
        assert outcome["issue"][0]["diagnostics"]
        assert "resource" not in out["entry"][index]
    gender_issue = out["entry"][1]["response"]["outcome"]["issue"]
    assert any("gender" in e for i in gender_issue for e in i.get("expression", []))

    good_id = location_id(out["entry"][0], "Patient")
    assert (await client.get(f"/Patient/{good_id}")).status_code == 200
    assert out["entry"][6]["resource"]["name"][0]["family"] == "Putnam"
    assert [e["resource"]["id"] for e in out["entry"][7]["resource"]["entry"]] == [good_id]
    assert (await client.get("/Patient/b-put")).json()["meta"]["versionId"] == "1"
    assert (await client.get("/Patient/b-old")).status_code == 410
    assert await count(client, "Patient", family="bad") == 0
    assert await count(client, "Patient") == 2  # Good and b-put


async def test_batch_entries_may_not_refer_to_each_other(client: httpx.AsyncClient) -> None:
    """R4 3.1.0.11.1: in a batch, a reference to another entry's fullUrl is non-conformant
    (servers SHOULD check). The referring entry fails on its own; nothing dangling is stored."""
    urn = "urn:uuid:bbbbbbbb-0000-4000-8000-000000000001"
    body = bundle(
        "batch",
        entry("POST", "Patient", patient("Solo"), full_url=urn),
        entry("POST", "Appointment", appointment(urn)),
    )
    r = await post_bundle(client, body)
    assert r.status_code == 200, r.text
    first, second = r.json()["entry"]
    assert first["response"]["status"].startswith("201")
    assert second["response"]["status"][:1] == "4", second
    assert second["response"]["outcome"]["resourceType"] == "OperationOutcome"
    assert await count(client, "Patient") == 1
    appts = (await client.get("/Appointment")).json()
    assert "urn:uuid" not in str(appts.get("entry", []))


# --- malformed bundles ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (patient("NotABundle"), "Bundle"),
        ({"resourceType": "Bundle", "type": "searchset", "entry": []}, "Bundle.type"),
        ({"resourceType": "Bundle", "type": "collection", "entry": []}, "Bundle.type"),
        ({"resourceType": "Bundle", "entry": []}, "type"),
        (
            bundle("transaction", {"resource": patient("NoRequest")}),
            "Bundle.entry[0].request",
        ),
        (
            bundle("batch", entry("POST", "Patient", patient("Fine")), {"resource": patient("X")}),
            "Bundle.entry[1].request",
        ),
        (bundle("transaction", entry("FETCH", "Patient", patient("X"))), "method"),
        (bundle("transaction", {"request": {"method": "POST"}, "resource": patient("X")}), "url"),
        (bundle("transaction", entry("POST", "Patient")), "resource"),
        (bundle("transaction", entry("DELETE", "Patient")), "Bundle.entry[0]"),
        ({"resourceType": "Bundle", "type": "transaction", "entry": {"oops": 1}}, "entry"),
        ([1, 2, 3], "Bundle"),
    ],
)
async def test_malformed_bundles(client: httpx.AsyncClient, body: Any, mentions: str) -> None:
    r = await post_bundle(client, body)
    assert r.status_code == 400, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    text = " ".join(
        [i.get("diagnostics", "") for i in outcome["issue"]]
        + [e for i in outcome["issue"] for e in i.get("expression", [])]
    )
    assert mentions in text, outcome
    assert await count(client, "Patient") == 0


async def test_bundle_body_that_is_not_json(client: httpx.AsyncClient) -> None:
    r = await client.post("", content=b"{nope", headers={"Content-Type": "application/fhir+json"})
    assert r.status_code == 400
    assert r.json()["resourceType"] == "OperationOutcome"


async def test_bundle_needs_a_key(tenant_server: str) -> None:
    async with httpx.AsyncClient(base_url=tenant_server) as anon:
        r = await anon.post(
            "/api/fhir/r4", json=bundle("batch", entry("POST", "Patient", patient("X")))
        )
        assert r.status_code == 401
