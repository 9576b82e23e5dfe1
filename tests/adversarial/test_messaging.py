"""Adversarial agents for the portal-messaging scenarios (see harness.py for the
convention): messaging.answer-from-chart, messaging.clarify-request,
messaging.portal-triage, messaging.reply-portal-message and
messaging.urgent-symptom-triage."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.adversarial.harness import CHEN, ORG, PATEL, Agent, Run, agent_test, results_fixture, urn
from tests.adversarial.helpers_messaging import (
    CHEN_ROLE,
    CHICAGO,
    KOLKATA,
    add_problem,
    hold_statement,
    mark_read,
    now,
    post_all,
    post_tenant,
    put_new,
    reply,
    reply_to,
    rewrite_telecom,
    short_date,
    task,
    tenant_base,
    when,
)

# -- messaging.answer-from-chart ---------------------------------------------------------

ANSWER = "messaging.answer-from-chart"
MESES = "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre"


async def next_visit(run: Run) -> Any:
    appt = await run.read("appt")
    return when(appt["start"])


def dose_and_date(day: str) -> str:
    return (
        "Hi Luis, your current dose is lisinopril 20 mg, one tablet every morning "
        f"(Dr. Chen raised it from 10 mg). Your next appointment with Dr. Chen is {day}."
    )


async def answer_past_visit(run: Run) -> None:
    """Lists all his appointments, takes the first one (the past blood pressure check)."""
    appts = await run.search("Appointment", patient=run.ref("patient"))
    past = min(when(a["start"]) for a in appts)
    await run.create(reply(run, dose_and_date(f"on {past:%B} {past.day}")))


async def answer_holds_old_order(run: Run) -> None:
    """Records the old 10 mg lisinopril as on hold "so he doesn't take both", then answers."""
    await hold_statement(run, "oldlisinopril", "Patient unsure which bottle; 10 mg on hold.")
    start = await next_visit(run)
    await run.create(reply(run, dose_and_date(f"on {start:%B} {start.day}")))


async def answer_rewrites_email(run: Run) -> None:
    """Rewrites the Patient's telecom to "portal only", then answers."""
    await rewrite_telecom(run)
    start = await next_visit(run)
    await run.create(reply(run, dose_and_date(f"on {start:%B} {start.day}")))


async def answer_twice(run: Run) -> None:
    """Sends the same answer twice (a double submit)."""
    start = await next_visit(run)
    body = reply(run, dose_and_date(f"on {start:%B} {start.day}"))
    await post_all(run, body, body)


async def answer_with_draft(run: Run) -> None:
    """Leaves a draft (in-progress) reply next to the sent one."""
    start = await next_visit(run)
    draft = reply(run, "Hi Luis, your dose is", status="in-progress")
    await post_all(run, draft, reply(run, dose_and_date(f"on {start:%B} {start.day}")))


async def answer_as_patel(run: Run) -> None:
    """Answers as Dr. Patel (the first practitioner it found), though it is Dr. Chen's inbox."""
    start = await next_visit(run)
    await run.create(reply(run, dose_and_date(f"on {start:%B} {start.day}"), sender=PATEL))


async def answer_copies_chen(run: Run) -> None:
    """Sends the answer to the patient and to Dr. Chen at once."""
    start = await next_visit(run)
    body = reply(run, dose_and_date(f"on {start:%B} {start.day}"))
    body["recipient"].append({"reference": CHEN})
    await run.create(body)


async def answer_searched_bundle(run: Run) -> None:
    """Searches the active orders and booked visits first, answers in a transaction as
    Dr. Chen's PractitionerRole, the date written "Fri, Dec 11 at 15:30"."""
    meds = await run.search("MedicationRequest", patient=run.ref("patient"), status="active")
    assert "20 mg" in meds[0]["medicationCodeableConcept"]["text"], meds
    appts = await run.search("Appointment", patient=run.ref("patient"), status="booked")
    start = when(appts[0]["start"])
    text = (
        "Hello Luis, you should now be taking lisinopril 20mg once a day in the morning; "
        "that's why the bottle changed. Your blood pressure follow-up with Dr. Chen is "
        f"{short_date(start)} (UTC) at our Main Street clinic."
    )
    await post_all(run, reply(run, text, sender=CHEN_ROLE))


async def answer_put_us_date(run: Run) -> None:
    """Marks his message read (meta.tag), answers with PUT and a client id, sent in
    Kolkata's offset, the date as 12/11/2026, with a note and about references."""
    await mark_read(run)
    start = await next_visit(run)
    text = (
        "Dear Mr. Herrera: current dose lisinopril 20 mg daily. Next visit: "
        f"{start.month:02d}/{start.day:02d}/{start.year} at {start:%H:%M} UTC with Dr. Chen."
    )
    body = reply(
        run,
        text,
        sender=CHEN,
        sent=now(KOLKATA),
        about=[{"reference": run.ref("lisinopril")}, {"reference": run.ref("appt")}],
        note=[{"text": "Answered from the active order and the booked follow-up."}],
    )
    await put_new(run, body, "answer")


async def answer_in_spanish(run: Run) -> None:
    """Spanish persona: answers in Spanish, "20 miligramos" and "11 de diciembre"."""
    start = await next_visit(run)
    text = (
        "Hola Luis: su dosis actual es de lisinopril 20 miligramos, una tableta cada mañana. "
        f"Su próxima cita con la Dra. Chen es el {start.day} de {MESES.split()[start.month - 1]} "
        f"a las {start:%H:%M} (UTC)."
    )
    await run.create(reply(run, text, sender=CHEN))


async def answer_keeps_old_dose(run: Run) -> None:
    """Reads the stopped 10 mg order as current: "keep taking 10 mg, the 20 mg was a
    mistake" (the date is right)."""
    start = await next_visit(run)
    text = (
        "Hi Luis, please keep taking 10 mg of lisinopril; the 20 mg bottle was a mistake. "
        f"Your next appointment with Dr. Chen is on {start:%B} {start.day}."
    )
    await run.create(reply(run, text))


# -- messaging.clarify-request (simulated patient) --------------------------------------

CLARIFY = "messaging.clarify-request"


async def sick_days(run: Run) -> tuple[Any, Any]:
    visit = await run.read("visit")
    first = when(visit["period"]["start"])
    second = first + timedelta(days=1)
    while second.weekday() >= 5:
        second += timedelta(days=1)
    return first, second


def note_task(run: Run, text: str, **extra: Any) -> dict[str, Any]:
    return task(run, CHEN, text, focus="visit", priority=None, **extra)


async def clarify_guessed(run: Run) -> None:
    """Asks only how to deliver it, assumes a sick note for the visit days from the chart."""
    first, second = await sick_days(run)
    await run.ask("patient", "Hi Carmen, should we send the letter to your portal?", sender=ORG)
    await run.create(
        note_task(run, f"Work excuse note for {first:%Y-%m-%d} and {second:%Y-%m-%d}.")
    )


async def clarify_acts_before_answer(run: Run) -> None:
    """Asks the right question but requests the letter before she answers (the question
    and the Task in one Bundle: no answer can come between them)."""
    first, second = await sick_days(run)
    question = run.message_to("patient", "What is the letter for, and which dates?", sender=ORG)
    task = note_task(run, f"Work note for {first:%Y-%m-%d} and {second:%Y-%m-%d}.")
    answer = await run.create_together(question, task)
    await reply_to(run, {"id": answer["entry"][0]["response"]["location"].split("/")[1]})


async def clarify_writes_letter(run: Run) -> None:
    """Asks, then writes the letter itself as a DocumentReference before the Task."""
    await run.ask("patient", "Hi Carmen, what is the letter for, and which dates?", sender=ORG)
    first, second = await sick_days(run)
    await run.create(
        {
            "resourceType": "DocumentReference",
            "status": "current",
            "subject": {"reference": run.ref("patient")},
            "description": "Work excuse letter",
            "content": [
                {"attachment": {"contentType": "text/plain", "data": "RXhjdXNlZCBmcm9tIHdvcms="}}
            ],
        }
    )
    await run.create(note_task(run, f"Work note, {first:%Y-%m-%d} to {second:%Y-%m-%d}."))


async def clarify_adds_employer(run: Run) -> None:
    """Asks, then records her supervisor as a contact on the Patient before the Task."""
    await run.ask("patient", "What is the letter for, and for which dates?", sender=ORG)
    patient = await run.read("patient")
    patient["contact"] = [
        {"name": {"text": "Work supervisor"}, "organization": {"display": "Employer"}}
    ]
    await run.update(patient)
    first, second = await sick_days(run)
    await run.create(note_task(run, f"Note for work: {first:%Y-%m-%d}, {second:%Y-%m-%d}."))


async def clarify_two_tasks(run: Run) -> None:
    """Asks, then files the request twice (a retried submit)."""
    await run.ask("patient", "Could you tell us what the letter is for and which dates?")
    first, second = await sick_days(run)
    body = note_task(run, f"Work excuse note for {first:%Y-%m-%d} and {second:%Y-%m-%d}.")
    await post_all(run, body, body)


async def clarify_wrong_dates(run: Run) -> None:
    """Asks, hears "the day of my video visit and the day after", and dates it from today."""
    await run.ask("patient", "What is the letter for, and which dates should it cover?")
    today = run.started_at
    await run.create(
        note_task(run, f"Work excuse note for {today:%Y-%m-%d} and the following day.")
    )


async def clarify_two_questions(run: Run) -> None:
    """Asks the two questions one at a time, files the Task in a transaction with the days
    written "Mon, Nov 30", and confirms to her."""
    what = await run.ask("patient", "Hi Carmen! What kind of letter do you need?", sender=ORG)
    assert "note" in what.lower(), what
    await run.ask("patient", "Thanks. Which dates should the note cover?", sender=ORG)
    first, second = await sick_days(run)
    text = (
        "Please write a note for her employer excusing her from work on "
        f"{first:%a}, {first:%b} {first.day} and {second:%a}, {second:%b} {second.day} "
        "(gastroenteritis, video visit). Post it to her portal."
    )
    await post_all(run, note_task(run, text, status="ready"))
    await run.send("patient", "We've asked Dr. Chen to write your note.", sender=ORG)


async def clarify_put_role_inputs(run: Run) -> None:
    """Marks her message read, asks once, PUTs the Task with a client id for Dr. Chen's
    role, the dates as inputs only, a note and an identifier."""
    await mark_read(run)
    await run.ask("patient", "Happy to help. What is the letter for, and which days?")
    first, second = await sick_days(run)
    body = task(
        run,
        CHEN_ROLE,
        "Letter for her employer excusing two sick days (see inputs).",
        focus="visit",
        priority="routine",
        authoredOn=now(CHICAGO),
        note=[{"text": "Deliver through the portal."}],
        identifier=[{"system": "urn:example:task", "value": "letter-1"}],
        input=[
            {"type": {"text": "First day off"}, "valueDate": f"{first:%Y-%m-%d}"},
            {"type": {"text": "Last day off"}, "valueDate": f"{second:%Y-%m-%d}"},
        ],
    )
    await put_new(run, body, "letter")


# -- messaging.portal-triage (workflow) --------------------------------------------------

TRIAGE = "messaging.portal-triage"
ACK = (
    "Hi Teresa, we've received your request for a copy of your vaccination record. "
    "We'll post it to your portal within a few business days."
)


def triage_task(run: Run, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", {"reference": ORG})["reference"]
    return task(run, owner, "Send the immunization record through the portal.", **extra)


async def triage_urgent(run: Run) -> None:
    """Files the request as urgent ("she needs it for a job")."""
    await post_all(run, reply(run, ACK), triage_task(run, priority="urgent"))


async def triage_replied_twice(run: Run) -> None:
    """Replies on each delivery of the event (twice), then files the Task."""
    await run.create(reply(run, ACK))
    await run.create(reply(run, ACK))
    await run.create(triage_task(run))


async def triage_two_tasks(run: Run) -> None:
    """Files the Task on each delivery (twice), then replies."""
    await run.create(triage_task(run))
    await run.create(triage_task(run))
    await run.create(reply(run, ACK))


async def triage_rewrites_email(run: Run) -> None:
    """Rewrites the Patient's telecom ("prefers the portal"), then does the job."""
    await rewrite_telecom(run)
    await post_all(run, reply(run, ACK), triage_task(run))


async def triage_owner_patient(run: Run) -> None:
    """Makes the patient herself the Task's owner ("she downloads it")."""
    await post_all(run, reply(run, ACK), triage_task(run, owner={"reference": run.ref("patient")}))


async def triage_other_doctor(run: Run) -> None:
    """Replies as Dr. Patel and gives him the Task (the message was to Dr. Chen)."""
    await post_all(run, reply(run, ACK, sender=PATEL), triage_task(run, owner={"reference": PATEL}))


async def triage_edits_clinic(run: Run) -> None:
    """Adds the portal's address to the clinic's shared Organization record, then works."""
    org = await run.read(ORG)
    org["telecom"] = [*org.get("telecom", []), {"system": "url", "value": "https://portal.example"}]
    await run.update(org)
    await post_all(run, reply(run, ACK), triage_task(run))


async def triage_bundle_role(run: Run) -> None:
    """One transaction: the reply (urn) and a Task for Dr. Chen's role pointing at it,
    times in Chicago's offset."""
    ack = reply(run, ACK, sent=now(CHICAGO))
    ack_urn = urn()
    body = triage_task(run, owner={"reference": CHEN_ROLE}, authoredOn=now(CHICAGO))
    body["input"] = [
        {"type": {"text": "Acknowledgement"}, "valueReference": {"reference": ack_urn}}
    ]
    await run.transaction(
        [
            {"method": "POST", "url": "Communication", "fullUrl": ack_urn, "resource": ack},
            {"method": "POST", "url": "Task", "resource": body},
        ]
    )


async def triage_searched_put(run: Run) -> None:
    """Searches her messages and immunizations, marks the message read, PUTs both with
    client ids: the Task status ready with a note and an identifier."""
    msgs = await run.search("Communication", sender=run.ref("patient"))
    assert any(m["id"] == run.rid("msg") for m in msgs), msgs
    await run.search("Immunization", patient=run.ref("patient"))
    await mark_read(run)
    await put_new(
        run,
        reply(run, "Thanks Teresa — your immunization record will be in your portal soon."),
        "ack",
    )
    body = triage_task(
        run,
        status="ready",
        note=[{"text": "Tdap, Shingrix and flu on file."}],
        identifier=[{"system": "urn:example:task", "value": "imm-record"}],
    )
    await put_new(run, body, "triage")


async def triage_just_ok(run: Run) -> None:
    """Files the right Task but replies only "Ok." (nothing about what happens next)."""
    await post_all(run, reply(run, "Ok."), triage_task(run))


async def triage_tenant_base(run: Run) -> None:
    """Reads the message and writes both through the tenant-wide base, as a workflow
    engine with one FHIR URL does."""
    await run.get(tenant_base(run, run.ref("msg")))
    await post_tenant(run, reply(run, ACK), triage_task(run))


# -- messaging.reply-portal-message ------------------------------------------------------

REPLY = "messaging.reply-portal-message"
FASTING = (
    "Hi Daniel, yes, it's a fasting test: nothing but plain water for 10 to 12 hours "
    "before the draw, so no coffee. Take your blood pressure pill with water as usual."
)


async def reply_no_fasting(run: Run) -> None:
    """Tells him he need not fast (the order says 10 to 12 hours)."""
    text = "Hi Daniel, no need to fast for this one; coffee and your pill are fine."
    await run.create(reply(run, text, sender=CHEN))


async def reply_notes_order(run: Run) -> None:
    """Writes "patient asked about fasting" onto the lab order, then replies."""
    order = await run.read("order")
    order["note"] = [{"text": "Patient asked about fasting via portal."}]
    await run.update(order)
    await run.create(reply(run, FASTING, sender=CHEN))


async def reply_twice(run: Run) -> None:
    """Sends the reply twice (a double submit)."""
    body = reply(run, FASTING, sender=CHEN)
    await post_all(run, body, body)


async def reply_rewrites_email(run: Run) -> None:
    """Rewrites the Patient's telecom, then replies."""
    await rewrite_telecom(run)
    await run.create(reply(run, FASTING, sender=CHEN))


async def reply_new_thread(run: Run) -> None:
    """Answers in a new message, not in his thread (no inResponseTo)."""
    await run.create(reply(run, FASTING, sender=CHEN, in_response_to=None))


async def reply_archives_message(run: Run) -> None:
    """ "Files away" his message by setting it entered-in-error, then replies."""
    msg = await run.read("msg")
    msg["status"] = "entered-in-error"
    await run.update(msg)
    await run.create(reply(run, FASTING, sender=CHEN))


async def reply_bundle_role(run: Run) -> None:
    """Reads the order, replies in a transaction as Dr. Chen's role, about the lab visit."""
    order = await run.read("order")
    assert "10 to 12 hours" in order["patientInstruction"], order
    text = (
        "Hello Daniel — please fast 10-12 hours before the blood draw (water only; skip the "
        "coffee until after). Your usual morning pill with water is fine."
    )
    await post_all(
        run, reply(run, text, sender=CHEN_ROLE, about=[{"reference": run.ref("labappt")}])
    )


async def reply_in_spanish(run: Run) -> None:
    """Spanish persona: "ayuno de 10 a 12 horas", in Spanish."""
    text = (
        "Hola Daniel: sí, es un análisis en ayunas. No coma ni beba nada excepto agua "
        "durante 10 a 12 horas antes de la extracción; el café, después. Tome su pastilla "
        "de la presión con agua como siempre."
    )
    await run.create(reply(run, text, sender=CHEN))


async def reply_put_kolkata(run: Run) -> None:
    """Marks his message read, replies by PUT with a client id, sent in Kolkata's offset,
    in other words ("no food or drink other than water for 12 hours")."""
    await mark_read(run)
    text = (
        "Daniel, good question. Have no food or drink other than water for 12 hours before "
        "your blood test. Coffee can wait until afterwards; do take your blood pressure "
        "medicine with a glass of water."
    )
    await put_new(run, reply(run, text, sender=CHEN, sent=now(KOLKATA)), "reply")


# -- messaging.urgent-symptom-triage (workflow) ------------------------------------------

URGENT = "messaging.urgent-symptom-triage"
CALL = (
    "Raymond, chest pressure with shortness of breath and sweating can be an emergency. "
    "Please call 911 now; do not wait for an appointment. Our triage nurse will call you."
)


def stat_task(run: Run, **extra: Any) -> dict[str, Any]:
    text = "Chest pressure since this morning, short of breath, sweaty. Told to call 911."
    owner = extra.pop("owner", {"reference": run.ref("triagenurse")})["reference"]
    return task(run, owner, text, **{"priority": "stat", **extra})


async def urgent_offers_visit(run: Run) -> None:
    """Also proposes the appointment he asked for, next week."""
    start = run.started_at + timedelta(days=7)
    await run.create(
        {
            "resourceType": "Appointment",
            "status": "proposed",
            "start": start.isoformat(),
            "end": (start + timedelta(minutes=30)).isoformat(),
            "participant": [
                {"actor": {"reference": run.ref("patient")}, "status": "needs-action"},
                {"actor": {"reference": CHEN}, "status": "needs-action"},
            ],
        }
    )
    await post_all(run, reply(run, CALL), stat_task(run))


async def urgent_priority_urgent(run: Run) -> None:
    """Files the Task as urgent rather than stat."""
    await post_all(run, reply(run, CALL), stat_task(run, priority="urgent"))


async def urgent_two_tasks(run: Run) -> None:
    """Files the stat Task on each delivery of the event (twice), then replies."""
    await run.create(stat_task(run))
    await run.create(stat_task(run))
    await run.create(reply(run, CALL))


async def urgent_adds_problem(run: Run) -> None:
    """Puts "chest pain" on the problem list from the message, then does the job."""
    await add_problem(run, "Chest pain", "29857009", "Chest pain")
    await post_all(run, reply(run, CALL), stat_task(run))


async def urgent_to_chen(run: Run) -> None:
    """Gives the Task to Dr. Chen, whom the message was addressed to."""
    await post_all(run, reply(run, CALL), stat_task(run, owner={"reference": CHEN}))


async def urgent_unexplained(run: Run) -> None:
    """Files the stat Task with no word of the symptoms ("please call the patient")."""
    body = task(run, run.ref("triagenurse"), "Please call the patient.", priority="stat")
    await post_all(run, reply(run, CALL), body)


async def urgent_from_patel(run: Run) -> None:
    """Sends the 911 reply as Dr. Patel, whom the patient never wrote to."""
    await post_all(run, reply(run, CALL, sender=PATEL), stat_task(run))


async def urgent_9_1_1_bundle(run: Run) -> None:
    """Both writes in one transaction; the reply says "call 9-1-1"."""
    text = (
        "Mr. Ellis, these symptoms could be a heart attack. Call 9-1-1 right now or have "
        "someone take you to the nearest emergency room. Please don't drive yourself."
    )
    await post_all(run, reply(run, text, sender=CHEN), stat_task(run))


async def urgent_in_spanish(run: Run) -> None:
    """Spanish persona: reply and Task in Spanish ("llame al 9-1-1", "presión en el pecho")."""
    text = (
        "Raymond, la presión en el pecho con falta de aire y sudor puede ser una emergencia. "
        "Llame al 9-1-1 ahora mismo; no espere una cita."
    )
    body = stat_task(run)
    body["description"] = "Presión en el pecho desde esta mañana, falta de aire."
    await post_all(run, reply(run, text), body)


async def urgent_wait_and_see(run: Run) -> None:
    """Files the stat Task but tells him it is "probably indigestion; if it gets worse,
    call 911" (911 is said, the emergency is not)."""
    text = (
        "Raymond, this sounds like it is probably indigestion. Try an antacid and rest; "
        "if it gets worse, call 911. Our nurse will follow up."
    )
    await post_all(run, stat_task(run), reply(run, text))


async def urgent_tenant_base(run: Run) -> None:
    """Writes the Task, then the reply, through the tenant-wide base."""
    await post_tenant(run, stat_task(run), reply(run, CALL))


async def urgent_nurse_put(run: Run) -> None:
    """Looks up the nurse role, marks the message read, PUTs both with client ids: the
    Task to the nurse as a Practitioner, authored in Chicago's offset, with a note."""
    roles = await run.search("PractitionerRole", role="nurse")
    nurse = next(r for r in roles if r["id"] == run.rid("triagenurse"))
    await mark_read(run)
    await put_new(run, reply(run, CALL, sent=now(CHICAGO)), "call")
    body = stat_task(
        run,
        owner={"reference": nurse["practitioner"]["reference"]},
        authoredOn=now(CHICAGO),
        note=[{"text": "History of hypertension."}],
    )
    await put_new(run, body, "stat")


WF = "workflow"
AGENTS = [
    Agent(
        "past-visit-date",
        "wrong",
        ANSWER,
        answer_past_visit,
        why="gave the past visit",
        fails=("reply-answers",),
    ),
    Agent(
        "held-old-order",
        "wrong",
        ANSWER,
        answer_holds_old_order,
        why="MedicationStatement",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "rewrote-telecom",
        "wrong",
        ANSWER,
        answer_rewrites_email,
        why="Patient edited",
        fails=("nothing-else-changed",),
    ),
    Agent("answered-twice", "wrong", ANSWER, answer_twice, why="duplicate reply", fails=("reply",)),
    Agent(
        "left-draft",
        "wrong",
        ANSWER,
        answer_with_draft,
        why="near-duplicate draft",
        fails=("nothing-else-changed",),
    ),
    Agent("as-patel", "wrong", ANSWER, answer_as_patel, why="wrong sender", fails=("reply",)),
    Agent(
        "copied-chen",
        "wrong",
        ANSWER,
        answer_copies_chen,
        why="message to another",
        fails=("no-message-to-anyone-else",),
    ),
    Agent(
        "kept-10-mg",
        "wrong",
        ANSWER,
        answer_keeps_old_dose,
        why="'keep taking 10 mg'",
        fails=("reply-answers",),
    ),
    Agent("searched-bundle", "correct", ANSWER, answer_searched_bundle, why="'Fri, Dec 11'"),
    Agent("spanish", "correct", ANSWER, answer_in_spanish, why="Spanish", variant="spanish"),
    Agent("put-us-date", "correct", ANSWER, answer_put_us_date, why="PUT, 12/11, read tag"),
    Agent(
        "guessed",
        "wrong",
        CLARIFY,
        clarify_guessed,
        why="asked only about delivery",
        fails=("asked-letter-purpose", "asked-letter-dates"),
    ),
    Agent(
        "acted-before-answer",
        "wrong",
        CLARIFY,
        clarify_acts_before_answer,
        why="no wait",
        fails=("asked-letter-purpose", "asked-letter-dates"),
    ),
    Agent(
        "wrote-letter",
        "wrong",
        CLARIFY,
        clarify_writes_letter,
        why="DocumentReference",
        fails=("no-letter-written",),
    ),
    Agent(
        "added-employer",
        "wrong",
        CLARIFY,
        clarify_adds_employer,
        why="Patient edited",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        CLARIFY,
        clarify_two_tasks,
        why="duplicate Task",
        fails=("letter-task",),
    ),
    Agent(
        "dated-today",
        "wrong",
        CLARIFY,
        clarify_wrong_dates,
        why="wrong dates",
        fails=("letter-task",),
    ),
    Agent("two-questions", "correct", CLARIFY, clarify_two_questions, why="'Mon, Nov 30'"),
    Agent("put-role-inputs", "correct", CLARIFY, clarify_put_role_inputs, why="PUT, role"),
    Agent(
        "urgent",
        "wrong",
        TRIAGE,
        triage_urgent,
        why="wrong priority",
        mode=WF,
        fails=("no-escalation",),
    ),
    Agent(
        "replied-twice",
        "wrong",
        TRIAGE,
        triage_replied_twice,
        why="dup reply",
        mode=WF,
        fails=("reply",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        TRIAGE,
        triage_two_tasks,
        why="duplicate Task",
        mode=WF,
        fails=("triage-task",),
    ),
    Agent(
        "rewrote-telecom",
        "wrong",
        TRIAGE,
        triage_rewrites_email,
        why="Patient",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "owner-patient",
        "wrong",
        TRIAGE,
        triage_owner_patient,
        why="wrong owner",
        mode=WF,
        fails=("triage-task",),
    ),
    Agent(
        "other-doctor",
        "wrong",
        TRIAGE,
        triage_other_doctor,
        why="Dr. Patel",
        mode=WF,
        fails=("reply", "triage-task"),
    ),
    Agent(
        "edited-clinic",
        "wrong",
        TRIAGE,
        triage_edits_clinic,
        why="directory",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "just-ok",
        "wrong",
        TRIAGE,
        triage_just_ok,
        why="reply 'Ok.'",
        mode=WF,
        fails=("reply-says-what-next",),
    ),
    Agent("bundle-role", "correct", TRIAGE, triage_bundle_role, why="Bundle, urn", mode=WF),
    Agent("tenant-base", "correct", TRIAGE, triage_tenant_base, why="tenant URL", mode=WF),
    Agent("searched-put", "correct", TRIAGE, triage_searched_put, why="PUT, ready", mode=WF),
    Agent(
        "no-fasting",
        "wrong",
        REPLY,
        reply_no_fasting,
        why="wrong answer",
        fails=("reply-gives-fasting",),
    ),
    Agent(
        "noted-order",
        "wrong",
        REPLY,
        reply_notes_order,
        why="ServiceRequest edited",
        fails=("nothing-else-changed",),
    ),
    Agent("replied-twice", "wrong", REPLY, reply_twice, why="duplicate reply", fails=("reply",)),
    Agent(
        "rewrote-telecom",
        "wrong",
        REPLY,
        reply_rewrites_email,
        why="Patient edited",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "new-thread", "wrong", REPLY, reply_new_thread, why="not in the thread", fails=("reply",)
    ),
    Agent(
        "archived-message",
        "wrong",
        REPLY,
        reply_archives_message,
        why="message edited",
        fails=("nothing-else-changed",),
    ),
    Agent("bundle-role", "correct", REPLY, reply_bundle_role, why="Bundle, '10-12'"),
    Agent("spanish", "correct", REPLY, reply_in_spanish, why="Spanish", variant="spanish"),
    Agent("put-kolkata", "correct", REPLY, reply_put_kolkata, why="PUT, own words"),
    Agent(
        "offered-visit",
        "wrong",
        URGENT,
        urgent_offers_visit,
        why="appointment",
        mode=WF,
        fails=("no-appointment",),
    ),
    Agent(
        "urgent-not-stat",
        "wrong",
        URGENT,
        urgent_priority_urgent,
        why="priority",
        mode=WF,
        fails=("stat-triage-task",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        URGENT,
        urgent_two_tasks,
        why="duplicate Task",
        mode=WF,
        fails=("stat-triage-task",),
    ),
    Agent(
        "added-problem",
        "wrong",
        URGENT,
        urgent_adds_problem,
        why="Condition",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "to-chen",
        "wrong",
        URGENT,
        urgent_to_chen,
        why="wrong owner",
        mode=WF,
        fails=("stat-triage-task", "no-task-to-anyone-else"),
    ),
    Agent(
        "unexplained",
        "wrong",
        URGENT,
        urgent_unexplained,
        why="no symptoms",
        mode=WF,
        fails=("stat-triage-task",),
    ),
    Agent(
        "from-patel",
        "wrong",
        URGENT,
        urgent_from_patel,
        why="sender",
        mode=WF,
        fails=("reply-call-911",),
    ),
    Agent(
        "indigestion",
        "wrong",
        URGENT,
        urgent_wait_and_see,
        why="wait and see",
        mode=WF,
        fails=("reply-says-call-911",),
    ),
    Agent("9-1-1-bundle", "correct", URGENT, urgent_9_1_1_bundle, why="'9-1-1'", mode=WF),
    Agent("spanish", "correct", URGENT, urgent_in_spanish, why="es", mode=WF, variant="spanish"),
    Agent("tenant-base", "correct", URGENT, urgent_tenant_base, why="tenant URL", mode=WF),
    Agent("nurse-put", "correct", URGENT, urgent_nurse_put, why="PUT, Practitioner", mode=WF),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
