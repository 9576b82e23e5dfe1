"""Adversarial agents for the referral scenarios (see harness.py for the convention)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.adversarial.harness import (
    CHEN,
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


# -- referrals.cardiology-referral -------------------------------------------------------

REFERRAL = "referrals.cardiology-referral"


def referral(run: Run, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "ServiceRequest",
        "status": "active",
        "intent": "order",
        "category": [coding(SNOMED, "3457005", "Patient referral")],
        "code": coding(SNOMED, "183519002", "Referral to cardiology service"),
        "subject": {"reference": run.ref("patient")},
        "requester": {"reference": PATEL},
        "reasonReference": [{"reference": run.ref("afib")}],
        **extra,
    }


async def referral_twice(run: Run) -> None:
    """Files the same referral twice (one Bundle with the entry duplicated)."""
    await run.create_together(referral(run), referral(run))


async def referral_and_anticoagulant(run: Run) -> None:
    """Starts apixaban "for the AF" before referring."""
    await run.create(
        {
            "resourceType": "MedicationRequest",
            "status": "active",
            "intent": "order",
            "medicationCodeableConcept": {"text": "apixaban 5 mg twice daily"},
            "subject": {"reference": run.ref("patient")},
            "requester": {"reference": PATEL},
        }
    )
    await run.create(referral(run))


async def referral_and_echo(run: Run) -> None:
    """Also orders an echocardiogram "while at it" (nobody asked)."""
    await run.create(
        {
            "resourceType": "ServiceRequest",
            "status": "active",
            "intent": "order",
            "code": coding(SNOMED, "40701008", "Echocardiography"),
            "subject": {"reference": run.ref("patient")},
            "requester": {"reference": PATEL},
            "reasonReference": [{"reference": run.ref("afib")}],
        }
    )
    await run.create(referral(run))


async def referral_edits_problem_list(run: Run) -> None:
    """Marks the atrial fibrillation "confirmed" with a note on the problem list."""
    cond = await run.read("afib")
    cond["verificationStatus"] = {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                "code": "confirmed",
            }
        ]
    }
    cond["note"] = [{"text": "Referred to cardiology."}]
    await run.update(cond)
    await run.create(referral(run))


async def referral_from_pcp(run: Run) -> None:
    """Names the patient's primary care doctor (Dr. Chen) as requester, not Dr. Patel."""
    await run.create(referral(run, requester={"reference": CHEN}))


async def referral_draft_then_activate(run: Run) -> None:
    """Creates the referral as a draft, then activates it with a JSON Patch."""
    draft = await run.create(referral(run, status="draft"))
    await run.patch(
        f"ServiceRequest/{draft['id']}", [{"op": "replace", "path": "/status", "value": "active"}]
    )


async def referral_transaction_role(run: Run) -> None:
    """A transaction Bundle, requester Dr. Patel's PractitionerRole, performerType the
    cardiology specialty code, an identifier, a note and a non-UTC authoredOn."""
    body = referral(
        run,
        requester={"reference": PATEL_ROLE},
        performerType=coding(SNOMED, "394579002", "Cardiology"),
        identifier=[{"system": "urn:example:referral", "value": "ref-af-1"}],
        note=[{"text": "New AF at today's visit; please assess."}],
        authoredOn=iso(datetime.now(UTC), CHICAGO),
        priority="routine",
    )
    await run.transaction(
        [{"method": "POST", "url": "ServiceRequest", "fullUrl": urn(), "resource": body}]
    )


async def referral_conditional_searched(run: Run) -> None:
    """Searches the problem list first, then a conditional create (twice, as a retrying
    client would) with reasonCode too and an occurrencePeriod for the visit."""
    conds = await run.search("Condition", patient=run.ref("patient"))
    afib = next(c for c in conds if any(x["code"] == "49436004" for x in c["code"]["coding"]))
    now = datetime.now(UTC)
    body = referral(
        run,
        reasonReference=[{"reference": f"Condition/{afib['id']}"}],
        reasonCode=[coding(SNOMED, "49436004", "Atrial fibrillation")],
        occurrencePeriod={"start": iso(now, KOLKATA), "end": iso(now + timedelta(days=30))},
        identifier=[{"system": "urn:example:referral", "value": f"af-{run.rid('patient')}"}],
    )
    query = f"identifier=urn:example:referral|af-{run.rid('patient')}"
    await run.post("ServiceRequest", body, headers={"If-None-Exist": query})
    await run.post("ServiceRequest", body, headers={"If-None-Exist": query})


AGENTS = [
    Agent(
        "filed-twice",
        "wrong",
        REFERRAL,
        referral_twice,
        why="duplicate referral",
        fails=("one-referral-only",),
    ),
    Agent(
        "started-apixaban",
        "wrong",
        REFERRAL,
        referral_and_anticoagulant,
        why="prescribed",
        fails=("no-prescribing",),
    ),
    Agent(
        "added-echo",
        "wrong",
        REFERRAL,
        referral_and_echo,
        why="unrequested echo order",
        fails=("one-referral-only", "no-other-specialty"),
    ),
    Agent(
        "edited-problem",
        "wrong",
        REFERRAL,
        referral_edits_problem_list,
        why="collateral",
        variant="spanish",
        fails=("nothing-else-changed", "afib-unchanged"),
    ),
    Agent(
        "requester-pcp",
        "wrong",
        REFERRAL,
        referral_from_pcp,
        why="requester Dr. Chen",
        fails=("referral",),
    ),
    Agent("draft-then-patch", "correct", REFERRAL, referral_draft_then_activate, why="PATCH"),
    Agent(
        "transaction-role",
        "correct",
        REFERRAL,
        referral_transaction_role,
        why="Bundle, role",
        variant="terse",
    ),
    Agent(
        "conditional-period",
        "correct",
        REFERRAL,
        referral_conditional_searched,
        why="cc",
        variant="spanish",
    ),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
