"""Content negotiation on the FHIR API, over real HTTP: a client that parses a body only
when it says `application/json` (what low-code HTTP nodes do) gets that type when it asks
through Accept or `_format`, on every interaction and on errors; everyone else keeps
`application/fhir+json`; XML is 406."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.fhir.negotiation import FHIR_JSON_TYPE, JSON_TYPE, NotAcceptable, negotiate
from tests.conftest import TenantHandle

CHEN = "Practitioner/demo-canonical-prac-chen"


class NotJson(Exception):
    """The body came labelled as something other than application/json."""


async def _require_json(response: httpx.Response) -> None:
    await response.aread()
    if not response.content:
        return  # 204s and Prefer: return=minimal carry no body to parse
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != JSON_TYPE:
        raise NotJson(f"{response.request.method} {response.request.url} answered '{media}'")


def json_only(tenant: TenantHandle, accept: str | None = JSON_TYPE) -> httpx.AsyncClient:
    """An HTTP client that refuses any body not labelled application/json."""
    headers = dict(tenant.headers)
    if accept is not None:
        headers["Accept"] = accept
    return httpx.AsyncClient(
        base_url=tenant.fhir_base,
        headers=headers,
        timeout=30,
        event_hooks={"response": [_require_json]},
    )


@pytest.fixture
async def json_client(tenant: TenantHandle) -> AsyncIterator[httpx.AsyncClient]:
    async with json_only(tenant) as c:
        yield c


def media(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";")[0].strip()


def patient(family: str) -> dict[str, Any]:
    return {"resourceType": "Patient", "name": [{"family": family}]}


# --- the rule, as a table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "fmt", "expected"),
    [
        (None, None, FHIR_JSON_TYPE),
        ("", None, FHIR_JSON_TYPE),
        ("*/*", None, FHIR_JSON_TYPE),
        ("application/*", None, FHIR_JSON_TYPE),
        ("application/fhir+json", None, FHIR_JSON_TYPE),
        ("application/fhir+json; fhirVersion=4.0", None, FHIR_JSON_TYPE),
        ("application/json+fhir", None, FHIR_JSON_TYPE),
        ("application/json", None, JSON_TYPE),
        ("Application/JSON; charset=utf-8", None, JSON_TYPE),
        ("application/json, application/fhir+json", None, JSON_TYPE),
        ("application/fhir+json, application/json", None, FHIR_JSON_TYPE),
        ("application/json, */*", None, JSON_TYPE),
        ("application/json;q=0.5, application/fhir+json", None, FHIR_JSON_TYPE),
        ("application/fhir+json;q=0.4, application/json;q=0.9", None, JSON_TYPE),
        ("application/json;q=0.5, */*", None, FHIR_JSON_TYPE),  # the wildcard weighs 1
        ("application/fhir+json;q=0, */*", None, JSON_TYPE),
        ("application/fhir+xml, application/json;q=0.1", None, JSON_TYPE),
        # A browser: everything via */*; the default wins the tie.
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", None, FHIR_JSON_TYPE),
        # A low-code HTTP node's default Accept.
        (
            "application/json,text/html,application/xhtml+xml,application/xml,text/*;q=0.9, "
            "image/*;q=0.8, */*;q=0.7",
            None,
            JSON_TYPE,
        ),
        ("text/html", None, FHIR_JSON_TYPE),  # neither JSON nor XML: not refused
        ("text/html, application/xhtml+xml", None, FHIR_JSON_TYPE),
        (None, "json", JSON_TYPE),
        (None, "application/json", JSON_TYPE),
        (None, "JSON", JSON_TYPE),
        (None, "fhir+json", FHIR_JSON_TYPE),
        (None, "fhir json", FHIR_JSON_TYPE),  # '+' decoded as a space from a raw query
        (None, "application/fhir+json", FHIR_JSON_TYPE),
        (None, "", FHIR_JSON_TYPE),
        ("application/fhir+xml", "json", JSON_TYPE),  # _format wins over Accept
        ("application/json", "fhir+json", FHIR_JSON_TYPE),
        ("application/json", "", JSON_TYPE),
    ],
)
def test_the_negotiated_type(accept: str | None, fmt: str | None, expected: str) -> None:
    assert negotiate(accept, fmt) == expected


@pytest.mark.parametrize(
    ("accept", "fmt", "field"),
    [
        ("application/fhir+xml", None, "Accept"),
        ("application/xml", None, "Accept"),
        ("text/xml", None, "Accept"),
        ("application/xml, text/xml;q=0.5", None, "Accept"),
        ("application/json;q=0, application/fhir+xml", None, "Accept"),
        (None, "xml", "_format"),
        (None, "application/fhir+xml", "_format"),
        (None, "text/xml", "_format"),
        (None, "ttl", "_format"),
        ("application/json", "html", "_format"),
    ],
)
def test_xml_and_unknown_formats_are_refused(
    accept: str | None, fmt: str | None, field: str
) -> None:
    refused = negotiate(accept, fmt)
    assert isinstance(refused, NotAcceptable)
    assert refused.field == field
    assert "JSON only" in refused.message


# --- a JSON-only client through every interaction ----------------------------------------


async def test_a_json_only_client_reads_searches_writes_and_pages(
    json_client: httpx.AsyncClient,
) -> None:
    metadata = await json_client.get("/metadata")
    assert metadata.json()["resourceType"] == "CapabilityStatement"
    assert "application/json" in metadata.json()["format"]

    created = await json_client.post("/Patient", json=patient("Negotiated"))
    assert created.status_code == 201
    pid = created.json()["id"]
    await json_client.post("/Patient", json=patient("Negotiated"))
    read = await json_client.get(f"/Patient/{pid}")
    assert read.json()["name"][0]["family"] == "Negotiated"
    assert read.headers["etag"] == 'W/"1"'
    assert "accept" in read.headers["vary"].lower()

    updated = await json_client.put(f"/Patient/{pid}", json={**patient("Renamed"), "id": pid})
    assert updated.json()["meta"]["versionId"] == "2"
    patched = await json_client.patch(
        f"/Patient/{pid}",
        json=[{"op": "add", "path": "/gender", "value": "female"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert patched.json()["gender"] == "female"
    vread = await json_client.get(f"/Patient/{pid}/_history/1")
    assert vread.json()["name"][0]["family"] == "Negotiated"

    page = await json_client.get("/Patient", params={"family": "Negotiated,Renamed", "_count": "1"})
    assert page.json()["total"] == 2
    following = next(link["url"] for link in page.json()["link"] if link["relation"] == "next")
    second = await json_client.get(following)
    assert len(second.json()["entry"]) == 1
    assert second.json()["entry"][0]["resource"]["id"] != page.json()["entry"][0]["resource"]["id"]
    posted = await json_client.post(
        "/Patient/_search",
        content="family=Renamed",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.json()["total"] == 1

    history = await json_client.get(f"/Patient/{pid}/_history")
    assert [e["response"]["etag"] for e in history.json()["entry"]] == ['W/"3"', 'W/"2"', 'W/"1"']
    assert (await json_client.get("/Patient/_history")).json()["type"] == "history"
    assert (await json_client.get("/_history", params={"_count": "1"})).json()["total"] >= 4

    found = await json_client.get("/Appointment/$find", params={"practitioner": CHEN})
    assert found.json()["resourceType"] == "Bundle"

    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": patient("InBundle"), "request": {"method": "POST", "url": "Patient"}}
        ],
    }
    done = await json_client.post("", json=bundle)
    assert done.json()["type"] == "transaction-response"

    minimal = await json_client.post(
        "/Patient", json=patient("Quiet"), headers={"Prefer": "return=minimal"}
    )
    assert minimal.status_code == 201 and minimal.content == b""
    deleted = await json_client.delete(f"/Patient/{pid}")
    assert deleted.status_code == 204


async def test_errors_reach_a_json_only_client_as_operation_outcomes(
    json_client: httpx.AsyncClient, tenant: TenantHandle
) -> None:
    pid = (await json_client.post("/Patient", json=patient("Versioned"))).json()["id"]
    calls = [
        (404, await json_client.get("/Patient/does-not-exist")),
        (400, await json_client.get("/Patient", params={"colour": "red"})),
        (
            400,
            await json_client.post("/Patient", json={"resourceType": "Patient", "gender": "often"}),
        ),
        (
            415,
            await json_client.post(
                "/Patient", content=b"<Patient/>", headers={"Content-Type": "text/xml"}
            ),
        ),
        (
            412,
            await json_client.put(
                f"/Patient/{pid}",
                json={**patient("Stale"), "id": pid},
                headers={"If-Match": 'W/"9"'},
            ),
        ),
        (405, await json_client.request("TRACE", "/Patient")),
    ]
    async with json_only(tenant) as anonymous:
        anonymous.headers.pop("Authorization")
        calls.append((401, await anonymous.get("/Patient")))
    for status, response in calls:
        assert response.status_code == status, response.text
        assert response.json()["resourceType"] == "OperationOutcome"


async def test_format_json_relabels_without_an_accept_header(tenant: TenantHandle) -> None:
    async with json_only(tenant, accept=None) as client:
        created = await client.post("/Patient", params={"_format": "json"}, json=patient("Fmt"))
        await client.post("/Patient?_format=application/json", json=patient("Fmt"))
        pid = created.json()["id"]
        read = await client.get(f"/Patient/{pid}?_format=application%2Fjson")
        page = await client.get(
            "/Patient", params={"family": "Fmt", "_count": "1", "_format": "json"}
        )
        links = {link["relation"]: link["url"] for link in page.json()["link"]}
        second = await client.get(links["next"])  # still json: the link keeps _format
        history = await client.get(
            f"/Patient/{pid}/_history", params={"_count": "1", "_format": "json"}
        )
        history_links = {link["relation"]: link["url"] for link in history.json()["link"]}
        error = await client.get("/Patient/nope", params={"_format": "json"})
        metadata = await client.get("/metadata", params={"_format": "json"})
        # _format is a result parameter everywhere: never an unknown search parameter or
        # a conditional-create criterion.
        again = await client.post("/Patient", params={"_format": "json"}, json=patient("Fmt"))
    assert read.json()["id"] == pid
    assert page.json()["total"] == 2
    assert "_format=json" in links["self"] and "_format=json" in links["next"]
    assert second.json()["entry"][0]["resource"]["name"][0]["family"] == "Fmt"
    assert "_format=json" in history_links["self"]
    assert error.status_code == 404 and error.json()["resourceType"] == "OperationOutcome"
    assert metadata.json()["resourceType"] == "CapabilityStatement"
    assert again.status_code == 201 and again.json()["id"] != pid
    assert history.json()["total"] == 1


async def test_the_default_stays_fhir_json(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.fhir_base, headers=tenant.headers) as client:
        plain = await client.get("/metadata")
        star = await client.get("/metadata", headers={"Accept": "*/*"})
        fhir = await client.get("/Patient", headers={"Accept": "application/fhir+json"})
        fmt = await client.get("/Patient", params={"_format": "fhir+json"})
        error = await client.get("/Patient/nope")
        html = await client.get("/metadata", headers={"Accept": "text/html"})
    for response in (plain, star, fhir, fmt, error, html):
        assert media(response) == FHIR_JSON_TYPE, response.request.url
        assert response.headers["content-type"].endswith("charset=utf-8")
    assert fmt.json()["resourceType"] == "Bundle"
    assert error.status_code == 404


@pytest.mark.parametrize(
    ("headers", "params", "field"),
    [
        ({"Accept": "application/fhir+xml"}, {}, "Accept"),
        ({"Accept": "application/xml"}, {}, "Accept"),
        ({"Accept": "text/xml"}, {}, "Accept"),
        ({}, {"_format": "xml"}, "_format"),
        ({}, {"_format": "application/fhir+xml"}, "_format"),
        ({"Accept": "application/json"}, {"_format": "xml"}, "_format"),
    ],
)
async def test_xml_is_406_with_an_operation_outcome(
    tenant: TenantHandle, headers: dict[str, str], params: dict[str, str], field: str
) -> None:
    async with httpx.AsyncClient(base_url=tenant.fhir_base, headers=tenant.headers) as client:
        answers = [
            await client.get("/metadata", headers=headers, params=params),
            await client.get("/Patient", headers=headers, params=params),
            await client.post("/Patient", headers=headers, params=params, json=patient("Xml")),
        ]
        searched = await client.get("/Patient", params={"family": "Xml"})
    for r in answers:
        assert r.status_code == 406, r.text
        outcome = r.json()
        assert outcome["resourceType"] == "OperationOutcome"
        [issue] = outcome["issue"]
        assert issue["code"] == "not-supported" and issue["expression"] == [field]
        assert "JSON only" in issue["diagnostics"]
        # In JSON the Accept header can read, if it named one.
        wanted = JSON_TYPE if headers.get("Accept") == JSON_TYPE else FHIR_JSON_TYPE
        assert media(r) == wanted
    assert searched.json()["total"] == 0  # the refused create wrote nothing


async def test_a_run_view_negotiates_too(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as api:
        r = await api.post(
            "/api/testing/runs",
            json={"scenarioId": "results.critical-lab", "mode": "workflow"},
        )
        assert r.status_code == 201, r.text
        run = r.json()
        xml = await api.get(f"{run['fhirBase']}/Task", headers={"Accept": "application/xml"})
        await api.post(f"/api/testing/runs/{run['id']}/cancel")
    assert run["fhirBase"].endswith(f"/api/testing/runs/{run['id']}/fhir/r4")
    async with json_only(tenant) as json_client:
        order = await json_client.get(f"{run['fhirBase']}/{run['fixture']['order']}")
        tasks = await json_client.get(f"{run['fhirBase']}/Task")
        missing = await json_client.get(f"{run['fhirBase']}/Task/nope")
        unknown_run = await json_client.get("/api/testing/runs/run_nope/fhir/r4/Task")
    assert order.json()["resourceType"] == "ServiceRequest"
    assert tasks.json()["type"] == "searchset"
    assert missing.status_code == 404 and missing.json()["resourceType"] == "OperationOutcome"
    assert unknown_run.status_code == 404
    assert xml.status_code == 406


async def test_the_eligibility_check_answers_plain_json(tenant: TenantHandle) -> None:
    async with json_only(tenant) as json_client:
        pid = (await json_client.post("/Patient", json=patient("Uncovered"))).json()["id"]
        r = await json_client.post(
            f"{tenant.server}/api/eligibility/$check",
            json={"patient": f"Patient/{pid}", "date": "2026-01-05"},
        )
    assert r.status_code == 200, r.text
    assert r.json()["eligible"] is False and r.json()["coverage"] is None
