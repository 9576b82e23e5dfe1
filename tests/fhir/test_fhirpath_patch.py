"""FHIRPath Patch (a Parameters resource as FHIR JSON) over HTTP: every operation type,
the errors that name the operation and its path, validation of the result, and a patch
that changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.fhir.fhirpatch import apply_fhirpath_patch

FHIR_JSON = {"Content-Type": "application/fhir+json"}
PATIENT: dict[str, Any] = {
    "resourceType": "Patient",
    "identifier": [{"system": "urn:s", "value": "1"}, {"system": "urn:s", "value": "2"}],
    "name": [
        {"use": "official", "family": "Ngata", "given": ["Aroha", "Mere"]},
        {"use": "old", "family": "Smith", "given": ["Aroha"]},
    ],
    "gender": "female",
    "birthDate": "1980-01-01",
}


def op(kind: str, path: str, **parts: Any) -> dict[str, Any]:
    out: list[dict[str, Any]] = [
        {"name": "type", "valueCode": kind},
        {"name": "path", "valueString": path},
    ]
    for name, value in parts.items():
        if name == "value":
            out.append({"name": "value", **value})
        elif name in ("index", "source", "destination"):
            out.append({"name": name, "valueInteger": value})
        else:
            out.append({"name": name, "valueString": value})
    return {"name": "operation", "part": out}


def params(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Parameters", "parameter": list(operations)}


async def made(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.post("/Patient", json=PATIENT)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def patch(
    client: httpx.AsyncClient,
    pid: str,
    *operations: dict[str, Any],
    media: str = "application/fhir+json",
) -> httpx.Response:
    return await client.patch(
        f"/Patient/{pid}", json=params(*operations), headers={"Content-Type": media}
    )


async def test_each_operation_type(client: httpx.AsyncClient) -> None:
    pid = (await made(client))["id"]
    r = await patch(
        client,
        pid,
        op("replace", "Patient.birthDate", value={"valueDate": "1981-02-03"}),
        op("replace", "Patient.name.where(use = 'old').family", value={"valueString": "Jones"}),
        op("add", "Patient", name="active", value={"valueBoolean": True}),
        op(
            "add",
            "Patient",
            name="telecom",
            value={"valueContactPoint": {"system": "phone", "value": "555-0100"}},
        ),
        # A complex value given as parts (a backbone element has no value[x] type).
        op(
            "add",
            "Patient",
            name="contact",
            value={
                "part": [
                    {"name": "name", "valueHumanName": {"family": "Ngata", "given": ["Tama"]}},
                    {"name": "telecom", "valueContactPoint": {"system": "phone", "value": "1"}},
                ]
            },
        ),
        op("insert", "Patient.identifier", index=1, value={"valueIdentifier": {"value": "1.5"}}),
        op("insert", "Patient.name[0].given", index=0, value={"valueString": "Kiri"}),
        op("move", "Patient.identifier", source=2, destination=0),
        op("delete", "Patient.name[0].given.last()"),
        op("delete", "Patient.gender"),
        op("delete", "Patient.deceased"),  # nothing there: no error
        media="application/fhir+json; fhirVersion=4.0",
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"]["versionId"] == "2"
    assert body["birthDate"] == "1981-02-03"
    assert body["name"][1]["family"] == "Jones" and body["name"][0]["family"] == "Ngata"
    assert body["active"] is True
    assert body["telecom"] == [{"system": "phone", "value": "555-0100"}]
    assert body["contact"] == [
        {
            "name": {"family": "Ngata", "given": ["Tama"]},
            "telecom": [{"system": "phone", "value": "1"}],
        }
    ]
    assert [i["value"] for i in body["identifier"]] == ["2", "1", "1.5"]
    assert body["name"][0]["given"] == ["Kiri", "Aroha"]
    assert "gender" not in body
    assert (await client.get(f"/Patient/{pid}")).json() == body


async def test_other_json_media_types_and_choice_elements(client: httpx.AsyncClient) -> None:
    pid = (await made(client))["id"]
    for media in ("application/json+fhir", "application/json"):
        r = await patch(
            client,
            pid,
            op("replace", "Patient.birthDate", value={"valueDate": "1990-01-01"}),
            media=media,
        )
        assert r.status_code == 200, (media, r.text)
    r = await patch(
        client, pid, op("add", "Patient", name="deceased", value={"valueBoolean": False})
    )
    assert r.status_code == 200 and r.json()["deceasedBoolean"] is False
    # A choice element is replaced by its FHIRPath name, even with another type.
    r = await patch(
        client, pid, op("replace", "Patient.deceased", value={"valueDateTime": "2020-01-01"})
    )
    assert r.status_code == 200, r.text
    assert r.json()["deceasedDateTime"] == "2020-01-01" and "deceasedBoolean" not in r.json()
    r = await patch(client, pid, op("delete", "Patient.deceased.ofType(dateTime)"))
    assert r.status_code == 200 and "deceasedDateTime" not in r.json()


@pytest.mark.parametrize(
    ("operation", "status", "words"),
    [
        # replace and delete need exactly one element.
        (op("replace", "Patient.name.given", value={"valueString": "X"}), 422, "found 3"),
        (op("replace", "Patient.telecom", value={"valueString": "X"}), 422, "found nothing"),
        (op("delete", "Patient.name"), 422, "found 2"),
        # add: to one element, not over a value that does not repeat.
        (op("add", "Patient", name="gender", value={"valueCode": "male"}), 422, "already"),
        (op("add", "Patient", name="frobnicate", value={"valueCode": "x"}), 422, "not an element"),
        (op("add", "Patient.name", name="text", value={"valueString": "x"}), 422, "found 2"),
        # insert and move: indices in range, on a repeating element.
        (op("insert", "Patient.identifier", index=3, value={"valueIdentifier": {}}), 422, "0..2"),
        (op("insert", "Patient.gender", index=0, value={"valueCode": "male"}), 422, "repeat"),
        (op("move", "Patient.identifier", source=0, destination=2), 422, "0..1"),
        (op("move", "Patient.name.given", source=0, destination=1), 422, "found 2"),
        # Invalid FHIRPath is a 400 naming the path, never a silent no-match.
        (op("delete", "Patient.name.where(use = = 'old')"), 400, "not valid FHIRPath"),
        (op("delete", "Patient.name.where(use = 'old') garbage"), 400, "not valid FHIRPath"),
        (op("delete", "Patient.name.where(frob())"), 400, "unknown function"),
        (op("delete", "Patient.name | Patient.address"), 400, "cannot be patched"),
        (op("delete", "Patient.name.resolve()"), 400, "resolve"),
        (op("delete", ""), 400, "empty"),
        # Malformed operations.
        (op("upsert", "Patient.gender"), 400, "type must be one of"),
        (op("replace", "Patient.gender"), 400, "needs value"),
        (op("insert", "Patient.identifier", value={"valueIdentifier": {}}), 400, "needs index"),
        (op("replace", "Patient.gender", value={}), 400, "value[x]"),
        # The result is validated like any update.
        (op("replace", "Patient.birthDate", value={"valueString": "last year"}), 400, "birthDate"),
        (op("replace", "Patient.gender", value={"valueCode": "robot"}), 400, "gender"),
        (op("replace", "Patient.id", value={"valueString": "other"}), 422, "id"),
    ],
)
async def test_failures_name_the_operation_and_path(
    client: httpx.AsyncClient, operation: dict[str, Any], status: int, words: str
) -> None:
    pid = (await made(client))["id"]
    ok = op("replace", "Patient.active", value={"valueBoolean": True})
    r = await patch(
        client,
        pid,
        op("add", "Patient", name="active", value={"valueBoolean": False}),
        ok,
        operation,
    )
    assert r.status_code == status, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    text = outcome["issue"][0]["diagnostics"]
    assert words in text, text
    path = operation["part"][1]["valueString"]
    if status == 422 and words != "id":
        assert "operation 2 " in text and f"'{path}'" in text
        assert outcome["issue"][0]["expression"] == ["Parameters.parameter[2]"]
    # Nothing was written: not even the operations before the failing one.
    current = (await client.get(f"/Patient/{pid}")).json()
    assert current["meta"]["versionId"] == "1" and "active" not in current


async def test_a_patch_that_changes_nothing_makes_no_version(client: httpx.AsyncClient) -> None:
    pid = (await made(client))["id"]
    r = await patch(client, pid, op("replace", "Patient.gender", value={"valueCode": "female"}))
    assert r.status_code == 200 and r.json()["meta"]["versionId"] == "1"
    r = await patch(client, pid, op("delete", "Patient.telecom"))
    assert r.status_code == 200 and r.json()["meta"]["versionId"] == "1"
    assert (await client.get(f"/Patient/{pid}/_history")).json()["total"] == 1


async def test_formats_json_patch_and_merge_patch_unchanged(client: httpx.AsyncClient) -> None:
    pid = (await made(client))["id"]
    r = await client.patch(
        f"/Patient/{pid}",
        json=[{"op": "replace", "path": "/gender", "value": "male"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 200 and r.json()["gender"] == "male"
    r = await client.patch(
        f"/Patient/{pid}",
        json={"gender": "other"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200 and r.json()["gender"] == "other"
    # A Parameters body sent as JSON Patch or merge patch is not guessed at.
    for media in ("application/json-patch+json", "application/merge-patch+json"):
        r = await patch(client, pid, op("delete", "Patient.gender"), media=media)
        assert r.status_code == 415, r.text
        assert "FHIRPath Patch" in r.json()["issue"][0]["diagnostics"]
    r = await client.patch(f"/Patient/{pid}", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    text = r.json()["issue"][0]["diagnostics"]
    for media in (
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/fhir+json",
        "FHIRPath Patch",
    ):
        assert media in text, text


def test_the_original_is_left_alone() -> None:
    original: dict[str, Any] = {
        "resourceType": "Patient",
        "id": "p",
        "name": [{"given": ["A", "B"]}],
    }
    out = apply_fhirpath_patch(
        original, params(op("move", "Patient.name.given", source=0, destination=1))
    )
    assert out["name"][0]["given"] == ["B", "A"]
    assert original["name"][0]["given"] == ["A", "B"]


def test_primitive_extensions_stay_aligned() -> None:
    original = {
        "resourceType": "Patient",
        "id": "p",
        "name": [{"given": ["A", "B"], "_given": [None, {"extension": [{"url": "u"}]}]}],
    }
    out = apply_fhirpath_patch(original, params(op("delete", "Patient.name.given[0]")))
    assert out["name"][0] == {"given": ["B"], "_given": [{"extension": [{"url": "u"}]}]}
    out = apply_fhirpath_patch(original, params(op("delete", "Patient.name.given[1]")))
    assert out["name"][0] == {"given": ["A"]}
