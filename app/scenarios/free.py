"""A scenario's free choices: the ones it declares, else the ones its own expectations
state.

A scenario that declares no `free` (an imported one, say) has still said what is
acceptable where it wrote a condition on an element of what must be created: its
`booked` expectation's `start >= %runStart and start <= %runStart + 14 days` says any
start in those two weeks will do, not only the reference solution's. So, without a
declaration, each element of the consequential table that such a condition names is
free, constrained by every clause of that expectation that names it — for the elements
whose choice is a matter of which one, never of whether: a time (`start`, `occurrence`,
`effective`), a visit's length, a code, a priority, who owns or performs the work, and
which practitioner takes part in a visit. Never a status, an intent, the patient, or
whether a participant declined. `"free": []` declares that nothing is free.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.scenarios.consequential import TABLE
from app.scenarios.schema import (
    AnyOfExpectation,
    Expectation,
    FreeChoice,
    ResourceExpectation,
    Scenario,
)

# Which elements a condition can make free (by kind, and by name for values/references).
_FREE_KINDS = frozenset({"time", "duration", "concept"})
_FREE_VALUES = frozenset({"priority"})
_FREE_REFERENCES = frozenset({"owner", "performer", "requester", "focus", "locationReference"})
# The names a condition uses for an element that is not one key (a visit's length).
_NAMES = {"duration": ("end", "minutesDuration")}


def free_choices(scenario: Scenario) -> tuple[list[FreeChoice], bool]:
    """The free choices, and whether they were inferred (no `free` declared)."""
    if scenario.free is not None:
        return list(scenario.free), False
    return inferred_free(scenario), True


def _positive(
    expectations: list[Expectation], required: bool = True
) -> Iterator[ResourceExpectation]:
    """Required resource expectations that something must match (not "must not happen"),
    the children of a required any_of included."""
    for e in expectations:
        if isinstance(e, AnyOfExpectation):
            yield from _positive(e.expectations, required and e.required)
        elif (
            isinstance(e, ResourceExpectation)
            and required
            and e.required
            and (e.count is None or e.count.max != 0)
        ):
            yield e


def _names(path: str, clause: str) -> bool:
    """Whether a clause names the element at the top of its paths (`start >= …`,
    `code.coding…`), not as part of another path (`participant.start`)."""
    for name in _NAMES.get(path, (path,)):
        if re.search(rf"(?<![\w.%]){re.escape(name)}\b", clause):
            return True
    return False


def inferred_free(scenario: Scenario) -> list[FreeChoice]:
    out: list[FreeChoice] = []
    seen: set[tuple[str, str]] = set()
    for expectation in _positive(list(scenario.expectations)):
        rtype = expectation.resource_type
        for element in TABLE.get(rtype, ()):
            free = element.kind in _FREE_KINDS or (
                element.path in _FREE_VALUES
                or (element.kind == "reference" and element.path in _FREE_REFERENCES)
            )
            if not free or (rtype, element.path) in seen:
                continue
            clauses = [w for w in expectation.where if _names(element.path, w)]
            if clauses:
                seen.add((rtype, element.path))
                out.append(FreeChoice(resource_type=rtype, path=element.path, where=clauses))
        if rtype == "Appointment" and (rtype, "participant.actor") not in seen:
            clauses = [w for w in expectation.where if "participant" in w and "Practitioner" in w]
            if clauses:
                seen.add((rtype, "participant.actor"))
                out.append(FreeChoice(resource_type=rtype, path="participant.actor", where=clauses))
    return out
