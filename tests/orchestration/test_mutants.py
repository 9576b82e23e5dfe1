"""Near-miss mutants derived from an oracle (pure)."""

from __future__ import annotations

from typing import Any

from app.orchestration.mutants import (
    OTHER_PATIENT,
    OTHER_REGISTER,
    derive_mutants,
    derive_variant_mutants,
)
from app.scenarios.calls import is_write
from app.scenarios.schema import MessageExpectation, OracleCall, Scenario


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


SLOTTED = {
    "method": "POST",
    "path": "/Appointment",
    "save_as": "booking",
    "body": {
        "resourceType": "Appointment",
        "status": "booked",
        "start": {"$time": "+2wd@10:00"},
        "end": {"$time": "+2wd@10:30"},
        "participant": [
            {"actor": {"reference": "@patient"}, "status": "accepted"},
            {"actor": {"reference": "Practitioner/demo-canonical-prac-chen"}, "status": "accepted"},
        ],
    },
}


def test_each_create_duplicated_a_booking_with_a_real_run() -> None:
    found = [m for m in derive_mutants(scenario([LOOK, BOOK, CANCEL])) if m.kind == "duplicate"]
    assert len(found) == 1  # creates only: a PATCH made twice changes nothing
    calls = found[0].calls
    assert [c.method for c in calls] == ["GET", "POST", "POST", "PATCH"]
    assert calls[1].body == calls[2].body and calls[2].save_as is None
    assert found[0].probe == 2
    assert not found[0].real_run  # no start/practitioner: the scheduling rules pass it
    booking = [m for m in derive_mutants(scenario([LOOK, SLOTTED])) if m.kind == "duplicate"]
    assert booking[0].real_run  # the second booking overlaps the first: a 409
    assert booking[0].calls[1].save_as == "booking"


def test_a_booking_moved_off_the_free_slots() -> None:
    found = [m for m in derive_mutants(scenario([LOOK, SLOTTED])) if m.kind == "slot"]
    moved = [(m.calls[1].body["start"], m.calls[1].body["end"]) for m in found]
    assert moved == [
        ({"$time": "+2wd@10:10"}, {"$time": "+2wd@10:40"}),
        ({"$time": "+2wd@03:00"}, {"$time": "+2wd@03:30"}),
    ]
    assert all(m.real_run and m.probe == 1 for m in found)
    assert "10 minutes later" in found[0].description
    # A lenient scenario's rules let it through: grading alone must catch it, in memory.
    lenient = derive_mutants(scenario([LOOK, SLOTTED], scheduling="lenient"))
    assert all(not m.real_run for m in lenient if m.kind == "slot")
    # Not a booking (no clock token, or a status that holds no time): nothing to move.
    assert "slot" not in kinds(derive_mutants(scenario([LOOK, BOOK])))
    waitlisted = {**SLOTTED, "body": {**SLOTTED["body"], "status": "waitlist"}}  # type: ignore[dict-item]
    assert "slot" not in kinds(derive_mutants(scenario([LOOK, waitlisted])))


def test_collateral_change_on_a_fixture_resource_the_oracle_leaves_alone() -> None:
    s = scenario([LOOK, BOOK])
    document = s.model_dump(by_alias=True, exclude_none=True)
    document["fixture"] += [
        {"resourceType": "Condition", "id": "@htn", "subject": {"reference": "@patient"}},
        {"resourceType": "Condition", "id": "@afib", "subject": {"reference": "@patient"}},
        {
            "resourceType": "MedicationStatement",
            "id": "@statin",
            "status": "active",
            "medicationCodeableConcept": {"text": "statin"},
            "subject": {"reference": "@patient"},
        },
    ]
    found = [m for m in derive_mutants(Scenario.model_validate(document)) if m.kind == "collateral"]
    extra = {m.calls[-1].path: m.calls[-1].body for m in found}
    # The oracle's calls, then one change per type (the first resource of each).
    assert all(m.calls[:-1] == (s.oracle[0], s.oracle[1]) for m in found)
    assert set(extra) == {
        "/Patient/@patient",
        "/Appointment/@appt",
        "/Condition/@htn",
        "/MedicationStatement/@statin",
    }
    assert extra["/Patient/@patient"][0]["path"] == "/telecom"
    assert extra["/Condition/@htn"][0]["path"] == "/note"
    assert extra["/Appointment/@appt"] == [{"op": "add", "path": "/status", "value": "cancelled"}]
    assert extra["/MedicationStatement/@statin"][0]["value"] == "stopped"
    # A resource the oracle writes is not collateral.
    touched = derive_mutants(scenario([LOOK, BOOK, CANCEL]))
    assert "/Appointment/@appt" not in {m.calls[-1].path for m in touched if m.kind == "collateral"}


def _said(text: Any, recipient: str = "@patient") -> dict[str, Any]:
    return {
        "method": "POST",
        "path": "/Communication",
        "body": {
            "resourceType": "Communication",
            "status": "completed",
            "sender": {"reference": "Organization/demo-canonical-org"},
            "recipient": [{"reference": recipient}],
            "payload": [{"contentString": part} for part in text],
        },
    }


MESSAGE_CHECK: dict[str, Any] = {
    "id": "told",
    "type": "message",
    "label": "told",
    "says": ["Dr. A"],
    "saysAny": ["see you", "hasta pronto"],
    "not": ["no charge"],
    "mentions": [{"of": "booked", "path": "start"}],
    "grounded": True,
    "claims": True,
}


def _message(document: dict[str, Any]) -> MessageExpectation:
    return MessageExpectation.model_validate(document)


def _texts(calls: tuple[OracleCall, ...]) -> list[Any]:
    return [
        part["contentString"]
        for c in calls
        if isinstance(c.body, dict) and c.body.get("resourceType") == "Communication"
        for part in c.body["payload"]
    ]


def test_message_mutants_undo_what_each_required_check_looks_for() -> None:
    s = scenario(
        [
            {"method": "GET", "path": "/Slot"},
            BOOK,
            _said(["You're booked with Dr. A at 3:30 PM on", {"$time": "+2wd@15:30"}, "See you!"]),
        ]
    )
    s.expectations.append(_message(MESSAGE_CHECK))
    by_kind: dict[str, list[Any]] = {}
    for m in derive_mutants(s):
        by_kind.setdefault(m.kind, []).append(m)
    assert sorted(k for k in by_kind if k.startswith("message")) == [
        "message-claim",
        "message-not",
        "message-says",
        "message-time",
    ]
    says, says_any = by_kind["message-says"]
    assert "Dr. A" not in " ".join(t for t in _texts(says.calls) if isinstance(t, str))
    assert "See you" not in " ".join(t for t in _texts(says_any.calls) if isinstance(t, str))
    assert _texts(by_kind["message-not"][0].calls)[-1] == "no charge"
    shifted = _texts(by_kind["message-time"][0].calls)
    assert shifted[0] == "You're booked with Dr. A at 4:30 pm on"
    assert shifted[1] == {"$time": "+2wd@16:30"}
    # The oracle books, so the claim added is the next in the list no write backs.
    (claim,) = by_kind["message-claim"]
    assert _texts(claim.calls)[-1] == "I've sent your prescription to your pharmacy."


def test_no_message_mutant_without_a_required_check() -> None:
    s = scenario([BOOK, _said(["See you, Dr. A"])])
    assert not [m for m in derive_mutants(s) if m.kind.startswith("message")]
    s.expectations.append(_message({**MESSAGE_CHECK, "required": False}))
    assert not [m for m in derive_mutants(s) if m.kind.startswith("message")]


def test_an_oracle_that_says_nothing_gets_a_message_that_claims_too_much() -> None:
    s = scenario([BOOK])
    s.expectations.append(_message({"id": "told", "type": "message", "label": "t", "claims": True}))
    (claim,) = [m for m in derive_mutants(s) if m.kind.startswith("message")]
    assert claim.kind == "message-claim"
    added = claim.calls[-1]
    assert added.method == "POST" and added.path == "/Communication"
    assert isinstance(added.body, dict) and added.body["recipient"] == [{"reference": "@patient"}]
    assert "I've sent your prescription" in added.body["payload"][0]["contentString"]


def test_a_register_persona_gets_a_sentence_in_the_other_register() -> None:
    usted = {"id": "formal", "type": "message", "label": "usted", "register": "usted"}
    spanish = {"persona": "spanish", "expectations": [usted]}
    s = scenario(
        [BOOK, _said(["Su cita está reservada."])], variants=[spanish, {"persona": "terse"}]
    )
    assert derive_variant_mutants(s, None) == derive_variant_mutants(s, "terse") == []
    (mutant,) = derive_variant_mutants(s, "spanish")
    assert mutant.kind == "message-register"
    assert _texts(mutant.calls)[-1] == OTHER_REGISTER["usted"]
    # An oracle that says nothing: the sentence comes as a message of its own.
    (alone,) = derive_variant_mutants(scenario([BOOK], variants=[spanish]), "spanish")
    assert alone.calls[-1].path == "/Communication" and len(alone.calls) == 2
