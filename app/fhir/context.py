"""What every FHIR interaction runs in: the `FhirContext` (the tenant, the base URL for
links, the run view if any, who writes, the write statement, the booking rules' mode),
and what a write answers (`WriteResult`, with its HTTP headers).

Every resource reference an interaction touches is appended to `ctx.touched` for the
request trace.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.db import Conn
from app.fhir import booking_rules, repository, writes
from app.fhir.search.sql import Visibility

RUN_TAG = writes.RUN_TAG
SIM_TAG = writes.SIM_TAG


@dataclass
class FhirContext:
    tenant_id: uuid.UUID
    base_url: str
    run_id: str | None = None
    touched: list[str] = field(default_factory=list)
    # Set by writes: the runs whose resources changed (to regrade them soon).
    changed_runs: set[str] = field(default_factory=set)
    # Who writes when not the client ("setup", "stimulus", "sim"), and whether the
    # writes count toward the daily quota (setup writes of built-in scenarios do not).
    source: str | None = None
    count_usage: bool = True
    writes: int = 0
    # The API root the client used (for links in webhook payloads), and the webhook
    # deliveries the writes created (enqueued after commit).
    root_url: str = ""
    deliveries: list[str] = field(default_factory=list)
    # The statement writes go through, composed with the parts of the features whose
    # tables it also writes (fhir imports none of them): `app.runs.fhir_writes`.
    write_statement: repository.WriteStatement = field(kw_only=True)
    # The scheduling rules (`app.fhir.booking_rules`): "lenient" in the view of a run whose
    # scenario says so; on the tenant base, `lenient_lookup` tells whether a refused
    # booking belongs to such a run.
    scheduling: str = "strict"
    lenient_lookup: booking_rules.LenientLookup | None = None

    @property
    def visibility(self) -> Visibility:
        return Visibility(self.run_id)

    def touch(self, *refs: str) -> None:
        self.touched.extend(refs)

    async def write(self, conn: Conn, writes: list[repository.PreparedWrite]) -> None:
        outcome = await repository.write_versions(
            conn,
            self.tenant_id,
            writes,
            self.write_statement,
            count_usage=self.count_usage,
            fhir_root=self.root_url,
        )
        self.changed_runs.update(outcome.runs)
        self.deliveries.extend(outcome.deliveries)
        self.writes += len(writes)


@dataclass(slots=True)
class WriteResult:
    status: int  # 200 or 201
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    json: str | None

    def headers(self, base_url: str) -> dict[str, str]:
        return {
            "ETag": f'W/"{self.version_id}"',
            "Last-Modified": http_date(self.last_updated),
            "Location": f"{base_url}/{self.resource_type}/{self.id}/_history/{self.version_id}",
        }


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(moment: datetime) -> str:
    """RFC 9110's IMF-fixdate (what email.utils.format_datetime(usegmt=True) gives, at a
    fifth of its cost: it is on every read's and write's headers)."""
    m = moment.astimezone(UTC)
    return (
        f"{_WEEKDAYS[m.weekday()]}, {m.day:02d} {_MONTHS[m.month - 1]} {m.year:04d} "
        f"{m.hour:02d}:{m.minute:02d}:{m.second:02d} GMT"
    )
