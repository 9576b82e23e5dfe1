"""The run page's view-models: pure functions over what the services return."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.console import run_views as rv
from app.fhir import service as fhir_service
from understudy_client.contract.runs import SimulatedReply, SimulatorIssue, TraceCall

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PATIENT = "Patient/p1"
CHEN = "Practitioner/chen"


def _row(rid: str, resource: dict[str, Any]) -> fhir_service.ThreadMessage:
    return fhir_service.ThreadMessage(rid, orjson.dumps(resource).decode(), AT)


def _message(sender: str, recipient: str, text: str, answers: str | None = None) -> Any:
    body: dict[str, Any] = {
        "resourceType": "Communication",
        "sender": {"reference": sender},
        "recipient": [{"reference": recipient}],
        "payload": [{"contentString": text}],
    }
    if answers:
        body["inResponseTo"] = [{"reference": answers}]
    return body


def _reply(message: str, reply: str | None, engine: str, note: str | None = None) -> Any:
    return SimulatedReply(
        message=message, reply=reply, turn=1, engine=engine, model=None,
        prompt_version=None, note=note,
    )  # fmt: skip


def test_the_thread_names_each_replys_engine_and_flags_the_simulators_issues() -> None:
    rows = [
        _row("m1", _message(CHEN, PATIENT, "When suits you?")),
        _row("r1", _message(PATIENT, CHEN, "Mondays. Also take 2 pills.", "Communication/m1")),
        _row("m2", _message(CHEN, PATIENT, "Thanks!")),
    ]
    replies = [
        _reply("Communication/m1", "Communication/r1", "scripted"),
        _reply("Communication/m2", None, "none", "the patient stopped replying: turn cap"),
    ]
    issues = [SimulatorIssue(message="Communication/m1", issue="sounds like staff")]
    thread = rv.thread_of(rows, PATIENT, replies, issues)
    assert [(m.id, m.from_patient, m.engine) for m in thread] == [
        ("m1", False, None),
        ("r1", True, "scripted"),
        ("m2", False, None),
    ]
    assert thread[1].issues == ["sounds like staff"]
    assert thread[1].in_response_to == "Communication/m1"
    assert thread[2].silenced == "the patient stopped replying: turn cap"
    box = rv.reply_box(thread, replies, PATIENT, max_turns=2)
    assert box.answers is None and box.waiting and "every turn" in box.waiting
    open_box = rv.reply_box(thread, replies[:1], PATIENT, max_turns=3)
    assert open_box.answers is not None and open_box.answers.id == "m2"


def test_references_are_linked_and_everything_else_escaped() -> None:
    html = str(rv.ref_links("closest Appointment/a-1 <b>fails</b>: x", "run_1"))
    assert '<a href="/chart/Appointment/a-1?run=run_1"' in html
    assert "&lt;b&gt;fails&lt;/b&gt;" in html
    assert "<a" not in str(rv.ref_links("GET /Slot 200"))


@pytest.mark.parametrize(
    ("resource", "patient"),
    [
        ({"resourceType": "Patient", "id": "p1"}, "Patient/p1"),
        ({"resourceType": "Task", "for": {"reference": "Patient/p2"}}, "Patient/p2"),
        ({"resourceType": "Communication", "subject": {"reference": "Patient/p3"}}, "Patient/p3"),
        (
            {
                "resourceType": "Appointment",
                "participant": [
                    {"actor": {"reference": CHEN}},
                    {"actor": {"reference": "Patient/p4"}},
                ],
            },
            "Patient/p4",
        ),
        ({"resourceType": "Slot", "schedule": {"reference": "Schedule/s"}}, None),
    ],
)
def test_the_patient_a_resource_is_about(resource: dict[str, Any], patient: str | None) -> None:
    assert rv.patient_of(resource) == patient


def _version(
    v: int, interaction: str, source: str | None, run: str | None
) -> fhir_service.StoredVersion:
    return fhir_service.StoredVersion("Task", "t", v, AT, interaction, run, source, "{}")


@pytest.mark.parametrize(
    ("versions", "mark"),
    [
        ([_version(1, "create", None, "run_1")], "created by this run"),
        ([_version(1, "create", "setup", "run_1")], "this run's fixture"),
        (
            [_version(2, "update", None, "run_1"), _version(1, "create", None, None)],
            "changed by this run",
        ),
        ([_version(1, "create", None, "run_2")], None),
    ],
)
def test_the_chart_marks_what_the_run_did(
    versions: list[fhir_service.StoredVersion], mark: str | None
) -> None:
    body = '{"resourceType": "Task", "status": "requested"}'
    row = fhir_service.ChartResource("Task", "t", 1, AT, body, None)
    [group] = rv.chart_groups([row], versions, "run_1")
    assert group.entries[0].mark == mark
    assert group.entries[0].summary == "requested"


def test_trace_paths_are_shown_after_their_base() -> None:
    call = TraceCall(
        at=AT, method="GET", path="/api/testing/runs/run_1/fhir/r4/Patient/p1", query="",
        status=200, duration_ms=1.0, transport="mcp", refs=[], shared=False,
    )  # fmt: skip
    shared = call.model_copy(update={"path": "/api/fhir/r4/Slot", "shared": True})
    rows = rv.trace_rows([call, shared], "run_1")
    assert [r.base for r in rows] == ["run", "tenant"]
    assert 'href="/chart/Patient/p1?run=run_1"' in str(rows[0].path_html)
    assert str(rows[1].path_html) == "/Slot"


def test_a_terminology_url_in_a_text_is_no_chart_link() -> None:
    """The crawl found /chart/CodeSystem/appointment-cancellation-reason (404): the tail of
    a system URL in a check's detail was linked as a resource."""
    text = "system http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason"
    assert "<a " not in str(rv.ref_links(text))
    assert 'href="/chart/Appointment/abc' in str(rv.ref_links("see Appointment/abc"))
