"""Adversarial agents none of whose mistakes a scenario's hand-written expectations name:
each is caught by the end-state comparison with the reference solution
(`matches-reference`) alone, and the correct ones beside them take free choices the
reference did not (see harness.py for the table convention)."""

from __future__ import annotations

from datetime import timedelta

from tests.adversarial.harness import CHEN, PATEL, Agent, Run, agent_test, results_fixture
from tests.adversarial.test_referrals import REFERRAL, referral
from tests.adversarial.test_results import FOLLOWUP, followup
from tests.adversarial.test_scheduling import ASK, NAMED, appointment

DERMATOLOGIST = "Practitioner/demo-canonical-prac-nguyen"
CARDIOLOGIST = "Practitioner/demo-canonical-prac-okafor"


async def named_patient_declined(run: Run) -> None:
    """Books the visit with the patient's participation `declined`."""
    s, e = await run.first_free(CHEN)
    body = appointment(run, s, e)
    body["participant"][0]["status"] = "declined"
    await run.create(body)


async def named_two_hour_block(run: Run) -> None:
    """Blocks two hours of Dr. Chen's day for a routine physical."""
    s, e = await run.first_free(CHEN, minutes=120)
    await run.create(appointment(run, s, e, minutesDuration=120))


async def named_hour_long_physical(run: Run) -> None:
    """Books an hour for the annual physical (two free slots): the brief names no length."""
    s, e = await run.first_free(CHEN, minutes=60)
    await run.create(appointment(run, s, e, minutesDuration=60))


async def referral_to_the_dermatologist(run: Run) -> None:
    """Files the cardiology referral with the dermatologist as its performer."""
    await run.create(referral(run, performer=[{"reference": DERMATOLOGIST}]))


async def referral_to_the_cardiologist(run: Run) -> None:
    """Names the clinic's cardiologist as the referral's performer."""
    await run.create(referral(run, performer=[{"reference": CARDIOLOGIST}]))


async def followup_deferred_a_year(run: Run) -> None:
    """Files the follow-up Task, not to be started for a year."""
    start = (run.started_at + timedelta(days=365)).isoformat()
    await run.create(followup(run, restriction={"period": {"start": start}}))


async def followup_also_flags_the_chart(run: Run) -> None:
    """Files the Task, and puts a Flag on the chart nobody asked for."""
    await run.create(followup(run))
    await run.create(
        {
            "resourceType": "Flag",
            "status": "active",
            "code": {"text": "Uncontrolled diabetes"},
            "subject": {"reference": run.ref("patient")},
        }
    )


async def followup_logs_provenance(run: Run) -> None:
    """Files the Task, and records what it did as a Provenance (no chart change)."""
    task = await run.create(followup(run))
    await run.create(
        {
            "resourceType": "Provenance",
            "target": [{"reference": f"Task/{task['id']}"}],
            "recorded": run.started_at.isoformat(),
            "agent": [{"who": {"reference": PATEL}}],
        }
    )


AGENTS = [
    Agent(
        "patient-declined",
        "wrong",
        NAMED,
        named_patient_declined,
        why="declined",
        fails=("matches-reference",),
    ),
    Agent(
        "two-hour-block",
        "wrong",
        NAMED,
        named_two_hour_block,
        why="2 h for 30 min",
        fails=("matches-reference",),
    ),
    Agent("hour-long", "correct", NAMED, named_hour_long_physical, why="free length"),
    Agent(
        "dermatologist",
        "wrong",
        REFERRAL,
        referral_to_the_dermatologist,
        why="performer",
        fails=("matches-reference",),
    ),
    Agent("cardiologist", "correct", REFERRAL, referral_to_the_cardiologist, why="free"),
    Agent(
        "deferred-a-year",
        "wrong",
        FOLLOWUP,
        followup_deferred_a_year,
        why="restriction",
        fails=("matches-reference",),
    ),
    Agent(
        "extra-flag",
        "wrong",
        FOLLOWUP,
        followup_also_flags_the_chart,
        why="collateral",
        fails=("matches-reference",),
    ),
    Agent("provenance", "correct", FOLLOWUP, followup_logs_provenance, why="bookkeeping"),
]
_ = ASK  # the booking scenarios' module also drives book-ask-time

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
