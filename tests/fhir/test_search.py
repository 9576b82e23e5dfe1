"""Search over real HTTP: every parameter kind, result parameters, paging and errors.

Read-only tables run against one seeded tenant per module (`seeded`); tests that write get
a fresh tenant of their own (`client`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, time, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from app.db import Database
from app.fhir import service
from app.runs.fhir_writes import FHIR_WRITES
from tests.conftest import TenantHandle, make_tenant

LOINC = "http://loinc.org"
MRN = "http://hospital.example.org/mrn"
CHEN = "Practitioner/demo-canonical-prac-chen"
PATEL = "Practitioner/demo-canonical-prac-patel"
MAIN_CLINIC = "Location/demo-canonical-loc-main"


def patient(
    family: str,
    given: list[str],
    *,
    birth: str | None = None,
    gender: str = "unknown",
    mrn: str | None = None,
    extra_names: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Patient",
        "name": [{"family": family, "given": given}, *extra_names],
        "gender": gender,
    }
    if birth is not None:
        body["birthDate"] = birth
    if mrn is not None:
        body["identifier"] = [{"system": MRN, "value": mrn}]
    return body


def appointment(
    start: str, end: str, *actors: str, status: str = "booked", **extra: Any
) -> dict[str, Any]:
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": start,
        "end": end,
        "participant": [{"actor": {"reference": a}, "status": "accepted"} for a in actors],
        **extra,
    }


def observation(
    code: str, subject: str, system: str | None = LOINC, **extra: Any
) -> dict[str, Any]:
    coding: dict[str, str] = {"code": code}
    if system is not None:
        coding["system"] = system
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [coding]},
        "subject": {"reference": subject},
        **extra,
    }


# Every resource of the seeded tenant, by client id (PUT) so expectations read plainly.
SEED: dict[str, dict[str, Any]] = {
    # --- patients: names, genders, identifiers, birth dates -------------------------------
    "Patient/rivera": patient(
        "Rivera", ["Alex"], birth="1985-04-11", gender="female", mrn="MRN-001"
    ),
    "Patient/riviera": patient(
        "Riviera", ["Maria", "Elena"], birth="1985-04-12", gender="female", mrn="MRN-002"
    ),
    "Patient/nunez": patient("Núñez", ["Zoë"], birth="1985-04-13", gender="female", mrn="MRN-003"),
    "Patient/smith": patient("Smith", ["John", "Paul"], birth="2010-06-01", gender="male"),
    "Patient/smithers": patient(
        "Smithers",
        ["Alexander"],
        gender="male",
        extra_names=[{"use": "nickname", "text": "Sonny"}],
    ),
    # --- appointments at instants (2026-03-02/03) ----------------------------------------
    "Appointment/a1": appointment(
        "2026-03-02T09:00:00Z", "2026-03-02T09:30:00Z", "Patient/rivera", CHEN, MAIN_CLINIC
    ),
    "Appointment/a2": appointment(
        "2026-03-02T14:00:00Z",
        "2026-03-02T14:30:00Z",
        "Patient/smith",
        PATEL,
        status="cancelled",
    ),
    "Appointment/a3": appointment(
        "2026-03-03T09:00:00Z",
        "2026-03-03T09:30:00Z",
        "Patient/rivera",
        PATEL,
        "PractitionerRole/demo-canonical-role-chen",
    ),
    # --- observations: codes and effective[x] -------------------------------------------
    "Observation/o1": observation(
        "2339-0",
        "Patient/rivera",
        effectivePeriod={"start": "2026-01-10", "end": "2026-01-20"},
    ),
    "Observation/o2": observation(
        "8867-4",
        "Patient/smith",
        effectiveDateTime="2026-01-15T08:00:00Z",
    ),
    "Observation/o3": observation(
        "2339-0",
        "Group/g1",
        system="http://example.org/local-codes",
        effectivePeriod={"start": "2026-02-01"},
    ),
    "Observation/o4": observation("xyz", "Patient/nunez", system=None),
}


async def put_all(client: httpx.AsyncClient, resources: dict[str, dict[str, Any]]) -> None:
    for ref, body in resources.items():
        rtype, rid = ref.split("/")
        r = await client.put(f"/{ref}", json={**body, "id": rid})
        assert r.status_code in (200, 201), (ref, r.text)
        assert r.json()["resourceType"] == rtype


async def put_as_setup(db: Database, handle: TenantHandle, resources: dict[str, Any]) -> None:
    """Write as a run's setup does: past bookings are history a client may not book now
    (the scheduling rules), but a chart has them."""
    ctx = service.FhirContext(
        tenant_id=handle.id, base_url="", source="setup", write_statement=FHIR_WRITES
    )
    async with db.pool.acquire() as conn:
        for ref, body in resources.items():
            rtype, rid = ref.split("/")
            result = await service.update(ctx, conn, rtype, rid, {**body, "id": rid})
            assert result.status in (200, 201), ref


@pytest.fixture(scope="module")
async def seeded_tenant(db: Database, server_url: str) -> TenantHandle:
    handle = await make_tenant(db, server_url, prefix="search")
    async with httpx.AsyncClient(
        base_url=handle.fhir_base, headers=handle.headers, timeout=30
    ) as c:
        await put_all(c, {k: v for k, v in SEED.items() if not k.startswith("Appointment/")})
    await put_as_setup(db, handle, {k: v for k, v in SEED.items() if k.startswith("Appointment/")})
    return handle


@pytest.fixture
async def seeded(seeded_tenant: TenantHandle) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the module's read-only seeded tenant (a connection of its own per test)."""
    async with httpx.AsyncClient(
        base_url=seeded_tenant.fhir_base, headers=seeded_tenant.headers, timeout=30
    ) as c:
        yield c


async def search(
    client: httpx.AsyncClient, resource_type: str, params: Any = None, **kwargs: Any
) -> dict[str, Any]:
    r = await client.get(f"/{resource_type}", params=params, **kwargs)
    assert r.status_code == 200, (str(r.request.url), r.text)
    assert r.headers["content-type"].startswith("application/fhir+json")
    bundle: dict[str, Any] = r.json()
    assert bundle["resourceType"] == "Bundle"
    assert bundle["type"] == "searchset"
    return bundle


def matches(bundle: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["resource"] for e in bundle.get("entry", []) if e["search"]["mode"] == "match"]


def match_ids(bundle: dict[str, Any]) -> set[str]:
    return {r["id"] for r in matches(bundle)}


def included(bundle: dict[str, Any]) -> set[str]:
    return {
        f"{e['resource']['resourceType']}/{e['resource']['id']}"
        for e in bundle.get("entry", [])
        if e["search"]["mode"] == "include"
    }


def link(bundle: dict[str, Any], relation: str) -> str | None:
    for item in bundle.get("link", []):
        if item["relation"] == relation:
            url: str = item["url"]
            return url
    return None


# --- strings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("family=Rivera", {"rivera"}),
        ("family=riv", {"rivera", "riviera"}),
        ("family=RIVI", {"riviera"}),
        ("family=nunez", {"nunez"}),  # accents are ignored…
        ("family=NÚÑ", {"nunez"}),  # …either way round
        ("family=smith", {"smith", "smithers"}),  # prefix match
        ("family=mith", set()),  # but not a substring
        ("given=alex", {"rivera", "smithers"}),
        ("given=zoe", {"nunez"}),
        ("given=elena", {"riviera"}),  # any given name
        ("name=paul", {"smith"}),
        ("name=sonny", {"smithers"}),  # HumanName.text
        ("name=maria", {"riviera"}),
        ("family:exact=Rivera", {"rivera"}),
        ("family:exact=rivera", set()),  # :exact is case-sensitive
        ("family:exact=Riv", set()),  # and whole-value
        ("family:exact=Núñez", {"nunez"}),
        ("family:exact=Nunez", set()),
        ("given:exact=Alex", {"rivera"}),
    ],
)
async def test_string_params(seeded: httpx.AsyncClient, query: str, expected: set[str]) -> None:
    bundle = await search(seeded, "Patient", dict(parse_qsl(query)))
    assert match_ids(bundle) == expected
    assert bundle["total"] == len(expected)


# --- tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "query", "expected"),
    [
        ("Patient", "gender=female", {"rivera", "riviera", "nunez"}),
        ("Patient", "gender=male", {"smith", "smithers"}),
        ("Patient", "gender:not=female", {"smith", "smithers"}),
        ("Patient", "gender=female,male", {"rivera", "riviera", "nunez", "smith", "smithers"}),
        ("Patient", f"identifier={MRN}|MRN-002", {"riviera"}),
        ("Patient", "identifier=MRN-002", {"riviera"}),
        ("Patient", f"identifier={MRN}|", {"rivera", "riviera", "nunez"}),
        ("Patient", "identifier=http://other.example.org|MRN-002", set()),
        ("Patient", "identifier=MRN-00", set()),  # tokens match whole codes only
        ("Observation", "code=2339-0", {"o1", "o3"}),
        ("Observation", f"code={LOINC}|2339-0", {"o1"}),
        ("Observation", "code=http://example.org/local-codes|2339-0", {"o3"}),
        ("Observation", f"code={LOINC}|", {"o1", "o2"}),
        ("Observation", "code=|xyz", {"o4"}),  # explicitly no system
        ("Observation", "code=|2339-0", set()),  # 2339-0 always has a system
        ("Observation", "code=xyz", {"o4"}),
        ("Observation", "code:not=2339-0", {"o2", "o4"}),
        ("Observation", f"code:not={LOINC}|2339-0", {"o2", "o3", "o4"}),
        ("Observation", f"code={LOINC}|8867-4,xyz", {"o2", "o4"}),
        ("Appointment", "status=booked", {"a1", "a3"}),
        ("Appointment", "status:not=booked", {"a2"}),
    ],
)
async def test_token_params(
    seeded: httpx.AsyncClient, resource_type: str, query: str, expected: set[str]
) -> None:
    bundle = await search(seeded, resource_type, dict(parse_qsl(query)))
    assert match_ids(bundle) == expected


# --- references -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "query", "expected"),
    [
        ("Observation", "patient=Patient/rivera", {"o1"}),
        ("Observation", "patient=rivera", {"o1"}),
        ("Observation", "patient=rivera,smith", {"o1", "o2"}),
        ("Observation", "patient=g1", set()),  # a Group subject is not a patient
        ("Observation", "subject=Group/g1", {"o3"}),
        ("Observation", "subject=Patient/smith", {"o2"}),
        ("Observation", "subject=g1", {"o3"}),
        ("Appointment", "patient=Patient/rivera", {"a1", "a3"}),
        ("Appointment", "patient=smith", {"a2"}),
        ("Appointment", f"actor={CHEN}", {"a1"}),
        ("Appointment", "actor=Patient/smith", {"a2"}),
        ("Appointment", "actor=demo-canonical-loc-main", {"a1"}),
        ("Appointment", "actor=PractitionerRole/demo-canonical-role-chen", {"a3"}),
        ("Appointment", f"practitioner={CHEN}", {"a1"}),
        ("Appointment", "practitioner=demo-canonical-prac-patel", {"a2", "a3"}),
        ("Appointment", f"practitioner={CHEN},{PATEL}", {"a1", "a2", "a3"}),
        # `practitioner` only ever matches Practitioner participants.
        ("Appointment", "practitioner=Patient/rivera", set()),
        ("Appointment", "practitioner=rivera", set()),
        ("Appointment", "practitioner=PractitionerRole/demo-canonical-role-chen", set()),
        ("Appointment", f"location={MAIN_CLINIC}", {"a1"}),
        ("Appointment", "location=Patient/rivera", set()),
    ],
)
async def test_reference_params(
    seeded: httpx.AsyncClient, resource_type: str, query: str, expected: set[str]
) -> None:
    bundle = await search(seeded, resource_type, dict(parse_qsl(query)))
    assert match_ids(bundle) == expected


# --- dates ----------------------------------------------------------------------------

# Birth dates (date precision): rivera 1985-04-11, riviera 1985-04-12, nunez 1985-04-13,
# smith 2010-06-01; smithers has none and never matches a date condition.
BIRTHDATE_CASES = [
    ("1985-04-12", {"riviera"}),
    ("eq1985-04-12", {"riviera"}),
    ("ne1985-04-12", {"rivera", "nunez", "smith"}),
    ("lt1985-04-12", {"rivera"}),
    ("le1985-04-12", {"rivera", "riviera"}),
    ("gt1985-04-12", {"nunez", "smith"}),
    ("ge1985-04-12", {"riviera", "nunez", "smith"}),
    ("sa1985-04-12", {"nunez", "smith"}),
    ("eb1985-04-12", {"rivera"}),
    ("ap1985-04-12", {"rivera", "riviera", "nunez"}),
    ("1985", {"rivera", "riviera", "nunez"}),
    ("eq1985-04", {"rivera", "riviera", "nunez"}),
    ("ne1985", {"smith"}),
    ("ge2000", {"smith"}),
    ("lt1985-04-11", set()),
    ("gt2010-06-01", set()),
]


@pytest.mark.parametrize(("value", "expected"), BIRTHDATE_CASES)
async def test_birthdate_prefixes(
    seeded: httpx.AsyncClient, value: str, expected: set[str]
) -> None:
    bundle = await search(seeded, "Patient", {"birthdate": value})
    assert match_ids(bundle) == expected


# Appointment.start instants: a1 2026-03-02T09:00:00Z, a2 2026-03-02T14:00:00Z,
# a3 2026-03-03T09:00:00Z (to the second).
APPOINTMENT_DATE_CASES = [
    ("2026-03-02", {"a1", "a2"}),
    ("ne2026-03-02", {"a3"}),
    ("2026-03-02T09:00", {"a1"}),
    ("2026-03-02T09:00:00Z", {"a1"}),
    ("lt2026-03-02T12:00:00Z", {"a1"}),
    ("le2026-03-02T09:00", {"a1"}),
    ("ge2026-03-02T12:00:00Z", {"a2", "a3"}),
    ("ge2026-03-02T14:00:00Z", {"a2", "a3"}),
    ("gt2026-03-02T14:00:00Z", {"a3"}),
    ("gt2026-03-02T13:59:59Z", {"a2", "a3"}),
    ("sa2026-03-02", {"a3"}),
    ("eb2026-03-03", {"a1", "a2"}),
    ("ge2026-03-02T15:00:00+01:00", {"a2", "a3"}),  # 14:00Z
    ("lt2026-03-02T10:00:00+01:00", set()),  # 09:00Z: a1 starts exactly then
    ("le2026-03-02T10:00:00+01:00", {"a1"}),
    ("2026-03", {"a1", "a2", "a3"}),
    ("2026-04", set()),
]


@pytest.mark.parametrize(("value", "expected"), APPOINTMENT_DATE_CASES)
async def test_appointment_date_instants(
    seeded: httpx.AsyncClient, value: str, expected: set[str]
) -> None:
    bundle = await search(seeded, "Appointment", {"date": value})
    assert match_ids(bundle) == expected


# Observation.effective[x]: o1 a period 2026-01-10..2026-01-20 (whole days), o2 the
# instant 2026-01-15T08:00:00Z, o3 a period from 2026-02-01 with no end, o4 none.
OBSERVATION_DATE_CASES = [
    ("2026-01", {"o1", "o2"}),
    ("2026-01-15", {"o2"}),  # the period is not inside that day
    ("ge2026-01-18", {"o1", "o3"}),
    ("lt2026-01-12", {"o1"}),
    ("gt2026-03-01", {"o3"}),  # open-ended
    ("sa2026-01-09", {"o1", "o2", "o3"}),
    ("sa2026-01-10", {"o2", "o3"}),
    ("eb2026-01-21", {"o1", "o2"}),
    ("eb2026-01-20", {"o2"}),
    ("eb2026-01-10", set()),
    ("ne2026-01", {"o3"}),
    ("2026", {"o1", "o2"}),
]


@pytest.mark.parametrize(("value", "expected"), OBSERVATION_DATE_CASES)
async def test_observation_date_periods(
    seeded: httpx.AsyncClient, value: str, expected: set[str]
) -> None:
    bundle = await search(seeded, "Observation", {"date": value})
    assert match_ids(bundle) == expected


async def test_last_updated(client: httpx.AsyncClient) -> None:
    first = (await client.post("/Patient", json=patient("Early", ["A"]))).json()
    await asyncio.sleep(0.05)
    second = (await client.post("/Patient", json=patient("Late", ["B"]))).json()
    t1, t2 = first["meta"]["lastUpdated"], second["meta"]["lastUpdated"]
    assert t1 < t2
    today = t2[:10]

    cases = [
        (f"ge{t2}", {second["id"]}),
        (f"lt{t2}", {first["id"]}),
        (f"le{t1}", {first["id"]}),
        (f"gt{t1}", {second["id"]}),
        (today, {first["id"], second["id"]}),
        (f"ge{today}", {first["id"], second["id"]}),
        (f"lt{today}", set()),
        ("gt2999-01-01", set()),
    ]
    for value, expected in cases:
        bundle = await search(client, "Patient", {"_lastUpdated": value})
        assert match_ids(bundle) == expected, value
    # AND of two bounds
    bundle = await search(
        client, "Patient", [("_lastUpdated", f"ge{t1}"), ("_lastUpdated", f"lt{t2}")]
    )
    assert match_ids(bundle) == {first["id"]}


# --- AND / OR, _id ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "params", "expected"),
    [
        ("Patient", [("family", "riv,smith")], {"rivera", "riviera", "smith", "smithers"}),
        ("Patient", [("family", "riv"), ("given", "alex")], {"rivera"}),
        ("Patient", [("family", "riv"), ("family", "rivi")], {"riviera"}),
        ("Patient", [("given", "alex,zoe"), ("gender", "female")], {"rivera", "nunez"}),
        ("Patient", [("birthdate", "ge1985-04-12"), ("birthdate", "lt2000")], {"riviera", "nunez"}),
        ("Patient", [("gender", "female"), ("gender", "male")], set()),
        (
            "Appointment",
            [("patient", "rivera"), ("practitioner", "demo-canonical-prac-patel")],
            {"a3"},
        ),
        ("Appointment", [("date", "2026-03-02"), ("status", "booked")], {"a1"}),
        ("Observation", [("code", "2339-0"), ("patient", "rivera,nunez")], {"o1"}),
        ("Patient", [("_id", "rivera,smith,no-such-id")], {"rivera", "smith"}),
        ("Patient", [("_id", "rivera,smith"), ("gender", "male")], {"smith"}),
        ("Patient", [("_id", "rivera"), ("_id", "smith")], set()),
        ("Patient", [("_id", "a1")], set()),  # an Appointment's id
    ],
)
async def test_and_or(
    seeded: httpx.AsyncClient,
    resource_type: str,
    params: list[tuple[str, str]],
    expected: set[str],
) -> None:
    bundle = await search(seeded, resource_type, params)
    assert match_ids(bundle) == expected
    assert bundle["total"] == len(expected)


# --- _sort ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("family", ["nunez", "rivera", "riviera", "smith", "smithers"]),
        ("-family", ["smithers", "smith", "riviera", "rivera", "nunez"]),
        # Missing values sort last either way.
        ("birthdate", ["rivera", "riviera", "nunez", "smith", "smithers"]),
        ("-birthdate", ["smith", "nunez", "riviera", "rivera", "smithers"]),
        ("gender,-birthdate", ["nunez", "riviera", "rivera", "smith", "smithers"]),
    ],
)
async def test_sort(seeded: httpx.AsyncClient, sort: str, expected: list[str]) -> None:
    bundle = await search(seeded, "Patient", {"_sort": sort})
    assert [r["id"] for r in matches(bundle)] == expected


async def test_sort_by_last_updated(client: httpx.AsyncClient) -> None:
    made = []
    for family in ("Bravo", "Alpha", "Charlie"):
        made.append((await client.post("/Patient", json=patient(family, ["X"]))).json()["id"])
        await asyncio.sleep(0.01)
    asc = await search(client, "Patient", {"_sort": "_lastUpdated"})
    assert [r["id"] for r in matches(asc)] == made
    desc = await search(client, "Patient", {"_sort": "-_lastUpdated"})
    assert [r["id"] for r in matches(desc)] == made[::-1]
    # An update moves a resource to the newest end (one that changes something: the same
    # body again makes no version).
    body = (await client.get(f"/Patient/{made[0]}")).json()
    body["birthDate"] = "1970-01-01"
    assert (await client.put(f"/Patient/{made[0]}", json=body)).status_code == 200
    desc = await search(client, "Patient", {"_sort": "-_lastUpdated"})
    assert [r["id"] for r in matches(desc)] == [made[0], made[2], made[1]]


# --- _count, total, paging --------------------------------------------------------------


async def test_count_and_total(seeded: httpx.AsyncClient) -> None:
    default = await search(seeded, "Slot")
    assert len(matches(default)) == 20  # the default page size
    slots_total = default["total"]
    assert slots_total > 500  # 2 weeks of the canonical directory's free Slots

    two = await search(seeded, "Patient", {"_count": "2", "_sort": "family"})
    assert two["total"] == 5
    assert [r["id"] for r in matches(two)] == ["nunez", "rivera"]
    assert link(two, "next") is not None

    everything = await search(seeded, "Patient", {"_count": "50"})
    assert len(matches(everything)) == 5
    assert link(everything, "next") is None

    capped = await search(seeded, "Slot", {"_count": "1000"})
    assert len(matches(capped)) == 500  # at most 500 per page
    assert capped["total"] == slots_total
    assert link(capped, "next") is not None

    zero = await search(seeded, "Patient", {"_count": "0"})
    assert zero["total"] == 5
    assert "entry" not in zero


async def _create_many(client: httpx.AsyncClient, n: int) -> set[str]:
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> str:
        async with sem:
            r = await client.post("/Patient", json=patient(f"Pager{i:03d}", ["Page"]))
            assert r.status_code == 201, r.text
            rid: str = r.json()["id"]
            return rid

    return set(await asyncio.gather(*(one(i) for i in range(n))))


async def _walk(
    client: httpx.AsyncClient, url: str, relation: str, base: str, *, check_self: bool = False
) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """Follow `relation` links from `url` to the end: the pages' resources, the last Bundle."""
    pages: list[list[dict[str, Any]]] = []
    bundle: dict[str, Any] = {}
    next_url: str | None = url
    while next_url is not None:
        assert next_url.startswith(base + "/Patient?"), next_url  # absolute links
        assert len(pages) < 50, "paging does not end"
        r = await client.get(next_url)
        assert r.status_code == 200, (next_url, r.text)
        bundle = r.json()
        assert bundle["total"] == 123
        pages.append(matches(bundle))
        if check_self:  # the self link names this very page
            self_url = link(bundle, "self")
            assert self_url is not None and self_url.startswith(base + "/Patient?")
            again = await client.get(self_url)
            assert [r["id"] for r in matches(again.json())] == [r["id"] for r in pages[-1]]
        next_url = link(bundle, relation)
    return pages, bundle


def _ids(pages: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [[r["id"] for r in page] for page in pages]


@pytest.mark.parametrize("sort", [None, "family", "-_lastUpdated"])
async def test_paging_next_and_previous(
    client: httpx.AsyncClient, tenant: TenantHandle, sort: str | None
) -> None:
    created = await _create_many(client, 123)
    params = {"_count": "10", "given": "page"}
    if sort:
        params["_sort"] = sort
    first = await search(client, "Patient", params)
    assert first["total"] == 123
    assert link(first, "previous") is None
    self_url = link(first, "self")
    assert self_url is not None
    assert self_url.startswith(tenant.fhir_base + "/Patient?")
    assert ("given", "page") in parse_qsl(urlsplit(self_url).query)

    next_url = link(first, "next")
    assert next_url is not None
    assert ("given", "page") in parse_qsl(urlsplit(next_url).query)
    pages, last = await _walk(client, next_url, "next", tenant.fhir_base, check_self=True)
    pages.insert(0, matches(first))
    resources = [r for page in pages for r in page]
    seen = [r["id"] for r in resources]
    assert len(seen) == 123  # every resource exactly once…
    assert set(seen) == created  # …and nothing else
    assert [len(p) for p in pages] == [10] * 12 + [3]
    if sort == "family":
        assert [r["name"][0]["family"] for r in resources] == [f"Pager{i:03d}" for i in range(123)]
    elif sort == "-_lastUpdated":
        stamps = [r["meta"]["lastUpdated"] for r in resources]
        assert stamps == sorted(stamps, reverse=True)

    # …and back again from the last page, through `previous` links.
    prev_url = link(last, "previous")
    assert prev_url is not None
    back, start = await _walk(client, prev_url, "previous", tenant.fhir_base)
    assert _ids(back) == _ids(pages[-2::-1])
    assert link(start, "previous") is None


async def test_summary_count_and_elements(seeded: httpx.AsyncClient) -> None:
    counted = await search(seeded, "Patient", {"_summary": "count", "gender": "female"})
    assert counted["total"] == 3
    assert "entry" not in counted

    slim = await search(seeded, "Patient", {"_elements": "birthDate,gender", "_id": "rivera"})
    (resource,) = matches(slim)
    assert resource["resourceType"] == "Patient"
    assert resource["id"] == "rivera"
    assert resource["birthDate"] == "1985-04-11"
    assert resource["gender"] == "female"
    assert "name" not in resource and "identifier" not in resource
    assert "SUBSETTED" in [t.get("code") for t in resource["meta"].get("tag", [])]


# --- _include / _revinclude -------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "params", "expected_matches", "expected_included"),
    [
        (
            "Appointment",
            {"_id": "a1", "_include": "Appointment:patient"},
            {"a1"},
            {"Patient/rivera"},
        ),
        (
            "Appointment",
            {"_id": "a1,a2", "_include": "Appointment:patient"},
            {"a1", "a2"},
            {"Patient/rivera", "Patient/smith"},
        ),
        (
            "Appointment",
            {"_id": "a1,a3", "_include": "Appointment:actor:Practitioner"},
            {"a1", "a3"},
            {CHEN, PATEL},
        ),
        (
            "Appointment",
            {"_id": "a1", "_include": "Appointment:actor"},
            {"a1"},
            {"Patient/rivera", CHEN, MAIN_CLINIC},
        ),
        (
            "Patient",
            {"_id": "rivera", "_revinclude": "Appointment:patient"},
            {"rivera"},
            {"Appointment/a1", "Appointment/a3"},
        ),
        (
            "Patient",
            {"_id": "smithers", "_revinclude": "Appointment:patient"},
            {"smithers"},
            set(),
        ),
        (
            "Observation",
            {"code": "2339-0", "_include": "Observation:patient"},
            {"o1", "o3"},
            {"Patient/rivera"},  # o3's subject is a Group
        ),
    ],
)
async def test_include_and_revinclude(
    seeded: httpx.AsyncClient,
    resource_type: str,
    params: dict[str, str],
    expected_matches: set[str],
    expected_included: set[str],
) -> None:
    bundle = await search(seeded, resource_type, params)
    assert match_ids(bundle) == expected_matches
    assert included(bundle) == expected_included
    assert bundle["total"] == len(expected_matches)  # included resources are not counted
    for entry in bundle["entry"]:
        resource = entry["resource"]
        assert entry["fullUrl"].endswith(f"/{resource['resourceType']}/{resource['id']}")
        assert entry["fullUrl"].startswith("http")


async def test_include_both_ways_in_one_request(seeded: httpx.AsyncClient) -> None:
    bundle = await search(
        seeded,
        "Appointment",
        [
            ("_id", "a3"),
            ("_include", "Appointment:patient"),
            ("_include", "Appointment:practitioner"),
        ],
    )
    assert match_ids(bundle) == {"a3"}
    assert included(bundle) == {"Patient/rivera", PATEL}


# --- POST _search -----------------------------------------------------------------------


async def test_post_search(seeded: httpx.AsyncClient) -> None:
    r = await seeded.post("/Patient/_search", data={"family": "riv", "given": "maria"})
    assert r.status_code == 200, r.text
    assert match_ids(r.json()) == {"riviera"}
    # Parameters in the URL and in the body are combined.
    r = await seeded.post("/Patient/_search?gender=female", data={"birthdate": "1985-04"})
    assert r.status_code == 200, r.text
    assert match_ids(r.json()) == {"rivera", "riviera", "nunez"}
    r = await seeded.post("/Patient/_search?gender=male", data={"birthdate": "1985-04"})
    assert r.status_code == 200, r.text
    assert r.json()["total"] == 0
    r = await seeded.post("/Patient/_search", data={"bogus": "1"})
    assert r.status_code == 400
    assert r.json()["resourceType"] == "OperationOutcome"


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_type", "query", "named"),
    [
        ("Patient", "bogus=1", "bogus"),
        ("Patient", "code=abc", "code"),  # a parameter of another type
        ("Patient", "family=riv&frobnicate=yes", "frobnicate"),
        ("Appointment", "slot-status=free", "slot-status"),
        ("Patient", "birthdate:exact=1985-04-12", "birthdate:exact"),  # unsupported modifier
        ("Basic", "code=xyz", "code"),
    ],
)
async def test_unknown_parameter(
    seeded: httpx.AsyncClient, resource_type: str, query: str, named: str
) -> None:
    r = await seeded.get(f"/{resource_type}?{query}")
    assert r.status_code == 400, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert any(named.split(":")[0] in i["diagnostics"] for i in outcome["issue"]), outcome
    assert any(i.get("expression") == [named] for i in outcome["issue"]), outcome

    lenient = await seeded.get(f"/{resource_type}?{query}", headers={"Prefer": "handling=lenient"})
    assert lenient.status_code == 200, lenient.text
    assert lenient.json()["type"] == "searchset"


async def test_lenient_still_applies_known_parameters(seeded: httpx.AsyncClient) -> None:
    bundle = await search(
        seeded, "Patient", {"bogus": "1", "family": "riv"}, headers={"Prefer": "handling=lenient"}
    )
    assert match_ids(bundle) == {"rivera", "riviera"}
    # A bad value of a known parameter is still an error.
    r = await seeded.get(
        "/Patient", params={"birthdate": "someday"}, headers={"Prefer": "handling=lenient"}
    )
    assert r.status_code == 400


@pytest.mark.parametrize(
    ("resource_type", "params", "named"),
    [
        ("Patient", {"birthdate": "1985-13-45"}, "birthdate"),
        ("Patient", {"birthdate": "yesterday"}, "birthdate"),
        ("Patient", {"birthdate": "xx1985"}, "birthdate"),
        ("Appointment", {"date": "2026-03-02T25:00:00Z"}, "date"),
        ("Patient", {"_lastUpdated": "not-a-date"}, "_lastUpdated"),
        ("Patient", {"_count": "abc"}, "_count"),
        ("Patient", {"_count": "-1"}, "_count"),
        ("Patient", {"_sort": "bogus"}, "_sort"),
        ("Appointment", {"_include": "Appointment:status"}, "_include"),
        ("Appointment", {"_include": "nonsense"}, "_include"),
        ("Observation", {"patient": "http://"}, "patient"),
    ],
)
async def test_bad_values(
    seeded: httpx.AsyncClient, resource_type: str, params: dict[str, str], named: str
) -> None:
    r = await seeded.get(f"/{resource_type}", params=params)
    assert r.status_code == 400, r.text
    outcome = r.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert any(named in i["diagnostics"] for i in outcome["issue"]), outcome


async def test_unknown_type_is_404(seeded: httpx.AsyncClient) -> None:
    r = await seeded.get("/Frobnicator", params={"_id": "x"})
    assert r.status_code == 404
    assert r.json()["resourceType"] == "OperationOutcome"


# --- consistency ------------------------------------------------------------------------


async def test_writes_are_visible_to_the_next_search(client: httpx.AsyncClient) -> None:
    assert (await search(client, "Patient", {"family": "okonkwo"}))["total"] == 0
    created = await client.post("/Patient", json=patient("Okonkwo", ["Ada"], gender="female"))
    pid = created.json()["id"]
    assert match_ids(await search(client, "Patient", {"family": "okonkwo"})) == {pid}

    body = {**created.json(), "name": [{"family": "Mbeki", "given": ["Ada"]}]}
    assert (await client.put(f"/Patient/{pid}", json=body)).status_code == 200
    assert (await search(client, "Patient", {"family": "okonkwo"}))["total"] == 0
    assert match_ids(await search(client, "Patient", {"family": "mbeki"})) == {pid}

    patched = await client.patch(
        f"/Patient/{pid}",
        content=b'[{"op": "replace", "path": "/gender", "value": "male"}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert patched.status_code == 200
    assert match_ids(await search(client, "Patient", {"gender": "male"})) == {pid}
    assert (await search(client, "Patient", {"gender": "female"}))["total"] == 0

    assert (await client.delete(f"/Patient/{pid}")).status_code == 204
    assert (await search(client, "Patient", {"family": "mbeki"}))["total"] == 0


def _free(hhmm: str) -> tuple[str, str]:
    """A free 30-minute time of Dr. Chen's on the next weekday (what a client may book)."""
    day = datetime.now(UTC).date() + timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    start = datetime.combine(day, time.fromisoformat(hhmm), UTC)
    end = start + timedelta(minutes=30)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


FREE_0900, FREE_1000 = _free("09:00"), _free("10:00")


async def test_deleted_resources_never_appear(client: httpx.AsyncClient) -> None:
    keep = (await client.post("/Patient", json=patient("Keep", ["K"]))).json()["id"]
    gone = (await client.post("/Patient", json=patient("Gone", ["G"]))).json()["id"]
    appt_ok = await client.post(
        "/Appointment",
        json=appointment(*FREE_0900, f"Patient/{gone}", CHEN),
    )
    appt_gone = await client.post(
        "/Appointment",
        json=appointment(*FREE_1000, f"Patient/{keep}", CHEN),
    )
    a_ok, a_gone = appt_ok.json()["id"], appt_gone.json()["id"]
    assert (await client.delete(f"/Patient/{gone}")).status_code == 204
    assert (await client.delete(f"/Appointment/{a_gone}")).status_code == 204

    assert match_ids(await search(client, "Patient")) == {keep}
    assert (await search(client, "Patient", {"_id": gone}))["total"] == 0
    assert (await search(client, "Patient", {"family": "gone"}))["total"] == 0
    assert (await search(client, "Patient", {"_summary": "count"}))["total"] == 1
    today = (await client.get(f"/Patient/{keep}")).json()["meta"]["lastUpdated"][:10]
    assert (await search(client, "Patient", {"_lastUpdated": today}))["total"] == 1
    assert match_ids(await search(client, "Appointment", {"actor": CHEN})) == {a_ok}
    assert (await search(client, "Appointment", {"date": FREE_0900[0][:10]}))["total"] == 1
    # Neither through _include nor _revinclude.
    inc = await search(client, "Appointment", {"_id": a_ok, "_include": "Appointment:patient"})
    assert included(inc) == set()
    rev = await search(client, "Patient", {"_id": keep, "_revinclude": "Appointment:patient"})
    assert included(rev) == set()


async def test_one_type_never_returns_another(client: httpx.AsyncClient) -> None:
    # The same id under three types.
    for rtype, body in [
        ("Patient", patient("Same", ["Id"])),
        ("Basic", {"resourceType": "Basic", "code": {"text": "note"}}),
        ("Device", {"resourceType": "Device", "status": "active"}),
    ]:
        r = await client.put(f"/{rtype}/shared-id", json={**body, "id": "shared-id"})
        assert r.status_code == 201, r.text
    today = r.json()["meta"]["lastUpdated"][:10]
    for rtype in ("Patient", "Basic", "Device"):
        for params in ({"_id": "shared-id"}, {"_lastUpdated": today}, {}):
            bundle = await search(client, rtype, params)
            assert {e["resource"]["resourceType"] for e in bundle["entry"]} == {rtype}
            assert bundle["total"] == 1
            assert bundle["entry"][0]["fullUrl"].endswith(f"/{rtype}/shared-id")
    practitioners = await search(client, "Practitioner", {"_count": "100"})
    assert {r["resourceType"] for r in matches(practitioners)} == {"Practitioner"}
    assert practitioners["total"] == 5  # the canonical directory's clinicians


async def test_other_types_by_id_and_tag(client: httpx.AsyncClient) -> None:
    basic = await client.post("/Basic", json={"resourceType": "Basic", "code": {"text": "memo"}})
    device = await client.post(
        "/Device",
        json={
            "resourceType": "Device",
            "status": "active",
            "meta": {"tag": [{"system": "http://example.org/tags", "code": "demo"}]},
        },
    )
    other = await client.post("/Device", json={"resourceType": "Device", "status": "inactive"})
    b_id, d_id, o_id = basic.json()["id"], device.json()["id"], other.json()["id"]

    assert match_ids(await search(client, "Basic", {"_id": b_id})) == {b_id}
    assert (await search(client, "Basic", {"_id": d_id}))["total"] == 0
    assert match_ids(await search(client, "Device", {"_id": f"{d_id},{o_id}"})) == {d_id, o_id}
    assert match_ids(await search(client, "Device", {"_id": f"{d_id},{b_id}"})) == {d_id}
    tagged = await search(client, "Device", {"_tag": "http://example.org/tags|demo"})
    assert match_ids(tagged) == {d_id}
    newest = await search(client, "Device", {"_sort": "-_lastUpdated", "_count": "1"})
    assert match_ids(newest) == {o_id}


@pytest.mark.parametrize("resource_type", ["Basic", "Device", "Patient"])
async def test_other_types_by_last_updated(client: httpx.AsyncClient, resource_type: str) -> None:
    bodies = {
        "Basic": {"resourceType": "Basic", "code": {"text": "memo"}},
        "Device": {"resourceType": "Device", "status": "active"},
        "Patient": patient("Stamp", ["S"]),
    }
    older = (await client.post(f"/{resource_type}", json=bodies[resource_type])).json()
    await asyncio.sleep(0.05)
    newer = (await client.post(f"/{resource_type}", json=bodies[resource_type])).json()
    stamp = newer["meta"]["lastUpdated"]
    today = stamp[:10]

    cases = [
        (today, {older["id"], newer["id"]}),
        (f"lt{stamp}", {older["id"]}),
        (f"ge{stamp}", {newer["id"]}),
        (f"gt{today}", set()),
        (f"le{today}", {older["id"], newer["id"]}),
    ]
    for value, expected in cases:
        bundle = await search(client, resource_type, {"_lastUpdated": value})
        assert match_ids(bundle) == expected, value


@pytest.mark.parametrize("sort", [None, "start"])
async def test_self_link_of_a_later_page(seeded: httpx.AsyncClient, sort: str | None) -> None:
    params = {"_count": "3", "status": "free"}
    if sort:
        params["_sort"] = sort
    first = await search(seeded, "Slot", params)
    next_url = link(first, "next")
    assert next_url is not None
    second = (await seeded.get(next_url)).json()
    self_url = link(second, "self")
    assert self_url is not None
    items = parse_qsl(urlsplit(self_url).query)
    names = [k for k, _ in items]
    assert len(names) == len(set(names)), self_url  # each parameter once
    assert ("status", "free") in items
    again = await search(seeded, "Slot", items)
    assert match_ids(again) == match_ids(second)
    assert match_ids(second).isdisjoint(match_ids(first))
