from __future__ import annotations

import fhirpathpy
import pytest

from app.scenarios.fhirpath_syntax import (
    MAX_EXPRESSION_LENGTH,
    is_standard_variable,
    syntax_error,
    variables_used,
)

ACCEPTED = [
    "participant.where(actor.reference = 'Practitioner/' + %fixture.chen).exists()",
    "start >= %runStart + 7 days",
    "code.coding.where(system='http://loinc.org' and code='2345-7').exists()",
    "status in ('booked' | 'pending')",
    "%current.appt.status = 'cancelled'",
    "priority = 'urgent'",
    "payload.content.contains('x')",
    "status = 'booked' // a trailing comment",
    "value.as(Quantity).value > 5 'mg'",
    "authoredOn >= @2025-03-07T08:00:00Z and $this.exists()",
    "note.text.lower().matches('fast(ing)?')",
    "(status = 'booked')",
    "  status = 'booked'  ",
]


@pytest.mark.parametrize("expression", ACCEPTED)
def test_accepts_typical_scenario_fhirpath(expression: str) -> None:
    assert syntax_error(expression) is None


@pytest.mark.parametrize(
    ("expression", "column", "words"),
    [
        ("status = = 'x'", 10, "extraneous input '='"),
        ("status = 'booked' garbage", 19, "'garbage'"),
        ("(status = 'booked'", 19, "missing ')'"),
        ("where(", 7, "end of expression"),
        ("status.", 8, "end of expression"),
        ("1 +", 4, "end of expression"),
        ("a b", 3, "'b'"),
        ("a..b", 3, "'.'"),
        ("status = 'unterminated", 10, "token recognition error"),
        ("status ¤ 'x'", 8, "token recognition error"),
    ],
)
def test_rejects_with_column(expression: str, column: int, words: str) -> None:
    error = syntax_error(expression)
    assert error is not None
    assert error.startswith(f"column {column}: ")
    assert words in error


@pytest.mark.parametrize("expression", ["", "   ", "\n"])
def test_rejects_empty(expression: str) -> None:
    assert syntax_error(expression) == "empty expression"


def test_rejects_overlong() -> None:
    expression = " or ".join(["status = 'booked'"] * (MAX_EXPRESSION_LENGTH // 10))
    error = syntax_error(expression)
    assert error is not None and "longer than" in error


def test_fhirpathpy_alone_would_accept_what_we_reject() -> None:
    # Why this module exists: the library evaluates broken input without complaint.
    assert fhirpathpy.evaluate({"status": "booked"}, "status = = 'booked'") == [True]
    assert syntax_error("status = = 'booked'") is not None


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("not(status = 'booked')", "not() takes no arguments (write 'x.not()'"),
        ("participant.where()", "where() takes 1 argument(s), not 0"),
        ("status.exists(1, 2)", "exists() takes 0 or 1 argument(s), not 2"),
        ("code.memberOf('http://x')", "unknown function 'memberOf()'"),
        ("status.shout()", "unknown function 'shout()'"),
    ],
)
def test_rejects_calls_fhirpathpy_would_fail_on(expression: str, words: str) -> None:
    """fhirpathpy raises these only while evaluating, and a where clause that raises is
    false: a must-not-happen guard written `not(x)` could never fire."""
    error = syntax_error(expression)
    assert error is not None and words in error, error


def test_accepts_every_function_form_in_use() -> None:
    for expression in (
        "(status = 'cancelled').not()",
        "iif(status = 'booked', 1, 0) = 1",
        "start.toString().substring(11, 2).toInteger() >= 14",
        "note.text.join(' ').lower().contains('warfarin')",
        "participant.actor.reference.select($this.startsWith('Practitioner/')).allTrue()",
        "now() > %runStart and today().exists()",
    ):
        assert syntax_error(expression) is None, expression


def test_long_expecting_sets_are_dropped() -> None:
    error = syntax_error("status = = 'x'")
    assert error is not None and "{" not in error


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("status = 'booked'", set()),
        ("start >= %runStart + 7 days and start < %now", {"runStart", "now"}),
        (
            "participant.where(actor.reference = 'Practitioner/' + %fixture.chen).exists()",
            {"fixture.chen"},
        ),
        ("%current.appt.status = 'cancelled'", {"current.appt"}),
        ("%fixture.patient.length() > 0", {"fixture.patient"}),
        ("%fixture", {"fixture"}),
        ("%fixture.`patient`", {"fixture.patient"}),
        ("%'current'.appt.exists()", {"current.appt"}),
        ("(%fixture).patient", {"fixture"}),  # not the member-access shape
        ("%resource.id = %context.id and %ucum.exists()", {"resource", "context", "ucum"}),
        ("code.exists() and %`vs-lab-codes`.exists()", {"vs-lab-codes"}),
        ("%sct | %loinc", {"sct", "loinc"}),
        ("%appt.status", {"appt"}),  # unknown variable: reported, judged by the caller
        ("x.where(y = %fixture.a).select(%current.b.z)", {"fixture.a", "current.b"}),
    ],
)
def test_variables_used(expression: str, expected: set[str]) -> None:
    assert variables_used(expression) == expected


def test_variables_used_rejects_invalid() -> None:
    with pytest.raises(ValueError, match="column"):
        variables_used("status = = %now")


def test_variables_used_returns_a_fresh_set() -> None:
    # Results are cached; a caller mutating its set must not change the cache.
    first = variables_used("%now > start")
    first.add("junk")
    assert variables_used("%now > start") == {"now"}


@pytest.mark.parametrize(
    ("name", "standard"),
    [
        ("resource", True),
        ("rootResource", True),
        ("context", True),
        ("ucum", True),
        ("sct", True),
        ("loinc", True),
        ("vs-anything", True),
        ("ext-anything", True),
        ("runStart", False),
        ("fixture.patient", False),
        ("appt", False),
    ],
)
def test_is_standard_variable(name: str, standard: bool) -> None:
    assert is_standard_variable(name) is standard
