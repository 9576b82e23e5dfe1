from __future__ import annotations

import copy
import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import fhirpathpy
import pytest
from fhirpathpy.models import models

from app.scenarios.expansion import (
    ExpandedScenario,
    ExpansionError,
    apply_variant,
    brief_tokens,
    expand_scenario,
    expand_value,
    fixture_symbols,
    is_time_token,
    render_brief,
    resolve_time_token,
    run_ids,
    used_symbols,
)
from app.scenarios.schema import Scenario

FHIR_ID = re.compile(r"[A-Za-z0-9.-]{1,64}")
RUN_KEY = "r7k2m9q1"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Weekday names of the dates used below, checked here so a typo in a table cannot hide.
FRI = at("2025-03-07T16:00")
SAT = at("2025-03-08T12:00")
SUN = at("2025-03-09T12:00")
MON = at("2025-03-03T08:00")


def test_reference_days_are_what_the_tables_assume() -> None:
    assert [d.strftime("%a") for d in (FRI, SAT, SUN, MON)] == ["Fri", "Sat", "Sun", "Mon"]


# --- time tokens -------------------------------------------------------------------------

TIME_CASES = [
    # every unit, both signs, keeping the run start's clock
    ("now", "2025-03-07T16:00", "2025-03-07T16:00:00.000+00:00"),
    ("+0d", "2025-03-07T16:00", "2025-03-07T16:00:00.000+00:00"),
    ("-0d", "2025-03-07T16:00", "2025-03-07T16:00:00.000+00:00"),
    ("+3d", "2025-03-07T16:00", "2025-03-10T16:00:00.000+00:00"),
    ("-20d", "2025-03-07T16:00", "2025-02-15T16:00:00.000+00:00"),
    ("+2h", "2025-03-07T16:00", "2025-03-07T18:00:00.000+00:00"),
    ("-36h", "2025-03-07T16:00", "2025-03-06T04:00:00.000+00:00"),
    ("+90m", "2025-03-07T16:00", "2025-03-07T17:30:00.000+00:00"),
    ("-5m", "2025-03-07T16:00", "2025-03-07T15:55:00.000+00:00"),
    ("+1wd", "2025-03-07T16:00", "2025-03-10T16:00:00.000+00:00"),
    # @HH:MM sets the clock after the offset; d ignores whether it has passed
    ("+1d@09:30", "2025-03-07T16:00", "2025-03-08T09:30:00.000+00:00"),
    ("+0d@09:00", "2025-03-07T16:00", "2025-03-07T09:00:00.000+00:00"),
    ("-2d@00:00", "2025-03-07T16:00", "2025-03-05T00:00:00.000+00:00"),
    ("+0d@23:59", "2025-03-07T16:00", "2025-03-07T23:59:00.000+00:00"),
    # +0wd: today on a weekday while the time is ahead, else the next weekday
    ("+0wd", "2025-03-03T08:00", "2025-03-03T08:00:00.000+00:00"),
    ("+0wd@10:00", "2025-03-03T08:00", "2025-03-03T10:00:00.000+00:00"),
    ("+0wd@10:00", "2025-03-03T10:00", "2025-03-04T10:00:00.000+00:00"),  # not ahead
    ("+0wd@10:00", "2025-03-03T16:00", "2025-03-04T10:00:00.000+00:00"),
    ("+0wd@10:00", "2025-03-07T16:00", "2025-03-10T10:00:00.000+00:00"),  # Fri late
    ("+0wd@17:00", "2025-03-07T16:00", "2025-03-07T17:00:00.000+00:00"),  # Fri early
    ("+0wd", "2025-03-08T12:00", "2025-03-10T12:00:00.000+00:00"),  # Sat
    ("+0wd@10:00", "2025-03-08T12:00", "2025-03-10T10:00:00.000+00:00"),
    ("+0wd@13:00", "2025-03-09T12:00", "2025-03-10T13:00:00.000+00:00"),  # Sun
    ("-0wd@10:00", "2025-03-08T12:00", "2025-03-10T10:00:00.000+00:00"),
    # +1wd: the next business day after today, whatever the clock
    ("+1wd@10:00", "2025-03-07T16:00", "2025-03-10T10:00:00.000+00:00"),  # Fri -> Mon
    ("+1wd@10:00", "2025-03-08T12:00", "2025-03-10T10:00:00.000+00:00"),  # Sat -> Mon
    ("+1wd@10:00", "2025-03-09T12:00", "2025-03-10T10:00:00.000+00:00"),  # Sun -> Mon
    ("+1wd@10:00", "2025-03-03T08:00", "2025-03-04T10:00:00.000+00:00"),  # Mon -> Tue
    ("+2wd@10:00", "2025-03-07T16:00", "2025-03-11T10:00:00.000+00:00"),
    ("+5wd", "2025-03-05T12:00", "2025-03-12T12:00:00.000+00:00"),  # Wed -> next Wed
    ("+6wd", "2025-03-06T12:00", "2025-03-14T12:00:00.000+00:00"),  # Thu -> Fri+1wk
    ("+10wd", "2025-03-08T12:00", "2025-03-21T12:00:00.000+00:00"),
    # negative wd: back over weekdays from today
    ("-1wd", "2025-03-03T08:00", "2025-02-28T08:00:00.000+00:00"),  # Mon -> Fri
    ("-1wd", "2025-03-08T12:00", "2025-03-07T12:00:00.000+00:00"),  # Sat -> Fri
    ("-1wd", "2025-03-09T12:00", "2025-03-07T12:00:00.000+00:00"),  # Sun -> Fri
    ("-1wd@09:00", "2025-03-04T08:00", "2025-03-03T09:00:00.000+00:00"),  # Tue -> Mon
    ("-2wd", "2025-03-04T08:00", "2025-02-28T08:00:00.000+00:00"),  # Tue -> Fri
    ("-5wd", "2025-03-07T16:00", "2025-02-28T16:00:00.000+00:00"),
    # month ends, leap years, year ends
    ("+1d", "2025-01-31T10:00", "2025-02-01T10:00:00.000+00:00"),
    ("+1d", "2025-02-28T10:00", "2025-03-01T10:00:00.000+00:00"),
    ("+1d", "2024-02-28T10:00", "2024-02-29T10:00:00.000+00:00"),
    ("+1d", "2024-02-29T10:00", "2024-03-01T10:00:00.000+00:00"),
    ("-1d", "2024-03-01T10:00", "2024-02-29T10:00:00.000+00:00"),
    ("+1wd", "2025-01-31T10:00", "2025-02-03T10:00:00.000+00:00"),
    ("+1wd", "2024-02-28T10:00", "2024-02-29T10:00:00.000+00:00"),
    ("+1d", "2024-12-31T10:00", "2025-01-01T10:00:00.000+00:00"),
    ("-1d@08:00", "2025-01-01T10:00", "2024-12-31T08:00:00.000+00:00"),
    ("+1wd@09:00", "2021-12-31T18:00", "2022-01-03T09:00:00.000+00:00"),
    ("-1wd", "2024-01-01T10:00", "2023-12-29T10:00:00.000+00:00"),
    ("+45m", "2024-12-31T23:30", "2025-01-01T00:15:00.000+00:00"),
    ("+1h", "2024-02-28T23:30", "2024-02-29T00:30:00.000+00:00"),
    ("+365d", "2024-01-01T00:00", "2024-12-31T00:00:00.000+00:00"),
]


@pytest.mark.parametrize(("token", "start", "expected"), TIME_CASES)
def test_time_token(token: str, start: str, expected: str) -> None:
    assert resolve_time_token(token, at(start)) == expected


@pytest.mark.parametrize(
    ("token", "start", "expected"),
    [
        ("-20d", "2025-03-07T16:00", "2025-02-15"),
        ("now", "2025-03-07T16:00", "2025-03-07"),
        ("+1wd", "2025-03-07T16:00", "2025-03-10"),
        ("+0wd@10:00", "2025-03-03T16:00", "2025-03-04"),
        ("+9h", "2025-03-07T16:00", "2025-03-08"),
        ("-40d", "2024-03-01T00:00", "2024-01-21"),
    ],
)
def test_date_token(token: str, start: str, expected: str) -> None:
    assert resolve_time_token(token, at(start), as_date=True) == expected


def test_time_token_converts_other_zones_to_utc_and_keeps_milliseconds() -> None:
    start = datetime(2025, 3, 7, 23, 30, 15, 123456, tzinfo=timezone(timedelta(hours=-5)))
    assert resolve_time_token("+0d", start) == "2025-03-08T04:30:15.123+00:00"
    assert resolve_time_token("+0d@10:00", start) == "2025-03-08T10:00:00.000+00:00"
    assert resolve_time_token("+0d", start, as_date=True) == "2025-03-08"


def _weekday_walk(today: date, count: int) -> date:
    """The obvious loop, to check the arithmetic on every start day."""
    step = 1 if count > 0 else -1
    day = today
    for _ in range(abs(count)):
        day += timedelta(days=step)
        while day.weekday() >= 5:
            day += timedelta(days=step)
    return day


@pytest.mark.parametrize("offset", range(14))
def test_weekday_arithmetic_matches_a_walk(offset: int) -> None:
    start = at("2025-12-22T12:00") + timedelta(days=offset)  # two weeks over the year end
    for count in [n for n in range(-23, 24) if n != 0]:
        token = f"{count:+d}wd"
        assert resolve_time_token(token, start, as_date=True) == str(
            _weekday_walk(start.date(), count)
        ), token


@pytest.mark.parametrize(
    ("token", "words"),
    [
        ("+1x", "'+1x'"),
        ("1wd@25:00", "'1wd@25:00'"),
        ("+1wd@25:00", "25:00"),
        ("+1d@12:60", "12:60"),
        ("+1h@10:00", "needs unit d or wd"),
        ("+5m@10:00", "needs unit d or wd"),
        ("", "''"),
        ("+1wd@9:00", "'+1wd@9:00'"),
        ("1d", "'1d'"),
        ("+d", "'+d'"),
        ("+1 d", "'+1 d'"),
        (" +1d", "' +1d'"),
        ("+1D", "'+1D'"),
        ("NOW", "'NOW'"),
        ("+1.5d", "'+1.5d'"),
        ("+1wd@10:00Z", "'+1wd@10:00Z'"),
        ("+9999999d", "out of range"),
        ("-999999d", "out of range"),
        ("-999999wd", "out of range"),
    ],
)
def test_bad_time_token(token: str, words: str) -> None:
    with pytest.raises(ExpansionError, match=re.escape(words)):
        resolve_time_token(token, FRI)


def test_naive_run_start_is_refused() -> None:
    with pytest.raises(ExpansionError, match="timezone-aware"):
        resolve_time_token("+1d", datetime(2025, 3, 7, 10, 0))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"$time": "+1d"}, True),
        ({"$date": "-20d"}, True),
        ({"$time": 5}, False),
        ({"$time": "+1d", "extra": 1}, False),
        ({"$when": "+1d"}, False),
        ("+1d", False),
        ([{"$time": "+1d"}], False),
    ],
)
def test_is_time_token(value: Any, expected: bool) -> None:
    assert is_time_token(value) is expected


def test_produced_times_work_in_fhirpath() -> None:
    r4 = models["r4"]
    start = at("2025-03-07T10:00")
    monday = resolve_time_token("+1wd@09:00", start)
    tuesday = resolve_time_token("+2wd@11:00", start)
    run_start = resolve_time_token("now", start)

    def holds(expression: str, **variables: str) -> list[Any]:
        result: list[Any] = fhirpathpy.evaluate({}, expression, variables, model=r4)
        return result

    assert holds("@2025-03-07T10:00:00.000+00:00 + 3 days > %t", t=monday) == [True]
    assert holds("@2025-03-07T10:00:00.000+00:00 + 3 days > %t", t=tuesday) == [False]
    assert holds("%runStart + 3 days = %t + 1 hour", runStart=run_start, t=monday) == [True]
    assert holds("%runStart + 4 days < %t", runStart=run_start, t=tuesday) == [True]
    assert holds("%d < @2025-03-07", d=resolve_time_token("-1d", start, as_date=True)) == [True]


# --- scenarios used below ----------------------------------------------------------------

PATIENT: dict[str, Any] = {
    "resourceType": "Patient",
    "id": "@patient",
    "name": [{"use": "official", "given": ["Alex", "J"], "family": "Rivera"}],
    "birthDate": "1985-04-12",
    "telecom": [
        {"system": "email", "value": "alex@example.com"},
        {"system": "phone", "value": "555-0100"},
    ],
    "active": True,
}
CHEN: dict[str, Any] = {
    "resourceType": "Practitioner",
    "id": "@chen",
    "name": [{"prefix": ["Dr."], "given": ["Wei"], "family": "Chen"}],
}
APPT: dict[str, Any] = {
    "resourceType": "Appointment",
    "id": "@appt",
    "status": "booked",
    "serviceType": [{"coding": [{"code": "physical", "display": "Annual physical"}]}],
    "start": {"$time": "+1wd@10:00"},
    "end": {"$time": "+1wd@10:30"},
    "participant": [
        {"actor": {"reference": "@patient", "display": "Alex"}, "status": "accepted"},
        {"actor": {"reference": "@chen"}, "status": "accepted"},
    ],
}
NO_SHOW: dict[str, Any] = {**APPT, "status": "noshow"}


def make_scenario(**fields: Any) -> Scenario:
    data: dict[str, Any] = {
        "id": "scheduling.book-annual",
        "title": "Book an annual physical",
        "category": "scheduling",
        "summary": "A patient asks for their yearly check-up.",
        "modes": ["agent"],
        "brief": "{{patient.name}} wants a physical with Dr. {{chen.name.family}}.",
        "fixture": [PATIENT, CHEN, APPT],
        "expectations": [
            {
                "id": "booked",
                "type": "field",
                "label": "The appointment is booked",
                "target": "@appt",
                "where": ["status = 'booked'"],
            },
            {
                "id": "either",
                "type": "any_of",
                "label": "Either",
                "expectations": [
                    {
                        "id": "call",
                        "type": "api_call",
                        "label": "Searched",
                        "method": "GET",
                        "path": "/Slot",
                    }
                ],
            },
        ],
        "variants": [
            {
                "persona": "spanish",
                "summary": "Prefers Spanish",
                "overrides": {
                    "@patient": {
                        "communication": [{"language": {"text": "Spanish"}}],
                        "name": [{"given": ["Alejandra"], "family": "Rivera"}],
                        "birthDate": None,
                    },
                    "@appt": {"status": "proposed"},
                },
                "brief": "{{patient.name}} (Spanish) wants a physical.",
            },
            {"persona": "plain", "overrides": {"@chen": {"active": True}}},
            {"persona": "ghost", "overrides": {"@nobody": {"active": True}}},
            {"persona": "retype", "overrides": {"@chen": {"resourceType": "Patient"}}},
            {"persona": "reid", "overrides": {"@chen": {"id": "other"}}},
            {"persona": "unid", "overrides": {"@chen": {"id": None}}},
            {"persona": "bare", "overrides": {"chen": {"active": True}}},
        ],
    }
    data.update(fields)
    return Scenario.model_validate(data)


# --- symbols -----------------------------------------------------------------------------


def test_fixture_symbols_cover_fixture_and_stimulus() -> None:
    scenario = make_scenario(
        stimulus=[
            NO_SHOW,
            {"resourceType": "Communication", "id": "@msg", "status": "completed"},
            {"resourceType": "Communication", "id": "@msg", "status": "completed"},
            {"resourceType": "Observation", "id": "literal-id", "status": "final"},
        ]
    )
    assert fixture_symbols(scenario) == {
        "patient": "Patient",
        "chen": "Practitioner",
        "appt": "Appointment",
        "msg": "Communication",
    }


@pytest.mark.parametrize(
    ("fixture", "stimulus", "words"),
    [
        ([PATIENT, {**PATIENT, "name": []}], [], "fixture[1]: symbol @patient is defined twice"),
        ([PATIENT], [{**PATIENT, "resourceType": "Person"}], "@patient is a Patient, not a Person"),
        (
            [],
            [{**CHEN, "id": "@x"}, {**PATIENT, "id": "@x"}],
            "@x is a Practitioner, not a Patient",
        ),
        ([{**PATIENT, "id": "@my-patient"}], [], "bad symbol '@my-patient'"),
        ([{**PATIENT, "id": "@"}], [], "bad symbol '@'"),
        ([{"id": "@p"}], [], "@p has no resourceType"),
    ],
)
def test_fixture_symbol_errors(
    fixture: list[dict[str, Any]], stimulus: list[dict[str, Any]], words: str
) -> None:
    scenario = make_scenario(fixture=fixture, stimulus=stimulus)
    with pytest.raises(ExpansionError, match=re.escape(words)):
        fixture_symbols(scenario)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (APPT, {"patient", "chen"}),  # its own "id": "@appt" is a definition
        (PATIENT, set()),
        ({"reference": "@patient"}, {"patient"}),
        ("@patient", {"patient"}),
        ([{"id": "@a"}, "@b"], {"a", "b"}),  # ids inside a list are uses
        ({"contained": [{"id": "@inner"}], "x": [[["@deep"]]]}, {"inner", "deep"}),
        ({"value": "alex@example.com", "note": "@ noon", "when": "@2025-03-07"}, set()),
        ({"text": "see @patient"}, set()),
        ({"n": 3, "ok": True, "none": None}, set()),
    ],
)
def test_used_symbols(value: Any, expected: set[str]) -> None:
    assert used_symbols(value) == expected


@pytest.mark.parametrize(
    ("symbols", "expected"),
    [
        (["patient", "appt"], {"patient": "r7k2m9q1-patient", "appt": "r7k2m9q1-appt"}),
        (["lab_result"], {"lab_result": "r7k2m9q1-lab-result"}),
        (["a.b", "Mixed9"], {"a.b": "r7k2m9q1-a.b", "Mixed9": "r7k2m9q1-Mixed9"}),
        ([], {}),
    ],
)
def test_run_ids(symbols: list[str], expected: dict[str, str]) -> None:
    assert run_ids(symbols, RUN_KEY) == expected


@pytest.mark.parametrize(
    "symbols",
    [
        ["x" * 55, "x" * 56, "x" * 80, "x" * 81 + "y", "x" * 81 + "z"],  # collide when cut
        ["a_b", "a-b", "a b", "a.b"],  # collide after replacing characters
        ["ä", "ö", "a", "-"],
    ],
)
def test_run_ids_are_unique_valid_and_stable(symbols: list[str]) -> None:
    ids = run_ids(symbols, RUN_KEY)
    assert set(ids) == set(symbols)
    assert len(set(ids.values())) == len(symbols)
    for rid in ids.values():
        assert FHIR_ID.fullmatch(rid), rid
        assert rid.startswith(RUN_KEY + "-")
    # A symbol's id does not depend on the order or on unrelated symbols.
    assert run_ids(reversed(symbols), RUN_KEY) == ids
    assert run_ids([*symbols, "other"], RUN_KEY) == {**ids, "other": f"{RUN_KEY}-other"}


def test_run_ids_keep_a_plain_id_up_to_64_characters() -> None:
    symbol = "s" * (64 - len(RUN_KEY) - 1)
    assert run_ids([symbol], RUN_KEY) == {symbol: f"{RUN_KEY}-{symbol}"}
    longer = run_ids([symbol + "s"], RUN_KEY)[symbol + "s"]
    assert len(longer) == 64
    assert longer != f"{RUN_KEY}-{symbol}"


def test_run_ids_differ_between_runs() -> None:
    assert run_ids(["patient"], "aaaa0000") != run_ids(["patient"], "bbbb1111")


@pytest.mark.parametrize("run_key", ["", "UPPER123", "has-dash", "k" * 33])
def test_bad_run_key(run_key: str) -> None:
    with pytest.raises(ExpansionError, match="run key"):
        run_ids(["patient"], run_key)


# --- expand_value ------------------------------------------------------------------------

REFS = {"patient": "Patient/r7k2m9q1-patient", "chen": "Practitioner/r7k2m9q1-chen"}
START = at("2025-03-07T16:00")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"reference": "@patient"}, {"reference": "Patient/r7k2m9q1-patient"}),
        (
            {"subject": {"reference": "@patient", "display": "@chen"}},
            {"subject": {"reference": "Patient/r7k2m9q1-patient", "display": "r7k2m9q1-chen"}},
        ),
        ("@patient", "r7k2m9q1-patient"),
        ({"id": "@chen"}, {"id": "r7k2m9q1-chen"}),
        (
            {"identifier": [{"value": "@patient"}], "x": [["@chen", {"reference": "@chen"}]]},
            {
                "identifier": [{"value": "r7k2m9q1-patient"}],
                "x": [["r7k2m9q1-chen", {"reference": "Practitioner/r7k2m9q1-chen"}]],
            },
        ),
        (
            {"telecom": [{"value": "alex@example.com"}], "text": "@patient said hi", "n": "@"},
            {"telecom": [{"value": "alex@example.com"}], "text": "@patient said hi", "n": "@"},
        ),
        ({"reference": "Patient/literal"}, {"reference": "Patient/literal"}),
        ({"reference": "alex@example.com"}, {"reference": "alex@example.com"}),
        (
            {"reference": {"reference": "@chen", "when": {"$date": "+0d"}}},
            {"reference": {"reference": "Practitioner/r7k2m9q1-chen", "when": "2025-03-07"}},
        ),
        (
            {"start": {"$time": "+1wd@10:00"}, "birthDate": {"$date": "-20d"}},
            {"start": "2025-03-10T10:00:00.000+00:00", "birthDate": "2025-02-15"},
        ),
        (
            [{"$time": "now"}, 3, None, True, 1.5],
            ["2025-03-07T16:00:00.000+00:00", 3, None, True, 1.5],
        ),
        ({}, {}),
    ],
)
def test_expand_value(value: Any, expected: Any) -> None:
    before = copy.deepcopy(value)
    assert expand_value(value, REFS, START) == expected
    assert value == before


def test_expand_value_returns_a_deep_copy() -> None:
    value: dict[str, Any] = {"a": [{"b": ["c"]}], "reference": {"x": ["y"]}}
    expanded = expand_value(value, REFS, START)
    expanded["a"][0]["b"].append("d")
    expanded["reference"]["x"].append("z")
    assert value == {"a": [{"b": ["c"]}], "reference": {"x": ["y"]}}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"reference": "@appt"}, "unknown symbol @appt"),
        ("@nobody", "unknown symbol @nobody"),
        ([{"deep": ["@ghost"]}], "unknown symbol @ghost"),
        ({"start": {"$time": "+1x"}}, "'+1x'"),
        ({"start": {"$date": "+1wd@9:00"}}, "'+1wd@9:00'"),
        ({"start": {"$time": 5}}, "bad time token"),
        ({"start": {"$time": "+1d", "zone": "UTC"}}, "bad time token"),
    ],
)
def test_expand_value_errors(value: Any, words: str) -> None:
    with pytest.raises(ExpansionError, match=re.escape(words)):
        expand_value(value, REFS, START)


# --- variants ----------------------------------------------------------------------------


def _by_id(resources: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    return next(r for r in resources if r["id"] == rid)


def test_variant_patches_add_replace_and_remove() -> None:
    scenario = make_scenario(stimulus=[NO_SHOW])
    varied = apply_variant(scenario, "spanish")
    patient = _by_id(varied.fixture, "@patient")
    assert patient["communication"] == [{"language": {"text": "Spanish"}}]  # added
    assert patient["name"] == [{"given": ["Alejandra"], "family": "Rivera"}]  # replaced
    assert "birthDate" not in patient  # removed by null
    assert patient["telecom"] == PATIENT["telecom"]  # untouched
    # A symbol's stimulus update is patched like its fixture version.
    assert _by_id(varied.fixture, "@appt")["status"] == "proposed"
    assert _by_id(varied.stimulus, "@appt")["status"] == "proposed"
    assert varied.brief == "{{patient.name}} (Spanish) wants a physical."
    # The original is unchanged, and the result is a full, valid scenario.
    assert _by_id(scenario.fixture, "@patient") == PATIENT
    assert scenario.brief is not None and scenario.brief.startswith("{{patient.name}} wants")
    assert varied.expectations == scenario.expectations
    assert Scenario.model_validate(varied.model_dump(by_alias=True)) == varied


def test_variant_expectations_are_appended_for_that_persona_only() -> None:
    usted = {"id": "formal", "type": "message", "label": "usted", "register": "usted"}
    scenario = make_scenario()
    data = scenario.model_dump(by_alias=True)
    data["variants"][0]["expectations"] = [usted]
    scenario = Scenario.model_validate(data)
    varied = apply_variant(scenario, "spanish")
    assert [e.id for e in varied.expectations] == [*(e.id for e in scenario.expectations), "formal"]
    # Applied once: the result applied again is the same scenario.
    assert apply_variant(varied, "spanish").expectations == varied.expectations
    other = scenario.variants[1].persona
    assert apply_variant(scenario, other).expectations == scenario.expectations


def test_variant_without_brief_keeps_the_brief() -> None:
    scenario = make_scenario()
    varied = apply_variant(scenario, "plain")
    assert varied.brief == scenario.brief
    assert _by_id(varied.fixture, "@chen")["active"] is True


def test_variant_patch_lists_are_not_shared() -> None:
    scenario = make_scenario()
    varied = apply_variant(scenario, "spanish")
    _by_id(varied.fixture, "@patient")["name"][0]["given"].append("X")
    assert scenario.variants[0].overrides["@patient"]["name"][0]["given"] == ["Alejandra"]
    again = apply_variant(scenario, "spanish")
    assert _by_id(again.fixture, "@patient")["name"][0]["given"] == ["Alejandra"]


def test_unknown_persona() -> None:
    with pytest.raises(KeyError):
        apply_variant(make_scenario(), "pirate")


@pytest.mark.parametrize(
    ("persona", "words"),
    [
        ("ghost", "unknown symbol @nobody"),
        ("retype", "changes resourceType"),
        ("reid", "changes id"),
        ("unid", "changes id"),
        ("bare", "'chen' is not a symbol"),
    ],
)
def test_bad_variant(persona: str, words: str) -> None:
    with pytest.raises(ExpansionError, match=re.escape(words)):
        apply_variant(make_scenario(), persona)


# --- briefs ------------------------------------------------------------------------------

EXPANDED_REFS = {
    "patient": "Patient/r7k2m9q1-patient",
    "chen": "Practitioner/r7k2m9q1-chen",
    "appt": "Appointment/r7k2m9q1-appt",
}
EXPANDED = {
    symbol: expand_value(resource, EXPANDED_REFS, at("2024-11-29T16:00"))  # a Friday
    for symbol, resource in (("patient", PATIENT), ("chen", CHEN), ("appt", APPT))
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{patient.name}}", "Alex J Rivera"),
        ("{{patient.id}}", "r7k2m9q1-patient"),
        ("{{patient.ref}}", "Patient/r7k2m9q1-patient"),
        ("{{appt.start}}", "Monday 2 December 2024 at 10:00 UTC"),
        ("{{appt.status}}", "booked"),
        ("{{patient.birthDate}}", "1985-04-12"),
        ("{{patient.active}}", "true"),
        ("{{chen.name.family}}", "Chen"),
        ("{{patient.name.given}}", "Alex"),
        ("{{patient.telecom.value}}", "alex@example.com"),
        ("{{patient.telecom.1.value}}", "555-0100"),
        ("{{appt.serviceType}}", "Annual physical"),
        ("{{appt.participant.actor.reference}}", "Patient/r7k2m9q1-patient"),
        ("{{appt.participant.1.actor.reference}}", "Practitioner/r7k2m9q1-chen"),
        ("{{title}}", "Book an annual physical"),
        ("{{summary}}", "A patient asks for their yearly check-up."),
        ("{{id}}", "scheduling.book-annual"),
        ("{{category}}", "scheduling"),
        (
            "Hi {{ patient.name }}, see Dr. {{chen.name.family}} on {{appt.start}} ({{appt.ref}}).",
            "Hi Alex J Rivera, see Dr. Chen on Monday 2 December 2024 at 10:00 UTC "
            "(Appointment/r7k2m9q1-appt).",
        ),
        ("no tokens, { braces } and {single}", "no tokens, { braces } and {single}"),
    ],
)
def test_render_brief(template: str, expected: str) -> None:
    assert render_brief(template, make_scenario(), EXPANDED, EXPANDED_REFS) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-12-03T10:00:00.000+00:00", "Tuesday 3 December 2024 at 10:00 UTC"),
        ("2024-12-03T10:00:00Z", "Tuesday 3 December 2024 at 10:00 UTC"),
        ("2024-12-03T05:00:00-05:00", "Tuesday 3 December 2024 at 10:00 UTC"),
        ("2025-01-01T00:30:00+01:00", "Tuesday 31 December 2024 at 23:30 UTC"),
        ("2024-12-03", "2024-12-03"),
        ("2024-02-30T10:00:00Z", "2024-02-30T10:00:00Z"),
        ([{"text": "Alex Rivera"}], "Alex Rivera"),
        ([{"given": ["Alex"]}], "Alex"),
        ({"coding": [{"display": "Annual physical"}]}, "Annual physical"),
        ({"text": "Physical", "coding": [{"display": "Other"}]}, "Physical"),
        (12, "12"),
        (False, "false"),
    ],
)
def test_brief_values_read_naturally(value: Any, expected: str) -> None:
    resources = {"x": {"resourceType": "Basic", "id": "k-x", "v": value}}
    refs = {"x": "Basic/k-x"}
    assert render_brief("{{x.v}}", make_scenario(), resources, refs) == expected


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{{nobody.name}}", "unknown symbol @nobody in brief token {{nobody.name}}"),
        ("{{patient.nickname}}", "{{patient.nickname}}"),
        ("{{patient.name.middle}}", "{{patient.name.middle}}"),
        ("{{patient.telecom.5.value}}", "{{patient.telecom.5.value}}"),
        ("{{patient.telecom}}", "{{patient.telecom}} is not a text value"),
        ("{{patient}}", "{{patient}} needs a field"),
        ("{{workflow}}", "unknown brief token {{workflow}}"),
        ("{{brief}}", "unknown brief token {{brief}}"),
        ("{{modes}}", "unknown brief token {{modes}}"),
        ("{{}}", "bad brief token {{}}"),
        ("{{patient..name}}", "bad brief token {{patient..name}}"),
        ("{{patient.name!}}", "bad brief token {{patient.name!}}"),
    ],
)
def test_render_brief_errors(template: str, words: str) -> None:
    with pytest.raises(ExpansionError, match=re.escape(words)):
        render_brief(template, make_scenario(), EXPANDED, EXPANDED_REFS)


def test_brief_symbol_known_only_by_ref() -> None:
    refs = {**EXPANDED_REFS, "saved": "Task/abc"}
    assert render_brief("{{saved.ref}} {{saved.id}}", make_scenario(), EXPANDED, refs) == (
        "Task/abc abc"
    )
    with pytest.raises(ExpansionError, match=re.escape("no resource for @saved")):
        render_brief("{{saved.status}}", make_scenario(), EXPANDED, refs)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            "{{patient.name}} and {{ appt.start }} and {{title}}",
            ["patient.name", "appt.start", "title"],
        ),
        ("{{a.b}}{{a.b}}", ["a.b", "a.b"]),
        ("{{}} {single} none", [""]),
        ("plain", []),
    ],
)
def test_brief_tokens(template: str, expected: list[str]) -> None:
    assert brief_tokens(template) == expected


# --- the whole scenario ------------------------------------------------------------------


def test_expand_scenario() -> None:
    scenario = make_scenario(stimulus=[NO_SHOW])
    before = scenario.model_dump()
    expanded = expand_scenario(scenario, RUN_KEY, at("2024-11-29T16:00"))
    assert isinstance(expanded, ExpandedScenario)
    assert expanded.refs == EXPANDED_REFS
    assert [r["id"] for r in expanded.fixture] == [
        "r7k2m9q1-patient",
        "r7k2m9q1-chen",
        "r7k2m9q1-appt",
    ]
    appt = expanded.fixture[2]
    assert appt["start"] == "2024-12-02T10:00:00.000+00:00"
    assert appt["participant"][0]["actor"] == {
        "reference": "Patient/r7k2m9q1-patient",
        "display": "Alex",
    }
    assert expanded.stimulus == [{**appt, "status": "noshow"}]
    assert expanded.brief == "Alex J Rivera wants a physical with Dr. Chen."
    assert scenario.model_dump() == before


def test_expand_scenario_with_persona() -> None:
    expanded = expand_scenario(make_scenario(), RUN_KEY, at("2024-11-29T16:00"), "spanish")
    assert expanded.brief == "Alejandra Rivera (Spanish) wants a physical."
    assert expanded.fixture[0]["communication"] == [{"language": {"text": "Spanish"}}]
    assert expanded.fixture[2]["status"] == "proposed"


def test_expand_scenario_brief_reads_the_latest_version() -> None:
    scenario = make_scenario(stimulus=[NO_SHOW], brief="It is {{appt.status}}.")
    assert expand_scenario(scenario, RUN_KEY, START).brief == "It is noshow."


def test_expand_scenario_without_brief() -> None:
    scenario = make_scenario(brief=None, modes=["workflow"], workflow="React to no-shows")
    assert expand_scenario(scenario, RUN_KEY, START).brief is None


def test_expand_scenario_unknown_symbol() -> None:
    scenario = make_scenario(fixture=[APPT])
    with pytest.raises(ExpansionError, match="unknown symbol @patient"):
        expand_scenario(scenario, RUN_KEY, START)
