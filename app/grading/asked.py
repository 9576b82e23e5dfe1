"""`asked`: the simulated patient revealed a fact because the system asked, before it
acted on it — asked, not guessed.

The snapshot lists each fact (topic) every reply of the simulated patient revealed, with
the staff message the reply answers and whether that message asked about the topic. The
expectation holds on the first reveal of its `fact` that answers a message asking about
it and comes strictly before the first evidence of `before` (while `before` does not
hold yet, every reveal so far counts: the order cannot have been violated yet).

A failure says which of these it was, nearest miss first: revealed only after the work,
revealed without being asked (the patient let it slip, so the system did not ask), never
revealed, or no reply from the simulated patient at all.
"""

from __future__ import annotations

from app.grading.fhirpath import fhirpath_datetime
from app.grading.scoring import capped, make_result
from app.grading.snapshot import (
    Graded,
    Revealed,
    RunSnapshot,
    is_simulated,
)
from app.scenarios.schema import AskedExpectation
from understudy_client.contract.runs import Evidence, ExpectationResult


def first_write(expectation: AskedExpectation, snapshot: RunSnapshot) -> Graded:
    """What a `beforeWrite` asked waits on, as a graded result: the system's first write
    of that resource type in the run (its time is the cutoff; none yet: no cutoff)."""
    kind = expectation.before_write or ""
    times = [
        c.first_changed_at
        for c in snapshot.changed
        if c.resource_type == kind and (c.via_run or c.run_id is not None) and not is_simulated(c)
    ]
    first = min(times, default=None)
    label = f"the first {kind} written"
    result = ExpectationResult(
        id=f"first-{kind}",
        label=label,
        type="resource",
        required=False,
        weight=0,
        passed=first is not None,
        score=0,
        evidence=Evidence(matches=[]),
        detail=label,
    )
    return Graded(result, first_at=first)


def describe_reveal(revealed: Revealed) -> str:
    return (
        f"{revealed.reply_ref} answering {revealed.asked_ref} at {fhirpath_datetime(revealed.at)}"
    )


def grade_asked(expectation: AskedExpectation, snapshot: RunSnapshot, before: Graded) -> Graded:
    """`before` is the graded result of the expectation `expectation.before` names."""
    fact = expectation.fact
    cutoff = before.first_at
    of_fact = sorted((r for r in snapshot.revealed if r.topic == fact), key=lambda r: r.at)
    answered = [r for r in of_fact if r.asked]
    in_time = [r for r in answered if cutoff is None or r.at < cutoff]

    evidence = Evidence(
        matches=[],
        note=(
            f"counting replies before {before.result.label!r} ({fhirpath_datetime(cutoff)})"
            if cutoff is not None
            else f"{before.result.label!r} does not hold yet: every reply so far counts"
        ),
    )
    if in_time:
        first = in_time[0]
        refs = [ref for r in in_time for ref in (r.asked_ref, r.reply_ref)]
        evidence.matches = capped(list(dict.fromkeys(refs)))
        detail = f"the patient revealed {fact!r} in {describe_reveal(first)}, which asked"
        return make_result(expectation, True, evidence, detail, first.at)

    if answered:  # asked, but the answer came only after the work
        evidence.closest = describe_reveal(answered[0])
        detail = f"{fact!r} was revealed only after {before.result.label!r}"
        return make_result(expectation, False, evidence, detail)
    if of_fact:  # the patient let it slip: nobody asked
        evidence.closest = describe_reveal(of_fact[0])
        detail = (
            f"{fact!r} was revealed without being asked: {of_fact[0].asked_ref} did not ask "
            "about it"
        )
        return make_result(expectation, False, evidence, detail)
    if snapshot.patient_replies == 0:
        detail = (
            f"no simulated patient replied in this run, so {fact!r} was never revealed "
            "(no message asked the patient)"
        )
        return make_result(expectation, False, evidence, detail)
    detail = (
        f"none of the simulated patient's {snapshot.patient_replies} reply(ies) revealed "
        f"{fact!r}: no message asked about it in a way the patient answered"
    )
    return make_result(expectation, False, evidence, detail)
