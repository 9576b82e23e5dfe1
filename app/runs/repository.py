"""The runs feature's SQL."""

from __future__ import annotations

from app.fhir.repository import WriteCall, WritePart

# --- Parts of the FHIR write statement ----------------------------------------------------
# The FHIR store writes every resource in one statement (`app.fhir.repository`); these are
# the runs tables' share of it, composed in by `app.runs.fhir_writes`.

# The run owning an entry written outside any run view: the run whose fixture holds the
# resource or one it references (`run_ref`). `{refs}` is the entry's text[] of references.
RUN_OWNING_REFS = """(
        SELECT rr.run_id FROM run_ref rr
        WHERE rr.tenant_id = $1 AND rr.ref = ANY({refs})
        LIMIT 1
    )"""


def _now(call: WriteCall) -> tuple[object, ...]:
    return (call.now,)


# A live run whose resources changed is marked (and regraded soon).
TOUCH_LIVE_RUNS = WritePart(
    sql="""touched AS (
    UPDATE run SET changed_at = {now}::timestamptz
    WHERE tenant_id = $1 AND status = 'live'
        AND id IN (SELECT DISTINCT owner FROM done WHERE owner IS NOT NULL)
)""",
    params=("now",),
    args=_now,
)
