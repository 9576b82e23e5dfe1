"""Strict by default: errors where the end-state comparison (matches-reference, free,
asked) cannot work, and the lint's warnings where a scenario is weaker than it looks."""

from __future__ import annotations

from typing import Any

from app.fhir.validation import is_known_type
from app.scenarios.consequential import element_paths
from app.scenarios.validation_base import field_of, list_of, vacuous
from app.scenarios.validation_fhirpath import FhirPathChecks


class StrictChecks(FhirPathChecks):
    """matches-reference, free choices, asked, and the lint."""

    def check_strict(self) -> None:
        """Errors where the end-state comparison cannot work; warnings (the lint) where
        a scenario is weaker than it looks."""
        self.check_strict_expectations()
        self.lint_message_checks()
        self.lint_reference()
        self.check_free()

    def check_strict_expectations(self) -> None:
        """No `reference` expectation; an `asked` one names exactly one of before and
        beforeWrite; a `where` with `all()` warns (it holds over an empty collection)."""
        data = self.data
        for index, expectation in enumerate(list_of(data.get("expectations"))):
            if not isinstance(expectation, dict):
                continue
            path = f"/expectations/{index}"
            kind = expectation.get("type")
            if kind == "reference":
                self.add(
                    f"{path}/type",
                    "matches-reference is added to every run by default: configure it with "
                    "`strict` and `free`, not as an expectation",
                )
            if kind == "asked" and (expectation.get("before") is None) == (
                expectation.get("beforeWrite") is None
            ):
                self.add(
                    f"{path}/before",
                    "an asked expectation needs exactly one of before or beforeWrite",
                )
            before_write = expectation.get("beforeWrite")
            if (
                kind == "asked"
                and isinstance(before_write, str)
                and not is_known_type(before_write)
            ):
                self.add(f"{path}/beforeWrite", f"unknown FHIR resource type {before_write!r}")
            for w_index, where in enumerate(list_of(expectation.get("where"))):
                if isinstance(where, str) and vacuous(where):
                    self.warn(
                        f"{path}/where/{w_index}",
                        "all() is true over an empty collection: this holds when the element "
                        "is absent (say what absence means with exists() or empty())",
                    )

    def lint_message_checks(self) -> None:
        """Message checks of content with none grounded nor claims: a wrong fact passes."""
        data = self.data
        messages = [
            (index, e)
            for index, e in enumerate(list_of(data.get("expectations")))
            if isinstance(e, dict) and e.get("type") == "message"
        ]
        content = ("says", "saysAny", "mentions", "not")
        if any(any(e.get(k) for k in content) for _, e in messages) and not any(
            e.get("grounded") or e.get("claims") for _, e in messages
        ):
            first = next(i for i, e in messages if any(e.get(k) for k in content))
            self.warn(
                f"/expectations/{first}",
                "a message check with neither grounded nor claims, and no other message check "
                "with them: a wrong date, dose or claim in the messages passes",
            )

    def lint_reference(self) -> None:
        """What leaves the end state uncompared: no oracle writes, strict off, and facts
        for the simulated patient with no asked expectation."""
        data = self.data
        raw_strict = data.get("strict")
        strict: dict[str, Any] = raw_strict if isinstance(raw_strict, dict) else {}
        oracle = list_of(data.get("oracle"))
        writes = [
            c
            for c in oracle
            if isinstance(c, dict) and c.get("method") in ("POST", "PUT", "PATCH", "DELETE")
        ]
        if not writes:
            self.warn(
                "/oracle",
                "no oracle writes: the run's end state is not compared with a reference "
                "solution (matches-reference), so only the hand-written expectations judge it",
            )
        if isinstance(strict.get("off"), str):
            self.warn(
                "/strict/off",
                f"strict is off ({strict['off']}): the end state is not compared with the "
                "reference solution's",
            )
        sim = data.get("patientSim")
        if isinstance(sim, dict) and list_of(sim.get("facts")):
            asked = [
                e
                for e in list_of(data.get("expectations"))
                if isinstance(e, dict) and e.get("type") == "asked"
            ]
            if not asked:
                self.warn(
                    "/patientSim",
                    "no asked expectation: runs get a default asked only for the facts the "
                    "oracle asks about before it writes",
                )

    def check_free(self) -> None:
        """Each free choice names a known type, one of its consequential elements, and
        FHIRPath that parses."""
        for index, choice in enumerate(list_of(self.data.get("free"))):
            if not isinstance(choice, dict):
                continue
            path = f"/free/{index}"
            rtype = field_of(choice, "resourceType")
            element = str(choice.get("path", ""))
            if isinstance(rtype, str) and not is_known_type(rtype):
                self.add(f"{path}/resourceType", f"unknown FHIR resource type {rtype!r}")
            elif isinstance(rtype, str):
                allowed = element_paths(rtype)
                if allowed and element not in allowed and element != "participant.actor":
                    self.add(
                        f"{path}/path",
                        f"{element!r} is not a consequential element of {rtype}; one of: "
                        + ", ".join(allowed),
                    )
                elif element == "participant.actor" and rtype != "Appointment":
                    self.add(f"{path}/path", "participant.actor is an Appointment's")
            for w_index, where in enumerate(list_of(choice.get("where"))):
                if isinstance(where, str):
                    self.check_fhirpath(where, f"{path}/where/{w_index}")
