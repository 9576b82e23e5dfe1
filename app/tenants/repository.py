"""The tenants feature's SQL."""

from __future__ import annotations

import random

from app.fhir.repository import WriteCall, WritePart

# --- Parts of the FHIR write statement ----------------------------------------------------
# The FHIR store writes every resource in one statement (`app.fhir.repository`); this is
# the usage counter's share of it, composed in by `app.runs.fhir_writes`.

# Concurrent writers of one tenant spread their usage increments over this many rows.
USAGE_SHARDS = 16


def _usage_args(call: WriteCall) -> tuple[object, ...]:
    return (call.now.date(), random.randrange(USAGE_SHARDS), call.count_usage)


# The writes count toward the tenant's daily quota (unless the caller says they do not).
COUNT_WRITES = WritePart(
    sql="""usage AS (
    INSERT INTO usage_counter AS u (tenant_id, day, shard, writes)
    SELECT $1, {day}::date, {shard}::smallint, count(*) FROM up
    HAVING {counted}::bool AND count(*) > 0
    ON CONFLICT (tenant_id, day, shard) DO UPDATE SET writes = u.writes + excluded.writes
)""",
    params=("day", "shard", "counted"),
    args=_usage_args,
)
