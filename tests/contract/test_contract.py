"""The response models of `understudy_client.contract` against real answers of the test
server: every answer parses into its model and dumps back to the very same JSON (no field lost,
renamed, added or turned from null into absent), the client parses into them and
refuses an answer that does not fit, and the package imports nothing of the server."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter

from tests.conftest import TenantHandle
from tests.evals.test_evals import WORKFLOW, api_client, run_eval
from tests.threaded_server import ThreadedServer, free_port
from understudy_client import harness
from understudy_client.contract import evals as ce
from understudy_client.contract import runs as cr
from understudy_client.contract import scenarios as cs

RUN: TypeAdapter[cr.RunView] = TypeAdapter(cr.RunView)


def same_json(adapter: TypeAdapter[Any], body: Any) -> Any:
    """Parse `body` into the model and check its dump is `body` again."""
    parsed = adapter.validate_python(body)
    assert adapter.dump_python(parsed, mode="json", by_alias=True) == body
    return parsed


class Declared:
    """The server's OpenAPI document: each answer must fit the schema declared for it."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.checked = 0

    @classmethod
    async def of(cls, tenant: TenantHandle) -> Declared:
        async with httpx.AsyncClient(base_url=tenant.server) as http:
            return cls((await http.get("/openapi.json")).json())

    def check(self, method: str, path: str, response: httpx.Response) -> Any:
        operation = self.document["paths"][path][method.lower()]
        declared = operation["responses"][str(response.status_code)]
        schema = declared["content"]["application/json"]["schema"]
        body = response.json()
        # Refs resolve against the document; `discriminator` is an annotation here.
        jsonschema.validate(body, {**schema, "components": self.document["components"]})
        self.checked += 1
        return body


def test_the_contract_imports_nothing_of_the_server() -> None:
    code = (
        "import sys\n"
        "import understudy_client.contract.runs, understudy_client.contract.evals\n"
        "import understudy_client.contract.scenarios\n"
        "print(sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


async def test_run_views_round_trip(tenant: TenantHandle) -> None:
    declared = await Declared.of(tenant)
    runs = "/api/testing/runs"
    one = runs + "/{run_id}"
    async with api_client(tenant) as client:
        started = await client.post("/runs", json={"scenarioId": WORKFLOW[0], "label": "c"})
        assert started.status_code == 201, started.text
        body = declared.check("POST", runs, started)
        live = same_json(TypeAdapter(cr.LiveRunView), body)
        assert "brief" not in body  # workflow mode: absent, not null
        assert body["variant"] is None  # null, not absent
        assert live.progress.required_total is None
        got = declared.check("GET", one, await client.get(f"/runs/{live.id}"))
        assert isinstance(same_json(RUN, got), cr.LiveRunView)
        ended = await client.post(f"/runs/{live.id}/cancel")
        cancelled = declared.check("POST", one + "/cancel", ended)
        final = same_json(TypeAdapter(cr.FinalRunView), cancelled)
        assert final.note == "cancelled before a verdict" and final.expectations == []
        assert "simulatedPatient" not in cancelled
        listed = declared.check("GET", runs, await client.get("/runs", params={"label": "c"}))
        assert [r.id for r in same_json(TypeAdapter(cr.RunList), listed).runs] == [live.id]
        trace = declared.check("GET", one + "/trace", await client.get(f"/runs/{live.id}/trace"))
        same_json(TypeAdapter(cr.RunTrace), trace)
        deleted = await client.delete(f"/runs/{live.id}/data")
        same_json(TypeAdapter(cr.RunDataRemoved), declared.check("DELETE", one + "/data", deleted))
        scenarios = declared.check("GET", "/api/testing/scenarios", await client.get("/scenarios"))
        assert len(same_json(TypeAdapter(cs.ScenarioList), scenarios).scenarios) > 3
    async with httpx.AsyncClient(base_url=tenant.server, headers=tenant.headers) as http:
        usage = declared.check("GET", "/api/usage", await http.get("/api/usage"))
    assert same_json(TypeAdapter(cr.Usage), usage).resets_at.tzinfo is not None
    assert usage["resetsAt"].endswith("T00:00:00Z")
    assert declared.checked == 8


async def test_eval_views_and_compare_round_trip(tenant: TenantHandle) -> None:
    baseline = await run_eval(tenant, "contract base", correct=True, repeats=1)
    current = await run_eval(tenant, "contract broken", correct=False, repeats=1)
    declared = await Declared.of(tenant)
    evals = "/api/testing/evals"
    async with api_client(tenant) as client:
        view = declared.check("GET", evals + "/{eval_id}", await client.get(f"/evals/{current}"))
        parsed = same_json(TypeAdapter(ce.EvalView), view)
        assert parsed.summary is not None and parsed.summary.pass_rate.passes == 0
        assert parsed.summary.most_failed_checks  # the broken automation's failed checks
        for item in parsed.runs:
            assert item.run_id is not None and item.passed is False
            got = await client.get(f"/runs/{item.run_id}")
            final = same_json(RUN, declared.check("GET", "/api/testing/runs/{run_id}", got))
            assert isinstance(final, cr.FinalRunView) and final.expectations
        got = await client.get("/evals", params={"labelPrefix": "contract"})
        listed = same_json(TypeAdapter(ce.EvalList), declared.check("GET", evals, got))
        assert {e.id for e in listed.evals} == {baseline, current}
        got = await client.get(f"/evals/{current}/compare", params={"baseline": baseline})
        compared = declared.check("GET", evals + "/{eval_id}/compare", got)
        comparison = same_json(TypeAdapter(ce.Comparison), compared)
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
