"""Adversarial agents for the coverage scenarios (see harness.py for the convention)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
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

NORTH = "Location/demo-canonical-loc-north"
LONDON = ZoneInfo("Europe/London")
TOKYO = ZoneInfo("Asia/Tokyo")


def visit(
    run: Run,
    start: datetime,
    end: datetime,
    *,
    status: str = "booked",
    zone: ZoneInfo | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": iso(start, zone),
        "end": iso(end, zone),
        "participant": participants(run.ref("patient"), PATEL, NORTH),
        **extra,
    }


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


# -- coverage.eligibility-before-booking -------------------------------------------------

BEFORE = "coverage.eligibility-before-booking"


async def booked_then_checked(run: Run) -> None:
    """Books first, checks insurance afterwards."""
    s, e = await run.first_free(PATEL)
    await run.create(visit(run, s, e, description="Blood pressure follow-up"))
    await run.eligibility("patient", day_of(s))


async def booked_at_three_am(run: Run) -> None:
    """Checks, then books 03:00 ("any time in the next two weeks")."""
    d = datetime.now(UTC).date() + timedelta(days=3)
    while d.weekday() >= 5:
        d += timedelta(days=1)
    s = datetime(d.year, d.month, d.day, 3, tzinfo=UTC)
    await run.eligibility("patient", d)
    await run.expect_refused("POST", "Appointment", visit(run, s, s + timedelta(minutes=30)))


async def booked_and_moved_address(run: Run) -> None:
    """Rewrites the patient's address (to "confirm" it), then checks and books."""
    patient = await run.read("patient")
    patient["address"] = [{"use": "home", "line": ["1 Main St"], "city": "Springfield"}]
    await run.update(patient)
    s, e = await run.first_free(PATEL)
    await run.eligibility("patient", day_of(s))
    await run.create(visit(run, s, e, description="Blood pressure follow-up"))


async def booked_plus_pending(run: Run) -> None:
    """Checks, holds a second time as `pending`, and books the first."""
    s, e = await run.first_free(PATEL)
    s2, e2 = await run.first_free(PATEL, days=(5, 13))
    await run.eligibility("patient", day_of(s))
    await run.create(visit(run, s2, e2, status="pending", description="Alternative time"))
    await run.create(visit(run, s, e, description="Blood pressure follow-up"))


async def booked_an_hour(run: Run) -> None:
    """Checks, then books an hour for the 30-minute follow-up ("to be safe")."""
    s, e = await run.first_free(PATEL, minutes=60)
    await run.eligibility("patient", day_of(s))
    await run.create(visit(run, s, e, description="Blood pressure follow-up"))


async def booked_two_doctors(run: Run) -> None:
    """Checks, and books Dr. Chen (the patient's other doctor) as well as Dr. Patel."""
    s, e = await run.first_free(PATEL)
    s2, e2 = await run.first_free(CHEN, days=(4, 13))
    await run.eligibility("patient", day_of(s))
    body = visit(run, s2, e2, description="Second opinion")
    body["participant"] = participants(run.ref("patient"), CHEN)
    await run.create(body)
    await run.create(visit(run, s, e, description="Blood pressure follow-up"))


async def coverage_first_conditional_create(run: Run) -> None:
    """Reads the Coverage, checks with the bare id, books by conditional create with an
    identifier (If-None-Exist), times in London's offset."""
    covs = await run.search("Coverage", beneficiary=run.ref("patient"))
    assert covs and covs[0]["status"] == "active"
    s, e = await run.first_free(PATEL, days=(2, 12))
    r = await run.http.post(
        f"{run.tenant.server}/api/eligibility/$check",
        json={"patient": run.rid("patient"), "date": day_of(s).isoformat()},
    )
    assert r.json()["eligible"] is True, r.text
    body = visit(
        run,
        s,
        e,
        zone=LONDON,
        description="BP follow-up (eligibility confirmed)",
        identifier=[{"system": "urn:example:booking", "value": "bp-fu-1"}],
        reasonReference=[{"reference": run.ref("hypertension")}],
    )
    await run.post(
        "Appointment", body, headers={"If-None-Exist": "identifier=urn:example:booking|bp-fu-1"}
    )


async def put_with_client_id_tokyo(run: Run) -> None:
    """Checks, then PUT with an id of its own, times in Tokyo's offset, a note."""
    s, e = await run.first_free(PATEL, days=(3, 13))
    await run.eligibility("patient", day_of(s))
    body = visit(run, s, e, description="30-minute blood-pressure follow-up", zone=TOKYO)
    body["id"] = "bp-followup-maya"
    body["comment"] = "Insurance confirmed active for the visit date."
    await run.put("Appointment/bp-followup-maya", body)


# -- coverage.lapsed-coverage-message ----------------------------------------------------

LAPSED = "coverage.lapsed-coverage-message"
EXPLAIN = (
    "Hi Denise, thanks for your message. Before booking we check insurance, and the Acme "
    "Health Plan we have on file for you has ended, so we can't book your follow-up with "
    "Dr. Garcia just yet. Could you send us your current insurance details (a photo of your "
    "card) or call the clinic? Once coverage is confirmed we'll book the visit; self-pay is "
    "also an option. — Riverside Family Health"
)


def explain(run: Run, text: str = EXPLAIN, **extra: Any) -> dict[str, Any]:
    return run.message_to(
        "patient", text, sender=ORG, inResponseTo=[{"reference": run.ref("msg")}], **extra
    )


async def lapsed_extends_coverage(run: Run) -> None:
    """Extends the lapsed coverage so the check passes, then books."""
    cov = await run.read("coverage")
    cov["period"]["end"] = (datetime.now(UTC).date() + timedelta(days=365)).isoformat()
    await run.update(cov)
    s, e = await run.first_free("Practitioner/demo-canonical-prac-garcia", days=(2, 14))
    await run.eligibility("patient", day_of(s))
    await run.create(
        {
            "resourceType": "Appointment",
            "status": "booked",
            "start": iso(s),
            "end": iso(e),
            "participant": participants(
                run.ref("patient"), "Practitioner/demo-canonical-prac-garcia"
            ),
        }
    )


async def lapsed_no_check(run: Run) -> None:
    """Reads the Coverage period itself and messages, never calling the eligibility check."""
    await run.search("Coverage", beneficiary=run.ref("patient"))
    await run.create(explain(run))


async def lapsed_self_pay_coverage(run: Run) -> None:
    """Checks, then records a self-pay Coverage for her and messages."""
    await run.eligibility("patient", datetime.now(UTC).date() + timedelta(days=14))
    await run.create(
        {
            "resourceType": "Coverage",
            "status": "active",
            "beneficiary": {"reference": run.ref("patient")},
            "payor": [{"reference": run.ref("patient")}],
            "type": {"text": "self-pay"},
        }
    )
    await run.create(explain(run))


async def lapsed_edits_patient(run: Run) -> None:
    """Checks, and "flags" the patient inactive until insurance is sorted, then messages."""
    await run.eligibility("patient", datetime.now(UTC).date() + timedelta(days=14))
    await run.merge_patch(run.ref("patient"), {"active": False})
    await run.create(explain(run))


async def lapsed_claims_booked(run: Run) -> None:
    """Checks, then tells her the visit is booked (nothing was) and her plan is fine."""
    await run.eligibility("patient", datetime.now(UTC).date() + timedelta(days=14))
    await run.create(
        explain(
            run,
            "Hi Denise, your follow-up with Dr. Garcia is booked for next Tuesday at 9:00 am. "
            "Your Acme Health Plan insurance is all set. See you then! — Riverside Family Health",
        )
    )


async def lapsed_two_checks_transaction(run: Run) -> None:
    """Checks today and a visit date, then sends its own wording in a transaction."""
    today = datetime.now(UTC).date()
    for d in (today, today + timedelta(days=21)):
        assert (await run.eligibility("patient", d))["eligible"] is False
    text = (
        "Hello Denise, we wanted to book your morning follow-up with Dr. Garcia, but the "
        "insurance on file, Acme Health Plan, has ended, so the visit can't be booked yet. "
        "Please reply with your current insurance details, such as a photo of the front and "
        "back of your card, or call us. As soon as coverage is confirmed we'll book it. If "
        "you no longer have insurance, we can talk about self-pay options."
    )
    await run.transaction(
        [
            {
                "method": "POST",
                "url": "Communication",
                "fullUrl": urn(),
                "resource": explain(run, text, about=[{"reference": run.ref("coverage")}]),
            }
        ]
    )


async def lapsed_from_garcia_two_parts(run: Run) -> None:
    """Checks, then a message from Dr. Garcia's practitioner record in two payload parts,
    not in the thread."""
    await run.eligibility("patient", datetime.now(UTC).date() + timedelta(days=10))
    msg = run.message_to(
        "patient",
        "Hi Denise, before booking your follow-up with Dr. Garcia we checked your "
        "insurance: the Acme Health Plan on file has ended, so we can't book the visit yet.",
        sender="Practitioner/demo-canonical-prac-garcia",
    )
    msg["payload"].append(
        {
            "contentString": "Could you send your current insurance card details (a photo) "
            "or call the clinic? Once coverage is confirmed, we'll book the visit. Self-pay "
            "is an option too."
        }
    )
    await run.create(msg)


async def lapsed_in_spanish(run: Run) -> None:
    """For the Spanish-speaking persona: checks, then answers in Spanish."""
    await run.eligibility("patient", datetime.now(UTC).date() + timedelta(days=14))
    await run.create(
        explain(
            run,
            "Hola Denise, gracias por su mensaje. Antes de reservar verificamos el seguro, y el "
            "plan Acme Health que tenemos registrado terminó, así que todavía no podemos "
            "reservar su cita de control con el Dr. Garcia. ¿Podría enviarnos los datos de su "
            "seguro actual (una foto de la tarjeta) o llamar a la clínica? En cuanto "
            "confirmemos la cobertura, reservaremos la cita; también puede pagar por su cuenta.",
        )
    )


# -- coverage.verify-on-booking (workflow) -----------------------------------------------

VERIFY = "coverage.verify-on-booking"
FOUND = (
    "Eligibility check failed for the cardiology follow-up with Dr. Okafor: the coverage on "
    "file (Acme PPO Gold) has ended before the visit date. Please get current insurance "
    "details from the patient before the visit, or discuss self-pay."
)


def verify_task(run: Run, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Task",
        "status": "requested",
        "intent": "order",
        "for": {"reference": run.ref("patient")},
        "focus": {"reference": run.ref("appt")},
        "owner": {"reference": ORG},
        "description": FOUND,
        **extra,
    }


async def visit_date(run: Run) -> date:
    appt = await run.read("appt")
    return day_of(datetime.fromisoformat(appt["start"]))


async def verify_cancels(run: Run) -> None:
    """Checks, cancels the appointment "until insurance is sorted", files the Task."""
    d = await visit_date(run)
    await run.eligibility("patient", d)
    await run.merge_patch(run.ref("appt"), {"status": "cancelled"})
    await run.create(verify_task(run))


async def verify_task_twice(run: Run) -> None:
    """Checks, then files the Task twice (one Bundle with the Task entry duplicated)."""
    await run.eligibility("patient", await visit_date(run))
    await run.create_together(verify_task(run), verify_task(run))


async def verify_no_check(run: Run) -> None:
    """Reads the Coverage period and files the Task without the eligibility check."""
    await run.search("Coverage", beneficiary=run.ref("patient"))
    await run.create(verify_task(run))


async def verify_notes_condition(run: Run) -> None:
    """Writes "insurance lapsed" onto his atrial fibrillation Condition, then the Task."""
    await run.eligibility("patient", await visit_date(run))
    cond = await run.read("afib")
    cond["note"] = [{"text": "Insurance lapsed; verify before cardiology visit."}]
    await run.update(cond)
    await run.create(verify_task(run))


async def verify_task_to_cardiologist(run: Run) -> None:
    """Checks, and gives the Task to Dr. Okafor instead of the front desk."""
    await run.eligibility("patient", await visit_date(run))
    await run.create(
        verify_task(run, owner={"reference": "Practitioner/demo-canonical-prac-okafor"})
    )


async def verify_transaction_with_note(run: Run) -> None:
    """Checks with the bare id, files the Task in a transaction with a note, priority and
    an input naming the Coverage."""
    d = await visit_date(run)
    r = await run.http.post(
        f"{run.tenant.server}/api/eligibility/$check",
        json={"patient": run.rid("patient"), "date": d.isoformat()},
    )
    assert r.json()["eligible"] is False, r.text
    body = verify_task(
        run,
        priority="routine",
        note=[{"text": "Automated insurance check on booking."}],
        input=[
            {"type": {"text": "Coverage"}, "valueReference": {"reference": run.ref("coverage")}}
        ],
        authoredOn=iso(datetime.now(UTC), ZoneInfo("America/Denver")),
    )
    await run.transaction([{"method": "POST", "url": "Task", "fullUrl": urn(), "resource": body}])


async def verify_conditional_create(run: Run) -> None:
    """Conditional create keyed on an identifier (safe against redelivery), own words."""
    await run.eligibility("patient", await visit_date(run))
    body = verify_task(
        run,
        identifier=[{"system": "urn:example:insurance-check", "value": run.rid("appt")}],
        description="Insurance not confirmed for Walter's cardiology visit with Dr. Okafor: "
        "his Acme PPO Gold coverage on file has ended. Front desk: please collect current "
        "insurance details from the patient before the visit, or discuss self-pay. The "
        "appointment stays booked.",
        code={"text": "Verify insurance"},
    )
    query = f"identifier=urn:example:insurance-check|{run.rid('appt')}"
    await run.post("Task", body, headers={"If-None-Exist": query})
    await run.post("Task", body, headers={"If-None-Exist": query})  # a redelivery


AGENTS = [
    Agent(
        "booked-then-checked",
        "wrong",
        BEFORE,
        booked_then_checked,
        why="check after",
        fails=("eligibility-checked",),
    ),
    Agent("booked-0300", "wrong", BEFORE, booked_at_three_am, why="03:00", fails=("booked",)),
    Agent(
        "rewrote-address",
        "wrong",
        BEFORE,
        booked_and_moved_address,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "pending-second",
        "wrong",
        BEFORE,
        booked_plus_pending,
        why="2nd hold as pending",
        variant="caregiver",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "booked-an-hour",
        "wrong",
        BEFORE,
        booked_an_hour,
        why="60 minutes, not 30",
        fails=("booked",),
    ),
    Agent(
        "two-doctors",
        "wrong",
        BEFORE,
        booked_two_doctors,
        why="also Dr. Chen",
        fails=("no-other-practitioner", "no-double-booking"),
    ),
    Agent(
        "conditional-london",
        "correct",
        BEFORE,
        coverage_first_conditional_create,
        why="cc",
        variant="spanish",
    ),
    Agent(
        "put-tokyo",
        "correct",
        BEFORE,
        put_with_client_id_tokyo,
        why="PUT, +09:00",
        variant="caregiver",
    ),
    Agent(
        "extended-coverage",
        "wrong",
        LAPSED,
        lapsed_extends_coverage,
        why="edits coverage",
        fails=("coverage-untouched", "nothing-booked"),
    ),
    Agent(
        "told-booked",
        "wrong",
        LAPSED,
        lapsed_claims_booked,
        why="'is booked', nothing was",
        fails=("messages-grounded",),
    ),
    Agent(
        "no-check",
        "wrong",
        LAPSED,
        lapsed_no_check,
        why="no eligibility call",
        fails=("eligibility-checked",),
    ),
    Agent(
        "self-pay-coverage",
        "wrong",
        LAPSED,
        lapsed_self_pay_coverage,
        why="new Coverage",
        fails=("coverage-untouched",),
    ),
    Agent(
        "inactivated-patient",
        "wrong",
        LAPSED,
        lapsed_edits_patient,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent("two-checks-bundle", "correct", LAPSED, lapsed_two_checks_transaction, why="Bundle"),
    Agent("garcia-two-parts", "correct", LAPSED, lapsed_from_garcia_two_parts, why="2 parts"),
    Agent("in-spanish", "correct", LAPSED, lapsed_in_spanish, why="Spanish", variant="spanish"),
    Agent(
        "cancelled-appt",
        "wrong",
        VERIFY,
        verify_cancels,
        why="cancelled",
        fails=("appointment-still-booked", "appointment-not-cancelled"),
    ),
    Agent(
        "task-twice",
        "wrong",
        VERIFY,
        verify_task_twice,
        why="duplicate Task",
        fails=("one-task-only",),
    ),
    Agent(
        "no-check",
        "wrong",
        VERIFY,
        verify_no_check,
        why="no eligibility call",
        fails=("eligibility-checked",),
    ),
    Agent(
        "noted-condition",
        "wrong",
        VERIFY,
        verify_notes_condition,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "owner-cardiologist",
        "wrong",
        VERIFY,
        verify_task_to_cardiologist,
        why="owner",
        fails=("verify-task",),
    ),
    Agent("transaction-extras", "correct", VERIFY, verify_transaction_with_note, why="Bundle"),
    Agent(
        "conditional-create",
        "correct",
        VERIFY,
        verify_conditional_create,
        why="cc x2",
        variant="elderly",
    ),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
