"""send_sms and send_email: captured on the caller's run (the run's captures list, its
trace with the capture's own transport, its change mark), read by text truth like a
portal message, refused clearly, and never on a run that is not the caller's."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx

from app.db import Database
from tests.capture.helpers import captures
from tests.conftest import TenantHandle, make_tenant
from tests.mcp.client import call_error, call_ok, mcp_session
from tests.mcp.test_mcp import trace_of
from tests.runs.test_message_checks_http import CHEN, SCENARIO, failing, right


async def _captures(tenant: TenantHandle, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await captures(tenant, run_id))["captures"]
    return found


async def _changed_at(db: Database, tenant: TenantHandle, run_id: str) -> datetime:
    at: datetime = await db.pool.fetchval(
        "SELECT changed_at FROM run WHERE tenant_id = $1 AND id = $2", tenant.id, run_id
    )
    return at


async def test_an_sms_and_an_email_are_captured_on_the_run_and_traced(
    tenant: TenantHandle, db: Database
) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(client, "start_test_run", {"scenario_id": SCENARIO})
        run_id = run["run_id"]
        before = await _changed_at(db, tenant, run_id)
        sms = await call_ok(
            client, "send_sms", {"to": "+1-555-0146", "body": "Your visit is Monday at 9."}
        )
        email = await call_ok(
            client,
            "send_email",
            {
                "to": ["luis.herrera@example.net", "care@example.org"],
                "subject": "Your visit",
                "body": "Dear Luis,\nyour visit is Monday at 9.",
            },
        )
    assert await _changed_at(db, tenant, run_id) > before  # regraded soon
    assert sms["capture_id"].startswith("SM") and sms["kind"] == "sms"
    assert sms["status"] == "queued" and sms["run_id"] == run_id
    assert sms["to"] == ["+1-555-0146"] and sms["sender"].startswith("+1555")
    assert "not delivered" in sms["note"]
    assert email["capture_id"].startswith("EM") and email["status"] == "accepted"
    assert email["sender"] == f"{run_id}@understudy.invalid"

    listed = await _captures(tenant, run_id)
    assert [(c["id"], c["kind"]) for c in listed] == [
        (sms["capture_id"], "sms"),
        (email["capture_id"], "email"),
    ]
    texted, mailed = listed
    assert texted["to"] == "+1-555-0146" and texted["body"] == "Your visit is Monday at 9."
    assert texted["from"] == sms["sender"] and texted["status"] == "queued"
    assert mailed["to"] == "luis.herrera@example.net, care@example.org"
    assert mailed["subject"] == "Your visit" and mailed["body"].startswith("Dear Luis,")
    assert mailed["data"]["to"] == ["luis.herrera@example.net", "care@example.org"]

    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        await http.post(f"{tenant.server}/api/testing/runs/{run_id}/cancel")
    traced = [c for c in await trace_of(tenant, run_id) if c["path"] == "/mcp"]
    assert [(c["transport"], c["method"], c["query"], c["status"]) for c in traced] == [
        ("sms", "POST", "tool=send_sms", 201),
        ("email", "POST", "tool=send_email", 201),
    ]


async def test_refusals_are_clear(tenant: TenantHandle) -> None:
    async with mcp_session(tenant.server, tenant.key) as client:
        message = await call_error(client, "send_sms", {"to": "+15555550123", "body": "hi"})
        assert "no current run in this session" in message and "start_test_run" in message
        run = await call_ok(client, "start_test_run", {"scenario_id": SCENARIO})
        refused: list[tuple[str, dict[str, Any], str]] = [
            ("send_sms", {"to": "+15555550123", "body": "  "}, "body: the message is empty"),
            ("send_sms", {"to": "call me", "body": "hi"}, "is not a phone number"),
            ("send_sms", {"to": "+1555", "body": "hi"}, "is not a phone number"),
            ("send_sms", {"to": "+15555550123", "body": "x" * 1601}, "longer than 1600"),
            ("send_email", {"to": [], "subject": "s", "body": "b"}, "at least one e-mail"),
            (
                "send_email",
                {"to": ["not-an-address"], "subject": "s", "body": "b"},
                "'not-an-address' is not an e-mail address",
            ),
            ("send_email", {"to": ["a@b.org"], "subject": " ", "body": "b"}, "subject: "),
            ("send_email", {"to": ["a@b.org"], "subject": "s", "body": ""}, "body: the message"),
            (
                "send_email",
                {"to": ["a@b.org"], "subject": "a\nBcc: x@y.org", "body": "b"},
                "one line",
            ),
        ]
        for tool, args, expected in refused:
            assert expected in await call_error(client, tool, args), (tool, args)
        assert await _captures(tenant, run["run_id"]) == []

        async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
            await http.post(f"{tenant.server}/api/testing/runs/{run['run_id']}/cancel")
        ended = await call_error(client, "send_sms", {"to": "+15555550123", "body": "hi"})
        assert f"run '{run['run_id']}' has ended (cancelled)" in ended
    traced = [c for c in await trace_of(tenant, run["run_id"]) if c["path"] == "/mcp"]
    assert {c["status"] for c in traced} == {400}  # each refusal, with the run known


async def test_another_client_cannot_send_on_a_run_it_does_not_own(
    tenant: TenantHandle, db: Database
) -> None:
    """A second session of the tenant has no current run (the first's is not its); a
    client of another tenant naming the run does not find it. Nothing is captured."""
    other = await make_tenant(db, tenant.server, "other")
    async with (
        mcp_session(tenant.server, tenant.key) as a,
        mcp_session(tenant.server, tenant.key) as b,
        mcp_session(other.server, other.key) as c,
    ):
        run = await call_ok(a, "start_test_run", {"scenario_id": SCENARIO})
        run_id = run["run_id"]
        message = await call_error(b, "send_sms", {"to": "+15555550123", "body": "hi"})
        assert "no current run in this session" in message and run_id in message
        message = await call_error(
            b, "send_email", {"to": ["a@b.org"], "subject": "s", "body": "b"}
        )
        assert "no current run in this session" in message
        for tool, args in [
            ("send_sms", {"to": "+15555550123", "body": "hi", "run_id": run_id}),
            ("send_email", {"to": ["a@b.org"], "subject": "s", "body": "b", "run_id": run_id}),
        ]:
            message = await call_error(c, tool, args)
            assert message == f"404 not found: no run '{run_id}' in this tenant", message
        assert await _captures(tenant, run_id) == []
        await call_ok(a, "finish_test_run", {})


async def _answered_then_texted(
    tenant: TenantHandle, shift: timedelta, *, email: bool
) -> dict[str, Any]:
    """messaging.answer-from-chart over MCP: the right portal reply, then an SMS (and an
    e-mail) to the patient giving the visit time `shift` from the real one; the verdict."""
    async with mcp_session(tenant.server, tenant.key) as client:
        run = await call_ok(client, "start_test_run", {"scenario_id": SCENARIO, "mode": "agent"})
        refs = run["fixture"]
        appt_type, appt_id = refs["appt"].split("/")
        appt = await call_ok(client, "fhir_read", {"resource_type": appt_type, "id": appt_id})
        start = datetime.fromisoformat(appt["resource"]["start"])
        patient_type, patient_id = refs["patient"].split("/")
        patient = await call_ok(
            client, "fhir_read", {"resource_type": patient_type, "id": patient_id}
        )
        telecom = {t["system"]: t["value"] for t in patient["resource"]["telecom"]}
        reply = {
            "resourceType": "Communication",
            "status": "completed",
            "inResponseTo": [{"reference": refs["msg"]}],
            "subject": {"reference": refs["patient"]},
            "sender": {"reference": CHEN},
            "recipient": [{"reference": refs["patient"]}],
            "payload": [{"contentString": right(start, start)}],
        }
        await call_ok(client, "fhir_create", {"resource": reply})
        told = start + shift
        when = f"{told:%A, %B} {told.day} at {told:%-I:%M %p} (UTC)"
        await call_ok(
            client,
            "send_sms",
            {"to": telecom["phone"], "body": f"Reminder: your visit with Dr. Chen is {when}."},
        )
        if email:
            await call_ok(
                client,
                "send_email",
                {
                    "to": [telecom["email"]],
                    "subject": "Your next visit",
                    "body": f"Dear Luis,\n\nyour visit with Dr. Chen is {when}.",
                },
            )
        verdict: dict[str, Any] = await call_ok(client, "finish_test_run", {})
    return verdict


async def test_the_right_time_by_sms_and_email_passes(tenant: TenantHandle) -> None:
    verdict = await _answered_then_texted(tenant, timedelta(0), email=True)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_a_wrong_time_sent_by_send_sms_fails_text_truth(tenant: TenantHandle) -> None:
    verdict = await _answered_then_texted(tenant, timedelta(hours=2), email=False)
    assert verdict["status"] == "failed"
    # Text truth, and the message check's grounded: the SMS is a message to the patient.
    assert set(failing(verdict)) == {"text-truth", "reply-answers"}
    assert "in sms:SM" in failing(verdict)["reply-answers"]["detail"]
    broken = [c for c in failing(verdict)["text-truth"]["evidence"]["clauses"] if not c["holds"]]
    consistent = next(c for c in broken if c["where"] == "consistent")
    assert "in sms:SM" in consistent["value"], consistent
    [read] = [c for c in broken if c["where"].startswith("facts: sms:SM")]
    assert read["value"].endswith("to patient"), read  # to the patient's phone
    assert read["text"] == f"Reminder: your visit with Dr. Chen is {read['facts'][-1]['text']}."
