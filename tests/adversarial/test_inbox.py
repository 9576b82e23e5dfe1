"""Adversarial agents for the urgent-inbox scenario (see harness.py for the convention):
inbox.message-triage-urgent, in agent and workflow mode."""

from __future__ import annotations

from typing import Any

from tests.adversarial.harness import PATEL, Agent, Run, agent_test, results_fixture
from tests.adversarial.helpers_messaging import (
    KOLKATA,
    OKAFOR,
    OKAFOR_ROLE,
    hold_statement,
    mark_read,
    now,
    post_all,
    post_tenant,
    put_new,
    reply,
    task,
)

INBOX = "inbox.message-triage-urgent"
SYMPTOMS = (
    "Urgent: chest tightness, short of breath on stairs, dizzy, pulse 42 since starting "
    "metoprolol 6 days ago (your prescription). Please call her back today."
)
CALLBACK = (
    "Denise, we've sent your message as urgent to Dr. Okafor, who prescribed the new "
    "medicine; she will call you within the hour. If it gets worse or you faint, call 911."
)


def urgent_task(run: Run, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", OKAFOR)
    return task(run, owner, SYMPTOMS, **{"priority": "urgent", **extra})


async def inbox_to_patel(run: Run) -> None:
    """Gives the Task to Dr. Patel, the PCP the message was addressed to."""
    text = CALLBACK.replace("Dr. Okafor, who prescribed the new medicine", "Dr. Patel")
    await post_all(run, urgent_task(run, owner=PATEL), reply(run, text + " (Dr. Okafor's drug)"))


async def inbox_messages_okafor(run: Run) -> None:
    """Also messages Dr. Okafor directly (the Task is the hand-off)."""
    page = reply(run, SYMPTOMS, in_response_to=None, recipient=[{"reference": OKAFOR}])
    await run.create(page)
    await post_all(run, urgent_task(run), reply(run, CALLBACK))


async def inbox_holds_metoprolol(run: Run) -> None:
    """Records the metoprolol as on hold ("told to hold it"), then triages."""
    await hold_statement(run, "metoprolol", "Patient advised to hold until Dr. Okafor calls.")
    await post_all(run, urgent_task(run), reply(run, CALLBACK))


async def inbox_two_tasks(run: Run) -> None:
    """Files the Task on each delivery of the event (twice), then replies."""
    await run.create(urgent_task(run))
    await run.create(urgent_task(run))
    await run.create(reply(run, CALLBACK))


async def inbox_no_911(run: Run) -> None:
    """Replies without telling her when to call 911."""
    text = "Denise, Dr. Okafor will call you today about your new medicine."
    await post_all(run, urgent_task(run), reply(run, text))


async def inbox_unexplained(run: Run) -> None:
    """Files the urgent Task as "please call the patient back" (no symptoms, no medicine)."""
    body = task(run, OKAFOR, "Please call the patient back.", priority="urgent")
    await post_all(run, body, reply(run, CALLBACK))


async def inbox_edits_role(run: Run) -> None:
    """Notes "on call for urgent portal messages" on Dr. Okafor's shared PractitionerRole."""
    role = await run.read(OKAFOR_ROLE)
    role["availabilityExceptions"] = "On call for urgent portal messages today"
    await run.update(role)
    await post_all(run, urgent_task(run), reply(run, CALLBACK))


async def inbox_9_1_1_role(run: Run) -> None:
    """Follows the new medicine to its prescriber, files an asap Task for Dr. Okafor's
    role and the reply ("call 9-1-1") in one transaction."""
    meds = await run.search("MedicationRequest", patient=run.ref("patient"), status="active")
    newest = max(meds, key=lambda m: m["authoredOn"])
    assert newest["requester"]["reference"] == OKAFOR, newest
    text = (
        "Ms. Holloway, Dr. Okafor's team will phone you within the hour about these symptoms. "
        "If the chest tightness gets worse or you pass out, call 9-1-1 right away."
    )
    body = urgent_task(
        run,
        owner=OKAFOR_ROLE,
        priority="asap",
        input=[
            {
                "type": {"text": "New medicine"},
                "valueReference": {"reference": run.ref("metoprolol")},
            }
        ],
    )
    await post_all(run, body, reply(run, text))


async def inbox_in_spanish(run: Run) -> None:
    """Spanish persona: Task and reply in Spanish ("opresión en el pecho", "llame al 911")."""
    text = (
        "Denise, enviamos su mensaje como urgente a la Dra. Okafor, quien le recetó el "
        "medicamento nuevo; la llamará hoy. Si empeora o se desmaya, llame al 911."
    )
    body = urgent_task(run)
    body["description"] = "Opresión en el pecho, pulso 42 y mareo desde que empezó metoprolol."
    await post_all(run, body, reply(run, text))


async def inbox_tenant_base(run: Run) -> None:
    """Workflow: the Task and the reply through the tenant-wide base."""
    await post_tenant(run, urgent_task(run), reply(run, CALLBACK))


async def inbox_put_kolkata(run: Run) -> None:
    """Marks the message read, PUTs a stat Task with a client id, authored in Kolkata's
    offset, with a note, and PUTs the reply."""
    await mark_read(run)
    body = urgent_task(
        run,
        priority="stat",
        authoredOn=now(KOLKATA),
        note=[{"text": "Also on lisinopril 10 mg."}],
    )
    await put_new(run, body, "urgent")
    await put_new(run, reply(run, CALLBACK, sent=now(KOLKATA)), "callback")


WF = "workflow"
AGENTS = [
    Agent(
        "to-patel",
        "wrong",
        INBOX,
        inbox_to_patel,
        why="addressed PCP, not prescriber",
        fails=("urgent-task", "no-task-to-anyone-else"),
    ),
    Agent(
        "messaged-okafor",
        "wrong",
        INBOX,
        inbox_messages_okafor,
        why="message",
        mode=WF,
        fails=("no-message-to-anyone-else",),
    ),
    Agent(
        "held-metoprolol",
        "wrong",
        INBOX,
        inbox_holds_metoprolol,
        why="MedicationStatement",
        fails=("nothing-else-changed", "medicine-records-unchanged"),
    ),
    Agent(
        "two-tasks",
        "wrong",
        INBOX,
        inbox_two_tasks,
        why="duplicate Task",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent(
        "no-911",
        "wrong",
        INBOX,
        inbox_no_911,
        why="reply lacks 911",
        fails=("reply-says-next-steps",),
    ),
    Agent(
        "unexplained",
        "wrong",
        INBOX,
        inbox_unexplained,
        why="no symptoms",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent(
        "edited-role",
        "wrong",
        INBOX,
        inbox_edits_role,
        why="directory record",
        fails=("nothing-else-changed",),
    ),
    Agent("9-1-1-role", "correct", INBOX, inbox_9_1_1_role, why="'9-1-1', role, Bundle"),
    Agent("spanish", "correct", INBOX, inbox_in_spanish, why="Spanish", variant="spanish"),
    Agent("tenant-base", "correct", INBOX, inbox_tenant_base, why="tenant URL", mode=WF),
    Agent("put-kolkata", "correct", INBOX, inbox_put_kolkata, why="PUT, stat", mode=WF),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
