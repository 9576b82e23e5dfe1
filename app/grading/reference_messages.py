"""Messages in `matches-reference` pair as a conversation, not one to one: each must go to
a recipient the reference wrote to, about the same subject, sent; every recipient the
reference wrote to must get one; `strict.messages` bounds how many (see
`app.grading.reference`)."""

from __future__ import annotations

from app.grading.changes import content_key
from app.grading.reference_elements import PRACTITIONER_TYPES
from app.grading.reference_resources import Finding, diff_entry, ref_of_change
from app.grading.reference_values import Context, refs_in
from app.grading.scoring import count_bounds
from app.grading.snapshot import (
    ChangedResource,
    SentText,
)
from app.grading.truth.texts import addresses_of
from app.scenarios.consequential import (
    MESSAGE_TYPES,
    SENT_STATUSES,
)
from app.scenarios.schema import ReferenceExpectation


def grade_conversation(
    expectation: ReferenceExpectation,
    expected: list[ChangedResource],
    expected_new: list[ChangedResource],
    actual_new: list[ChangedResource],
    ctx: Context,
    findings: list[Finding],
    matches: list[str],
) -> None:
    wanted = [c for c in expected_new if c.resource_type in MESSAGE_TYPES and c.resource]
    sent = [c for c in actual_new if c.resource_type in MESSAGE_TYPES and c.resource]
    recipients = {
        ctx.resolve(r) for c in wanted for r in refs_in((c.resource or {}).get("recipient"))
    }
    subjects = {ctx.resolve(r) for c in wanted for r in refs_in((c.resource or {}).get("subject"))}
    statuses = set(SENT_STATUSES)
    # Besides whom the reference writes to, the people its writes concern — the patient
    # a Task is for, the practitioner who owns it — may be told what was done: that
    # changes nothing in the chart. Nobody else (the look-alike patient, other staff).
    concerned = {
        ctx.resolve(r)
        for c in expected
        for r in c.all_refs
        if r.startswith(("Patient/", *PRACTITIONER_TYPES))
    }
    allowed = recipients | concerned
    subjects = subjects or {r for r in concerned if r.startswith("Patient/")}
    reached: set[str] = set()
    first_of: dict[str, str] = {}  # what a message says and to whom -> the first that did
    for c in sent:
        body = c.resource or {}
        ref = ref_of_change(c)
        to = [ctx.resolve(r) for r in refs_in(body.get("recipient"))]
        problems = []
        original = first_of.setdefault(content_key(body), ref)
        if original != ref:
            problems.append(f"a duplicate of {original} (the same message twice)")
        stray = [r for r in to if r not in allowed]
        if stray or not to:
            nobody = ", ".join(stray) or "nobody"
            problems.append(f"to {nobody}, whom the reference never writes to or about")
        subject = [ctx.resolve(r) for r in refs_in(body.get("subject"))]
        if subjects and subject and not set(subject) <= subjects:
            problems.append(f"about {', '.join(subject)}, not {', '.join(sorted(subjects))}")
        if str(body.get("status")) not in statuses:
            problems.append(
                f"status {body.get('status')}, not sent ({', '.join(sorted(statuses))})"
            )
        if problems:
            title = f"message {ref}"
            entry = diff_entry("collateral", title, c.resource_type, ref, None, body, problems)
            findings.append(Finding("collateral", title, "; ".join(problems), ref, entry))
        else:
            reached.update(to)
            matches.append(f"message {ref} to {', '.join(to)}")
    for recipient in sorted(recipients - reached):
        title = f"the reference writes to {recipient}; no message sent to them"
        wrote = next(
            (
                c
                for c in wanted
                if recipient
                in {ctx.resolve(r) for r in refs_in((c.resource or {}).get("recipient"))}
            ),
            None,
        )
        entry = diff_entry(
            "missing",
            title,
            wrote.resource_type if wrote else "Communication",
            None,
            wrote.resource if wrote else None,
            None,
            [],
        )
        findings.append(
            Finding("missing", title, "", ref_of_change(sent[0]) if sent else None, entry)
        )
    bounds = expectation.messages
    if bounds is not None:
        count = len([c for c in sent if c.resource])
        limits = count_bounds(bounds)
        if not limits.holds(count):
            findings.append(
                Finding("collateral", f"{count} message(s) sent", f"expected {limits.describe()}")
            )


def grade_sent(
    expected: list[SentText],
    actual: list[SentText],
    reached_otherwise: frozenset[str],
    findings: list[Finding],
    matches: list[str],
) -> None:
    """The SMS and e-mail sent (captured effects) pair by kind and recipient, as messages
    do: every number or address the reference texts (or mails) must get one of that kind;
    one to anybody it never sends to is collateral (a reminder texted to the wrong
    patient), unless it is a patient the reference writes to in the portal
    (`reached_otherwise`: their numbers and addresses) — the same person told by another
    channel, as a message to a recipient the reference writes to is free. The same text
    sent twice to the same people is collateral, as a duplicate message is. What they say
    is the message checks' and text truth's to grade."""
    wanted = {(t.kind, a) for t in expected for a in addresses_of(t)}
    reached: set[tuple[str, str]] = set()
    first_of: dict[tuple[str, frozenset[str], str], str] = {}
    for sent in actual:
        got = {(sent.kind, a) for a in addresses_of(sent)}
        key = (sent.kind, frozenset(a for _, a in got), " ".join(sent.body.split()))
        original = first_of.setdefault(key, sent.ref)
        if original != sent.ref:
            title = f"{sent.kind} {sent.ref}: a duplicate of {original} (the same text twice)"
            findings.append(Finding("collateral", title, "", sent.ref, None))
        stray = sorted(a for _, a in got - wanted if a not in reached_otherwise)
        if stray:
            title = f"{sent.kind} {sent.ref} to {', '.join(stray)}"
            why = f"the reference sends no {sent.kind} to {', '.join(stray)}"
            findings.append(Finding("collateral", title, why, sent.ref, None))
        if got & wanted:
            reached |= got & wanted
            matches.append(f"{sent.kind} {sent.ref} to {sent.to}")
    for kind, address in sorted(wanted - reached):
        closest = next((t.ref for t in actual if t.kind == kind), None)
        title = f"the reference sends an {kind} to {address}; none was sent to them"
        findings.append(Finding("missing", title, "", closest, None))
