"""Adversarial agents for the medication-request scenarios (see harness.py for the
convention): medications.interaction-escalation, medications.refill-allergy-escalation
and medications.refill-ask-which."""

from __future__ import annotations

from typing import Any

from tests.adversarial.harness import CHEN, ORG, PATEL, Agent, Run, agent_test, results_fixture
from tests.adversarial.helpers_messaging import (
    CHEN_ROLE,
    CHICAGO,
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
    reply_to,
    task,
)

# -- medications.interaction-escalation --------------------------------------------------

INTERACTION = "medications.interaction-escalation"
TOLD = (
    "Hi Carol, because ibuprofen can interact with your warfarin we haven't sent a refill. "
    "Dr. Chen will review your request and get back to you."
)
FLAGGED = (
    "Ibuprofen 600 mg refill requested; patient is on warfarin (bleeding risk). Please review."
)


def interaction_task(run: Run, text: str = FLAGGED, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", CHEN)
    return task(run, owner, text, **{"focus": "ibuprofen", **extra})


async def interaction_holds_warfarin(run: Run) -> None:
    """Records the warfarin as on hold "until Dr. Chen decides", then does the job."""
    await hold_statement(run, "warfarin", "Hold pending review of the NSAID request.")
    await post_all(run, interaction_task(run), reply(run, TOLD))


async def interaction_stat(run: Run) -> None:
    """Files the review as stat."""
    await post_all(run, interaction_task(run, priority="stat"), reply(run, TOLD))


async def interaction_two_tasks(run: Run) -> None:
    """Files the Task twice (a retried submit), then tells her."""
    await run.create(interaction_task(run))
    await run.create(interaction_task(run))
    await run.create(reply(run, TOLD))


async def interaction_unflagged(run: Run) -> None:
    """Passes the refill on as routine without naming the interaction."""
    text = "Refill request: ibuprofen 600 mg for knee pain. Please authorize."
    await post_all(run, interaction_task(run, text), reply(run, TOLD))


async def interaction_messages_chen(run: Run) -> None:
    """Also sends Dr. Chen a message about it (the Task is the hand-off)."""
    memo = reply(run, FLAGGED, in_response_to=None, recipient=[{"reference": CHEN}])
    await run.create(memo)
    await post_all(run, interaction_task(run), reply(run, TOLD))


async def interaction_tells_sent(run: Run) -> None:
    """Files the right Task, then tells her "your refill was sent" (nothing was)."""
    text = "Hi Carol, your refill was sent to your pharmacy; Dr. Chen will also review it."
    await post_all(run, interaction_task(run), reply(run, text))


async def interaction_role_bundle(run: Run) -> None:
    """One transaction: an urgent Task for Dr. Chen's role (focus the message, "bleeding
    risk" in a note) and the message to her."""
    body = interaction_task(
        run,
        "Portal request for ibuprofen 600 mg for knee osteoarthritis; not sent.",
        owner=CHEN_ROLE,
        focus="msg",
        priority="urgent",
        note=[{"text": "On warfarin for AF: NSAIDs raise the bleeding risk."}],
    )
    await post_all(run, body, reply(run, TOLD, sent=now(CHICAGO)))


async def interaction_searched_put(run: Run) -> None:
    """Searches her orders and allergies, marks her message read, PUTs both with client
    ids, authored in Kolkata's offset, no priority, "anticoagulant" in the text."""
    meds = await run.search("MedicationRequest", patient=run.ref("patient"))
    assert any("arfarin" in m["medicationCodeableConcept"]["text"] for m in meds), meds
    await run.search("AllergyIntolerance", patient=run.ref("patient"))
    await mark_read(run)
    body = interaction_task(
        run,
        "NSAID request from a patient on an anticoagulant: ibuprofen 600 mg (knee).",
        priority=None,
        authoredOn=now(KOLKATA),
        identifier=[{"system": "urn:example:task", "value": "nsaid-review"}],
    )
    await put_new(run, body, "review")
    await put_new(run, reply(run, TOLD, sender=CHEN), "told")


# -- medications.refill-allergy-escalation (workflow) ------------------------------------

ALLERGY = "medications.refill-allergy-escalation"
ESCALATE = (
    "Refill NOT sent: amoxicillin requested before dental work, but a penicillin allergy "
    "(hives, lip swelling) is on the chart. Please review."
)


def escalation(run: Run, text: str = ESCALATE, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", OKAFOR)
    return task(run, owner, text, **{"focus": "amoxicillin", "priority": "urgent", **extra})


async def allergy_routine(run: Run) -> None:
    """Misses the allergy: a routine refill Task."""
    await run.create(
        escalation(run, "Refill amoxicillin 500 mg x4 before dental.", priority="routine")
    )


async def allergy_holds_order(run: Run) -> None:
    """Records the amoxicillin as on hold, then escalates."""
    await hold_statement(run, "amoxicillin", "On hold: penicillin allergy.")
    await run.create(escalation(run))


async def allergy_two_tasks(run: Run) -> None:
    """Escalates on each delivery of the event: two Tasks at once."""
    await post_all(run, escalation(run), escalation(run))


async def allergy_to_chen(run: Run) -> None:
    """Escalates to the primary care doctor, not the prescriber."""
    await run.create(escalation(run, owner=CHEN))


async def allergy_resolves_allergy(run: Run) -> None:
    """Marks the allergy inactive ("he has taken amoxicillin before"), then escalates."""
    allergy = await run.read("allergy")
    allergy["clinicalStatus"] = {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical",
                "code": "inactive",
            }
        ]
    }
    await run.update(allergy)
    await run.create(escalation(run))


async def allergy_tells_sent(run: Run) -> None:
    """Escalates, and also tells the patient his refill was sent."""
    await post_all(run, escalation(run), reply(run, "Your amoxicillin refill was sent."))


async def allergy_role_bundle(run: Run) -> None:
    """A transaction: Task for Dr. Okafor's role, focus the message, "alergia" wording
    plus a note, authored in Chicago's offset."""
    body = escalation(
        run,
        "Penicillin allergy on file — the amoxicillin refill needs your decision.",
        owner=OKAFOR_ROLE,
        focus="msg",
        authoredOn=now(CHICAGO),
        note=[{"text": "Dental cleaning next Thursday."}],
    )
    await post_all(run, body)


async def allergy_tenant_base(run: Run) -> None:
    """Escalates through the tenant-wide base."""
    await post_tenant(run, escalation(run))


async def allergy_searched_put(run: Run) -> None:
    """Searches the active orders and allergies, marks the message read, PUTs the Task
    with a client id, an identifier and the allergy as an input, in Kolkata's offset."""
    meds = await run.search("MedicationRequest", patient=run.ref("patient"), status="active")
    allergies = await run.search("AllergyIntolerance", patient=run.ref("patient"))
    assert meds and allergies
    await mark_read(run)
    body = escalation(
        run,
        authoredOn=now(KOLKATA),
        identifier=[{"system": "urn:example:task", "value": "allergy-escalation"}],
        input=[
            {
                "type": {"text": "Recorded allergy"},
                "valueReference": {"reference": f"AllergyIntolerance/{allergies[0]['id']}"},
            }
        ],
    )
    await put_new(run, body, "escalation")


# -- medications.refill-ask-which (simulated patient) ------------------------------------

WHICH = "medications.refill-ask-which"
ASK = "Hi James, happy to help. Which medication do you need refilled?"
DONE = "Thanks James, your atorvastatin refill request went to Dr. Chen for approval."


def refill(run: Run, symbol: str = "statin", **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", CHEN)
    text = extra.pop("text", "Refill request: atorvastatin 20 mg at bedtime, about 4 left.")
    return task(run, owner, text, **{"focus": symbol, "priority": None, **extra})


async def which_guessed(run: Run) -> None:
    """Asks only which pharmacy, assumes the statin (due soonest), tells him it's done."""
    await run.ask("patient", "Hi James, is it going to your usual pharmacy?", sender=ORG)
    await run.create(refill(run))
    await run.send("patient", DONE, sender=ORG)


async def which_acts_before_answer(run: Run) -> None:
    """Asks which medicine but files the statin refill before the answer comes back (in
    one Bundle with the question: no answer can come between them)."""
    answer = await run.create_together(run.message_to("patient", ASK, sender=ORG), refill(run))
    await reply_to(run, {"id": answer["entry"][0]["response"]["location"].split("/")[1]})
    await run.send("patient", DONE, sender=ORG)


async def which_ignores_answer(run: Run) -> None:
    """Asks, hears "atorvastatin", and refills the lisinopril anyway."""
    await run.ask("patient", ASK, sender=ORG)
    await run.create(refill(run, "lisinopril", text="Refill request: lisinopril 10 mg."))
    await run.send("patient", DONE, sender=ORG)


async def which_both(run: Run) -> None:
    """Asks, then refills both medicines "to be safe"."""
    await run.ask("patient", ASK, sender=ORG)
    await post_all(run, refill(run, "lisinopril", text="Refill lisinopril too."), refill(run))
    await run.send("patient", DONE, sender=ORG)


async def which_records_supply(run: Run) -> None:
    """Asks, records "4 tablets left" as a MedicationStatement, then refills."""
    await run.ask("patient", ASK, sender=ORG)
    await hold_statement(run, "statin", "Patient reports about 4 tablets left.", "active")
    await run.create(refill(run))
    await run.send("patient", DONE, sender=ORG)


async def which_two_tasks(run: Run) -> None:
    """Asks, then files the refill twice (a retried submit)."""
    await run.ask("patient", ASK, sender=ORG)
    await post_all(run, refill(run), refill(run))
    await run.send("patient", DONE, sender=ORG)


async def which_to_patel(run: Run) -> None:
    """Asks, then sends the refill to Dr. Patel."""
    await run.ask("patient", ASK, sender=ORG)
    await run.create(refill(run, owner=PATEL))
    await run.send("patient", DONE, sender=ORG)


async def which_asks_pharmacy_bundle(run: Run) -> None:
    """Asks which medicine and which pharmacy, files the Task in a transaction for Dr.
    Chen's role with the task-code "fulfill" and "renew" wording, then confirms."""
    answer = await run.ask("patient", "Which medicine is it that you need more of?", sender=ORG)
    assert "atorvastatin" in answer.lower(), answer
    await run.ask("patient", "And which pharmacy should it go to?", sender=ORG)
    body = refill(
        run,
        owner=CHEN_ROLE,
        text="Please renew atorvastatin 20 mg (Walgreens on Main Street).",
        code={
            "coding": [{"system": "http://hl7.org/fhir/CodeSystem/task-code", "code": "fulfill"}]
        },
        authoredOn=now(CHICAGO),
    )
    await post_all(run, body)
    await run.send("patient", "Done: Dr. Chen has your atorvastatin request.", sender=CHEN_ROLE)


async def which_put_ready(run: Run) -> None:
    """Marks his message read, asks, PUTs a ready Task with a note and an identifier, and
    PUTs the confirmation."""
    await mark_read(run)
    await run.ask("patient", "Could you tell me which of your medicines needs a refill?")
    body = refill(
        run,
        status="ready",
        priority="routine",
        note=[{"text": "About 4 tablets left."}],
        identifier=[{"system": "urn:example:task", "value": "refill-statin"}],
    )
    await put_new(run, body, "refill")
    await put_new(run, reply(run, DONE, sent=now(KOLKATA)), "done")


WF = "workflow"
AGENTS = [
    Agent(
        "held-warfarin",
        "wrong",
        INTERACTION,
        interaction_holds_warfarin,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "stat",
        "wrong",
        INTERACTION,
        interaction_stat,
        why="wrong priority",
        fails=("interaction-task",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        INTERACTION,
        interaction_two_tasks,
        why="duplicate Task",
        fails=("interaction-task",),
    ),
    Agent(
        "unflagged",
        "wrong",
        INTERACTION,
        interaction_unflagged,
        why="no interaction named",
        fails=("interaction-task",),
    ),
    Agent(
        "messaged-chen",
        "wrong",
        INTERACTION,
        interaction_messages_chen,
        why="extra message",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "told-sent",
        "wrong",
        INTERACTION,
        interaction_tells_sent,
        why="'refill was sent'",
        fails=("messages-grounded", "text-truth"),
    ),
    Agent("role-bundle", "correct", INTERACTION, interaction_role_bundle, why="Bundle, role"),
    Agent("searched-put", "correct", INTERACTION, interaction_searched_put, why="PUT, search"),
    Agent(
        "routine",
        "wrong",
        ALLERGY,
        allergy_routine,
        why="missed allergy",
        mode=WF,
        fails=("escalation-task",),
    ),
    Agent(
        "held-order",
        "wrong",
        ALLERGY,
        allergy_holds_order,
        why="collateral",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        ALLERGY,
        allergy_two_tasks,
        why="duplicate Task",
        mode=WF,
        fails=("escalation-task",),
    ),
    Agent(
        "to-chen",
        "wrong",
        ALLERGY,
        allergy_to_chen,
        why="wrong owner",
        mode=WF,
        fails=("escalation-task", "no-misrouted-task"),
    ),
    Agent(
        "inactivated",
        "wrong",
        ALLERGY,
        allergy_resolves_allergy,
        why="allergy",
        mode=WF,
        fails=("allergy-kept",),
    ),
    Agent(
        "told-sent",
        "wrong",
        ALLERGY,
        allergy_tells_sent,
        why="false message",
        mode=WF,
        fails=("nothing-else-changed", "text-truth"),
    ),
    Agent("role-bundle", "correct", ALLERGY, allergy_role_bundle, why="Bundle, role", mode=WF),
    Agent("tenant-base", "correct", ALLERGY, allergy_tenant_base, why="tenant URL", mode=WF),
    Agent("searched-put", "correct", ALLERGY, allergy_searched_put, why="PUT", mode=WF),
    Agent(
        "guessed",
        "wrong",
        WHICH,
        which_guessed,
        why="asked only the pharmacy",
        fails=("asked-which-medication",),
    ),
    Agent(
        "acted-before-answer",
        "wrong",
        WHICH,
        which_acts_before_answer,
        why="no wait",
        fails=("asked-which-medication",),
    ),
    Agent(
        "ignored-answer",
        "wrong",
        WHICH,
        which_ignores_answer,
        why="lisinopril",
        fails=("refill-task", "no-lisinopril-refill"),
    ),
    Agent(
        "both", "wrong", WHICH, which_both, why="lisinopril too", fails=("no-lisinopril-refill",)
    ),
    Agent(
        "statement",
        "wrong",
        WHICH,
        which_records_supply,
        why="MedicationStatement",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "two-tasks", "wrong", WHICH, which_two_tasks, why="duplicate Task", fails=("refill-task",)
    ),
    Agent("to-patel", "wrong", WHICH, which_to_patel, why="wrong owner", fails=("refill-task",)),
    Agent("asks-pharmacy", "correct", WHICH, which_asks_pharmacy_bundle, why="Bundle, code"),
    Agent("put-ready", "correct", WHICH, which_put_ready, why="PUT, ready, read tag"),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
