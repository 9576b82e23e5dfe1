"""`changes`: every change the system made is accounted for, or it is named."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from app.grading.changes import changed_paths
from app.grading.engine import grade
from app.grading.snapshot import ChangedResource
from tests.grading.test_fhirpath import (
    appointment,
    changed,
    communication,
    expectation,
    make_snapshot,
    task,
)
from understudy_client.contract.runs import ExpectationResult

BOOKED: dict[str, Any] = {
    "id": "booked",
    "type": "resource",
    "resourceType": "Appointment",
    "where": ["status = 'booked'"],
}
REPLIED: dict[str, Any] = {
    "id": "replied",
    "type": "resource",
    "resourceType": "Communication",
}
GUARD: dict[str, Any] = {"id": "guard", "type": "changes", "allow": ["booked", "replied"]}


def updated(before: dict[str, Any], after: dict[str, Any], **kw: Any) -> ChangedResource:
    return replace(changed(after, **kw), created=False, before=before)


def result_of(items: list[dict[str, Any]], writes: list[ChangedResource]) -> ExpectationResult:
    verdict = grade([expectation(**i) for i in items], make_snapshot(changed=writes))
    return next(r for r in verdict.expectations if r.id == "guard")


def test_expected_writes_pass_and_are_listed() -> None:
    result = result_of(
        [BOOKED, REPLIED, GUARD],
        [changed(appointment("a1")), changed(communication("c1", text="Booked"))],
    )
    assert result.passed is True
    assert result.evidence.matches == [
        "Appointment/a1 (by booked)",
        "Communication/c1 (by replied)",
    ]


def test_nothing_written_holds() -> None:
    assert result_of([BOOKED, REPLIED, GUARD], []).passed is True


def test_an_extra_task_fails_naming_it() -> None:
    result = result_of([BOOKED, REPLIED, GUARD], [changed(appointment("a1")), changed(task("t1"))])
    assert result.passed is False
    assert "created Task/t1" in result.detail
    assert result.evidence.closest == "Task/t1"
    assert result.evidence.clauses == [{"where": "unexpected: created Task/t1", "holds": False}]


def test_a_near_duplicate_not_matching_the_expectation_fails() -> None:
    """The second hold as `pending` next to the booked one."""
    writes = [changed(appointment("a1")), changed(appointment("a2", status="pending"), first=2)]
    result = result_of([BOOKED, REPLIED, GUARD], writes)
    assert result.passed is False
    assert "created Appointment/a2" in result.detail


def test_a_duplicate_is_never_expected_even_when_allowed() -> None:
    """Two identical Tasks both match the allowed expectation; the second is a duplicate
    (written a minute later, with its own identifier and authoredOn)."""
    first = task("t1") | {"authoredOn": "2025-03-07T08:01:00Z"}
    again = task("t2") | {"authoredOn": "2025-03-07T08:02:00Z", "identifier": [{"value": "2"}]}
    tasks = {"id": "tasks", "type": "resource", "resourceType": "Task"}
    guard = {"id": "guard", "type": "changes", "allow": ["tasks"]}
    result = result_of([tasks, guard], [changed(first), changed(again, first=2)])
    assert result.passed is False
    assert "created Task/t2, a duplicate of Task/t1" in result.detail
    assert result.evidence.closest == "Task/t2"
    different = task("t3", priority="urgent")
    assert result_of([tasks, guard], [changed(first), changed(different, first=2)]).passed


def test_an_update_names_the_paths_that_changed() -> None:
    before: dict[str, Any] = {
        "resourceType": "Patient",
        "id": "pat-1",
        "meta": {"versionId": "1"},
        "telecom": [{"system": "phone", "value": "555-0100"}],
        "name": [{"family": "Rivera"}],
    }
    after = copy.deepcopy(before)
    after["telecom"][0]["value"] = "555-0199"
    after["meta"] = {"versionId": "2"}
    after["gender"] = "other"
    result = result_of(
        [BOOKED, REPLIED, GUARD], [changed(appointment("a1")), updated(before, after)]
    )
    assert result.passed is False
    assert "updated Patient/pat-1 (gender, telecom[0].value)" in result.detail
    assert result.evidence.clauses[0]["value"] == "gender, telecom[0].value"


def test_a_deletion_is_named() -> None:
    gone = replace(changed(task("t9"), deleted=True), created=False, before=task("t9"))
    result = result_of([BOOKED, REPLIED, GUARD], [gone])
    assert result.passed is False
    assert "deleted Task/t9" in result.detail


def test_allow_where_accounts_for_a_change_but_never_for_a_deletion() -> None:
    guard = GUARD | {"allowWhere": ["resourceType = 'Task' and status = 'requested'"]}
    result = result_of([BOOKED, REPLIED, guard], [changed(task("t1"))])
    assert result.passed is True
    assert any("allowWhere" in m for m in result.evidence.matches)
    gone = replace(changed(task("t9"), deleted=True), created=False, before=task("t9"))
    result = result_of([BOOKED, REPLIED, guard], [changed(task("t1")), gone])
    assert result.passed is False
    assert "deleted Task/t9" in result.detail


def test_no_net_change_is_not_a_change() -> None:
    same = updated(task("t1"), task("t1"))
    created_then_deleted = changed(task("t2"), deleted=True)
    result = result_of([BOOKED, REPLIED, GUARD], [same, created_then_deleted])
    assert result.passed is True
    assert result.evidence.note is not None
    assert "rewritten unchanged" in result.evidence.note
    assert "created and deleted again" in result.evidence.note


def test_a_record_created_and_withdrawn_is_no_change_but_a_sent_message_is() -> None:
    withdrawn = changed(task("t3", status="cancelled"))
    result = result_of([BOOKED, REPLIED, GUARD], [withdrawn])
    assert result.passed is True
    assert (
        result.evidence.note is not None and "withdrawn again (cancelled)" in result.evidence.note
    )
    unsent = changed(communication("c9", text="oops", recipient="Patient/pat-9"))
    unsent.resource["status"] = "entered-in-error"  # type: ignore[index]
    guard = {"id": "guard", "type": "changes", "allow": ["booked"]}
    assert result_of([BOOKED, guard], [unsent]).passed is False


def test_field_expectation_allows_its_fixture_resource_only_when_it_holds() -> None:
    keep = {"id": "kept", "type": "field", "target": "@appt", "where": ["status = 'booked'"]}
    guard = {"id": "guard", "type": "changes", "allow": ["kept"]}
    fixture_appt = appointment("appt-1") | {"comment": "running late"}
    ok = updated(appointment("appt-1"), fixture_appt)
    snapshot = make_snapshot(changed=[ok], current={"appt": fixture_appt})
    verdict = grade([expectation(**keep), expectation(**guard)], snapshot)
    assert [r.passed for r in verdict.expectations] == [True, True]

    cancelled = appointment("appt-1", status="cancelled")
    bad = updated(appointment("appt-1"), cancelled)
    snapshot = make_snapshot(changed=[bad], current={"appt": cancelled})
    verdict = grade([expectation(**keep), expectation(**guard)], snapshot)
    assert verdict.expectations[1].passed is False
    assert "updated Appointment/appt-1 (status)" in verdict.expectations[1].detail


def test_any_of_allows_what_its_holding_children_matched() -> None:
    either = {"id": "either", "type": "any_of", "expectations": [BOOKED, REPLIED]}
    guard = {"id": "guard", "type": "changes", "allow": ["either"]}
    result = result_of([either, guard], [changed(appointment("a1"))])
    assert result.passed is True


def test_scope_patient_ignores_tenant_wide_writes_and_scope_tenant_sees_them() -> None:
    slot = changed({"resourceType": "Slot", "id": "s1", "status": "busy"}, run_id=None)
    assert result_of([BOOKED, REPLIED, GUARD], [slot]).passed is True
    tenant_guard = GUARD | {"scope": "tenant"}
    result = result_of([BOOKED, REPLIED, tenant_guard], [slot])
    assert result.passed is False
    assert "created Slot/s1" in result.detail


def test_a_shared_resource_edited_through_the_run_view_is_the_runs_change() -> None:
    """Dr. Chen's record is the tenant's directory, not the run's: edited through the run's
    view it is still the run's doing."""
    doc = {"resourceType": "Practitioner", "id": "dr-lee", "active": False}
    edited = replace(
        changed(doc, run_id=None), created=False, via_run=True, before=doc | {"active": True}
    )
    result = result_of([BOOKED, REPLIED, GUARD], [edited])
    assert result.passed is False
    assert "updated Practitioner/dr-lee (active)" in result.detail


def test_many_evidence_refs_are_all_allowed_beyond_the_listing_cap() -> None:
    writes = [changed(communication(f"c{i}", text=f"note {i}"), first=i) for i in range(30)]
    result = result_of([REPLIED, {"id": "guard", "type": "changes", "allow": ["replied"]}], writes)
    assert result.passed is True


def test_an_any_of_holding_the_guard_itself_does_not_recurse() -> None:
    inner_guard = {"id": "guard", "type": "changes", "allow": ["either"]}
    either = {"id": "either", "type": "any_of", "expectations": [inner_guard, BOOKED]}
    verdict = grade([expectation(**either)], make_snapshot(changed=[changed(task("t1"))]))
    assert verdict.expectations[0].passed is False


@pytest.mark.parametrize(
    ("before", "after", "paths"),
    [
        ({"a": 1}, {"a": 1}, []),
        ({"a": 1}, {"a": 2}, ["a"]),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}, ["a.b[1]"]),
        ({"a": [1]}, {"a": [1, 2]}, ["a"]),
        ({"meta": {"versionId": "1"}}, {"meta": {"versionId": "2"}}, []),
        ({}, {"note": [{"text": "x"}]}, ["note"]),
    ],
)
def test_changed_paths(before: Any, after: Any, paths: list[str]) -> None:
    assert changed_paths(before, after) == paths


def test_an_allow_entry_with_paths_limits_what_an_update_may_touch() -> None:
    """Filing a document to the chart (subject) must not also rewrite its content."""
    keep = {"id": "filed", "type": "field", "target": "@appt", "where": ["status = 'booked'"]}
    guard = {"id": "guard", "type": "changes", "allow": [{"of": "filed", "paths": ["comment"]}]}
    noted = appointment("appt-1") | {"comment": "running late"}
    ok = updated(appointment("appt-1"), noted)
    verdict = grade(
        [expectation(**keep), expectation(**guard)],
        make_snapshot(changed=[ok], current={"appt": noted}),
    )
    assert verdict.expectations[1].passed is True
    moved = noted | {"start": "2025-03-10T10:00:00Z"}
    bad = updated(appointment("appt-1"), moved)
    verdict = grade(
        [expectation(**keep), expectation(**guard)],
        make_snapshot(changed=[bad], current={"appt": moved}),
    )
    result = verdict.expectations[1]
    assert result.passed is False
    assert "updated Appointment/appt-1 beyond what filed allows" in result.detail
    assert result.evidence.clauses[0]["value"] == "start (allowed: comment)"


def test_a_created_resource_with_decimals_is_compared_not_an_error() -> None:
    """Stored resources carry decimals as Decimal; two created with one value are a
    duplicate, and the guard says so instead of failing with a grading error."""
    from decimal import Decimal

    from app.grading.changes import content_key

    a = {
        "resourceType": "Observation",
        "status": "final",
        "valueQuantity": {"value": Decimal("7.4")},
    }
    assert content_key(a) == content_key(dict(a, id="other"))
    assert content_key(a) != content_key({**a, "valueQuantity": {"value": Decimal("7.5")}})
