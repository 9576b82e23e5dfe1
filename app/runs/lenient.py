"""Which run a refused tenant-base booking belongs to, for the scheduling rules.

A run view's context carries its run's setting (`run.scheduling`, recorded at start
from the scenario). A write on the tenant base belongs to the run whose fixture ids it
references (docs/architecture.md "Run views"); the FHIR store asks this only when it would refuse
a booking, so passing writes cost nothing more.
"""

from __future__ import annotations

import uuid

from app.db import Conn
from app.fhir.booking_rules import LenientLookup
from app.runs import repository


def lenient_lookup(tenant_id: uuid.UUID) -> LenientLookup:
    async def belongs_to_lenient_run(conn: Conn, refs: list[str]) -> bool:
        return await repository.belongs_to_lenient_run(conn, tenant_id=tenant_id, refs=refs)

    return belongs_to_lenient_run
