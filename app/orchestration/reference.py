"""A reference run: start a run of the scenario, replay its oracle through the app's
own HTTP stack and grade it final. One composition for the REST route and the console's
*Run reference solution* button."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from app.llm.client import LlmClient
from app.orchestration import oracle
from app.orchestration.check import Target
from app.runs import service as runs_service
from app.runs.errors import RunNotLive
from app.scenarios.service import LoadedScenario

LABEL = "reference-run"


async def reference_run(
    target: Target,
    loaded: LoadedScenario,
    *,
    mode: str | None,
    variant: str | None,
    llm: LlmClient | None,
    flush_trace: Callable[[], Awaitable[None]],
) -> runs_service.RunRow:
    """The ended run (graded final). `flush_trace` makes this process's buffered calls
    visible before grading; `llm` grades rubric expectations (None: they are not judged,
    and a bonus check not judged is neither a pass nor a failure)."""
    async with target.scopes.transaction() as tx:
        run = await runs_service.start_run(
            tx,
            target.tenant_id,
            runs_service.StartRequest(loaded.scenario.id, mode, variant, LABEL, None),
            limits=target.limits,
            root_url=target.root,
        )
    try:
        await oracle.replay(
            target.app, target.root, target.authorization, run, loaded.scenario.oracle
        )
    except Exception:
        # Leave no run live; one that ended meanwhile (its deadline) needs nothing.
        with contextlib.suppress(RunNotLive):
            async with target.scopes.transaction() as tx:
                await runs_service.cancel_run(tx, target.tenant_id, run.id)
        raise
    await flush_trace()
    return await runs_service.grade_run(
        target.scopes, target.tenant_id, run.id, final=True, llm=llm
    )
