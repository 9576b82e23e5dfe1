"""Adversarial agents for the intake scenario (see harness.py for the convention):
intake.questionnaire-routing, a workflow that routes a new-patient form to one queue."""

from __future__ import annotations

from typing import Any

from tests.adversarial.harness import (
    CHEN,
    Agent,
    Run,
    agent_test,
    participants,
    results_fixture,
)
from tests.adversarial.helpers_messaging import (
    CHICAGO,
    add_problem,
    mark_read,
    now,
    post_all,
    post_tenant,
    put_new,
    task,
)

INTAKE = "intake.questionnaire-routing"
WHY = "Intake form: chest tightness on exertion for about 10 days. Please call to assess."


def routed(run: Run, queue: str = "triage", **extra: Any) -> dict[str, Any]:
    return task(run, run.ref(queue), WHY, **{"focus": "intake", "priority": None, **extra})


async def intake_behavioral(run: Run) -> None:
    """Routes to Behavioral Health Intake (reads "Several days" as a positive screen)."""
    await run.create(routed(run, "bh"))


async def intake_two_queues(run: Run) -> None:
    """Routes to Nurse Triage and also to New Patient Scheduling "to get him booked"."""
    await post_all(run, routed(run, "scheduling"), routed(run))


async def intake_adds_problem(run: Run) -> None:
    """Puts chest pain on the problem list from the form, then routes."""
    await add_problem(run, "Chest tightness on exertion", "23924001", "Tight chest")
    await run.create(routed(run))


async def intake_two_tasks(run: Run) -> None:
    """Routes to Nurse Triage twice (a retried batch)."""
    await post_all(run, routed(run), routed(run))


async def intake_books_visit(run: Run) -> None:
    """Books the new-patient visit with Dr. Chen from the form, then routes."""
    start, end = await run.first_free(CHEN)
    await run.create(
        {
            "resourceType": "Appointment",
            "status": "booked",
            "start": start.isoformat(),
            "end": end.isoformat(),
            "participant": participants(run.ref("patient"), CHEN),
        }
    )
    await run.create(routed(run))


async def intake_unexplained(run: Run) -> None:
    """Routes to Nurse Triage without saying why ("new intake form")."""
    await run.create(
        task(run, run.ref("triage"), "New intake form.", focus="intake", priority=None)
    )


async def intake_searched_bundle(run: Run) -> None:
    """Lists the clinic's queues and picks Nurse Triage by name, routes in a transaction,
    priority asap, authored in Chicago's offset."""
    orgs = await run.search("Organization", partof="Organization/demo-canonical-org")
    queue = next(o for o in orgs if o["name"].endswith("Nurse Triage"))
    body = routed(run, priority="asap", authoredOn=now(CHICAGO))
    body["owner"] = {"reference": f"Organization/{queue['id']}", "display": queue["name"]}
    await post_all(run, body)


async def intake_in_spanish(run: Run) -> None:
    """Spanish persona: the reason written in Spanish ("opresión torácica")."""
    text = "Formulario de ingreso: opresión torácica al subir escaleras desde hace 10 días."
    await run.create({**routed(run), "description": text})


async def intake_tenant_base(run: Run) -> None:
    """Routes through the tenant-wide base."""
    await post_tenant(run, routed(run))


async def intake_put_note(run: Run) -> None:
    """Tags the form as read, PUTs the Task with a client id, a note and an identifier."""
    await mark_read(run, "intake")
    body = routed(
        run,
        priority="routine",
        note=[{"text": "PHQ-2 total 1 (negative)."}],
        identifier=[{"system": "urn:example:task", "value": "intake-route"}],
    )
    await put_new(run, body, "route")


WF = "workflow"
AGENTS = [
    Agent(
        "behavioral-health",
        "wrong",
        INTAKE,
        intake_behavioral,
        why="wrong queue",
        mode=WF,
        fails=("routed-to-triage", "no-other-queue"),
    ),
    Agent(
        "two-queues",
        "wrong",
        INTAKE,
        intake_two_queues,
        why="scheduling too",
        mode=WF,
        fails=("no-other-queue",),
    ),
    Agent(
        "added-problem",
        "wrong",
        INTAKE,
        intake_adds_problem,
        why="Condition",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        INTAKE,
        intake_two_tasks,
        why="duplicate Task",
        mode=WF,
        fails=("one-task-per-form",),
    ),
    Agent(
        "booked-visit",
        "wrong",
        INTAKE,
        intake_books_visit,
        why="Appointment",
        mode=WF,
        fails=("no-booking",),
    ),
    Agent(
        "unexplained",
        "wrong",
        INTAKE,
        intake_unexplained,
        why="no reason",
        mode=WF,
        fails=("routed-to-triage",),
    ),
    Agent("searched-bundle", "correct", INTAKE, intake_searched_bundle, why="Bundle", mode=WF),
    Agent("spanish", "correct", INTAKE, intake_in_spanish, why="es", mode=WF, variant="spanish"),
    Agent("tenant-base", "correct", INTAKE, intake_tenant_base, why="tenant URL", mode=WF),
    Agent("put-note", "correct", INTAKE, intake_put_note, why="PUT, note", mode=WF),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
