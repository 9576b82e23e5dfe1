"""Odd and hostile requests get a clear 4xx OperationOutcome, never a 500."""

from __future__ import annotations

import httpx
import pytest

JSON = {"Content-Type": "application/fhir+json"}
PATCH = {"Content-Type": "application/json-patch+json"}

CASES: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("GET", "/Patient?_count=99999999999999999999999", None, {}),
    ("GET", "/Patient?_count=-1", None, {}),
    ("GET", "/Patient?_sort=", None, {}),
    ("GET", "/Patient?_sort=nonsense", None, {}),
    ("GET", "/Patient?_include=Patient:nonsense", None, {}),
    ("GET", "/Patient?_include=garbage", None, {}),
    ("GET", "/Patient?_revinclude=Appointment:patient:Nope", None, {}),
    ("GET", "/Patient?birthdate=notadate", None, {}),
    ("GET", "/Patient?birthdate=ge", None, {}),
    ("GET", "/Patient?birthdate=2024-02-30", None, {}),
    ("GET", "/Patient?_lastUpdated=", None, {}),
    ("GET", "/Patient?family=", None, {}),
    ("GET", "/Patient?family:contains=x", None, {}),
    ("GET", "/Patient?general-practitioner=http://", None, {}),
    ("GET", "/Patient?_summary=text", None, {}),
    ("GET", "/Patient?_after=%00", None, {}),
    ("GET", "/Patient?_offset=abc", None, {}),
    ("GET", "/Patient/" + "x" * 500, None, {}),
    ("GET", "/Patient/abc/_history/notanumber", None, {}),
    ("GET", "/Patient/%00", None, {}),
    ("GET", "/Patient/%00/_history/1", None, {}),
    ("GET", "/Patient/%00/_history", None, {}),
    ("DELETE", "/Patient/%00", None, {}),
    ("PATCH", "/Patient/%00", b"[]", PATCH),
    ("GET", "/Patient?_id=%00", None, {}),
    ("POST", "/Patient", b'{"resourceType": "Patient", "name": [{"family": "a\\u0000"}]}', JSON),
    ("GET", "/Patient/abc/_history?_since=yesterday", None, {}),
    ("GET", "/Patient/_history?_count=zz", None, {}),
    ("PUT", "/Patient/" + "x" * 100, b'{"resourceType": "Patient"}', JSON),
    ("PUT", "/Patient/abc", b"[]", JSON),
    ("PUT", "/Patient/abc", b'"just a string"', JSON),
    ("PUT", "/Patient/abc", b'{"resourceType": "Patient"}', {**JSON, "If-Match": "garbage"}),
    ("POST", "/Patient", b"", JSON),
    ("POST", "/Patient", b"null", JSON),
    ("POST", "/Patient", b'{"resourceType": "Patient", "name": "not a list"}', JSON),
    ("POST", "/Patient", b'{"resourceType": "Patient", "id": 5, "meta": "x"}', JSON),
    ("POST", "/Patient", b'{"resourceType": "Patient", "contained": [{"resourceType": 3}]}', JSON),
    ("POST", "/Patient", b"\xff\xfe not utf8", JSON),
    ("POST", "/Patient", b'{"resourceType": "Patient"}', {"Content-Type": "text/html"}),
    ("POST", "/Patient?identifier=", b'{"resourceType": "Patient"}', JSON),
    ("PATCH", "/Patient/missing", b"[]", PATCH),
    ("PATCH", "/Patient/{pid}", b'{"op": "nope"}', PATCH),
    ("PATCH", "/Patient/{pid}", b'[{"op": "nope"}]', PATCH),
    ("PATCH", "/Patient/{pid}", b'[{"op": "remove", "path": "/nothing/here"}]', PATCH),
    ("PATCH", "/Patient/{pid}", b'[{"op": "replace", "path": "/id", "value": "other"}]', PATCH),
    ("PATCH", "/Patient/{pid}", b'"x"', {"Content-Type": "application/merge-patch+json"}),
    ("DELETE", "/Nope/abc", None, {}),
    ("POST", "", b'{"resourceType": "Bundle", "type": "transaction", "entry": "x"}', JSON),
    ("POST", "", b'{"resourceType": "Bundle", "type": "transaction", "entry": [1]}', JSON),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "transaction", "entry": '
        b'[{"request": {"method": "PUT", "url": "Patient"}, "resource": {}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "batch", "entry": '
        b'[{"request": {"method": "GET", "url": "Patient?bogus=1"}}]}',
        JSON,
    ),
    # A NUL inside a bundle entry's URL or If-None-Exist is data in the JSON body, out of
    # the edge check's sight (it sees the query and path of the request itself).
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "transaction", "entry": '
        b'[{"request": {"method": "GET", "url": "Patient?name=%00"}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "transaction", "entry": '
        b'[{"request": {"method": "GET", "url": "Patient/%00"}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "transaction", "entry": [{"request": '
        b'{"method": "POST", "url": "Patient", "ifNoneExist": "identifier=%00"}, '
        b'"resource": {"resourceType": "Patient"}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "transaction", "entry": [{"request": '
        b'{"method": "PUT", "url": "Patient?identifier=%00"}, '
        b'"resource": {"resourceType": "Patient"}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "batch", "entry": '
        b'[{"request": {"method": "GET", "url": "Patient?name=%00"}}]}',
        JSON,
    ),
    (
        "POST",
        "",
        b'{"resourceType": "Bundle", "type": "batch", "entry": [{"request": '
        b'{"method": "POST", "url": "Patient", "ifNoneExist": "identifier=%00"}, '
        b'"resource": {"resourceType": "Patient"}}]}',
        JSON,
    ),
    ("GET", "/Appointment/$find?practitioner=Practitioner/x&start=garbage", None, {}),
    ("GET", "/Appointment/$find?practitioner=Practitioner/x&duration=abc", None, {}),
    ("POST", "/Appointment/$find", b"[1, 2]", JSON),
]


@pytest.mark.parametrize(("method", "path", "body", "headers"), CASES)
async def test_no_server_errors(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
) -> None:
    created = await client.post("/Patient", json={"resourceType": "Patient"})
    path = path.replace("{pid}", created.json()["id"])
    response = await client.request(method, path, content=body, headers=headers)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        outcome = response.json()
        assert outcome["resourceType"] == "OperationOutcome"
        assert outcome["issue"][0]["diagnostics"]
    elif "batch" in (body or b"").decode(errors="replace"):
        entry = response.json()["entry"][0]
        assert entry["response"]["status"].startswith("4")


async def test_eligibility_bad_bodies(client: httpx.AsyncClient, tenant_server: str) -> None:
    url = f"{tenant_server}/api/eligibility/$check"
    for body in (
        b"",
        b"not json",
        b"[]",
        b'{"patient": 5, "date": "x"}',
        b'{"date": "2025-01-01"}',
    ):
        r = await client.post(url, content=body, headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (body, r.text)
        problem = r.json()
        assert problem.get("errors") or problem.get("detail")
