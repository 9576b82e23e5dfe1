"""`Appointment/$find` and `POST /api/eligibility/$check` over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import TenantHandle

CHEN = "Practitioner/demo-canonical-prac-chen"
PATEL = "Practitioner/demo-canonical-prac-patel"


def next_weekday() -> date:
    """The first weekday after today: the test tenant has free Slots on it all day."""
    day = datetime.now(UTC).date() + timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return day


def at(day: date, hhmm: str) -> str:
    return f"{day.isoformat()}T{hhmm}:00Z"


def instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def slot_ref(day: date, hhmm: str, who: str = "chen") -> str:
    return f"Slot/demo-canonical-slot-{who}-{day:%Y%m%d}{hhmm.replace(':', '')}"


async def find(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    r = await client.get("/Appointment/$find", params=params)
    assert r.status_code == 200, (str(r.request.url), r.text)
    bundle = r.json()
    assert bundle["resourceType"] == "Bundle"
    assert bundle["type"] == "searchset"
    proposals = [e["resource"] for e in bundle.get("entry", [])]
    assert bundle["total"] == len(proposals)
    return proposals


def starts(proposals: list[dict[str, Any]]) -> list[str]:
    return [instant(p["start"]).strftime("%H:%M") for p in proposals]


async def book(
    client: httpx.AsyncClient,
    day: date,
    start: str,
    end: str,
    practitioner: str = CHEN,
    status: str = "booked",
) -> str:
    body = {
        "resourceType": "Appointment",
        "status": status,
        "start": at(day, start),
        "end": at(day, end),
        "participant": [
            {"actor": {"reference": "Patient/somebody"}, "status": "accepted"},
            {"actor": {"reference": practitioner}, "status": "accepted"},
        ],
    }
    r = await client.post("/Appointment", json=body)
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


# --- $find ----------------------------------------------------------------------------


async def test_find_whole_day(client: httpx.AsyncClient) -> None:
    day = next_weekday()
    proposals = await find(client, practitioner=CHEN, start=at(day, "00:00"), end=at(day, "23:59"))
    expected = [f"{h:02d}:{m:02d}" for h in range(9, 17) for m in (0, 30)]
    assert starts(proposals) == expected  # 09:00 … 16:30, in order
    for p in proposals:
        assert p["resourceType"] == "Appointment"
        assert p["status"] == "proposed"
        start, end = instant(p["start"]), instant(p["end"])
        assert end - start == timedelta(minutes=30)  # 30 minutes by default
        assert p["minutesDuration"] == 30
        assert start.date() == day
        assert p["slot"] == [{"reference": slot_ref(day, start.strftime("%H:%M"))}]
        assert [a["actor"]["reference"] for a in p["participant"]] == [CHEN]

    # A bare end date includes that whole day; a bare practitioner id works too.
    same = await find(
        client, practitioner="demo-canonical-prac-chen", start=day.isoformat(), end=day.isoformat()
    )
    assert starts(same) == expected


async def test_find_stays_inside_the_range(client: httpx.AsyncClient) -> None:
    day = next_weekday()
    proposals = await find(client, practitioner=CHEN, start=at(day, "10:00"), end=at(day, "12:00"))
    assert starts(proposals) == ["10:00", "10:30", "11:00", "11:30"]
    low, high = instant(at(day, "10:00")), instant(at(day, "12:00"))
    for p in proposals:
        assert low <= instant(p["start"]) < instant(p["end"]) <= high

    week = await find(
        client,
        practitioner=CHEN,
        start=day.isoformat(),
        end=(day + timedelta(days=6)).isoformat(),
    )
    weekdays = [
        day + timedelta(days=i) for i in range(7) if (day + timedelta(days=i)).weekday() < 5
    ]
    assert len(week) == 16 * len(weekdays)
    assert sorted({instant(p["start"]).date() for p in week}) == weekdays
    assert all("-chen-" in p["slot"][0]["reference"] for p in week)


async def test_find_defaults_to_the_coming_week(client: httpx.AsyncClient) -> None:
    before = datetime.now(UTC)
    proposals = await find(client, practitioner=CHEN)
    assert proposals
    for p in proposals:
        start = instant(p["start"])
        assert start >= before - timedelta(minutes=1)  # nothing in the past
        assert start < before + timedelta(days=7, minutes=1)


@pytest.mark.parametrize(
    ("bookings", "expected"),
    [
        ([], ["10:00", "10:30", "11:00", "11:30"]),
        ([("10:00", "10:30", CHEN, "booked")], ["10:30", "11:00", "11:30"]),
        ([("10:00", "10:30", CHEN, "cancelled")], ["10:00", "10:30", "11:00", "11:30"]),
        ([("10:00", "10:30", PATEL, "booked")], ["10:00", "10:30", "11:00", "11:30"]),
        ([("11:00", "12:00", CHEN, "booked")], ["10:00", "10:30"]),  # holds two slots
        ([("10:00", "11:00", CHEN, "arrived")], ["11:00", "11:30"]),
        (
            [("10:00", "10:30", CHEN, "booked"), ("11:00", "11:30", CHEN, "cancelled")],
            ["10:30", "11:00", "11:30"],
        ),
    ],
)
async def test_find_skips_booked_time(
    client: httpx.AsyncClient, bookings: list[tuple[str, str, str, str]], expected: list[str]
) -> None:
    day = next_weekday()
    for start, end, who, status in bookings:
        await book(client, day, start, end, who, status)
    proposals = await find(client, practitioner=CHEN, start=at(day, "10:00"), end=at(day, "12:00"))
    assert starts(proposals) == expected


async def test_find_frees_time_again(client: httpx.AsyncClient) -> None:
    day = next_weekday()
    window = {"practitioner": CHEN, "start": at(day, "10:00"), "end": at(day, "11:00")}
    appt = await book(client, day, "10:00", "10:30")
    assert starts(await find(client, **window)) == ["10:30"]
    # Cancelling the appointment gives the time back…
    r = await client.patch(
        f"/Appointment/{appt}",
        content=b'[{"op": "replace", "path": "/status", "value": "cancelled"}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert starts(await find(client, **window)) == ["10:00", "10:30"]
    # …and so does deleting one.
    other = await book(client, day, "10:30", "11:00")
    assert starts(await find(client, **window)) == ["10:00"]
    assert (await client.delete(f"/Appointment/{other}")).status_code == 204
    assert starts(await find(client, **window)) == ["10:00", "10:30"]


async def test_find_only_offers_free_slots(client: httpx.AsyncClient) -> None:
    day = next_weekday()
    ref = slot_ref(day, "10:30")
    slot = (await client.get(f"/{ref}")).json()
    assert slot["status"] == "free"
    r = await client.put(f"/{ref}", json={**slot, "status": "busy"})
    assert r.status_code == 200, r.text
    proposals = await find(client, practitioner=CHEN, start=at(day, "10:00"), end=at(day, "12:00"))
    assert starts(proposals) == ["10:00", "11:00", "11:30"]


@pytest.mark.parametrize(
    ("duration", "bookings", "expected"),
    [
        (60, [], [("10:00", 2), ("10:30", 2), ("11:00", 2)]),
        (60, [("10:30", "11:00")], [("11:00", 2)]),
        (90, [], [("10:00", 3), ("10:30", 3)]),
        (120, [], [("10:00", 4)]),
        (120, [("11:30", "12:00")], []),
        (45, [], [("10:00", 2), ("10:30", 2), ("11:00", 2)]),
    ],
)
async def test_find_longer_durations_combine_slots(
    client: httpx.AsyncClient,
    duration: int,
    bookings: list[tuple[str, str]],
    expected: list[tuple[str, int]],
) -> None:
    day = next_weekday()
    for start, end in bookings:
        await book(client, day, start, end)
    proposals = await find(
        client,
        practitioner=CHEN,
        start=at(day, "10:00"),
        end=at(day, "12:00"),
        duration=str(duration),
    )
    assert [(s, len(p["slot"])) for s, p in zip(starts(proposals), proposals, strict=True)] == (
        expected
    )
    for p in proposals:
        begins, ends = instant(p["start"]), instant(p["end"])
        assert ends - begins == timedelta(minutes=duration)
        assert p["minutesDuration"] == duration
        # The slots are consecutive and begin at the proposal's begins.
        first = begins.strftime("%H:%M")
        assert p["slot"][0]["reference"] == slot_ref(day, first)
        refs = [s["reference"] for s in p["slot"]]
        wanted = [
            slot_ref(day, (begins + timedelta(minutes=30 * i)).strftime("%H:%M"))
            for i in range(len(refs))
        ]
        assert refs == wanted


async def test_find_with_post_parameters(client: httpx.AsyncClient) -> None:
    day = next_weekday()
    await book(client, day, "10:30", "11:00")
    body = {
        "resourceType": "Parameters",
        "parameter": [
            {"name": "practitioner", "valueReference": {"reference": CHEN}},
            {"name": "start", "valueDateTime": at(day, "10:00")},
            {"name": "end", "valueDateTime": at(day, "12:00")},
            {"name": "duration", "valueInteger": 60},
        ],
    }
    r = await client.post(
        "/Appointment/$find", json=body, headers={"Content-Type": "application/fhir+json"}
    )
    assert r.status_code == 200, r.text
    proposals = [e["resource"] for e in r.json()["entry"]]
    assert starts(proposals) == ["11:00"]
    assert proposals[0]["minutesDuration"] == 60
    get = await find(
        client, practitioner=CHEN, start=at(day, "10:00"), end=at(day, "12:00"), duration="60"
    )
    assert [(p["start"], p["end"], p["slot"]) for p in get] == [
        (p["start"], p["end"], p["slot"]) for p in proposals
    ]

    # Without a duration: 30 minutes.
    short = {**body, "parameter": body["parameter"][:3]}
    r = await client.post("/Appointment/$find", json=short)
    assert r.status_code == 200, r.text
    assert starts([e["resource"] for e in r.json()["entry"]]) == ["10:00", "11:00", "11:30"]


@pytest.mark.parametrize(
    ("params", "status", "named"),
    [
        ({"start": "2026-12-01", "end": "2026-12-02"}, 400, "practitioner"),
        ({"practitioner": "Practitioner/nobody-here"}, 404, "Practitioner/nobody-here"),
        ({"practitioner": "nobody-here"}, 404, "nobody-here"),
        ({"practitioner": "Patient/demo-canonical-prac-chen"}, 400, "practitioner"),
        (
            {"practitioner": CHEN, "start": "2026-12-10T10:00:00Z", "end": "2026-12-10T09:00:00Z"},
            400,
            "end",
        ),
        ({"practitioner": CHEN, "start": "2026-12-10", "end": "2026-12-09"}, 400, "end"),
        ({"practitioner": CHEN, "start": "next tuesday"}, 400, "start"),
        ({"practitioner": CHEN, "end": "2026-02-30"}, 400, "end"),
        ({"practitioner": CHEN, "duration": "an hour"}, 400, "duration"),
        ({"practitioner": CHEN, "duration": "0"}, 400, "duration"),
        ({"practitioner": CHEN, "start": "2026-01-01", "end": "2026-12-31"}, 400, "end"),
    ],
)
async def test_find_errors(
    client: httpx.AsyncClient, params: dict[str, str], status: int, named: str
) -> None:
    r = await client.get("/Appointment/$find", params=params)
    assert r.status_code == status, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    text = " ".join(
        [i.get("diagnostics", "") for i in outcome["issue"]]
        + [e for i in outcome["issue"] for e in i.get("expression", [])]
    )
    assert named in text, outcome


async def test_find_deleted_practitioner_is_404(client: httpx.AsyncClient) -> None:
    r = await client.put(
        "/Practitioner/short-lived",
        json={"resourceType": "Practitioner", "id": "short-lived", "name": [{"family": "Brief"}]},
    )
    assert r.status_code == 201
    found = await find(client, practitioner="Practitioner/short-lived")
    assert found == []  # known, but no schedule
    assert (await client.delete("/Practitioner/short-lived")).status_code == 204
    r = await client.get("/Appointment/$find", params={"practitioner": "Practitioner/short-lived"})
    assert r.status_code == 404


async def test_find_needs_a_key(tenant_server: str) -> None:
    async with httpx.AsyncClient(base_url=tenant_server) as anon:
        r = await anon.get("/api/fhir/r4/Appointment/$find", params={"practitioner": CHEN})
        assert r.status_code == 401


# --- eligibility ----------------------------------------------------------------------


@pytest.fixture
async def api(tenant: TenantHandle) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers, timeout=30) as c:
        yield c


async def check(api: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await api.post("/api/eligibility/$check", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert set(answer) == {"eligible", "coverage", "reason"}
    assert isinstance(answer["reason"], str) and answer["reason"]
    return answer


async def new_patient(client: httpx.AsyncClient, family: str = "Covered") -> str:
    r = await client.post(
        "/Patient", json={"resourceType": "Patient", "name": [{"family": family}]}
    )
    assert r.status_code == 201
    pid: str = r.json()["id"]
    return pid


def coverage_body(
    pid: str,
    *,
    status: str = "active",
    period: dict[str, str] | None = None,
    services: list[str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Coverage",
        "status": status,
        "beneficiary": {"reference": f"Patient/{pid}"},
        "payor": [{"reference": "Organization/demo-canonical-org", "display": "Acme Health"}],
    }
    if period is not None:
        body["period"] = period
    if services is not None:
        body["costToBeneficiary"] = [
            {
                "type": {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/coverage-copay-type",
                            "code": code,
                        }
                    ]
                },
                "valueMoney": {"value": 20, "currency": "USD"},
            }
            for code in services
        ]
    return body


async def new_coverage(client: httpx.AsyncClient, pid: str, **kwargs: Any) -> str:
    r = await client.post("/Coverage", json=coverage_body(pid, **kwargs))
    assert r.status_code == 201, r.text
    cid: str = r.json()["id"]
    return cid


YEAR_2026 = {"start": "2026-01-01", "end": "2026-12-31"}


@pytest.mark.parametrize(
    ("coverage", "request_extra", "eligible", "reason_mentions"),
    [
        # active, the date inside the period
        ({"period": YEAR_2026}, {"date": "2026-06-15"}, True, ["active", "Acme Health"]),
        ({"period": YEAR_2026}, {"date": "2026-01-01"}, True, []),  # first day
        ({"period": YEAR_2026}, {"date": "2026-12-31"}, True, []),  # last day
        ({}, {"date": "2031-02-03"}, True, []),  # no period: always
        ({"period": {"start": "2026-01-01"}}, {"date": "2040-01-01"}, True, []),  # open end
        # not active
        (
            {"period": YEAR_2026, "status": "cancelled"},
            {"date": "2026-06-15"},
            False,
            ["cancelled"],
        ),
        ({"period": YEAR_2026, "status": "draft"}, {"date": "2026-06-15"}, False, ["draft"]),
        # outside the period
        ({"period": YEAR_2026}, {"date": "2027-01-01"}, False, ["2026-12-31"]),
        ({"period": YEAR_2026}, {"date": "2025-12-31"}, False, ["2026-01-01"]),
        # service types listed in costToBeneficiary
        (
            {"period": YEAR_2026, "services": ["gpvisit", "spvisit"]},
            {"date": "2026-06-15", "serviceType": "gpvisit"},
            True,
            [],
        ),
        (
            {"period": YEAR_2026, "services": ["gpvisit"]},
            {"date": "2026-06-15", "serviceType": "emergency"},
            False,
            ["emergency"],
        ),
        (
            {"period": YEAR_2026, "services": ["gpvisit"]},
            {"date": "2026-06-15"},  # no service type asked: covered
            True,
            [],
        ),
        (
            {"period": YEAR_2026},  # no restriction listed: every service
            {"date": "2026-06-15", "serviceType": "emergency"},
            True,
            [],
        ),
    ],
)
@pytest.mark.parametrize("patient_form", ["bare", "reference"])
async def test_eligibility(
    client: httpx.AsyncClient,
    api: httpx.AsyncClient,
    coverage: dict[str, Any],
    request_extra: dict[str, str],
    eligible: bool,
    reason_mentions: list[str],
    patient_form: str,
) -> None:
    pid = await new_patient(client)
    cid = await new_coverage(client, pid, **coverage)
    patient = pid if patient_form == "bare" else f"Patient/{pid}"
    answer = await check(api, {"patient": patient, **request_extra})
    assert answer["eligible"] is eligible, answer
    if eligible:
        assert answer["coverage"] == f"Coverage/{cid}"
    else:
        assert answer["coverage"] in (None, f"Coverage/{cid}")
    for text in reason_mentions:
        assert text in answer["reason"], answer


async def test_eligibility_picks_the_coverage_that_applies(
    client: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    pid = await new_patient(client)
    other = await new_patient(client, "Neighbour")
    await new_coverage(client, other, period=YEAR_2026)  # someone else's
    await new_coverage(client, pid, status="cancelled", period=YEAR_2026)
    await new_coverage(client, pid, period={"start": "2025-01-01", "end": "2025-12-31"})
    good = await new_coverage(client, pid, period=YEAR_2026)
    answer = await check(api, {"patient": pid, "date": "2026-03-01"})
    assert answer["eligible"] is True
    assert answer["coverage"] == f"Coverage/{good}"
    answer = await check(api, {"patient": pid, "date": "2025-03-01"})
    assert answer["eligible"] is True
    assert answer["coverage"] != f"Coverage/{good}"
    answer = await check(api, {"patient": pid, "date": "2024-03-01"})
    assert answer["eligible"] is False


async def test_eligibility_follows_changes(
    client: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    pid = await new_patient(client)
    cid = await new_coverage(client, pid, period=YEAR_2026)
    assert (await check(api, {"patient": pid, "date": "2026-05-05"}))["eligible"] is True
    stored = (await client.get(f"/Coverage/{cid}")).json()
    r = await client.put(f"/Coverage/{cid}", json={**stored, "status": "cancelled"})
    assert r.status_code == 200
    answer = await check(api, {"patient": pid, "date": "2026-05-05"})
    assert answer["eligible"] is False
    assert "cancelled" in answer["reason"]
    assert (await client.delete(f"/Coverage/{cid}")).status_code == 204
    answer = await check(api, {"patient": pid, "date": "2026-05-05"})
    assert answer == {
        "eligible": False,
        "coverage": None,
        "reason": answer["reason"],
    }


async def test_eligibility_without_coverage(
    client: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    pid = await new_patient(client)
    answer = await check(api, {"patient": f"Patient/{pid}", "date": "2026-06-15"})
    assert answer["eligible"] is False
    assert answer["coverage"] is None
    assert "Coverage" in answer["reason"]


async def test_eligibility_unknown_patient(api: httpx.AsyncClient) -> None:
    for patient in ("no-such-patient", "Patient/no-such-patient"):
        r = await api.post(
            "/api/eligibility/$check", json={"patient": patient, "date": "2026-06-15"}
        )
        assert r.status_code == 404, r.text
        assert "no-such-patient" in r.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"patient": "PID"}, "date"),
        ({"patient": "PID", "date": "2026-13-01"}, "date"),
        ({"patient": "PID", "date": "soon"}, "date"),
        ({"date": "2026-06-15"}, "patient"),
        ({"patient": "Practitioner/demo-canonical-prac-chen", "date": "2026-06-15"}, "patient"),
        ({"patient": "", "date": "2026-06-15"}, "patient"),
    ],
)
async def test_eligibility_bad_body(
    client: httpx.AsyncClient, api: httpx.AsyncClient, body: dict[str, str], field: str
) -> None:
    pid = await new_patient(client)
    if body.get("patient") == "PID":
        body = {**body, "patient": pid}
    r = await api.post("/api/eligibility/$check", json=body)
    assert r.status_code == 422, r.text
    problem = r.json()
    paths = [e.get("path") for e in problem.get("errors", [])]
    assert field in paths, problem


async def test_eligibility_body_that_is_not_json(api: httpx.AsyncClient) -> None:
    r = await api.post(
        "/api/eligibility/$check", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer usk_not-a-real-key"}])
async def test_eligibility_needs_a_key(
    tenant: TenantHandle, client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    pid = await new_patient(client)
    async with httpx.AsyncClient(base_url=tenant.server, headers=headers) as anon:
        r = await anon.post("/api/eligibility/$check", json={"patient": pid, "date": "2026-06-15"})
        assert r.status_code == 401


async def test_eligibility_is_per_tenant(
    client: httpx.AsyncClient, api: httpx.AsyncClient, db: Any, server_url: str
) -> None:
    from tests.conftest import make_tenant

    pid = await new_patient(client)
    await new_coverage(client, pid, period=YEAR_2026)
    other = await make_tenant(db, server_url, prefix="other")
    async with httpx.AsyncClient(base_url=other.server, headers=other.headers) as c:
        r = await c.post("/api/eligibility/$check", json={"patient": pid, "date": "2026-06-15"})
        assert r.status_code == 404  # another tenant's patient does not exist here
