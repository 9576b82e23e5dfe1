"""The FHIR write statement as the server sends it.

The FHIR store sits below the features whose tables its one write statement also
writes, so it imports none of them: this module composes the statement from the store's
own rows and the owners' parts — run ownership and the live-run mark (runs), the usage
counter (tenants), the webhook outbox (webhooks) — and the callers that build a
`FhirContext` (the FHIR routes, a run's setup and stimulus, the simulated patient, the
canonical directory through its callers) hand it in. It lives in runs, the lowest layer
that sees all three owners.
"""

from __future__ import annotations

from app.fhir.repository import WriteStatement, write_statement
from app.runs.repository import RUN_OWNING_REFS, TOUCH_LIVE_RUNS
from app.tenants.repository import COUNT_WRITES
from app.webhooks.repository import OUTBOX

FHIR_WRITES: WriteStatement = write_statement(
    run_owner=RUN_OWNING_REFS, parts=(COUNT_WRITES, TOUCH_LIVE_RUNS, OUTBOX)
)
