"""Near-miss mutants derived from an oracle (pure)."""

from __future__ import annotations

from typing import Any

from app.orchestration.mutants import OTHER_PATIENT, derive_mutants, is_write
from app.scenarios.schema import OracleCall, Scenario


def scenario(oracle: list[dict[str, Any]], **extra: Any) -> Scenario:
    document: dict[str, Any] = {
        "id": "t.mutants",
        "title": "t",
        "category": "scheduling",
        "summary": "t",
        "modes": ["agent"],
        "brief": "Book it.",
        "fixture": [
            {"resourceType": "Patient", "id": "@patient", "name": [{"family": "A"}]},
            {
                "resourceType": "Appointment",
                "id": "@appt",
                "status": "booked",
                "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
            },
        ],
        "expectations": [
            {
                "id": "looked",
                "type": "api_call",
                "label": "looked",
                "method": "GET",
                "path": "/Slot",
                "before": "booked",
            },
            {
                "id": "booked",
                "type": "resource",
                "label": "booked",
                "resourceType": "Appointment",
                "where": ["status = 'booked'"],
            },
        ],
        "oracle": oracle,
        **extra,
    }
    return Scenario.model_validate(document)


BOOK = {
    "method": "POST",
    "path": "/Appointment",
    "body": {
        "resourceType": "Appointment",
        "status": "booked",
        "serviceType": [{"coding": [{"system": "http://snomed.info/sct", "code": "394814009"}]}],
        "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
    },
}
CANCEL = {
    "method": "PATCH",
    "path": "/Appointment/@appt",
    "body": [{"op": "replace", "path": "/status", "value": "cancelled"}],
}
LOOK = {"method": "GET", "path": "/Slot?status=free"}


def kinds(found: list[Any]) -> list[str]:
    return [m.kind for m in found]


def test_writes_and_operations() -> None:
    assert is_write(OracleCall(method="POST", path="/Appointment"))
    assert is_write(OracleCall(method="PATCH", path="/Appointment/@appt"))
    assert not is_write(OracleCall(method="POST", path="/Appointment/$find"))
    assert not is_write(OracleCall(method="POST", path="/Slot/_search"))
    assert not is_write(OracleCall(method="POST", path="/api/eligibility/$check"))
    assert not is_write(OracleCall(method="GET", path="/Slot"))


def test_each_write_dropped_redirected_and_recoded() -> None:
    found = derive_mutants(scenario([LOOK, BOOK, CANCEL]))
    drops = [m for m in found if m.kind == "drop"]
    assert [m.call_index for m in drops] == [1, 2]
    assert [c.method for c in drops[0].calls] == ["GET", "PATCH"]
    redirects = [m for m in found if m.kind == "redirect"]
    assert len(redirects) == 1  # only the booking's body names the patient
    moved = redirects[0].calls[1].body["participant"][0]["actor"]["reference"]
    assert moved == OTHER_PATIENT
    codes = {m.description.split(" with ", 1)[1] for m in found if m.kind == "code"}
    assert codes == {
        "status 'entered-in-error' instead of 'booked'",
        "code '394814009-changed' instead of '394814009' at serviceType[0].coding[0]",
        "status 'entered-in-error' instead of 'cancelled'",
    }
    # The oracle itself is never changed in place.
    assert BOOK["body"]["status"] == "booked"  # type: ignore[index]


def test_redirect_prefers_another_fixture_patient() -> None:
    s = scenario([LOOK, BOOK])
    document = s.model_dump(by_alias=True, exclude_none=True)
    document["fixture"].append({"resourceType": "Patient", "id": "@twin"})
    found = derive_mutants(Scenario.model_validate(document))
    redirect = next(m for m in found if m.kind == "redirect")
    assert redirect.calls[1].body["participant"][0]["actor"]["reference"] == "@twin"


def test_merge_patch_status_and_values_in_the_binding() -> None:
    merge = {"method": "PATCH", "path": "/Appointment/@appt", "body": {"status": "cancelled"}}
    task = {
        "method": "POST",
        "path": "/Task",
        "body": {
            "resourceType": "Task",
            "status": "requested",
            "intent": "order",
            "priority": "routine",
            "for": {"reference": "@patient"},
        },
    }
    found = derive_mutants(scenario([LOOK, merge, task]))
    described = [m.description for m in found if m.kind == "code"]
    assert any("status 'entered-in-error' instead of 'cancelled'" in d for d in described)
    assert any("intent 'proposal' instead of 'order'" in d for d in described)
    assert any("priority 'stat' instead of 'routine'" in d for d in described)


def test_reorder_only_for_required_before() -> None:
    found = derive_mutants(scenario([LOOK, BOOK]))
    reorder = [m for m in found if m.kind == "reorder"]
    assert len(reorder) == 1
    assert [c.method for c in reorder[0].calls] == ["POST", "GET"]
    # Already last: nothing to reorder.
    assert "reorder" not in kinds(derive_mutants(scenario([BOOK, LOOK])))
    optional = scenario([LOOK, BOOK])
    document = optional.model_dump(by_alias=True, exclude_none=True)
    document["expectations"][0]["required"] = False
    assert "reorder" not in kinds(derive_mutants(Scenario.model_validate(document)))
