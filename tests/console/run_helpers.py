"""Scenarios and API calls the run-page tests share: a small agent-mode scenario whose
checks an agent (the test, over httpx against fhirBase) can satisfy one at a time, and a
patientSim one."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from tests.conftest import TenantHandle

CHEN = "Practitioner/demo-canonical-prac-chen"

# Two required checks, so a first write turns one to holding while the run stays live.
TASKS: dict[str, Any] = {
    "id": "custom.console-two-steps",
    "title": "Two steps: a Task, then a message",
    "category": "messaging",
    "modes": ["agent"],
    "brief": "{{patient.name}} ({{patient.id}}) asked for a call back. File a Task for the "
    "front desk, then write to the patient.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Lindqvist", "given": ["Maja"]}],
        }
    ],
    "expectations": [
        {
            "id": "task",
            "type": "resource",
            "label": "A Task for the call back",
            "resourceType": "Task",
            "where": ["for.reference = 'Patient/' + %fixture.patient"],
        },
        {
            "id": "message",
            "type": "resource",
            "label": "A completed message to the patient",
            "resourceType": "Communication",
            "where": [
                "recipient.where(reference = 'Patient/' + %fixture.patient).exists()",
                "status = 'completed'",
            ],
        },
    ],
    "oracle": [
        {
            "method": "POST",
            "path": "/Task",
            "body": {
                "resourceType": "Task",
                "status": "requested",
                "intent": "order",
                "for": {"reference": "@patient"},
            },
        },
        {
            "method": "POST",
            "path": "/Communication",
            "body": {
                "resourceType": "Communication",
                "status": "completed",
                "recipient": [{"reference": "@patient"}],
                "payload": [{"contentString": "We will call you back today."}],
            },
        },
    ],
}

SIM_ANSWER = "Any weekday afternoon after 2 pm works for me."
SIM: dict[str, Any] = {
    "id": "custom.console-sim",
    "title": "Reschedule, asking when",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "{{patient.name}} ({{patient.id}}) wrote: I can't make my appointment.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Okoye", "given": ["Ada"]}],
        }
    ],
    "expectations": [
        {
            "id": "asked",
            "type": "resource",
            "label": "A message to the patient",
            "resourceType": "Communication",
            "where": ["recipient.where(reference = 'Patient/' + %fixture.patient).exists()"],
        },
        {
            "id": "task",
            "type": "resource",
            "label": "A Task to rebook the patient",
            "resourceType": "Task",
            "where": ["for.reference = 'Patient/' + %fixture.patient"],
        },
    ],
    "patientSim": {
        "patient": "@patient",
        "goal": "Move my appointment to another day",
        "facts": [
            {"topic": "preferred time", "keywords": ["day", "time", "when"], "answer": SIM_ANSWER}
        ],
        "maxTurns": 2,
    },
    "oracle": [
        {
            "method": "POST",
            "path": "/Communication",
            "body": {
                "resourceType": "Communication",
                "status": "completed",
                "subject": {"reference": "@patient"},
                "recipient": [{"reference": "@patient"}],
                "sender": {"reference": CHEN},
                "payload": [{"contentString": "Which day and time would suit you?"}],
            },
        },
        {
            "method": "POST",
            "path": "/Task",
            "body": {
                "resourceType": "Task",
                "status": "requested",
                "intent": "order",
                "for": {"reference": "@patient"},
            },
        },
    ],
}


def api(tenant: TenantHandle) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=30)


async def start(
    tenant: TenantHandle, scenario: dict[str, Any] = TASKS, **fields: Any
) -> dict[str, Any]:
    """Import the scenario (again: a new version is harmless) and start a run of it."""
    async with api(tenant) as client:
        imported = await client.post("/api/testing/scenarios", json=copy.deepcopy(scenario))
        assert imported.status_code in (200, 201), imported.text
        answer = await client.post(
            "/api/testing/runs", json={"scenarioId": scenario["id"], **fields}
        )
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    return run


def staff_message(run: dict[str, Any], text: str, status: str = "completed") -> dict[str, Any]:
    patient = run["fixture"]["patient"]
    return {
        "resourceType": "Communication",
        "status": status,
        "subject": {"reference": patient},
        "recipient": [{"reference": patient}],
        "sender": {"reference": CHEN},
        "payload": [{"contentString": text}],
    }


def task_for(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "for": {"reference": run["fixture"]["patient"]},
        "description": "Call the patient back",
    }
