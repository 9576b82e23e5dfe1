"""Grade one corpus case on each field it is about, with the package's public functions."""

from __future__ import annotations

from app.grading.message.claims import claims, unbacked
from app.grading.message.facts import grounded
from app.kit.dates import states_datetime
from tests.grading.corpus.cases import Case

FIELDS = ("grounded", "claims", "mentions")


def holds(case: Case) -> dict[str, bool]:
    """Whether each field's clause holds for the case's message (mentions only when set)."""
    result = {
        "grounded": not grounded(case.message, case.sources, case.zones),
        "claims": not unbacked(claims(case.message), case.writes),
    }
    if case.mention is not None:
        result["mentions"] = states_datetime([case.message], case.mention, case.zones) is not None
    return result


def why(case: Case) -> str:
    """What each check found, for a failing test's message."""
    facts = grounded(case.message, case.sources, case.zones)
    found = claims(case.message)
    return (
        f"{case.id}: {case.message!r}\n  ungrounded: {[(f.kind, f.text, f.detail) for f in facts]}"
        f"\n  claims: {[(c.action, c.text) for c in found]}"
        f" unbacked: {[c.text for c in unbacked(found, case.writes)]}"
    )
