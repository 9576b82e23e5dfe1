"""Expectation checks: ids unique, each type's fields consistent, references to other
expectations, `asked` and message clauses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.fhir.validation import is_known_type
from app.kit.consent import ALL_ACTIONS
from app.kit.phrases import fold_phrase
from app.scenarios.validation_base import (
    ALLOWABLE_TYPES,
    API_CALL_VARIABLES,
    MESSAGE_CLAUSES,
    PHRASE_FIELDS,
    article_for,
    field_of,
    list_of,
)
from app.scenarios.validation_fhirpath import FhirPathChecks


class ExpectationChecks(FhirPathChecks):
    """The expectations."""

    def check_expectations(self) -> None:
        found: dict[str, str] = {}  # id -> path of its first expectation
        befores: list[tuple[str, str, str]] = []  # (own id, named id, path of "before")
        children: dict[str, list[str]] = {}  # any_of id -> its children's ids
        kinds: dict[str, Any] = {}  # id -> type, of the first expectation with that id
        # (named id, path of the entry, its field: a changes' `allow`, a mention's `of`)
        allows: list[tuple[str, str, str]] = []
        for path, expectation in self.expectations(self.data, ""):
            eid = expectation.get("id")
            if isinstance(eid, str):
                if eid in found:
                    self.add(f"{path}/id", f"duplicate expectation id {eid!r} (also {found[eid]})")
                else:
                    found[eid] = path
                    kinds[eid] = expectation.get("type")
            self.check_expectation(expectation, path)
            kind = expectation.get("type")
            if kind in ("api_call", "asked") and isinstance(eid, str):
                before = expectation.get("before")
                if isinstance(before, str):
                    befores.append((eid, before, f"{path}/before"))
            if kind == "message" and isinstance(eid, str):
                after = expectation.get("after")
                if isinstance(after, str):
                    befores.append((eid, after, f"{path}/after"))
                for index, mention in enumerate(list_of(expectation.get("mentions"))):
                    if isinstance(mention, dict) and isinstance(mention.get("of"), str):
                        allows.append((mention["of"], f"{path}/mentions/{index}/of", "of"))
            if kind == "changes" and isinstance(eid, str):
                for index, named in enumerate(list_of(expectation.get("allow"))):
                    if isinstance(named, str):
                        allows.append((named, f"{path}/allow/{index}", "allow"))
                    elif isinstance(named, dict) and isinstance(named.get("of"), str):
                        allows.append((named["of"], f"{path}/allow/{index}/of", "allow"))
            if kind == "any_of" and isinstance(eid, str):
                children[eid] = [
                    child["id"]
                    for child in list_of(expectation.get("expectations"))
                    if isinstance(child, dict) and isinstance(child.get("id"), str)
                ]
        self.check_befores(found, befores, children)
        for named, path, field in allows:
            if named not in kinds:
                self.add(path, f"{field} names no expectation: {named!r}")
            elif kinds[named] not in ALLOWABLE_TYPES:
                kind = str(kinds[named])
                self.add(
                    path,
                    f"{field} names {named!r}, {article_for(kind)} {kind} expectation: only "
                    "resource, field and any_of expectations have resources as evidence",
                )

    def expectations(
        self, parent: dict[str, Any], path: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every expectation, any_of children included, with its path."""
        for index, expectation in enumerate(list_of(parent.get("expectations"))):
            if isinstance(expectation, dict):
                child_path = f"{path}/expectations/{index}"
                yield child_path, expectation
                if expectation.get("type") == "any_of":
                    yield from self.expectations(expectation, child_path)

    def check_expectation(self, expectation: dict[str, Any], path: str) -> None:
        kind = expectation.get("type")
        extra = API_CALL_VARIABLES if kind == "api_call" else frozenset()
        for index, where in enumerate(list_of(expectation.get("where"))):
            if isinstance(where, str):
                self.check_fhirpath(where, f"{path}/where/{index}", extra)
        for index, where in enumerate(list_of(expectation.get("allowWhere"))):
            if isinstance(where, str):
                self.check_fhirpath(where, f"{path}/allowWhere/{index}")
        count = expectation.get("count")
        if isinstance(count, dict):
            low, high = count.get("min"), count.get("max")
            if isinstance(low, int) and isinstance(high, int) and low > high:
                self.add(f"{path}/count", f"count.min ({low}) is greater than count.max ({high})")
        if kind == "resource":
            rtype = field_of(expectation, "resourceType")
            if isinstance(rtype, str) and not is_known_type(rtype):
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            if expectation.get("scope", "patient") == "patient":
                self.patient_scope = True
        elif kind == "changes":
            if expectation.get("scope", "patient") == "patient":
                self.patient_scope = True
        elif kind == "message":
            self.check_message(expectation, path)
        elif kind == "field":
            self.use_symbol_field(expectation.get("target"), f"{path}/target")
        elif kind == "webhook":
            self.use_symbol_field(expectation.get("resource"), f"{path}/resource")
        elif kind == "api_call":
            call_path = expectation.get("path")
            if isinstance(call_path, str) and not call_path.startswith("/"):
                self.add(
                    f"{path}/path",
                    "path must start with '/' (relative to the FHIR base, or /api/...)",
                )
        elif kind == "asked":
            self.check_asked(expectation, path)
        elif kind == "consent":
            self.check_consent(expectation, path)
        elif kind == "rubric" and expectation.get("required") is True:
            self.add(
                f"{path}/required",
                "rubric checks are always bonus: remove required, or set it to false",
            )

    def check_asked(self, expectation: dict[str, Any], path: str) -> None:
        sim = field_of(self.data, "patientSim")
        if not isinstance(sim, dict):
            self.add(
                f"{path}/type",
                "an asked expectation needs a simulated patient: the scenario has no patientSim",
            )
            return
        fact = expectation.get("fact")
        topics = [
            f["topic"]
            for f in list_of(sim.get("facts"))
            if isinstance(f, dict) and isinstance(f.get("topic"), str)
        ]
        if isinstance(fact, str) and fact not in topics:
            known = ", ".join(repr(t) for t in topics) or "none"
            self.add(
                f"{path}/fact",
                f"fact {fact!r} is not a topic of patientSim.facts (topics: {known})",
            )

    def check_consent(self, expectation: dict[str, Any], path: str) -> None:
        """Agreement comes from the simulated patient (or the patient's own first
        message, which a scenario without one cannot vouch for): actions to guard need a
        `patientSim`; an opt-out-only check (`actions: []`) does not."""
        actions = expectation.get("actions", list(ALL_ACTIONS))
        if isinstance(actions, list) and len(set(map(str, actions))) < len(actions):
            self.add(f"{path}/actions", "actions lists an action twice")
        if actions and not isinstance(field_of(self.data, "patientSim"), dict):
            self.add(
                f"{path}/actions",
                "a consent expectation with actions needs a simulated patient to agree or "
                "decline: the scenario has no patientSim (set actions to [] to check only "
                "the SMS opt-out)",
            )

    def check_message(self, expectation: dict[str, Any], path: str) -> None:
        clauses = [f for f in MESSAGE_CLAUSES if expectation.get(f) not in (None, False, [])]
        if not clauses:
            self.add(path, "a message expectation needs a clause: " + ", ".join(MESSAGE_CLAUSES))
        for field in PHRASE_FIELDS:
            phrases = expectation.get(field)
            if isinstance(phrases, list) and not phrases:
                self.add(f"{path}/{field}", f"{field} is empty: give at least one phrase")
            for index, phrase in enumerate(list_of(phrases)):
                if isinstance(phrase, str) and not any(c.isalnum() for c in fold_phrase(phrase)):
                    self.add(f"{path}/{field}/{index}", "a phrase needs a letter or a digit")
        said = {fold_phrase(p) for p in list_of(expectation.get("says")) if isinstance(p, str)}
        said |= {fold_phrase(p) for p in list_of(expectation.get("saysAny")) if isinstance(p, str)}
        for index, phrase in enumerate(list_of(expectation.get("not"))):
            if isinstance(phrase, str) and fold_phrase(phrase) in said:
                self.add(
                    f"{path}/not/{index}",
                    f"{phrase!r} is both required (says/saysAny) and forbidden (not)",
                )
        for index, mention in enumerate(list_of(expectation.get("mentions"))):
            if isinstance(mention, dict) and isinstance(mention.get("path"), str):
                self.check_fhirpath(mention["path"], f"{path}/mentions/{index}/path")
