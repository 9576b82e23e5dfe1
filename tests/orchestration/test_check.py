"""`scenarios check` end to end: the whole built-in library is a fair test (oracle
passes, nothing fails, every near miss fails), a weak scenario is caught, and grading
mutants in memory gives the verdicts real runs give."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.orchestration import check
from app.scenarios.service import builtin_scenarios
from app.settings import Settings
from app.tenants.quota import RunLimits
from tests.conftest import TenantHandle
from tests.scenarios.test_import_api import FIND_COVERAGE

LIBRARY = sorted(builtin_scenarios())
ROOT = Path(__file__).resolve().parents[2]


def failures(report: dict[str, Any], ignore: frozenset[str] = frozenset()) -> list[str]:
    out = list(report["problems"])
    for v in report["variants"]:
        name = f"{v['variant'] or 'baseline'} ({v['mode']})"
        if not v["oraclePasses"]:
            out.append(f"[{name}] oracle fails {v['oracleFailing']} {v['oracleError'] or ''}")
        if not v["nothingFails"]:
            out.append(f"[{name}] doing nothing passes")
        out += [
            f"[{name}] survived: {m['description']}"
            for m in v["survivors"]
            if m["kind"] not in ignore
        ]
        out += [
            f"[{name}] false failure: {r['description']}: {r['broke']}" for r in v["falseFailures"]
        ]
    return out


@pytest.mark.parametrize("scenario_id", LIBRARY)
async def test_library_scenario_passes_the_check(tenant: TenantHandle, scenario_id: str) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        r = await client.post(f"{tenant.server}/api/testing/scenarios/{scenario_id}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert failures(report) == []
    assert report["variants"][0]["variant"] is None
    assert all(v["mutants"] > 0 for v in report["variants"])
    assert all(v["rewrites"] > 0 for v in report["variants"])
    # Every mode the scenario has is checked, each with every persona.
    scenario = builtin_scenarios()[scenario_id].scenario
    checked = {(v["mode"], v["variant"]) for v in report["variants"]}
    personas = [None, *(variant.persona for variant in scenario.variants)]
    assert checked == {(str(m), p) for m in scenario.modes for p in personas}


WEAK: dict[str, Any] = {
    "id": "custom.weak-booking",
    "title": "Book a visit (weakly checked)",
    "category": "scheduling",
    "summary": "Only checks that some appointment is booked.",
    "modes": ["agent"],
    "brief": "Book {{patient.name}} with Dr. Chen.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"given": ["Ana"], "family": "Ruiz"}],
        }
    ],
    "expectations": [
        {
            "id": "booked",
            "type": "resource",
            "label": "Something is booked",
            "resourceType": "Appointment",
            "scope": "tenant",
            "where": ["status = 'booked'"],
        },
        {
            "id": "no-cancel",
            "type": "resource",
            "label": "Nothing cancelled",
            "resourceType": "Appointment",
            "where": ["status = 'cancelled'"],
            "count": {"max": 0},
        },
    ],
    "oracle": [
        {
            "method": "POST",
            "path": "/Appointment",
            "body": {
                "resourceType": "Appointment",
                "status": "booked",
                "start": {"$time": "+2wd@10:00"},
                "end": {"$time": "+2wd@10:30"},
                "participant": [
                    {"actor": {"reference": "@patient"}, "status": "accepted"},
                    {
                        "actor": {"reference": "Practitioner/demo-canonical-prac-chen"},
                        "status": "accepted",
                    },
                ],
            },
        }
    ],
}


def strong() -> dict[str, Any]:
    document = copy.deepcopy(WEAK)
    document["id"] = "custom.strong-booking"
    booked = document["expectations"][0]
    del booked["scope"]
    booked["where"].append(
        "participant.where(actor.reference = 'Patient/' + %fixture.patient).exists()"
    )
    document["expectations"].append(UNTOUCHED_PATIENT)
    return document


# Catches a collateral change to the chart (the Patient's telecom rewritten).
UNTOUCHED_PATIENT = {
    "id": "patient-untouched",
    "type": "resource",
    "label": "No Patient written",
    "resourceType": "Patient",
    "count": {"max": 0},
}


def brittle() -> dict[str, Any]:
    """Fair in what it asks, brittle in how it reads: the booking must name exactly two
    participants, so a harmless Location participant fails it."""
    document = strong()
    document["id"] = "custom.brittle-booking"
    document["expectations"][0]["where"].append("participant.count() = 2")
    return document


def find_coverage() -> dict[str, Any]:
    """FIND_COVERAGE, also catching the near misses a `changes` expectation would."""
    document = copy.deepcopy(FIND_COVERAGE)
    document["expectations"][0]["count"] = {"min": 1, "max": 1}
    document["expectations"].append(UNTOUCHED_PATIENT)
    return document


async def _import_and_check(client: httpx.AsyncClient, base: str, document: Any) -> Any:
    r = await client.post(f"{base}/api/testing/scenarios", json=document)
    assert r.status_code == 201, r.text
    r = await client.post(f"{base}/api/testing/scenarios/{document['id']}/check")
    assert r.status_code == 200, r.text
    return r.json()


# The weak scenario with the end-state comparison off: its hand-written expectations alone.
WEAK_OFF: dict[str, Any] = {
    **WEAK,
    "strict": {
        "off": "the hand-written expectations alone",
        "textOff": "the hand-written expectations alone",
    },
}
GENERATED = ("element", "delete")


async def test_weak_custom_scenario_is_caught(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        weak = await _import_and_check(client, tenant.server, WEAK_OFF)
        fixed = await _import_and_check(client, tenant.server, strong())
        by_default = await _import_and_check(
            client, tenant.server, {**WEAK, "id": "custom.weak-strict"}
        )
        missing = await client.post(f"{tenant.server}/api/testing/scenarios/nope/check")
    assert missing.status_code == 404
    assert weak["ok"] is False
    every = weak["variants"][0]["survivors"]
    # The check's own adversaries find the weakness too: a delete of a fixture resource,
    # a changed element of the booking.
    assert {m["kind"] for m in every} >= {"element", "delete"}, every
    survivors = [m for m in every if m["kind"] not in GENERATED]
    assert [m["kind"] for m in survivors] == ["redirect", "collateral"], survivors
    assert "Patient/understudy-other-patient" in survivors[0]["description"]
    assert survivors[0]["shouldCatch"] == ["booked"]
    assert "telecom rewritten" in survivors[1]["description"]
    assert weak["variants"][0]["neverDecisive"] == ["no-cancel"]
    # Strict by default, the same scenario is a fair test: the end-state comparison
    # with its reference solution catches every mutant its own expectations miss.
    assert by_default["ok"] is True, failures(by_default)
    # Both directions are in the report: the booking moved off the slots, or made
    # twice, is refused by the scheduling rules; every rewrite passes.
    caught = {m["kind"]: m["caughtBy"] for m in weak["variants"][0]["caught"]}
    assert caught["slot"][0] == "the API (refused with 409)"
    assert caught["duplicate"] == ["the API (refused with 409)"]
    assert weak["variants"][0]["falseFailures"] == []
    assert weak["variants"][0]["rewritesPassing"] == weak["variants"][0]["rewrites"] > 0
    assert fixed["ok"] is True, failures(fixed)


async def test_a_brittle_scenario_shows_the_false_failure(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(headers=tenant.headers, timeout=120) as client:
        report = await _import_and_check(client, tenant.server, brittle())
    assert report["ok"] is False
    variant = report["variants"][0]
    assert variant["survivors"] == []
    assert variant["oraclePasses"] and variant["nothingFails"]
    (false_failure,) = variant["falseFailures"]
    assert false_failure["kind"] == "extras"
    assert false_failure["broke"] == [
        {"expectation": "booked", "clause": "participant.count() = 2"}
    ]
    assert report["rewriteKinds"]["offset"] == 2


async def test_warnings_are_reported_not_failures(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=120
    ) as client:
        assert (await client.post("/scenarios", json=find_coverage())).status_code == 201
        r = await client.post(f"/scenarios/{FIND_COVERAGE['id']}/check")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["ok"] and report["valid"], failures(report)
    assert report["problems"] == []
    assert len(report["warnings"]) == 1, report["warnings"]
    assert report["warnings"][0].startswith("/fixture/1/id: symbol @cov is defined but never")


@asynccontextmanager
async def check_target(settings: Settings, tenant: TenantHandle) -> AsyncIterator[check.Target]:
    """An app of our own in this event loop (no queue: the check grades as it goes). Not
    a fixture: the app's lifespan must end in the task it started in."""
    app = create_app(settings.clone(redis_url=None))
    async with app.router.lifespan_context(app):
        yield check.Target(
            app,
            app.state.scopes,
            tenant.id,
            f"Bearer {tenant.key}",
            "http://check.local",
            RunLimits(20, app.state.quota),
        )


@pytest.mark.parametrize(
    "scenario_id",
    ["scheduling.reschedule-ask-day", "results.critical-lab", "orders.repeat-lab-next-morning"],
)
async def test_memory_grading_equals_real_runs(
    settings: Settings, tenant: TenantHandle, scenario_id: str
) -> None:
    """Every mutant and every rewrite of an agent and a workflow scenario, graded both
    ways: the same required expectations fail (for a rewrite: none)."""
    loaded = builtin_scenarios()[scenario_id]
    async with check_target(settings, tenant) as target:
        memory = await check.check_scenario(target, loaded, personas=[None])
        real = await check.check_scenario(target, loaded, personas=[None], real_mutants=True)
    assert memory.variants[0].executor == "memory"
    assert memory.variants[0].disagreement == []
    assert real.variants[0].executor == "real runs"
    pairs = list(zip(memory.variants[0].mutants, real.variants[0].mutants, strict=True))
    assert pairs
    for m, r in pairs:
        assert m.description == r.description
        assert m.caught_by == r.caught_by, m.description
    rewrites = list(zip(memory.variants[0].rewrites, real.variants[0].rewrites, strict=True))
    assert {w.kind for w, _ in rewrites} >= {"offset", "transaction", "extras"}
    for w, rw in rewrites:
        assert w.description == rw.description
        assert w.broke == rw.broke, w.description


async def test_cli_exit_status_and_table(settings: Settings, tmp_path: Path) -> None:
    weak_file = tmp_path / "weak.json"
    weak_file.write_text(json.dumps({**WEAK_OFF, "id": "custom.cli-weak"}))
    env = {
        **os.environ,
        "UNDERSTUDY_DATABASE_URL": str(settings.database_url),
        "UNDERSTUDY_DATA_DIR": str(tmp_path / "data"),
    }

    async def cli(*args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.cli",
            "scenarios",
            "check",
            *args,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), 180)
        assert process.returncode is not None
        return process.returncode, output.decode()

    code, text = await cli(str(weak_file))
    assert code == 1, text
    assert "mutant survived" in text and "should be caught by: booked" in text
    assert "0/1 scenarios pass the check" in text
    brittle_file = tmp_path / "brittle.json"
    brittle_file.write_text(json.dumps({**brittle(), "id": "custom.cli-brittle"}))
    code, text = await cli(str(brittle_file))
    assert code == 1, text  # a false failure fails the check as a survivor does
    assert "false failure: harmless extras" in text
    assert "fails booked (participant.count() = 2)" in text
    warned_file = tmp_path / "warned.json"
    warned_file.write_text(json.dumps({**find_coverage(), "id": "custom.cli-warned"}))
    strong_file = tmp_path / "strong.json"
    strong_file.write_text(json.dumps({**strong(), "id": "custom.cli-strong"}))
    code, text = await cli(str(strong_file), str(warned_file))
    assert code == 0, text  # a warning is not a failure
    assert "2/2 scenarios pass the check" in text
    assert "rewrites (must pass)" in text
    assert "custom.cli-warned: warning: /fixture/1/id: symbol @cov is defined but never" in text
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x"')
    code, text = await cli(str(bad))
    assert code == 1 and "cannot read" in text


def _unguarded(scenario_id: str) -> dict[str, Any]:
    """A built-in scenario as a careless import would write it: no `changes` guard, no
    must-not-happen expectation (count max 0) — only what must happen."""
    document: dict[str, Any] = json.loads((ROOT / "scenarios" / f"{scenario_id}.json").read_text())
    kept = [
        e
        for e in document["expectations"]
        if e["type"] != "changes" and (e.get("count") or {}).get("max") != 0
    ]
    kept_ids = {e["id"] for e in kept}
    for e in kept:  # a `before`/`after` on a dropped expectation cannot stay
        if e.get("before") not in (None, *kept_ids) or e.get("after") not in (None, *kept_ids):
            e.pop("before", None)
            e.pop("after", None)
    return {**document, "id": f"custom.unguarded-{scenario_id}", "expectations": kept}


@pytest.mark.parametrize(
    "scenario_id", ["results.identity-two-charts", "coverage.lapsed-coverage-message"]
)
async def test_an_imported_scenario_without_guards_is_strict_by_default(
    tenant: TenantHandle, scenario_id: str
) -> None:
    """Deleting the look-alike chart or the Coverage, extending a Coverage, touching a
    result: nothing in such a scenario forbids them, and each still fails — by the
    end-state comparison every imported scenario gets."""
    async with httpx.AsyncClient(headers=tenant.headers, timeout=180) as client:
        report = await _import_and_check(client, tenant.server, _unguarded(scenario_id))
    variant = report["variants"][0]
    assert variant["survivors"] == [], variant["survivors"]
    deletes = [m for m in variant["caught"] if m["kind"] == "delete"]
    assert deletes and all("matches-reference" in m["caughtBy"] for m in deletes)
    collateral = [m for m in variant["caught"] if m["kind"] == "collateral"]
    assert collateral and all("matches-reference" in m["caughtBy"] for m in collateral)
    assert variant["generated"]["element"] > 0
