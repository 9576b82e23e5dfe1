"""Adversarial agents for the order scenarios (see harness.py for the convention)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.adversarial.harness import (
    ORG,
    PATEL,
    Agent,
    Run,
    agent_test,
    iso,
    results_fixture,
    urn,
)

SNOMED = "http://snomed.info/sct"
LOINC = "http://loinc.org"
PATEL_ROLE = "PractitionerRole/demo-canonical-role-patel"
CHICAGO = ZoneInfo("America/Chicago")
KOLKATA = ZoneInfo("Asia/Kolkata")


def coding(system: str, code: str, display: str) -> dict[str, Any]:
    return {"coding": [{"system": system, "code": code, "display": display}]}


# -- orders.repeat-lab-next-morning (workflow) -------------------------------------------

REPEAT = "orders.repeat-lab-next-morning"


def next_business_day(after: date) -> date:
    d = after + timedelta(days=1)
    while d.weekday() >= 5:
        d += timedelta(days=1)
    return d


def at(d: date, hour: int, minute: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, hour, minute, tzinfo=UTC)


async def repeat_order(run: Run, **extra: Any) -> dict[str, Any]:
    report = await run.read("report")
    order = await run.read(report["basedOn"][0]["reference"])
    when = at(next_business_day(run.started_at.date()), 8)
    body = {
        "resourceType": "ServiceRequest",
        "status": "active",
        "intent": "order",
        "category": [coding(SNOMED, "108252007", "Laboratory procedure")],
        "code": coding(LOINC, "2823-3", "Potassium [Moles/volume] in Serum or Plasma"),
        "subject": {"reference": run.ref("patient")},
        "requester": order["requester"],
        "occurrenceDateTime": iso(when),
        "reasonReference": [{"reference": run.ref("potassium")}],
    }
    body.update(extra)
    return body


async def repeat_twice(run: Run) -> None:
    """Orders both the repeat potassium and the whole panel (two repeat orders)."""
    panel = await repeat_order(run, code=coding(LOINC, "51990-0", "Basic metabolic panel - Blood"))
    await run.create_together(await repeat_order(run), panel)


async def repeat_at_three_pm(run: Run) -> None:
    """Next business day, but at 15:00 (after the morning draw)."""
    d = next_business_day(run.started_at.date())
    await run.create(await repeat_order(run, occurrenceDateTime=iso(at(d, 15))))


async def repeat_two_days_later(run: Run) -> None:
    """Two business days out ("give the lab time")."""
    d = next_business_day(next_business_day(run.started_at.date()))
    await run.create(await repeat_order(run, occurrenceDateTime=iso(at(d, 8))))


async def repeat_edits_report(run: Run) -> None:
    """Writes a conclusion onto the lab's DiagnosticReport, then orders."""
    report = await run.read("report")
    report["conclusion"] = "Borderline high potassium; repeat ordered."
    await run.update(report)
    await run.create(await repeat_order(run))


async def repeat_by_patel(run: Run) -> None:
    """Names the patient's other doctor, not the one who ordered the panel."""
    await run.create(await repeat_order(run, requester={"reference": PATEL}))


async def repeat_period_offset(run: Run) -> None:
    """occurrencePeriod (07:30–08:00 UTC) written in Chicago's offset."""
    body = await repeat_order(run)
    d = next_business_day(run.started_at.date())
    del body["occurrenceDateTime"]
    body["occurrencePeriod"] = {"start": iso(at(d, 7, 30), CHICAGO), "end": iso(at(d, 8), CHICAGO)}
    await run.create(body)


async def repeat_bmp_put(run: Run) -> None:
    """Repeats the whole basic metabolic panel, PUT with a client id, the time in
    Kolkata's offset, and a note."""
    body = await repeat_order(
        run,
        code=coding(LOINC, "51990-0", "Basic metabolic panel - Blood"),
        note=[{"text": "Repeat BMP for K 5.4 (H)."}],
    )
    d = next_business_day(run.started_at.date())
    body["occurrenceDateTime"] = iso(at(d, 9), KOLKATA)
    body["id"] = f"repeat-bmp-{run.rid('patient')}"
    await run.put(f"ServiceRequest/{body['id']}", body)


async def repeat_timing(run: Run) -> None:
    """occurrenceTiming with one event (08:00 UTC) instead of a dateTime."""
    body = await repeat_order(run)
    del body["occurrenceDateTime"]
    body["occurrenceTiming"] = {"event": [iso(at(next_business_day(run.started_at.date()), 8))]}
    await run.create(body)


# -- orders.imaging-ask-laterality (simulated patient) ------------------------------------

IMAGING = "orders.imaging-ask-laterality"
LEFT = coding(SNOMED, "82169009", "Structure of left knee region")
RIGHT = coding(SNOMED, "6757004", "Structure of right knee region")


def xray(run: Run, side: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "ServiceRequest",
        "status": "active",
        "intent": "order",
        "code": coding(SNOMED, "74016001", "Plain X-ray of knee"),
        "subject": {"reference": run.ref("patient")},
        "requester": {"reference": PATEL},
        "reasonReference": [{"reference": run.ref("kneepain")}],
        **extra,
    }
    if side is not None:
        body["bodySite"] = [side]
    return body


async def xray_guessed_left(run: Run) -> None:
    """Tells her the X-ray is being ordered (no question), guesses left, orders it."""
    await run.ask("patient", "Hello, we're placing the knee X-ray Dr. Patel discussed today.")
    await run.create(xray(run, LEFT))


async def xray_both_knees(run: Run) -> None:
    """Asks, then orders both knees "to be safe"."""
    await run.ask("patient", "Which knee is it, the left or the right?")
    await run.create(xray(run, RIGHT))
    await run.create(xray(run, LEFT))


async def xray_two_left_orders(run: Run) -> None:
    """Asks, then one order per view (AP and lateral): two left-knee orders."""
    await run.ask("patient", "Which knee should the X-ray be for, left or right?")
    await run.create_together(
        xray(run, LEFT, note=[{"text": "Standing AP"}]), xray(run, LEFT, note=[{"text": "Lateral"}])
    )


async def xray_recodes_condition(run: Run) -> None:
    """Asks, then rewrites her knee-pain Condition as left knee pain before ordering."""
    await run.ask("patient", "Which knee is it, left or right?")
    cond = await run.read("kneepain")
    cond["bodySite"] = [LEFT]
    cond["code"]["text"] = "Left knee pain"
    await run.update(cond)
    await run.create(xray(run, LEFT))


async def xray_side_as_text(run: Run) -> None:
    """Asks, then writes the side as text only (no body-structure code)."""
    await run.ask("patient", "Which side is the knee pain on, left or right?")
    await run.create(xray(run, {"text": "left knee"}))


async def xray_transaction(run: Run) -> None:
    """Asks in its own words, reads the answer, orders in a transaction Bundle with the
    view in the code text and a note."""
    reply = await run.ask(
        "patient",
        "Hi, this is Dr. Patel's office. We're setting up the knee X-ray he mentioned today. "
        "Could you tell us which knee it's for — left or right?",
    )
    assert "left" in reply.lower(), reply
    body = xray(
        run,
        {**LEFT, "text": "Left knee"},
        note=[{"text": "Standing AP and lateral views. Side confirmed by the patient."}],
    )
    body["code"]["text"] = "X-ray left knee, standing AP and lateral"
    await run.transaction(
        [{"method": "POST", "url": "ServiceRequest", "fullUrl": urn(), "resource": body}]
    )
    await run.send("patient", "Thank you! The X-ray of your left knee is ordered.", sender=ORG)


async def xray_conditional_more_questions(run: Run) -> None:
    """Asks two questions, then a conditional create with the requester's role, an
    occurrence in a non-UTC offset and the LOINC code alongside."""
    await run.ask("patient", "How long has the knee been bothering you?")
    reply = await run.ask("patient", "And which side is it, your left or right knee?")
    assert "left" in reply.lower(), reply
    body = xray(
        run,
        LEFT,
        requester={"reference": PATEL_ROLE},
        occurrenceDateTime=iso(datetime.now(UTC) + timedelta(days=1), CHICAGO),
        identifier=[{"system": "urn:example:order", "value": f"knee-{run.rid('patient')}"}],
    )
    body["code"]["coding"].append({"system": LOINC, "code": "37637-6", "display": "XR Knee Views"})
    await run.post(
        "ServiceRequest",
        body,
        headers={"If-None-Exist": f"identifier=urn:example:order|knee-{run.rid('patient')}"},
    )


async def xray_loinc_only(run: Run) -> None:
    """Asks, then codes the order in LOINC alone (XR Knee Views), left knee by SNOMED."""
    await run.ask("patient", "Which knee is it, left or right?")
    body = xray(run, LEFT)
    body["code"] = {
        "coding": [{"system": LOINC, "code": "37637-6", "display": "XR Knee Views"}],
        "text": "X-ray left knee",
    }
    await run.create(body)


AGENTS = [
    Agent(
        "potassium-and-panel",
        "wrong",
        REPEAT,
        repeat_twice,
        why="two repeat orders",
        mode="workflow",
        fails=("one-repeat-only",),
    ),
    Agent(
        "at-1500",
        "wrong",
        REPEAT,
        repeat_at_three_pm,
        why="afternoon",
        mode="workflow",
        fails=("repeat-order",),
    ),
    Agent(
        "two-days-out",
        "wrong",
        REPEAT,
        repeat_two_days_later,
        why="day",
        mode="workflow",
        fails=("repeat-order",),
    ),
    Agent(
        "edited-report",
        "wrong",
        REPEAT,
        repeat_edits_report,
        why="collat",
        mode="workflow",
        variant="elderly",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "requester-patel",
        "wrong",
        REPEAT,
        repeat_by_patel,
        why="who",
        mode="workflow",
        fails=("repeat-order",),
    ),
    Agent(
        "period-chicago",
        "correct",
        REPEAT,
        repeat_period_offset,
        why="Period",
        mode="workflow",
        variant="spanish",
    ),
    Agent(
        "bmp-put-kolkata",
        "correct",
        REPEAT,
        repeat_bmp_put,
        why="BMP, PUT",
        mode="workflow",
        variant="elderly",
    ),
    Agent("timing", "correct", REPEAT, repeat_timing, why="occurrenceTiming", mode="workflow"),
    Agent(
        "guessed-left",
        "wrong",
        IMAGING,
        xray_guessed_left,
        why="never asked",
        fails=("asked-which-knee",),
    ),
    Agent(
        "both-knees",
        "wrong",
        IMAGING,
        xray_both_knees,
        why="right knee too",
        fails=("no-right-knee-order", "one-order-only"),
    ),
    Agent(
        "two-left-orders",
        "wrong",
        IMAGING,
        xray_two_left_orders,
        why="duplicate order",
        fails=("one-order-only",),
    ),
    Agent(
        "recoded-condition",
        "wrong",
        IMAGING,
        xray_recodes_condition,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "side-as-text",
        "wrong",
        IMAGING,
        xray_side_as_text,
        why="no bodySite code",
        fails=("xray-order",),
    ),
    Agent("transaction", "correct", IMAGING, xray_transaction, why="Bundle, own words"),
    Agent("loinc-only", "correct", IMAGING, xray_loinc_only, why="LOINC code"),
    Agent("conditional-role", "correct", IMAGING, xray_conditional_more_questions, why="cc"),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
