"""The judge's case of flip attribution (issue 18), end to end: the runs are judged by a
model behind a local fake chat-completions server, through an API of the test's own
configured with that model ("judge-a" scores the rubric high, "judge-b" low).

A rubric is always bonus: it moves a run's score, never its pass, and a compare cell is
labelled by pass rates. So a judge change alone flips no cell (nothing to attribute, the
gate passes under either rule); and a cell that did flip was flipped by a check that
decides a pass, never by the judge, even when the judge changed too and the rubric's
outcomes moved with it: an agent regression stays the agent's, and the gate fails on it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from tests.client.test_ci_attribution import gate
from tests.conftest import TenantHandle
from tests.evals.test_attribution import CUSTOM, custom_scenario, import_scenario
from tests.evals.test_evals import api_client
from tests.llm.fake_llm import FakeLlm, LlmRequest
from tests.threaded_server import ThreadedServer, free_port

RUBRIC = "task-explains"  # results.critical-lab's bonus rubric on the Task it asks for
SCORES = {"judge-a": 0.9, "judge-b": 0.2}  # the rubric's threshold is 0.7


def _judgement(request: LlmRequest) -> dict[str, Any]:
    model = str(request.model)
    return {"score": SCORES[model], "reason": f"{model} read the task"}


@pytest.fixture
def judged(settings: Settings, fake_llm: FakeLlm, tenant: TenantHandle) -> Any:
    """`judged(model)`: the tenant, served by an API whose judge is `model` on the fake
    model server (its worker jobs go to the session's worker, as any API's do)."""
    fake_llm.responder = _judgement

    @contextlib.contextmanager
    def serve(model: str) -> Iterator[TenantHandle]:
        port = free_port()
        app = create_app(fake_llm.settings_for(settings, llm_model=model))
        server = ThreadedServer(app, port, f"the API judged by {model}")
        server.start()
        try:
            yield dataclasses.replace(tenant, server=f"http://127.0.0.1:{port}")
        finally:
            server.stop()

    return serve


async def _eval_of(tenant: TenantHandle, label: str) -> dict[str, Any]:
    async with api_client(tenant) as client:
        listed = (await client.get("/evals", params={"labelPrefix": label})).json()
        [found] = [e for e in listed["evals"] if e["label"] == label]
        view: dict[str, Any] = (await client.get(f"/evals/{found['id']}")).json()
    return view


async def _rubric_outcomes(tenant: TenantHandle, view: dict[str, Any]) -> list[Any]:
    """The rubric's outcome in each run of the eval (None: skipped, the run failed)."""
    outcomes = []
    async with api_client(tenant) as client:
        for run in view["runs"]:
            final = (await client.get(f"/runs/{run['runId']}")).json()
            [rubric] = [e for e in final["expectations"] if e["id"] == RUBRIC]
            outcomes.append(rubric["passed"])
    return outcomes


def _judges(view: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(j["engine"], j["model"]) for r in view["runs"] for j in r["provenance"]["judgeUsed"]}


async def _compare(tenant: TenantHandle, current: str, baseline: str) -> dict[str, Any]:
    async with api_client(tenant) as client:
        r = await client.get(f"/evals/{current}/compare", params={"baseline": baseline})
    assert r.status_code == 200, r.text
    compared: dict[str, Any] = r.json()
    return compared


async def test_a_judge_change_alone_moves_scores_and_flips_no_cell(
    tenant: TenantHandle, judged: Any
) -> None:
    document = custom_scenario("Critical potassium, judged by a model")
    await import_scenario(tenant, document)
    with judged("judge-a") as by_a:
        code, out = await gate(by_a, "main 1", CUSTOM, 3, document)
    assert code == 0, out
    with judged("judge-b") as by_b:
        code, out = await gate(by_b, "pr-j a", CUSTOM, 3, document)
        assert code == 0, out
        assert "ignored cell" not in out
        code, out = await gate(by_b, "pr-j b", CUSTOM, 3, document, "--gate-on", "all")
        assert code == 0, out
    old, new = await _eval_of(tenant, "main 1"), await _eval_of(tenant, "pr-j a")
    assert _judges(old) == {("llm", "judge-a")} and _judges(new) == {("llm", "judge-b")}
    assert await _rubric_outcomes(tenant, old) == [True] * 3
    assert await _rubric_outcomes(tenant, new) == [False] * 3
    assert {r["passed"] for r in old["runs"] + new["runs"]} == {True}  # the pass stands
    compared = await _compare(tenant, new["id"], old["id"])
    [cell] = compared["cells"]
    assert (cell["label"], cell["attribution"]) == ("same", None)
    assert sum(compared["flips"].values()) == 0


async def test_an_agent_regression_is_not_blamed_on_a_judge_change(
    tenant: TenantHandle, judged: Any
) -> None:
    """Two copies of the scenario; in each, the agent does the work in 4 of 5 runs, then
    in 1 of 5, while the judge changes from judge-a to judge-b. The check that decides a
    pass failed on both sides, so the only check whose outcome appeared or vanished is
    the (bonus) rubric, failed by judge-b in the one run that passed."""
    document = custom_scenario("Critical potassium, judged by a model")
    scenarios = [CUSTOM, f"{CUSTOM}-2"]
    for scenario_id in scenarios:
        await import_scenario(tenant, document | {"id": scenario_id})
    both = ",".join(scenarios)
    with judged("judge-a") as by_a:
        code, out = await gate(by_a, "main 1", both, 5, document, worked=4)
    assert code == 0, out
    with judged("judge-b") as by_b:
        code, out = await gate(by_b, "pr-k a", both, 5, document, worked=1)
        assert code == 1, out
        assert "rule: significant regression" in out and "ignored cell" not in out
        code, out = await gate(by_b, "pr-k b", both, 5, document, "--gate-on", "all", worked=1)
        assert code == 1, out
    old, new = await _eval_of(tenant, "main 1"), await _eval_of(tenant, "pr-k a")
    assert _judges(old) == {("llm", "judge-a")} and _judges(new) == {("llm", "judge-b")}
    assert sorted(await _rubric_outcomes(tenant, old), key=str) == [None] * 2 + [True] * 8
    assert sorted(await _rubric_outcomes(tenant, new), key=str) == [False] * 2 + [None] * 8
    compared = await _compare(tenant, new["id"], old["id"])
    assert [(c["label"], c["attribution"]) for c in compared["cells"]] == [
        ("regressed", "agent")
    ] * 2
    assert compared["flips"]["agent"] == 2 and compared["flips"]["judge"] == 0
