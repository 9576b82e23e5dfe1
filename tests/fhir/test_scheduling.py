"""The scheduling rules (docs/scenarios.md "Scheduling rules") over real HTTP."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import TenantHandle

CHEN = "Practitioner/demo-canonical-prac-chen"


def weekday(after: int = 1) -> date:
    day = datetime.now(UTC).date() + timedelta(days=after)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return day


def saturday() -> date:
    day = datetime.now(UTC).date() + timedelta(days=1)
    while day.weekday() != 5:
        day += timedelta(days=1)
    return day


def at(day: date, hhmm: str) -> str:
    return f"{day.isoformat()}T{hhmm}:00Z"


def appointment(start: str, end: str, status: str = "booked", **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": start,
        "end": end,
        "participant": [
            {"actor": {"reference": "Patient/somebody"}, "status": "accepted"},
            {"actor": {"reference": CHEN}, "status": "accepted"},
        ],
        **extra,
    }


def diagnostics(r: httpx.Response) -> str:
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome", outcome
    return " ".join(i.get("diagnostics", "") for i in outcome["issue"])


def assert_refused(r: httpx.Response, conflict: str) -> str:
    assert r.status_code == 409, r.text
    text = diagnostics(r)
    assert "Dr. Sarah Chen" in text and CHEN in text, text
    assert conflict in text, text
    assert "nearest free times:" in text, text
    return text


async def test_end_not_after_start_is_422(client: httpx.AsyncClient) -> None:
    day = weekday()
    for end in ("09:30", "09:00"):
        r = await client.post("/Appointment", json=appointment(at(day, "09:30"), at(day, end)))
        assert r.status_code == 422, r.text
        assert "Appointment.end" in diagnostics(r)


@pytest.mark.parametrize(
    ("when", "conflict"),
    [
        (lambda: (at(saturday(), "10:00"), at(saturday(), "10:30")), "outside their schedule"),
        (lambda: (at(weekday(), "03:00"), at(weekday(), "03:30")), "outside their schedule"),
        (lambda: (at(weekday(), "09:10"), at(weekday(), "09:40")), "is not the start of a free"),
        (lambda: (at(weekday(), "09:00"), at(weekday(), "17:00")), "480 minutes long"),
        (lambda: (at(weekday(), "16:30"), at(weekday(), "17:30")), "end at"),
        (lambda: (at(saturday(), "09:00"), at(saturday(), "09:45")), "outside their schedule"),
        (
            lambda: (
                (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT10:00:00Z"),
                (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT10:30:00Z"),
            ),
            "in the past",
        ),
    ],
    ids=["saturday", "03:00", "09:10", "eight-hours", "past-closing", "saturday-45", "past"],
)
async def test_bad_bookings_are_409(client: httpx.AsyncClient, when: Any, conflict: str) -> None:
    start, end = when()
    text = assert_refused(await client.post("/Appointment", json=appointment(start, end)), conflict)
    # The nearest free times offered are ones $find offers, and booking one succeeds.
    offered = text.split("nearest free times: ", 1)[1].split(" (see", 1)[0].split("; ")[0]
    first, last = offered.split(" to ")
    r = await client.post("/Appointment", json=appointment(first, last))
    assert r.status_code == 201, r.text


async def test_free_slots_book_and_overlaps_are_409(client: httpx.AsyncClient) -> None:
    day = weekday()
    ok = await client.post("/Appointment", json=appointment(at(day, "10:00"), at(day, "11:00")))
    assert ok.status_code == 201, ok.text
    first = ok.json()["id"]
    r = await client.post("/Appointment", json=appointment(at(day, "10:30"), at(day, "11:00")))
    text = assert_refused(r, f"overlaps Appointment/{first}")
    assert at(day, "11:00") in text  # the nearest free time right after
    # A pending hold occupies the time too.
    hold = await client.post(
        "/Appointment", json=appointment(at(day, "10:30"), at(day, "11:00"), "pending")
    )
    assert_refused(hold, f"overlaps Appointment/{first}")
    # A proposal holds nothing and is not checked.
    proposed = await client.post(
        "/Appointment", json=appointment(at(day, "10:30"), at(day, "11:00"), "proposed")
    )
    assert proposed.status_code == 201, proposed.text
    # Slot references must match the times.
    wrong = appointment(
        at(day, "12:00"),
        at(day, "12:30"),
        slot=[{"reference": f"Slot/demo-canonical-slot-chen-{day:%Y%m%d}1300"}],
    )
    assert_refused(await client.post("/Appointment", json=wrong), "Appointment.slot names")
    right = appointment(
        at(day, "12:00"),
        at(day, "12:30"),
        slot=[{"reference": f"Slot/demo-canonical-slot-chen-{day:%Y%m%d}1200"}],
    )
    assert (await client.post("/Appointment", json=right)).status_code == 201
    # A status change at the same time is not a new booking; cancelling frees the time.
    r = await client.patch(
        f"/Appointment/{first}",
        json=[{"op": "replace", "path": "/status", "value": "arrived"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 200, r.text
    r = await client.patch(
        f"/Appointment/{first}",
        json=[{"op": "replace", "path": "/status", "value": "cancelled"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 200, r.text
    again = await client.post("/Appointment", json=appointment(at(day, "10:30"), at(day, "11:00")))
    assert again.status_code == 201, again.text


async def test_put_and_patch_to_booked_are_checked(client: httpx.AsyncClient) -> None:
    day = weekday()
    wait = await client.post(
        "/Appointment", json=appointment(at(day, "09:10"), at(day, "09:40"), "waitlist")
    )
    assert wait.status_code == 201, wait.text
    body = wait.json()
    r = await client.put(f"/Appointment/{body['id']}", json={**body, "status": "booked"})
    assert_refused(r, "is not the start of a free")
    r = await client.patch(
        f"/Appointment/{body['id']}",
        json={"status": "booked"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert_refused(r, "is not the start of a free")
    moved = {**body, "status": "booked", "start": at(day, "09:00"), "end": at(day, "09:30")}
    r = await client.put(f"/Appointment/{body['id']}", json=moved)
    assert r.status_code == 200, r.text


async def test_transaction_bundles_are_checked(client: httpx.AsyncClient) -> None:
    day = weekday()

    def entry(start: str, end: str) -> dict[str, Any]:
        return {
            "resource": appointment(at(day, start), at(day, end)),
            "request": {"method": "POST", "url": "Appointment"},
        }

    bundle = {"resourceType": "Bundle", "type": "transaction", "entry": [entry("03:00", "03:30")]}
    r = await client.post("", json=bundle)
    assert r.status_code == 409, r.text
    assert "outside their schedule" in diagnostics(r)
    # Two entries booking the same time: the second overlaps the first.
    bundle["entry"] = [entry("14:00", "14:30"), entry("14:00", "14:30")]
    r = await client.post("", json=bundle)
    assert r.status_code == 409, r.text
    assert "overlaps" in diagnostics(r)
    # The third overlaps the first, with one that fits between them (what the Bundle holds
    # grows entry by entry).
    bundle["entry"] = [entry("15:00", "15:30"), entry("15:30", "16:00"), entry("15:00", "15:30")]
    r = await client.post("", json=bundle)
    assert r.status_code == 409, r.text
    assert "overlaps" in diagnostics(r) and "entry[2]" in diagnostics(r)
    bundle["entry"] = [entry("14:00", "14:30"), entry("14:30", "15:00")]
    r = await client.post("", json=bundle)
    assert r.status_code == 200, r.text


SCENARIO: dict[str, Any] = {
    "id": "custom.scheduling-rules",
    "title": "A booking scenario",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "Book {{patient.name}}.",
    "fixture": [
        {"resourceType": "Patient", "id": "@patient", "name": [{"family": "Okoye"}]},
    ],
    "stimulus": [],
    "expectations": [
        {"id": "appt", "type": "resource", "label": "booked", "resourceType": "Appointment"}
    ],
}


def off_slot(patient: str, day: date) -> dict[str, Any]:
    appt = appointment(at(day, "03:00"), at(day, "03:30"))
    appt["participant"][0]["actor"]["reference"] = patient
    return appt


async def start(tenant: TenantHandle, scenario: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    ) as api:
        r = await api.post("/scenarios", json=scenario)
        assert r.status_code in (200, 201), r.text
        r = await api.post("/runs", json={"scenarioId": scenario["id"]})
        assert r.status_code == 201, r.text
        run: dict[str, Any] = r.json()
        return run


async def test_setup_and_stimulus_are_exempt(tenant: TenantHandle) -> None:
    scenario = copy.deepcopy(SCENARIO)
    bad = off_slot("@patient", saturday())
    scenario["fixture"].append({**bad, "id": "@old"})
    scenario["stimulus"] = [{**off_slot("@patient", weekday()), "id": "@new"}]
    run = await start(tenant, scenario)
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as view:
        for name in ("old", "new"):
            r = await view.get(f"/{run['fixture'][name]}")
            assert r.status_code == 200 and r.json()["start"].endswith("03:00:00Z"), r.text
        # The system under test is held to the rules in the same run (and the stimulus's
        # booking holds its time).
        patient = f"Patient/{run['fixture']['patient']}"
        r = await view.post("/Appointment", json=off_slot(patient, weekday()))
        assert_refused(r, f"it overlaps {run['fixture']['new']}")


async def test_a_lenient_scenario_run_is_exempt(
    tenant: TenantHandle, client: httpx.AsyncClient
) -> None:
    scenario = {**copy.deepcopy(SCENARIO), "id": "custom.lenient", "scheduling": "lenient"}
    run = await start(tenant, scenario)
    patient = f"Patient/{run['fixture']['patient']}"
    async with httpx.AsyncClient(base_url=run["fhirBase"], headers=tenant.headers) as view:
        r = await view.post("/Appointment", json=off_slot(patient, weekday()))
        assert r.status_code == 201, r.text
        # end before start stays a 422 even here.
        appt = off_slot(patient, weekday())
        appt["end"] = at(weekday(), "02:00")
        assert (await view.post("/Appointment", json=appt)).status_code == 422
    # On the tenant base, a write referencing the lenient run's fixture is its too.
    r = await client.post("/Appointment", json=off_slot(patient, weekday()))
    assert r.status_code == 201, r.text
    # ... and one referencing nobody's fixture is not.
    # (the lenient run's bookings on the base hold that time now).
    r = await client.post("/Appointment", json=off_slot("Patient/somebody", weekday()))
    assert_refused(r, "it overlaps Appointment/")


async def test_invalid_scheduling_setting_is_named(tenant: TenantHandle) -> None:
    scenario = {**copy.deepcopy(SCENARIO), "id": "custom.bad-setting", "scheduling": "loose"}
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    ) as api:
        r = await api.post("/scenarios", json=scenario)
    assert r.status_code == 422, r.text
    assert "scheduling" in r.text
