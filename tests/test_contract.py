"""The response models of `app.contract` against real answers of the test server: every
answer parses into its model and dumps back to the very same JSON (no field lost,
renamed, added or turned from null into absent), the client parses into them and
refuses an answer that does not fit, and the package imports nothing of the server."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter

from app.contract import evals as ce
from app.contract import runs as cr
from app.contract import scenarios as cs
from app.evals import harness
from tests.conftest import TenantHandle
from tests.evals.test_evals import WORKFLOW, api_client, run_eval
from tests.threaded_server import ThreadedServer, free_port

RUN: TypeAdapter[cr.RunView] = TypeAdapter(cr.RunView)


def same_json(adapter: TypeAdapter[Any], body: Any) -> Any:
    """Parse `body` into the model and check its dump is `body` again."""
    parsed = adapter.validate_python(body)
    assert adapter.dump_python(parsed, mode="json", by_alias=True) == body
    return parsed


def test_the_contract_imports_nothing_else_of_app() -> None:
    code = (
        "import sys, app.contract.runs, app.contract.evals, app.contract.scenarios\n"
        "print(sorted(m for m in sys.modules if m.startswith('app.')"
        " and not m.startswith('app.contract')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


async def test_run_views_round_trip(tenant: TenantHandle) -> None:
    async with api_client(tenant) as client:
        started = await client.post("/runs", json={"scenarioId": WORKFLOW[0], "label": "c"})
        assert started.status_code == 201, started.text
        live = same_json(TypeAdapter(cr.LiveRunView), started.json())
        assert "brief" not in started.json()  # workflow mode: absent, not null
        assert started.json()["variant"] is None  # null, not absent
        assert live.progress.required_total is None
        got = (await client.get(f"/runs/{live.id}")).json()
        assert isinstance(same_json(RUN, got), cr.LiveRunView)
        cancelled = (await client.post(f"/runs/{live.id}/cancel")).json()
        final = same_json(TypeAdapter(cr.FinalRunView), cancelled)
        assert final.note == "cancelled before a verdict" and final.expectations == []
        assert "simulatedPatient" not in cancelled
        listed = (await client.get("/runs", params={"label": "c"})).json()
        assert [r.id for r in same_json(TypeAdapter(cr.RunList), listed).runs] == [live.id]
        same_json(TypeAdapter(cr.RunTrace), (await client.get(f"/runs/{live.id}/trace")).json())
        removed = (await client.delete(f"/runs/{live.id}/data")).json()
        same_json(TypeAdapter(cr.RunDataRemoved), removed)
        scenarios = (await client.get("/scenarios")).json()
        assert len(same_json(TypeAdapter(cs.ScenarioList), scenarios).scenarios) > 3
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as http:
        usage = (await http.get("/api/usage")).json()
    assert same_json(TypeAdapter(cr.Usage), usage).resets_at.tzinfo is not None
    assert usage["resetsAt"].endswith("T00:00:00Z")


async def test_eval_views_and_compare_round_trip(tenant: TenantHandle) -> None:
    baseline = await run_eval(tenant, "contract base", correct=True, repeats=1)
    current = await run_eval(tenant, "contract broken", correct=False, repeats=1)
    async with api_client(tenant) as client:
        view = (await client.get(f"/evals/{current}")).json()
        parsed = same_json(TypeAdapter(ce.EvalView), view)
        assert parsed.summary is not None and parsed.summary.pass_rate.passes == 0
        assert parsed.summary.most_failed_checks  # the broken automation's failed checks
        for item in parsed.runs:
            assert item.run_id is not None and item.passed is False
            run = (await client.get(f"/runs/{item.run_id}")).json()
            final = same_json(RUN, run)
            assert isinstance(final, cr.FinalRunView) and final.expectations
        listed = (await client.get("/evals", params={"labelPrefix": "contract"})).json()
        assert {e.id for e in same_json(TypeAdapter(ce.EvalList), listed).evals} == {
            baseline,
            current,
        }
        compared = await client.get(f"/evals/{current}/compare", params={"baseline": baseline})
        comparison = same_json(TypeAdapter(ce.Comparison), compared.json())
        assert {c.label for c in comparison.cells} == {"regressed"}
        assert 0 <= comparison.test.p_regress_plain <= 1
    # The client's view of the same answers.
    connection = harness.Connection(tenant.server, tenant.key)
    async with harness.EvalApi(connection) as api:
        assert (await api.get_eval(current)).model_dump() == parsed.model_dump()
        assert (await api.compare(current, baseline, 0.05)) == comparison


def _answers(body: dict[str, Any]) -> FastAPI:
    app = FastAPI()

    @app.get("/api/testing/evals/{eval_id}")
    async def get_eval(eval_id: str) -> dict[str, Any]:
        return body

    return app


async def test_the_client_refuses_an_answer_that_does_not_fit() -> None:
    port = free_port()
    server = ThreadedServer(_answers({"id": "eval_x", "status": "done"}), port, "odd server")
    server.start()
    try:
        api = harness.EvalApi(harness.Connection(f"http://127.0.0.1:{port}", "key"))
        async with api:
            with pytest.raises(harness.UnexpectedAnswer) as caught:
                await api.get_eval("eval_x")
    finally:
        server.stop()
    message = str(caught.value)
    assert "GET /evals/eval_x" in message and "label: Field required" in message
    assert "status: Input should be" in message
