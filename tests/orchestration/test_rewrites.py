"""Equivalent rewrites derived from an oracle (pure), graded in memory: each must pass a
fair scenario, and one that fails a brittle scenario names the expectation and clause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from app.grading.engine import grade
from app.grading.snapshot import RunSnapshot
from app.orchestration.check import _broke
from app.orchestration.rewrites import Rewrite, client_id, derive_rewrites, in_offset
from app.orchestration.simulation import Simulation
from app.scenarios.schema import OracleCall, Scenario

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)  # a Tuesday

ORDER = {
    "method": "POST",
    "path": "/ServiceRequest",
    "save_as": "order",
    "body": {
        "resourceType": "ServiceRequest",
        "status": "active",
        "intent": "order",
        "code": {"coding": [{"system": "http://loinc.org", "code": "2823-3"}]},
        "subject": {"reference": "@patient"},
        "occurrenceDateTime": {"$time": "+1wd@08:00"},
        "authoredOn": {"$time": "now"},
    },
}
TELL = {
    "method": "POST",
    "path": "/Communication",
    "body": {
        "resourceType": "Communication",
        "status": "completed",
        "subject": {"reference": "@patient"},
        "about": [{"reference": "@order"}],
        "payload": [{"contentString": "Repeat potassium ordered for tomorrow morning."}],
    },
}
CANCEL = {
    "method": "PATCH",
    "path": "/Appointment/@appt",
    "body": [{"op": "replace", "path": "/status", "value": "cancelled"}],
}
READ = {"method": "GET", "path": "/Appointment/@appt"}
# The order: next weekday morning, UTC, read whatever the choice type.
FAIR_ORDER = [
    "code.coding.where(code = '2823-3').exists()",
    "subject.reference = 'Patient/' + %fixture.patient",
    "occurrence.startInstant().substring(0, 10) = (%runStart + 1 day).toString().substring(0, 10)",
    "occurrence.startInstant().substring(11, 2) = '08'",
]


def scenario(order_where: list[str], oracle: list[dict[str, Any]] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "id": "t.rewrites",
            "title": "t",
            "category": "orders",
            "summary": "t",
            "modes": ["agent"],
            "brief": "Order it.",
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
                    "id": "ordered",
                    "type": "resource",
                    "label": "ordered",
                    "resourceType": "ServiceRequest",
                    "where": order_where,
                    "count": {"min": 1, "max": 1},
                },
                {
                    "id": "told",
                    "type": "resource",
                    "label": "told",
                    "resourceType": "Communication",
                    "where": [
                        "about.where(reference = %fixture.order).exists() or about.exists()",
                        "payload.content.exists()",
                    ],
                },
                {
                    "id": "cancelled",
                    "type": "resource",
                    "label": "cancelled",
                    "resourceType": "Appointment",
                    "where": ["id = %fixture.appt", "status = 'cancelled'"],
                },
            ],
            "oracle": oracle or [READ, ORDER, TELL, CANCEL],
        }
    )


def before() -> RunSnapshot:
    appt = {
        "resourceType": "Appointment",
        "id": "r1-appt",
        "status": "booked",
        "participant": [{"actor": {"reference": "Patient/r1-patient"}, "status": "accepted"}],
    }
    return RunSnapshot(
        run_id="run_1",
        started_at=START,
        now=START + timedelta(seconds=1),
        deadline=START + timedelta(minutes=5),
        fixture={"patient": "Patient/r1-patient", "appt": "Appointment/r1-appt"},
        current={"patient": {"resourceType": "Patient", "id": "r1-patient"}, "appt": appt},
        patient_refs=frozenset({"Patient/r1-patient"}),
    )


def graded(s: Scenario, rewrite: Rewrite) -> list[dict[str, str]]:
    sim = Simulation(before())
    snapshot = sim.run(rewrite.calls, rewrite.expanded, rewrite.saves)
    assert all(status is not None and status < 400 for status in sim.statuses), (
        rewrite.description,
        sim.statuses,
    )
    return _broke(grade(list(s.expectations), snapshot).expectations)


def by_kind(s: Scenario) -> dict[str, list[Rewrite]]:
    out: dict[str, list[Rewrite]] = {}
    for rewrite in derive_rewrites(s):
        out.setdefault(rewrite.kind, []).append(rewrite)
    return out


def test_every_kind_is_derived_and_passes_a_fair_scenario() -> None:
    fair = scenario(FAIR_ORDER)
    oracle = Simulation(before()).run(fair.oracle)
    assert _broke(grade(list(fair.expectations), oracle).expectations) == []
    found = by_kind(fair)
    assert set(found) == {
        "offset",
        "choice",
        "transaction",
        "put-create",
        "create-then-patch",
        "extras",
    }
    assert len(found["offset"]) == 2
    for rewrites in found.values():
        for rewrite in rewrites:
            assert graded(fair, rewrite) == [], rewrite.description


def test_offset_writes_the_same_instant_elsewhere() -> None:
    write = OracleCall(method="POST", path="/Task")
    body = {
        "authoredOn": "2026-03-03T09:00:00.000+00:00",
        "note": [{"time": "2026-03-03T01:30:00Z"}],
    }
    shifted = in_offset("-08:00", write, body)
    assert shifted == {
        "authoredOn": "2026-03-03T01:00:00.000-08:00",
        "note": [{"time": "2026-03-02T17:30:00-08:00"}],
    }
    assert in_offset("+05:30", write, body)["authoredOn"] == "2026-03-03T14:30:00.000+05:30"
    assert in_offset("+05:30", write, {"birthDate": "2026-03-03"}) == {"birthDate": "2026-03-03"}
    # A message's text is not a dateTime: it tells the patient what it told them.
    said = {"payload": [{"contentString": "2026-03-03T09:00:00.000+00:00"}]}
    assert in_offset("-08:00", OracleCall(method="POST", path="/Communication"), said) == said
    # Only writes: a lookup's parameters are left alone.
    read = OracleCall(method="POST", path="/Appointment/$find")
    assert in_offset("+05:30", read, body) is body


def test_choice_swap_both_ways() -> None:
    (swap,) = by_kind(scenario(FAIR_ORDER))["choice"]
    order = swap.calls[1].body
    assert "occurrenceDateTime" not in order
    assert order["occurrencePeriod"] == {
        "start": {"$time": "+1wd@08:00"},
        "end": {"$time": "+1wd@08:00"},
    }
    body: dict[str, Any] = dict(cast(dict[str, Any], ORDER["body"]))
    del body["occurrenceDateTime"]
    body["occurrencePeriod"] = {"start": {"$time": "+1wd@08:00"}}
    back = {**ORDER, "body": body}
    (swap,) = by_kind(scenario(FAIR_ORDER, [back, TELL]))["choice"]
    assert swap.calls[0].body["occurrenceDateTime"] == {"$time": "+1wd@08:00"}
    # Nothing to swap: no choice rewrite.
    assert "choice" not in by_kind(scenario(FAIR_ORDER, [CANCEL]))


def test_transaction_bundles_the_writes_where_the_last_was() -> None:
    (tx,) = by_kind(scenario(FAIR_ORDER))["transaction"]
    assert [(c.method, c.path) for c in tx.calls] == [("GET", "/Appointment/@appt"), ("POST", "/")]
    bundle = tx.calls[1].body
    entries = bundle["entry"]
    assert bundle["type"] == "transaction"
    assert [e["request"] for e in entries] == [
        {"method": "POST", "url": "ServiceRequest"},
        {"method": "POST", "url": "Communication"},
        {"method": "PATCH", "url": "Appointment/@appt"},
    ]
    # The Communication refers to the order by the order entry's fullUrl.
    assert entries[1]["resource"]["about"] == [{"reference": entries[0]["fullUrl"]}]
    assert tx.saves == {entries[0]["fullUrl"]: "order"}
    # A later call naming the saved order gets it from the Bundle's answer.
    later = {"method": "GET", "path": "/ServiceRequest/@order"}
    with_later = scenario(FAIR_ORDER, [ORDER, TELL, CANCEL, later])
    (tx,) = by_kind(with_later)["transaction"]
    assert tx.calls[-1].path == "/ServiceRequest/@order"
    assert graded(with_later, tx) == []  # every call sent: the symbol was saved
    # A merge patch cannot be a transaction entry: no rewrite.
    merge = {**CANCEL, "body": {"status": "cancelled"}}
    assert "transaction" not in by_kind(scenario(FAIR_ORDER, [ORDER, merge]))


def test_the_writes_a_before_orders_keep_their_calls() -> None:
    s = scenario(FAIR_ORDER)
    document = s.model_dump(by_alias=True, exclude_none=True)
    document["expectations"].append(
        {
            "id": "told-first",
            "type": "api_call",
            "label": "told first",
            "method": "POST",
            "path": "/Communication",
            "before": "cancelled",
        }
    )
    document["oracle"] = [READ, TELL, ORDER, CANCEL]
    document["oracle"][1] = {**TELL, "body": {**TELL["body"], "about": []}}  # type: ignore[dict-item]
    (tx,) = by_kind(Scenario.model_validate(document))["transaction"]
    assert [(c.method, c.path) for c in tx.calls] == [
        ("GET", "/Appointment/@appt"),
        ("POST", "/Communication"),
        ("POST", "/"),
    ]
    assert "sent alone" in tx.description
    # put-create leaves that create a POST as well (the expectation names the method).
    (put,) = by_kind(Scenario.model_validate(document))["put-create"]
    assert [c.method for c in put.calls] == ["GET", "POST", "PUT", "PATCH"]


def test_creates_as_put_and_as_create_then_patch() -> None:
    s = scenario(FAIR_ORDER)
    (put,) = by_kind(s)["put-create"]
    rid = client_id(s, 1)
    assert put.calls[1].method == "PUT" and put.calls[1].path == f"/ServiceRequest/{rid}"
    assert put.calls[1].body["id"] == rid and put.calls[1].save_as == "order"
    assert put.calls[2].method == "PUT"  # every create
    (patched,) = by_kind(s)["create-then-patch"]
    methods = [(c.method, c.path) for c in patched.calls]
    assert methods == [
        ("GET", "/Appointment/@appt"),
        ("POST", "/ServiceRequest"),
        ("PATCH", "/ServiceRequest/@order"),
        ("POST", "/Communication"),
        ("PATCH", "/Communication/@rewrite3"),
        ("PATCH", "/Appointment/@appt"),
    ]
    assert set(patched.calls[1].body) == {"resourceType", "status", "intent", "code", "subject"}
    assert {op["path"] for op in patched.calls[2].body} == {"/occurrenceDateTime", "/authoredOn"}


def test_harmless_extras() -> None:
    (extras,) = by_kind(scenario(FAIR_ORDER))["extras"]
    order = extras.calls[1].body
    assert order["note"] and order["identifier"] and order["meta"]["tag"]
    booking = {
        "method": "POST",
        "path": "/Appointment",
        "body": {
            "resourceType": "Appointment",
            "status": "booked",
            "participant": [{"actor": {"reference": "@patient"}, "status": "accepted"}],
        },
    }
    (extras,) = by_kind(scenario(FAIR_ORDER, [booking]))["extras"]
    appointment = extras.calls[0].body
    assert "note" not in appointment  # an R4 Appointment has no note
    assert appointment["participant"][-1] == {
        "actor": {"reference": "Location/demo-canonical-loc-main"},
        "status": "accepted",
    }
    assert "Location participant" in extras.description


def test_a_brittle_scenario_reports_the_rewrite_and_the_clause_that_broke() -> None:
    brittle_where = [
        *FAIR_ORDER[:2],
        "occurrence.toString().substring(0, 10) = (%runStart + 1 day).toString().substring(0, 10)",
        "identifier.empty()",
    ]
    brittle = scenario(brittle_where)
    found = by_kind(brittle)
    assert graded(brittle, found["offset"][0]) == []
    (choice,) = found["choice"]
    assert graded(brittle, choice) == [
        {
            "expectation": "ordered",
            "clause": "occurrence.toString().substring(0, 10) = "
            "(%runStart + 1 day).toString().substring(0, 10)",
        }
    ]
    (extras,) = found["extras"]
    assert graded(brittle, extras) == [{"expectation": "ordered", "clause": "identifier.empty()"}]
