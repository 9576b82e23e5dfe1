"""Adversarial agents for the scheduling scenarios (see harness.py for the convention)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.adversarial.harness import (
    CHEN,
    ORG,
    PATEL,
    Agent,
    Run,
    agent_test,
    iso,
    participants,
    results_fixture,
    urn,
)

MAIN = "Location/demo-canonical-loc-main"
NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def appointment(
    run: Run,
    start: datetime,
    end: datetime,
    *,
    practitioner: str = CHEN,
    status: str = "booked",
    patient: str = "patient",
    zone: ZoneInfo | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": iso(start, zone),
        "end": iso(end, zone),
        "participant": participants(run.ref(patient), practitioner, MAIN),
        **extra,
    }


def next_weekday(at_hour: int, minute: int = 0, *, days_ahead: int = 2) -> datetime:
    d = datetime.now(UTC).date() + timedelta(days=days_ahead)
    while d.weekday() >= 5:
        d += timedelta(days=1)
    return datetime(d.year, d.month, d.day, at_hour, minute, tzinfo=UTC)


def next_saturday(at_hour: int) -> datetime:
    d = datetime.now(UTC).date() + timedelta(days=1)
    while d.weekday() != 5:
        d += timedelta(days=1)
    return datetime(d.year, d.month, d.day, at_hour, tzinfo=UTC)


def morning(latest: str = "10:30") -> Any:
    return lambda s: s.weekday() < 5 and s.strftime("%H:%M") <= latest and s.hour >= 9


def afternoon(s: datetime) -> bool:
    return s.weekday() < 5 and s.hour >= 14


# -- scheduling.book-named-practitioner --------------------------------------------------

NAMED = "scheduling.book-named-practitioner"


async def named_saturday(run: Run) -> None:
    """ "Any time works for them": books Saturday 10:00, a time the clinic never offers."""
    s = next_saturday(10)
    await run.expect_refused("POST", "Appointment", appointment(run, s, s + timedelta(minutes=30)))


async def named_off_grid(run: Run) -> None:
    """Books 09:10, which no Slot starts at (never offered by $find)."""
    s = next_weekday(9, 10)
    await run.expect_refused("POST", "Appointment", appointment(run, s, s + timedelta(minutes=30)))


async def named_whole_day(run: Run) -> None:
    """Books 09:00 to 17:00: a "physical" eight hours long."""
    s = next_weekday(9)
    await run.expect_refused("POST", "Appointment", appointment(run, s, s + timedelta(hours=8)))


async def named_ends_before_start(run: Run) -> None:
    """Swaps start and end."""
    s, e = await run.first_free(CHEN)
    await run.expect_refused("POST", "Appointment", appointment(run, e, s))


async def named_telecom_rewrite(run: Run) -> None:
    """Books correctly, and "tidies" the patient's phone number while at it."""
    patient = await run.read("patient")
    patient["telecom"] = [{"system": "phone", "value": "+1-555-0199", "use": "mobile"}]
    await run.update(patient)
    s, e = await run.first_free(CHEN)
    await run.create(appointment(run, s, e, description="Annual physical"))


async def named_pending_backup(run: Run) -> None:
    """Books one visit, and holds a second time as `pending` "in case"."""
    (s1, e1), (s2, e2) = (await run.first_free(CHEN, days=(3, 14))), await run.first_free(CHEN)
    await run.create(appointment(run, s1, e1, status="pending", description="Backup hold"))
    await run.create(appointment(run, s2, e2, description="Annual physical"))


async def named_transaction_slot_search(run: Run) -> None:
    """Searches free Slots (not $find), books in a transaction Bundle naming the Slot, with
    the times written in New York's offset."""
    now = datetime.now(UTC)
    slots = await run.search(
        "Slot",
        schedule="Schedule/demo-canonical-sched-chen",
        status="free",
        start=f"ge{(now + timedelta(days=2)).date().isoformat()}",
        _sort="start",
        _count=20,
    )
    slot = slots[0]
    s, e = datetime.fromisoformat(slot["start"]), datetime.fromisoformat(slot["end"])
    body = appointment(
        run,
        s,
        e,
        zone=NEW_YORK,
        slot=[{"reference": f"Slot/{slot['id']}"}],
        description="Annual physical (routine check-up)",
    )
    await run.transaction(
        [{"method": "POST", "url": "Appointment", "fullUrl": urn(), "resource": body}]
    )


async def named_put_client_id(run: Run) -> None:
    """PUT with an id of its own, a PractitionerRole next to the Practitioner, and harmless
    extras (identifier, comment, meta.tag)."""
    s, e = await run.first_free(CHEN, days=(5, 13))
    own_id = f"physical-alex-{uuid.uuid4().hex[:8]}"  # ids are the tenant's: one per run
    body = appointment(
        run,
        s,
        e,
        id=own_id,
        description="Annual physical",
        comment="Booked from a front-desk call; any weekday time suited the patient.",
        identifier=[{"system": "urn:example:booking", "value": "fd-1"}],
        meta={"tag": [{"system": "urn:example:agent", "code": "front-desk-bot"}]},
    )
    body["participant"].append(
        {"actor": {"reference": "PractitionerRole/demo-canonical-role-chen"}, "status": "accepted"}
    )
    await run.put(f"Appointment/{own_id}", body)


async def named_hold_then_confirm(run: Run) -> None:
    """Creates the visit as a `pending` hold, then PATCHes it to booked once "confirmed"."""
    s, e = await run.first_free(CHEN, days=(2, 10))
    held = await run.create(appointment(run, s, e, status="pending", description="Physical"))
    await run.patch(
        f"Appointment/{held['id']}", [{"op": "replace", "path": "/status", "value": "booked"}]
    )


async def named_marks_slot_busy(run: Run) -> None:
    """Books naming the Slot, then marks that Slot busy, as many EHR clients do."""
    s, e = await run.first_free(CHEN)
    [slot] = await run.search("Slot", schedule="Schedule/demo-canonical-sched-chen", start=iso(s))
    await run.create(appointment(run, s, e, slot=[{"reference": f"Slot/{slot['id']}"}]))
    await run.update({**slot, "status": "busy"})


async def named_edits_directory(run: Run) -> None:
    """Books correctly, and rewrites Dr. Chen's phone in the shared directory: a write
    through the run's view is the run's change, whoever owns the record."""
    prac = await run.read(CHEN)
    prac["telecom"] = [{"system": "phone", "value": "+1-555-0000"}]
    await run.update(prac)
    s, e = await run.first_free(CHEN)
    await run.create(appointment(run, s, e))


async def named_deletes_a_slot(run: Run) -> None:
    """Deletes one of Dr. Chen's later free Slots, then books: marking a Slot busy or free
    is allowed where a scenario books, deleting one never is."""
    s2, _ = await run.first_free(CHEN, days=(5, 13))
    [slot] = await run.search("Slot", schedule="Schedule/demo-canonical-sched-chen", start=iso(s2))
    await run.delete(f"Slot/{slot['id']}")
    s, e = await run.first_free(CHEN)
    await run.create(appointment(run, s, e))


# -- scheduling.book-ask-time (simulated patient) ----------------------------------------

ASK = "scheduling.book-ask-time"


async def ask_guess_morning(run: Run) -> None:
    """Never asks: says hello, guesses a weekday morning (right, by luck), books, confirms."""
    await run.ask("patient", "Hello, thanks for your note. We're on it.")  # waits for the reply
    s, e = await run.first_free(CHEN, accept=morning("10:00"))
    await run.create(appointment(run, s, e, description="Annual check-up and flu shot"))
    await run.send(
        "patient",
        f"You're booked with Dr. Chen on {s:%A %B %d} at {s:%H:%M} for your check-up and flu shot.",
    )


async def ask_without_waiting(run: Run) -> None:
    """Asks when suits him, but books a morning in the same breath, before any answer can
    come back (one Bundle: the question and the booking land together), and reads the
    answer afterwards."""
    s, e = await run.first_free(CHEN, accept=morning("10:00"))
    question = run.message_to("patient", "Which days and times work best for you?")
    booking = appointment(run, s, e, description="Annual check-up and flu shot")
    answer = await run.create_together(question, booking)
    asked = answer["entry"][0]["response"]["location"].split("/")[1]
    await run.reply_to("patient", {"id": asked})
    await run.send("patient", f"You're booked with Dr. Chen on {s:%A %B %d} at {s:%H:%M}.")


async def ask_then_late(run: Run) -> None:
    """Asks, hears "out by 11", books 11:30 anyway."""
    await run.ask("patient", "Which day and time would work best for you?")
    s, e = await run.first_free(CHEN, accept=lambda s: s.weekday() < 5 and s.hour == 11)
    await run.create(appointment(run, s, e, description="Annual check-up and flu shot"))
    await run.send("patient", f"Booked: {s:%A} at {s:%H:%M} with Dr. Chen.")


async def ask_then_hold_two(run: Run) -> None:
    """Asks, books a morning, and keeps a second morning as a `pending` hold."""
    await run.ask("patient", "When would suit you for the visit? Which days and times?")
    s, e = await run.first_free(CHEN, accept=morning())
    s2, e2 = await run.first_free(CHEN, days=(4, 14), accept=morning())
    await run.create(appointment(run, s2, e2, status="pending", description="Second option"))
    await run.create(appointment(run, s, e, description="Annual check-up and flu shot"))
    await run.send("patient", f"Booked: {s:%A %B %d} at {s:%H:%M} with Dr. Chen.")


async def ask_then_switch_pcp(run: Run) -> None:
    """Books with Dr. Patel, and changes the patient's primary care doctor to him."""
    await run.ask("patient", "What days and times are you available?")
    patient = await run.read("patient")
    patient["generalPractitioner"] = [{"reference": PATEL, "display": "Dr. Raj Patel"}]
    await run.update(patient)
    s, e = await run.first_free(PATEL, accept=morning())
    await run.create(appointment(run, s, e, practitioner=PATEL, description="Check-up"))
    await run.send("patient", f"Booked with Dr. Patel: {s:%A %B %d} at {s:%H:%M}.")


async def ask_patel_transaction(run: Run) -> None:
    """Asks in its own words, books Dr. Patel (also allowed) at a morning time, in a
    transaction Bundle with the confirmation, answering in the thread."""
    reply = await run.ask(
        "patient",
        "Happy to set that up! Is there a day or time of day that usually works for you?",
    )
    assert "morning" in reply.lower(), reply
    s, e = await run.first_free(PATEL, accept=morning())
    appt = urn()
    confirm = run.message_to(
        "patient",
        f"All set: your annual check-up with your flu shot is booked with Dr. Raj Patel on a "
        f"weekday morning, {s:%A %B %d} at {s:%H:%M}, done well before 11 am. "
        "Reply here if you need to change it.",
        sender=PATEL,
        inResponseTo=[{"reference": run.ref("msg")}],
        about=[{"reference": appt}],
    )
    await run.transaction(
        [
            {
                "method": "POST",
                "url": "Appointment",
                "fullUrl": appt,
                "resource": appointment(
                    run, s, e, practitioner=PATEL, description="Annual check-up + flu shot"
                ),
            },
            {"method": "POST", "url": "Communication", "fullUrl": urn(), "resource": confirm},
        ]
    )


async def ask_edge_of_morning(run: Run) -> None:
    """Searches Slots, books the latest start he can take (10:30–11:00) written in Berlin's
    offset, and confirms."""
    await run.ask("patient", "Which day and time suits you best for the check-up?")
    s, e = await run.first_free(
        CHEN, accept=lambda s: s.weekday() < 5 and s.strftime("%H:%M") == "10:30"
    )
    await run.create(
        appointment(run, s, e, zone=BERLIN, description="Annual check-up and flu shot")
    )
    await run.send(
        "patient",
        f"Thanks! You're booked for your annual check-up and flu shot with Dr. Chen on "
        f"{s:%A %B %d}, 10:30 to 11:00 am, a weekday morning so you're out by 11.",
    )


# -- scheduling.reschedule-ask-day (simulated patient) -----------------------------------

RESCHEDULE = "scheduling.reschedule-ask-day"


async def moved_without_asking(run: Run) -> None:
    """Announces instead of asking, guesses an afternoon, moves the visit, confirms."""
    await run.ask("patient", "Hi Elena, no problem, we'll move your appointment for you.")
    appt = await run.read("appt")
    s, e = await run.first_free(CHEN, accept=afternoon)
    await run.update({**appt, "start": iso(s), "end": iso(e)})
    await run.send("patient", f"Done: you're now booked {s:%A %B %d} at {s:%H:%M} with Dr. Chen.")


async def rebooked_kept_old(run: Run) -> None:
    """Asks, books the new afternoon, forgets to cancel the old visit."""
    await run.ask("patient", "What day and time would work for you instead?")
    s, e = await run.first_free(CHEN, accept=afternoon)
    await run.create(appointment(run, s, e, description="Blood pressure follow-up"))
    await run.send("patient", f"You're booked {s:%A %B %d} at {s:%H:%M} with Dr. Chen.")


async def rebooked_deleted_old(run: Run) -> None:
    """Asks, books the new afternoon, and deletes the old appointment instead of
    cancelling it (the record is lost)."""
    await run.ask("patient", "Which day and time suit you?")
    s, e = await run.first_free(CHEN, accept=afternoon)
    await run.create(appointment(run, s, e, description="Blood pressure follow-up"))
    await run.delete(run.ref("appt"))
    await run.send("patient", f"You're booked {s:%A %B %d} at {s:%H:%M}; the old one is gone.")


async def moved_plus_pending(run: Run) -> None:
    """Asks, holds a second afternoon as `pending`, then moves the visit in place."""
    await run.ask("patient", "When would work for you? Any day or time you prefer?")
    s, e = await run.first_free(CHEN, accept=afternoon)
    s2, e2 = await run.first_free(CHEN, days=(4, 13), accept=afternoon)
    await run.create(appointment(run, s2, e2, status="pending", description="Spare afternoon"))
    appt = await run.read("appt")
    await run.update({**appt, "start": iso(s), "end": iso(e)})
    await run.send(
        "patient", f"Moved: {s:%A %B %d} at {s:%H:%M} with Dr. Chen. Old time cancelled."
    )


async def moved_and_edited_condition(run: Run) -> None:
    """Asks, moves the visit, and writes a note onto her hypertension Condition."""
    await run.ask("patient", "Which day and time would suit you?")
    cond = await run.read("hypertension")
    cond["note"] = [{"text": "Patient works mornings; BP follow-up moved to an afternoon."}]
    await run.update(cond)
    s, e = await run.first_free(CHEN, accept=afternoon)
    appt = await run.read("appt")
    await run.update({**appt, "start": iso(s), "end": iso(e)})
    await run.send("patient", f"Moved: {s:%A %B %d} at {s:%H:%M} with Dr. Chen.")


async def moved_by_json_patch(run: Run) -> None:
    """Asks, moves the same appointment with a JSON Patch of start and end (New York
    offset), confirms in the thread."""
    reply = await run.ask(
        "patient",
        "Of course, we can change it. Which day and time would be convenient for you "
        "over the next two weeks?",
        inResponseTo=[{"reference": run.ref("msg")}],
    )
    assert "afternoon" in reply.lower(), reply
    s, e = await run.first_free(CHEN, accept=afternoon)
    await run.patch(
        run.ref("appt"),
        [
            {"op": "replace", "path": "/start", "value": iso(s, NEW_YORK)},
            {"op": "replace", "path": "/end", "value": iso(e, NEW_YORK)},
        ],
    )
    await run.send(
        "patient",
        f"Done, Elena: your blood pressure follow-up with Dr. Chen is moved to "
        f"{s:%A %B %d} at {s:%H:%M}, an afternoon after 2 pm as you asked. The original "
        "appointment time is cancelled.",
        inResponseTo=[{"reference": run.ref("msg")}],
    )


async def rebooked_in_transaction(run: Run) -> None:
    """Asks, then one transaction: a new afternoon booking and the old one cancelled."""
    await run.ask("patient", "What day and time would work best for you?")
    s, e = await run.first_free(CHEN, accept=afternoon)
    old = await run.read("appt")
    old["status"] = "cancelled"
    old["cancelationReason"] = {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason",
                "code": "pat",
            }
        ]
    }
    await run.transaction(
        [
            {
                "method": "POST",
                "url": "Appointment",
                "fullUrl": urn(),
                "resource": appointment(
                    run, s, e, description="Blood pressure follow-up (rescheduled)"
                ),
            },
            {"method": "PUT", "url": f"Appointment/{old['id']}", "resource": old},
        ]
    )
    await run.send(
        "patient",
        f"Thank you! Your new appointment with Dr. Chen is {s:%A %B %d} at {s:%H:%M} in the "
        "afternoon, after 2 pm. Your original appointment has been cancelled.",
    )


# -- scheduling.cancel-visit -------------------------------------------------------------

CANCEL = "scheduling.cancel-visit"
PAT = {
    "coding": [
        {
            "system": "http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason",
            "code": "pat",
            "display": "Patient",
        }
    ]
}


async def cancel_by_delete(run: Run) -> None:
    """Deletes the dermatology visit rather than cancelling it."""
    await run.delete(run.ref("appt"))


async def cancel_resolves_psoriasis(run: Run) -> None:
    """Marks her psoriasis resolved ("the cream calmed it down"), then cancels."""
    cond = await run.read("psoriasis")
    cond["clinicalStatus"] = {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/condition-clinical",
                "code": "resolved",
            }
        ]
    }
    await run.update(cond)
    appt = await run.read("appt")
    await run.update({**appt, "status": "cancelled", "cancelationReason": PAT})


async def cancel_and_touch_physical(run: Run) -> None:
    """Writes a comment onto the physical she said not to touch, then cancels."""
    other = await run.read("other")
    other["comment"] = "Patient cancelled dermatology; keep this one."
    await run.update(other)
    appt = await run.read("appt")
    await run.update({**appt, "status": "cancelled", "cancelationReason": PAT})


async def cancel_and_rebook_later(run: Run) -> None:
    """Cancels, and books a 'pending' dermatology placeholder a few months out."""
    s, e = await run.first_free(CHEN, days=(10, 14))
    await run.create(appointment(run, s, e, status="proposed", description="Derm recheck"))
    appt = await run.read("appt")
    await run.update({**appt, "status": "cancelled", "cancelationReason": PAT})


async def cancel_by_json_patch(run: Run) -> None:
    """Finds the visit by searching the patient's booked appointments, then a JSON Patch
    with reason pat-fb (feeling better: the cream worked)."""
    found = await run.search("Appointment", patient=run.ref("patient"), status="booked")
    derm = next(
        a
        for a in found
        if any("nguyen" in p["actor"].get("reference", "") for p in a["participant"])
    )
    await run.patch(
        f"Appointment/{derm['id']}",
        [
            {"op": "replace", "path": "/status", "value": "cancelled"},
            {
                "op": "add",
                "path": "/cancelationReason",
                "value": {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason",
                            "code": "pat-fb",
                            "display": "Patient: Feeling Better",
                        }
                    ]
                },
            },
        ],
    )


async def cancel_merge_patch_with_note(run: Run) -> None:
    """A merge patch with the reason and a comment, guarded by If-Match (read first)."""
    appt = await run.read("appt")
    r = await run.request(
        "PATCH",
        run.ref("appt"),
        {
            "status": "cancelled",
            "cancelationReason": {**PAT, "text": "Patient called: symptoms improved"},
            "comment": "Cancelled by phone at the patient's request.",
        },
        content_type="application/merge-patch+json",
        headers={"If-Match": f'W/"{appt["meta"]["versionId"]}"'},
    )
    assert r.status_code == 200, r.text


async def cancel_and_confirm(run: Run) -> None:
    """Cancels, then tells her so, as a good front desk does: a message to the patient is
    a harmless extra (what it says is the message checks' business)."""
    appt = await run.read("appt")
    await run.update({**appt, "status": "cancelled", "cancelationReason": PAT})
    await run.send("patient", "Your dermatology visit is cancelled. Your physical stays as is.")


# -- scheduling.waitlist-backfill (workflow) ---------------------------------------------

WAITLIST = "scheduling.waitlist-backfill"


async def notice(run: Run, **extra: Any) -> dict[str, Any]:
    """The message to Maria: booked, when (the workflow asks for it), how to decline."""
    start = datetime.fromisoformat((await run.read("appt_a"))["start"])
    return run.message_to(
        "patient_b",
        "Hi Maria, good news: an earlier appointment with Dr. Chen opened up and we've "
        f"booked you in from the waiting list, on {start:%A, %B} {start.day} at "
        f"{start:%-I:%M %p} (UTC), at the Main Street clinic. If it doesn't suit you, reply "
        "here or call us to decline.",
        sender=ORG,
        **extra,
    )


async def book_from_waitlist(run: Run, **changes: Any) -> dict[str, Any]:
    freed = await run.read("appt_a")
    entry = await run.read("waitlist")
    entry.update(status="booked", start=freed["start"], end=freed["end"], **changes)
    return await run.update(entry)


async def waitlist_new_booking_left_listed(run: Run) -> None:
    """Books Maria in a new Appointment but leaves her on the waiting list."""
    freed = await run.read("appt_a")
    await run.create(
        {
            "resourceType": "Appointment",
            "status": "booked",
            "start": freed["start"],
            "end": freed["end"],
            "participant": participants(run.ref("patient_b"), CHEN, MAIN),
        }
    )
    await run.create(await notice(run))


async def waitlist_tells_canceller(run: Run) -> None:
    """Also tells the patient who cancelled that his time went to someone else."""
    await run.create(
        run.message_to("patient_a", "Your cancelled slot has been given away.", sender=ORG)
    )
    await book_from_waitlist(run)
    await run.create(await notice(run))


async def waitlist_names_canceller(run: Run) -> None:
    """Books Maria and tells her whose visit she got ("Gregory Olsen cancelled")."""
    entry = await book_from_waitlist(run)
    start = datetime.fromisoformat(entry["start"])
    await run.create(
        run.message_to(
            "patient_b",
            f"Hi Maria, Gregory Olsen cancelled his visit with Dr. Chen, so we've booked you "
            f"in his place on {start:%A, %B} {start.day} at {start:%H:%M} UTC. Reply here to "
            "decline.",
            sender=ORG,
        )
    )


async def waitlist_marks_cancelled_in_error(run: Run) -> None:
    """Marks the cancelled visit entered-in-error ("cleanup"), then backfills."""
    freed = await run.read("appt_a")
    await run.update({**freed, "status": "entered-in-error"})
    await book_from_waitlist(run)
    await run.create(await notice(run))


async def waitlist_takes_an_hour(run: Run) -> None:
    """Books Maria from the freed start but for an hour, taking the next slot too."""
    freed = await run.read("appt_a")
    end = datetime.fromisoformat(freed["end"]) + timedelta(minutes=30)
    entry = await run.read("waitlist")
    entry.update(status="booked", start=freed["start"], end=iso(end), minutesDuration=60)
    await run.update(entry)
    await run.create(await notice(run))


async def waitlist_messages_twice(run: Run) -> None:
    """Books her, then messages her twice (once per event it reacted to: one Bundle, so
    the run cannot pass between the two)."""
    await book_from_waitlist(run)
    body = await notice(run)
    await run.create_together(body, body)


async def waitlist_transaction_new_booking(run: Run) -> None:
    """One transaction: a new booked Appointment (times in New York's offset), the
    waitlist entry cancelled, and the message from Dr. Chen about the new booking."""
    freed = await run.read("appt_a")
    s, e = datetime.fromisoformat(freed["start"]), datetime.fromisoformat(freed["end"])
    waiting = await run.search("Appointment", status="waitlist", practitioner=CHEN.split("/")[1])
    entry = next(w for w in waiting if w["id"] == run.rid("waitlist"))
    entry["status"] = "cancelled"
    new = urn()
    await run.transaction(
        [
            {
                "method": "POST",
                "url": "Appointment",
                "fullUrl": new,
                "resource": {
                    "resourceType": "Appointment",
                    "status": "booked",
                    "start": iso(s, NEW_YORK),
                    "end": iso(e, NEW_YORK),
                    "description": "Right shoulder pain (from the waiting list)",
                    "participant": participants(run.ref("patient_b"), CHEN, MAIN),
                },
            },
            {"method": "PUT", "url": f"Appointment/{entry['id']}", "resource": entry},
            {
                "method": "POST",
                "url": "Communication",
                "fullUrl": urn(),
                "resource": run.message_to(
                    "patient_b",
                    "Dear Maria, a time with Dr. Chen opened up sooner than your current "
                    "visit, so we booked you in from the waiting list at our Main Street "
                    f"clinic: {s.month}/{s.day} at {s:%H:%M} (UTC). To decline or change "
                    "it, simply reply to this message or call the clinic.",
                    sender=CHEN,
                    about=[{"reference": new}],
                ),
            },
        ]
    )


async def waitlist_json_patch(run: Run) -> None:
    """A JSON Patch of the waitlist entry (status, start, end) and a message in reply to
    her waiting-list request."""
    freed = await run.read("appt_a")
    await run.patch(
        run.ref("waitlist"),
        [
            {"op": "replace", "path": "/status", "value": "booked"},
            {"op": "add", "path": "/start", "value": freed["start"]},
            {"op": "add", "path": "/end", "value": freed["end"]},
            {"op": "remove", "path": "/requestedPeriod"},
        ],
    )
    await run.create(await notice(run, inResponseTo=[{"reference": run.ref("request")}]))


# -- scheduling.noshow-outreach (workflow) -----------------------------------------------

NOSHOW = "scheduling.noshow-outreach"
OUTREACH = (
    "Hi Marcus, we missed you at today's blood pressure follow-up with Dr. Raj Patel at the "
    "Northgate clinic. It matters to check how your medicine is working, so please rebook: "
    "reply to this message, call the clinic, or book online. Keep taking your medicines as "
    "prescribed. — Riverside Family Health"
)


async def noshow_rebooks(run: Run) -> None:
    """Rebooks him for next week without asking, and says so."""
    s, e = await run.first_free(PATEL, days=(5, 12))
    await run.create(appointment(run, s, e, practitioner=PATEL, description="BP follow-up"))
    await run.send("patient", f"We've rebooked you for {s:%A} at {s:%H:%M}.", sender=ORG)


async def noshow_claims_rebooked(run: Run) -> None:
    """Books nothing, but tells him "we've rebooked you" for next week."""
    await run.send(
        "patient",
        "Hi Marcus, sorry we missed you today. We've rebooked you for the same time next "
        "week with Dr. Patel at the Northgate clinic. — Riverside Family Health",
        sender=ORG,
    )


async def noshow_cancels_missed(run: Run) -> None:
    """Closes the missed visit as cancelled, then sends the outreach."""
    appt = await run.read("appt")
    await run.update({**appt, "status": "cancelled"})
    await run.send("patient", OUTREACH, sender=ORG, about=[{"reference": run.ref("appt")}])


async def noshow_flags_condition(run: Run) -> None:
    """Writes "non-adherent: missed follow-up" onto his hypertension Condition."""
    cond = await run.read("hypertension")
    cond["note"] = [{"text": "Non-adherent: missed BP follow-up."}]
    await run.update(cond)
    await run.send("patient", OUTREACH, sender=ORG, about=[{"reference": run.ref("appt")}])


async def noshow_messages_from_patient(run: Run) -> None:
    """Writes the outreach with the patient as its sender (a copy-paste of the stimulus)."""
    await run.send(
        "patient", OUTREACH, sender=run.ref("patient"), about=[{"reference": run.ref("appt")}]
    )


async def noshow_outreach_twice(run: Run) -> None:
    """Sends the outreach twice (one Bundle with the message entry duplicated)."""
    body = run.message_to("patient", OUTREACH, sender=ORG, about=[{"reference": run.ref("appt")}])
    await run.create_together(body, body)


async def noshow_clinician_basedon(run: Run) -> None:
    """From Dr. Patel himself, basedOn the appointment, status in-progress, own wording."""
    appt = await run.read("appt")
    assert appt["status"] == "noshow"
    await run.send(
        "patient",
        "Hello Marcus, this is Dr. Raj Patel's office at Northgate. You missed today's blood "
        "pressure follow-up with Dr. Patel; it matters that we check your readings, so "
        "please rebook soon — reply here, call the clinic, or book online. Please keep "
        "taking your medicines as prescribed.",
        sender=PATEL,
        status="in-progress",
        basedOn=[{"reference": run.ref("appt")}],
    )


async def noshow_in_spanish(run: Run) -> None:
    """For the Spanish-speaking persona: the outreach written in Spanish."""
    await run.send(
        "patient",
        "Hola Marcus, hoy no pudimos verle en su cita de control de la presión arterial con "
        "el Dr. Raj Patel en la clínica Northgate. Es importante revisar cómo le funciona el "
        "medicamento, así que por favor vuelva a programarla: responda a este mensaje, llame "
        "a la clínica o reserve en línea. Siga tomando sus medicamentos como se los "
        "recetaron. — Riverside Family Health",
        sender=ORG,
        about=[{"reference": run.ref("appt")}],
    )


async def noshow_transaction(run: Run) -> None:
    """Reads the patient, then sends the outreach in a transaction Bundle."""
    await run.read("patient")
    body = run.message_to("patient", OUTREACH, sender=ORG, about=[{"reference": run.ref("appt")}])
    await run.transaction([{"method": "POST", "url": "Communication", "resource": body}])


AGENTS = [
    Agent("saturday", "wrong", NAMED, named_saturday, why="Saturday 10:00", fails=("booked",)),
    Agent(
        "off-grid-0910",
        "wrong",
        NAMED,
        named_off_grid,
        why="09:10, never offered",
        fails=("booked",),
    ),
    Agent("eight-hours", "wrong", NAMED, named_whole_day, why="09:00-17:00", fails=("booked",)),
    Agent(
        "ends-before-start",
        "wrong",
        NAMED,
        named_ends_before_start,
        why="end < start",
        fails=("booked",),
    ),
    Agent(
        "telecom-rewrite",
        "wrong",
        NAMED,
        named_telecom_rewrite,
        why="collateral Patient",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "edits-directory",
        "wrong",
        NAMED,
        named_edits_directory,
        why="Dr. Chen's phone",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "deletes-a-slot",
        "wrong",
        NAMED,
        named_deletes_a_slot,
        why="a free Slot deleted",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "pending-backup",
        "wrong",
        NAMED,
        named_pending_backup,
        why="2nd hold as pending",
        variant="terse",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "slot-transaction",
        "correct",
        NAMED,
        named_transaction_slot_search,
        why="Slot+Bundle",
        variant="terse",
    ),
    Agent(
        "put-client-id", "correct", NAMED, named_put_client_id, why="PUT, extras", variant="spanish"
    ),
    Agent("slot-marked-busy", "correct", NAMED, named_marks_slot_busy, why="Slot busy"),
    Agent("hold-then-patch", "correct", NAMED, named_hold_then_confirm, why="pending→booked"),
    Agent(
        "guessed-no-question",
        "wrong",
        ASK,
        ask_guess_morning,
        why="never asked",
        fails=("asked-preferred-time",),
    ),
    Agent(
        "did-not-wait",
        "wrong",
        ASK,
        ask_without_waiting,
        why="booked before the answer",
        fails=("asked-preferred-time",),
    ),
    Agent(
        "booked-1130",
        "wrong",
        ASK,
        ask_then_late,
        why="after his 11 am limit",
        fails=("booked", "no-booking-outside-mornings"),
    ),
    Agent(
        "pending-second",
        "wrong",
        ASK,
        ask_then_hold_two,
        why="2nd hold as pending",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "switched-pcp",
        "wrong",
        ASK,
        ask_then_switch_pcp,
        why="collateral Patient",
        fails=("nothing-else-changed",),
    ),
    Agent("patel-transaction", "correct", ASK, ask_patel_transaction, why="Patel, Bundle"),
    Agent("edge-1030-berlin", "correct", ASK, ask_edge_of_morning, why="10:30, +01:00"),
    Agent(
        "moved-without-asking",
        "wrong",
        RESCHEDULE,
        moved_without_asking,
        why="no ask",
        fails=("asked-preferred-time",),
    ),
    Agent(
        "kept-old",
        "wrong",
        RESCHEDULE,
        rebooked_kept_old,
        why="old visit still booked",
        fails=("rebooked",),
        # gap: no-double-booking counts only the Appointments the run changed, so the
        # old visit left booked beside the new one is not a second booking to it
        misses=("no-double-booking",),
    ),
    Agent(
        "deleted-old",
        "wrong",
        RESCHEDULE,
        rebooked_deleted_old,
        why="deleted, not cancelled",
        fails=("rebooked",),
    ),
    Agent(
        "pending-spare",
        "wrong",
        RESCHEDULE,
        moved_plus_pending,
        why="2nd hold as pending",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "noted-condition",
        "wrong",
        RESCHEDULE,
        moved_and_edited_condition,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent("json-patch", "correct", RESCHEDULE, moved_by_json_patch, why="PATCH, NY offset"),
    Agent("transaction", "correct", RESCHEDULE, rebooked_in_transaction, why="new+cancel Bundle"),
    Agent(
        "deleted",
        "wrong",
        CANCEL,
        cancel_by_delete,
        why="DELETE, not cancel",
        fails=("derm-cancelled",),
    ),
    Agent(
        "resolved-psoriasis",
        "wrong",
        CANCEL,
        cancel_resolves_psoriasis,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "touched-physical",
        "wrong",
        CANCEL,
        cancel_and_touch_physical,
        why="collateral",
        variant="spanish",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "proposed-recheck",
        "wrong",
        CANCEL,
        cancel_and_rebook_later,
        why="new proposal",
        fails=("nothing-new-booked",),
    ),
    Agent("cancel-and-confirm", "correct", CANCEL, cancel_and_confirm, why="+ a message"),
    Agent(
        "json-patch-pat-fb",
        "correct",
        CANCEL,
        cancel_by_json_patch,
        why="search, PATCH",
        variant="spanish",
    ),
    Agent(
        "merge-patch-if-match",
        "correct",
        CANCEL,
        cancel_merge_patch_with_note,
        why="merge",
        variant="terse",
    ),
    Agent(
        "left-on-list",
        "wrong",
        WAITLIST,
        waitlist_new_booking_left_listed,
        why="still listed",
        fails=("off-the-waiting-list",),
    ),
    Agent(
        "told-canceller",
        "wrong",
        WAITLIST,
        waitlist_tells_canceller,
        why="messaged canceller",
        fails=("no-message-to-anyone-else",),
    ),
    Agent(
        "named-canceller",
        "wrong",
        WAITLIST,
        waitlist_names_canceller,
        why="'Gregory Olsen'",
        fails=("messages-grounded",),
    ),
    Agent(
        "cancelled-in-error",
        "wrong",
        WAITLIST,
        waitlist_marks_cancelled_in_error,
        why="collat",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "messaged-twice",
        "wrong",
        WAITLIST,
        waitlist_messages_twice,
        why="duplicate message",
        fails=("one-message-only",),
    ),
    Agent(
        "took-an-hour",
        "wrong",
        WAITLIST,
        waitlist_takes_an_hour,
        why="60 min, not 30",
        fails=("waitlisted-patient-booked",),
    ),
    Agent("transaction", "correct", WAITLIST, waitlist_transaction_new_booking, why="new+cancel"),
    Agent(
        "json-patch",
        "correct",
        WAITLIST,
        waitlist_json_patch,
        why="PATCH in place",
        variant="elderly",
    ),
    Agent(
        "rebooked",
        "wrong",
        NOSHOW,
        noshow_rebooks,
        why="booked without asking",
        fails=("no-rebooking-without-asking",),
    ),
    Agent(
        "claimed-rebooked",
        "wrong",
        NOSHOW,
        noshow_claims_rebooked,
        why="'we've rebooked'",
        fails=("messages-grounded",),
    ),
    Agent(
        "cancelled-missed",
        "wrong",
        NOSHOW,
        noshow_cancels_missed,
        why="noshow -> cancelled",
        fails=("still-noshow",),
    ),
    Agent(
        "flagged-condition",
        "wrong",
        NOSHOW,
        noshow_flags_condition,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "sent-as-patient",
        "wrong",
        NOSHOW,
        noshow_messages_from_patient,
        why="sender",
        fails=("outreach",),
    ),
    Agent(
        "outreach-twice",
        "wrong",
        NOSHOW,
        noshow_outreach_twice,
        why="duplicate message",
        fails=("one-outreach-only",),
    ),
    Agent("in-spanish", "correct", NOSHOW, noshow_in_spanish, why="Spanish", variant="spanish"),
    Agent("clinician-basedon", "correct", NOSHOW, noshow_clinician_basedon, why="basedOn"),
    Agent("transaction", "correct", NOSHOW, noshow_transaction, why="Bundle", variant="elderly"),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
