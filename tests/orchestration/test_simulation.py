"""The in-memory replay of oracle calls (pure): writes as the FHIR API makes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.grading.snapshot import RunSnapshot
from app.orchestration.simulation import Simulation
from app.scenarios.schema import OracleCall

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


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


def call(method: str, path: str, body: Any = None, save_as: str | None = None) -> OracleCall:
    return OracleCall(method=method, path=path, body=body, save_as=save_as)


TASK = {
    "resourceType": "Task",
    "status": "requested",
    "intent": "order",
    "for": {"reference": "@patient"},
    "authoredOn": {"$time": "now"},
}


def test_create_patch_delete_and_calls() -> None:
    sim = Simulation(before())
    snapshot = sim.run(
        [
            call("GET", "/Slot?status=free"),
            call("POST", "/Task", TASK, save_as="task"),
            call("PATCH", "/Task/@task", {"status": "accepted"}),
            call(
                "PATCH",
                "/Appointment/@appt",
                [{"op": "replace", "path": "/status", "value": "cancelled"}],
            ),
            call("DELETE", "/Task/@task"),
        ]
    )
    assert sim.statuses == [200, 201, 200, 200, 204]
    assert [c.path for c in snapshot.calls] == [
        "/Slot",
        "/Task",
        "/Task/replay-1",
        "/Appointment/r1-appt",
        "/Task/replay-1",
    ]
    assert snapshot.calls[0].query == "status=free"
    assert all(a.at < b.at for a, b in zip(snapshot.calls, snapshot.calls[1:], strict=False))
    assert snapshot.current["appt"] is not None
    assert snapshot.current["appt"]["status"] == "cancelled"
    by_ref = {f"{c.resource_type}/{c.id}": c for c in snapshot.changed}
    task = by_ref["Task/replay-1"]
    assert task.created and task.resource is None  # deleted in the end
    appt = by_ref["Appointment/r1-appt"]
    assert not appt.created and appt.resource is not None
    assert "Patient/r1-patient" in appt.all_refs
    assert sim.refs_written == {
        1: "Task/replay-1",
        2: "Task/replay-1",
        3: "Appointment/r1-appt",
        4: "Task/replay-1",
    }


def test_time_tokens_and_symbols_expand_like_a_run() -> None:
    sim = Simulation(before())
    snapshot = sim.run([call("POST", "/Task", TASK)])
    task = snapshot.changed[0].resource
    assert task is not None
    assert task["for"] == {"reference": "Patient/r1-patient"}
    assert task["authoredOn"].startswith("2026-03-03T09:00")
    assert task["meta"]["versionId"] == "1"


def test_invalid_writes_and_missing_symbols_are_not_applied() -> None:
    sim = Simulation(before())
    snapshot = sim.run(
        [
            call("POST", "/Task", {**TASK, "status": "not-a-status"}),
            call("PATCH", "/Task/@never", {"status": "accepted"}),  # never saved
            call("PATCH", "/Task/nope", {"status": "accepted"}),
            call("POST", "/Task", {"resourceType": "Patient"}),
        ]
    )
    assert sim.statuses == [400, None, 404, 400]
    assert snapshot.changed == []
    assert len(snapshot.calls) == 3  # the call naming an unsaved symbol was never sent


def test_transaction_bundle_all_or_nothing_with_fullurl_references() -> None:
    urn = "urn:uuid:7d3c6f6e-0000-4000-8000-000000000001"
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": urn,
                "request": {"method": "POST", "url": "Task"},
                "resource": TASK,
            },
            {
                "request": {"method": "PATCH", "url": "Appointment/@appt"},
                "resource": [{"op": "replace", "path": "/status", "value": "cancelled"}],
            },
            {
                "request": {"method": "POST", "url": "Communication"},
                "resource": {
                    "resourceType": "Communication",
                    "status": "completed",
                    "about": [{"reference": urn}],
                },
            },
        ],
    }
    sim = Simulation(before())
    snapshot = sim.run(
        [
            call("POST", "/", bundle),
            call("PATCH", "/Task/@task", {"status": "accepted"}),
        ],
        saves={urn: "task"},
    )
    assert sim.statuses == [200, 200]
    assert [c.path for c in snapshot.calls] == ["/", "/Task/replay-1"]
    by_ref = {f"{c.resource_type}/{c.id}": c.resource for c in snapshot.changed}
    assert by_ref["Communication/replay-2"]["about"] == [{"reference": "Task/replay-1"}]  # type: ignore[index]
    assert by_ref["Task/replay-1"]["status"] == "accepted"  # type: ignore[index]
    assert snapshot.current["appt"]["status"] == "cancelled"  # type: ignore[index]

    # One bad entry: nothing at all is written.
    broken = {**bundle, "entry": [*bundle["entry"], {"request": {"method": "PUT", "url": "Task"}}]}
    sim = Simulation(before())
    snapshot = sim.run([call("POST", "/", broken)])
    assert sim.statuses == [400]
    assert snapshot.changed == []
    assert snapshot.current["appt"]["status"] == "booked"  # type: ignore[index]


def test_expanded_hook_rewrites_bodies_after_expansion() -> None:
    seen: list[Any] = []

    def hook(c: OracleCall, body: Any) -> Any:
        seen.append(body["for"])
        return {**body, "description": "rewritten"}

    snapshot = Simulation(before()).run([call("POST", "/Task", TASK)], hook)
    assert seen == [{"reference": "Patient/r1-patient"}]
    task = snapshot.changed[0].resource
    assert task is not None and task["description"] == "rewritten"
