"""The shape of a search's date condition (app/fhir/search/sql.py), which decides what a
planner with poor statistics can do with it: when a key or the id finds the candidates,
each candidate's dates are probed by its own id (a scalar subquery, never a join); when
the dates alone narrow the search, their range drives it (`id IN (SELECT …)`). Their
results are the same: tests/fhir/test_search.py's date searches run both shapes."""

from __future__ import annotations

import uuid

from app.fhir.search.query import parse_search
from app.fhir.search.sql import compile_search

TENANT = uuid.UUID("00000000-0000-4000-8000-000000000001")


def _where(resource_type: str, query: str) -> str:
    items = [tuple(part.split("=", 1)) for part in query.split("&")]
    return compile_search(TENANT, parse_search(resource_type, items)).where  # type: ignore[arg-type]


PROBE = "(SELECT true FROM fhir_date d WHERE"
RANGE = "r.id IN (SELECT id FROM fhir_date"


def test_a_key_finds_the_candidates_and_the_dates_are_probed_per_candidate() -> None:
    for resource_type, query in [
        ("Slot", "schedule=Schedule/s1&status=free&start=ge2026-12-01"),
        ("Appointment", "patient=Patient/p1&date=ge2026-12-01&date=lt2026-12-08"),
        ("Appointment", "_id=a1&date=2026-12-01"),
    ]:
        where = _where(resource_type, query)
        assert PROBE in where and RANGE not in where, (query, where)
        assert "d.id = r.id" in where


def test_dates_alone_drive_through_their_range() -> None:
    for resource_type, query in [
        ("Appointment", "date=ge2026-12-01"),
        ("Slot", "status=free&start=ge2026-12-01"),  # a low-cardinality token drives nothing
        ("Appointment", "status:not=cancelled&date=ge2026-12-01"),  # nor does a negation
    ]:
        where = _where(resource_type, query)
        assert RANGE in where and PROBE not in where, (query, where)
