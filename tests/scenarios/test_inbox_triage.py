"""inbox.message-triage-urgent graded on real runs: the careless answers an agent gives
(the wrong clinician, routine priority, two Tasks, no reply, a reply that does not say
what happens next, a message or a booking instead of a Task, a changed medicine) fail,
and the equivalent right answers the brief allows pass."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import TenantHandle

SCENARIO = "inbox.message-triage-urgent"
OKAFOR = "Practitioner/demo-canonical-prac-okafor"
OKAFOR_ROLE = "PractitionerRole/demo-canonical-role-okafor"
PATEL = "Practitioner/demo-canonical-prac-patel"
CLINIC = "Organization/demo-canonical-org"
NEXT_STEPS = (
    "Your message has gone to Dr. Okafor, who prescribed the new medicine, as urgent: she"
    " will call you within the hour. If it gets worse or you faint, call 911 now."
)


class Run:
    """A live run of the scenario and a FHIR client on its base."""

    def __init__(self, fhir: httpx.AsyncClient, view: dict[str, Any]) -> None:
        self.fhir = fhir
        self.base = view["fhirBase"]
        self.refs: dict[str, str] = view["fixture"]

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.fhir.post(f"{self.base}/{body['resourceType']}", json=body)
        assert r.status_code == 201, r.text
        created: dict[str, Any] = r.json()
        return created

    async def put(self, body: dict[str, Any]) -> None:
        r = await self.fhir.put(f"{self.base}/{body['resourceType']}/{body['id']}", json=body)
        assert r.status_code == 200, r.text

    def task(self, owner: str = OKAFOR, priority: str = "urgent", **extra: Any) -> dict[str, Any]:
        return {
            "resourceType": "Task",
            "status": "requested",
            "intent": "order",
            "priority": priority,
            "description": "Chest tightness, short of breath, pulse 42 since starting metoprolol.",
            "focus": {"reference": self.refs["msg"]},
            "for": {"reference": self.refs["patient"]},
            "requester": {"reference": CLINIC},
            "owner": {"reference": owner},
            **extra,
        }

    def reply(self, text: str = NEXT_STEPS, sender: str = CLINIC) -> dict[str, Any]:
        return {
            "resourceType": "Communication",
            "status": "completed",
            "inResponseTo": [{"reference": self.refs["msg"]}],
            "subject": {"reference": self.refs["patient"]},
            "sender": {"reference": sender},
            "recipient": [{"reference": self.refs["patient"]}],
            "payload": [{"contentString": text}],
        }


Work = Callable[[Run], Awaitable[None]]


async def right(run: Run) -> None:
    await run.post(run.task())
    await run.post(run.reply())


async def asap_to_her_role(run: Run) -> None:
    await run.post(run.task(owner=OKAFOR_ROLE, priority="asap"))
    await run.post(run.reply(sender=OKAFOR))


async def stat_reply_first(run: Run) -> None:
    await run.post(run.reply())
    await run.post(run.task(priority="stat"))


async def misrouted_then_cancelled(run: Run) -> None:
    wrong = await run.post(run.task(owner=PATEL))
    await run.put({**wrong, "status": "cancelled"})
    await right(run)


async def to_the_pcp(run: Run) -> None:
    await run.post(run.task(owner=PATEL))
    await run.post(run.reply(NEXT_STEPS.replace("Okafor", "Patel")))


async def routine(run: Run) -> None:
    await run.post(run.task(priority="routine"))
    await run.post(run.reply())


async def two_tasks(run: Run) -> None:
    await run.post(run.task())
    await run.post(run.task(priority="asap"))
    await run.post(run.reply())


async def plus_a_routine_task(run: Run) -> None:
    # The extra Task first: written after the right work, it could land after the worker
    # had already passed the run (a run passes as soon as every required check holds).
    await run.post(run.task(priority="routine", description="Discuss at next check-up."))
    await right(run)


async def no_reply(run: Run) -> None:
    await run.post(run.task())


async def reply_without_next_steps(run: Run) -> None:
    await run.post(run.task())
    await run.post(run.reply("Thank you, we have received your message."))


async def message_instead_of_task(run: Run) -> None:
    note = run.reply("Dr. Okafor: urgent, please call Denise Holloway (pulse 42, chest tight).")
    note["recipient"] = [{"reference": OKAFOR}]
    await run.post(note)
    await run.post(run.reply())


def _next_weekday_at(hhmm: str, minutes: int) -> tuple[str, str]:
    """A time the canonical practitioners have free (the scheduling rules refuse others)."""
    day = datetime.now(UTC).date() + timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    start = datetime.combine(day, time.fromisoformat(hhmm), UTC)
    end = start + timedelta(minutes=minutes)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


async def booked_instead(run: Run) -> None:
    start, end = _next_weekday_at("09:00", 30)
    await run.post(
        {
            "resourceType": "Appointment",
            "status": "booked",
            "start": start,
            "end": end,
            "participant": [
                {"actor": {"reference": run.refs["patient"]}, "status": "accepted"},
                {"actor": {"reference": PATEL}, "status": "accepted"},
            ],
        }
    )
    await run.post(run.reply(NEXT_STEPS))


async def stopped_the_medicine(run: Run) -> None:
    await right(run)
    r = await run.fhir.get(f"{run.base}/{run.refs['metoprolol']}")
    await run.put({**r.json(), "status": "stopped"})


GUARD = "nothing-else-changed"  # the scenario's `changes` expectation


PASSING = [right, asap_to_her_role, stat_reply_first, misrouted_then_cancelled]
FAILING: list[tuple[Work, set[str]]] = [
    # What the reply says is the message check's (reply-says-next-steps); the reply
    # expectation itself looks at where it goes.
    (to_the_pcp, {"urgent-task", "no-task-to-anyone-else", "reply-says-next-steps", GUARD}),
    (routine, {"urgent-task", "no-routine-task", GUARD}),
    (two_tasks, {"urgent-task"}),
    (plus_a_routine_task, {"no-routine-task", GUARD}),
    (no_reply, {"reply-next-steps", "reply-says-next-steps"}),
    (reply_without_next_steps, {"reply-says-next-steps"}),
    (message_instead_of_task, {"urgent-task", "no-message-to-anyone-else", GUARD}),
    (booked_instead, {"urgent-task", "no-appointment", GUARD}),
    (stopped_the_medicine, {"medicines-unchanged", GUARD}),
]


async def graded(tenant: TenantHandle, work: Work, mode: str = "agent") -> dict[str, Any]:
    async with (
        httpx.AsyncClient(
            base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
        ) as api,
        httpx.AsyncClient(headers=tenant.headers, timeout=60) as fhir,
    ):
        started = await api.post("/runs", json={"scenarioId": SCENARIO, "mode": mode})
        assert started.status_code == 201, started.text
        view = started.json()
        await work(Run(fhir, view))
        finished = await api.post(f"/runs/{view['id']}/finish")
        assert finished.status_code == 200, finished.text
        verdict: dict[str, Any] = finished.json()
        return verdict


def failing_required(verdict: dict[str, Any]) -> set[str]:
    return {e["id"] for e in verdict["expectations"] if e.get("required") and e["passed"] is False}


@pytest.mark.parametrize("work", PASSING, ids=[w.__name__ for w in PASSING])
async def test_equivalent_right_answers_pass(tenant: TenantHandle, work: Work) -> None:
    verdict = await graded(tenant, work)
    assert verdict["status"] == "passed", failing_required(verdict)


@pytest.mark.parametrize(("work", "caught_by"), FAILING, ids=[w.__name__ for w, _ in FAILING])
async def test_careless_answers_fail(tenant: TenantHandle, work: Work, caught_by: set[str]) -> None:
    verdict = await graded(tenant, work)
    assert verdict["status"] == "failed"
    # The end-state comparison with the reference solution catches those that change the
    # chart too (what a message says is not its business).
    assert failing_required(verdict) - {"matches-reference"} == caught_by


async def test_both_modes_and_the_brief(tenant: TenantHandle) -> None:
    workflow = await graded(tenant, right, mode="workflow")
    assert workflow["status"] == "passed", failing_required(workflow)
    assert "brief" not in workflow
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=60
    ) as api:
        for mode in ("agent", "workflow"):
            r = await api.post(f"/scenarios/{SCENARIO}/reference-run", params={"mode": mode})
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "passed", failing_required(r.json())
        run = (await api.post("/runs", json={"scenarioId": SCENARIO})).json()
        await api.post(f"/runs/{run['id']}/cancel")
    # The agent is told where the message is and who the patient is.
    assert run["mode"] == "agent"
    assert run["fixture"]["msg"].split("/")[1] in run["brief"]
    assert "Denise Holloway" in run["brief"]
