"""`matches-reference`: the run's end state is the reference solution's end state.

Grading used to be "allowed unless a clause forbids it": whatever a scenario's author
did not think of passed. This check turns that around. The scenario's oracle (its
reference solution) is replayed from the run's own starting point (`app.grading.replay`,
through the FHIR API's own write functions), giving the change set a correct system
would have left in this very run. The run's actual change set — what it created,
updated and deleted, on the fixture and anywhere it wrote — is paired with it:

- a resource that existed before the run pairs with itself: its consequential elements
  (`app.scenarios.consequential`) must read as the reference left them — an edit the
  reference did not make (a Coverage period extended, a lab result's interpretation
  changed, the look-alike chart deleted) is collateral, one it made and the run did not
  is missing;
- created resources pair by type, each with the reference resource it differs from
  least; every consequential element must match after normalisation (instants as
  instants, codings by system + code, references through the directory, choice types
  unified, order ignored, durations as durations), except the scenario's `free`
  choices, whose `where` constraints must hold instead;
- messages (Communications) pair as a conversation, not one to one: how many is free
  unless `strict.messages` bounds it, but each must go to a recipient the reference
  wrote to, about the same subject, sent (a final status); every recipient the
  reference wrote to must get one. What they say is for the text checks;
- a Slot marked busy or free is no change of its own when a booking the run changed
  covers it (it follows from the booking);
- a created resource with no reference partner (a duplicate, an extra order) is
  collateral, a reference change with no partner is missing; both fail, naming the
  resource and, for an update, the paths that differ.

The simulated patient's replies are never the system's changes, and a resource created
and deleted (or withdrawn) again during the run is no change.

The parts are modules of their own: the expected change set (`reference_expected`), how
values read (`reference_values`), comparing one element (`reference_elements`), comparing
and pairing resources (`reference_resources`), the conversation (`reference_messages`)
and what each pair reports (`reference_reports`). This module grades.
"""

from __future__ import annotations

from app.grading.changes import changed_paths, no_net_change
from app.grading.fhirpath import FhirPathContext
from app.grading.reference_elements import MAX_DIFFS
from app.grading.reference_expected import expected_changes
from app.grading.reference_messages import grade_conversation, grade_sent
from app.grading.reference_reports import reference_result, replacements, report_created, report_old
from app.grading.reference_resources import (
    Finding,
    OldPair,
    aliases_of,
    diff_entry,
    pair_by_cost,
    ref_of_change,
    resource_diffs,
    slot_follows,
)
from app.grading.reference_values import Context, canonical_form, refs_in
from app.grading.snapshot import (
    ChangedResource,
    Graded,
    RunSnapshot,
    is_simulated,
)
from app.grading.truth.texts import patient_addresses
from app.scenarios.consequential import (
    BOOKKEEPING_TYPES,
    DERIVED_TYPES,
    MESSAGE_TYPES,
)
from app.scenarios.schema import FreeChoice, ReferenceExpectation

Pairs = list[tuple[str, ChangedResource | None, ChangedResource | None]]


def grade_reference(
    expectation: ReferenceExpectation, snapshot: RunSnapshot, fp: FhirPathContext
) -> Graded:
    start, expected_all, read, expected_sent = expected_changes(snapshot, expectation.oracle)
    expected = [c for c in expected_all if no_net_change(c) is None]
    actual = [
        c
        for c in snapshot.changed
        if (c.via_run or c.run_id is not None)
        and not is_simulated(c)
        and c.resource_type not in BOOKKEEPING_TYPES
        and no_net_change(c) is None
    ]
    aliases = aliases_of(start)
    known = {r for c in expected_all for r in c.all_refs} | set(snapshot.patient_refs) | read
    ctx = Context(
        aliases=aliases,
        run_start=snapshot.started_at,
        known={aliases.get(r, r) for r in known},
        created={ref_of_change(c): c.resource_type for c in actual if c.created},
    )
    findings: list[Finding] = []
    matches: list[str] = []
    free = expectation.free
    expected_new = [c for c in expected if c.created]
    actual_new = [c for c in actual if c.created]
    pairs = _pair_created(expected_new, actual_new, ctx, free, fp)
    olds = _pair_old(start, expected, actual, ctx, free, fp, findings)

    replacements(olds, pairs, ctx, free, fp, matches)
    for old in olds:
        report_old(old, findings, matches, (ctx, free, fp))
    for resource_type, e_, a_ in pairs:
        report_created(resource_type, e_, a_, actual_new, ctx, free, fp, findings, matches)
    for c in actual_new:
        if c.resource_type in DERIVED_TYPES:
            title = f"created {ref_of_change(c)}"
            entry = diff_entry(
                "collateral",
                title,
                c.resource_type,
                ref_of_change(c),
                None,
                c.resource,
                ["created"],
            )
            findings.append(Finding("collateral", title, "", ref_of_change(c), entry))
    grade_conversation(expectation, expected, expected_new, actual_new, ctx, findings, matches)
    told = {
        ctx.resolve(r)
        for c in expected_new
        if c.resource_type in MESSAGE_TYPES
        for r in refs_in((c.resource or {}).get("recipient"))
    }
    grade_sent(expected_sent, snapshot.sent, patient_addresses(snapshot, told), findings, matches)

    return reference_result(expectation, findings, matches, len(expected), len(actual))


def _pair_created(
    expected_new: list[ChangedResource],
    actual_new: list[ChangedResource],
    ctx: Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
) -> Pairs:
    """Created resources pair by type (messages as a conversation, apart). Every type is
    paired once without knowing the others' pairs, then again with them, so a reference
    to a resource the reference solution created (a message `about` its booking) reads as
    a reference to the run's partner of it."""
    types = sorted({c.resource_type for c in expected_new + actual_new} - MESSAGE_TYPES)
    types = [t for t in types if t not in DERIVED_TYPES]
    pairs: Pairs = []
    for final in (False, True):
        for resource_type in types:
            es = [c for c in expected_new if c.resource_type == resource_type]
            acts = [c for c in actual_new if c.resource_type == resource_type]

            def cost(e: ChangedResource, a: ChangedResource, rt: str = resource_type) -> int:
                return len(resource_diffs(rt, e.resource, a.resource, ctx, free, fp))

            for e_, a_ in pair_by_cost(es, acts, cost):
                if e_ is not None and a_ is not None:
                    ctx.paired[ref_of_change(e_)] = ref_of_change(a_)
                if final:
                    pairs.append((resource_type, e_, a_))
    return pairs


def _pair_old(
    start: RunSnapshot,
    expected: list[ChangedResource],
    actual: list[ChangedResource],
    ctx: Context,
    free: list[FreeChoice],
    fp: FhirPathContext,
    findings: list[Finding],
) -> list[OldPair]:
    """Resources that existed before the run pair with themselves. A derived resource (a
    Slot) the run changed is collateral unless a booking it changed covers it."""
    start_state = {ref: start.current.get(symbol) for symbol, ref in start.fixture.items()}
    expected_old = {ref_of_change(c): c for c in expected if not c.created}
    actual_old = {ref_of_change(c): c for c in actual if not c.created}
    appointments = [c for c in actual if c.resource_type == "Appointment"]
    olds: list[OldPair] = []
    for ref in sorted(expected_old.keys() | actual_old.keys()):
        resource_type = ref.split("/", 1)[0]
        e, a = expected_old.get(ref), actual_old.get(ref)
        if resource_type in DERIVED_TYPES:
            if a is not None and not slot_follows(a, appointments):
                findings.append(_derived_change(ref, a))
            continue
        before = (a.before if a is not None else None) or (e.before if e else None)
        before = before if before is not None else start_state.get(ref)
        want = e.resource if e is not None else before
        got = a.resource if a is not None else before
        diffs = (
            resource_diffs(resource_type, want, got, ctx, free, fp, before=before)
            if want is not None and got is not None
            else []
        )
        if (
            not diffs
            and e is None
            and a is not None
            and before is not None
            and got is not None
            and canonical_form(before) != canonical_form(got)
        ):
            # A resource the reference never writes, written anyway: every change of it is
            # collateral, informational ones too (a note added to an unrelated Condition);
            # the same content in another order or form is no change.
            diffs = [f"{p} changed" for p in changed_paths(before, got)[:MAX_DIFFS]]
        olds.append(OldPair(ref, e, a, before, want, got, diffs))
    return olds


def _derived_change(ref: str, a: ChangedResource) -> Finding:
    """A derived resource the run updated or deleted on its own: collateral."""
    paths = changed_paths(a.before, a.resource) if a.resource and a.before else []
    what = "deleted" if a.resource is None else "updated"
    title = f"{what} {ref}"
    entry = diff_entry(
        "collateral",
        title,
        ref.split("/", 1)[0],
        ref,
        a.before,
        a.resource,
        [f"{p} changed" for p in paths[:MAX_DIFFS]] or ["deleted"],
    )
    return Finding("collateral", title, ", ".join(paths[:MAX_DIFFS]), ref, entry)
