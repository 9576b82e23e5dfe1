"""The scenario check's text adversaries (`app.orchestration.text_adversaries`): from
what text-truth read in a reference solution's own words, near misses that must fail and
paraphrases that must pass — each caught by text-truth itself, not by a phrase list."""

from __future__ import annotations

import dataclasses

import pytest

from app.orchestration import check
from app.scenarios.service import builtin_scenarios
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.orchestration.test_check import check_target


@pytest.mark.parametrize(
    ("scenario_id", "kinds"),
    [
        (
            "scheduling.book-ask-time",
            {
                "text-zone",
                "text-time",
                "text-follow-up",
                "text-instruction",
                "text-claim",
                "text-care",
            },
        ),
        ("messaging.answer-from-chart", {"text-dose", "text-stopped-dose", "text-zone"}),
        ("results.normal-result-notify", {"text-value"}),
        ("coverage.lapsed-coverage-message", {"text-status"}),
    ],
)
async def test_text_mutants_fail_on_text_truth_and_paraphrases_pass(
    settings: Settings, tenant: TenantHandle, scenario_id: str, kinds: set[str]
) -> None:
    loaded = builtin_scenarios()[scenario_id]
    async with check_target(settings, tenant) as target:
        report = await check.check_scenario(target, loaded, personas=[None])
    variant = report.variants[0]
    worded = [m for m in variant.mutants if m.kind.startswith("text-")]
    assert kinds <= {m.kind for m in worded}, variant.generated
    for mutant in worded:
        assert "text-truth" in mutant.caught_by, mutant
    paraphrases = [r for r in variant.rewrites if r.kind.startswith("text-")]
    assert {r.kind for r in paraphrases} >= {"text-courtesy"}
    for rewrite in paraphrases:
        assert rewrite.broke == [], rewrite
    assert variant.generated.get("text-courtesy", 0) > 0


async def test_a_scenario_with_text_truth_off_gets_no_text_adversaries(
    settings: Settings, tenant: TenantHandle
) -> None:
    loaded = builtin_scenarios()["scheduling.book-ask-time"]
    document = loaded.scenario.model_copy(
        update={"strict": loaded.scenario.strict.model_copy(update={"text_off": "testing"})}
    )
    async with check_target(settings, tenant) as target:
        report = await check.check_scenario(
            target, dataclasses.replace(loaded, scenario=document), personas=[None]
        )
    assert not any(k.startswith("text-") for k in report.variants[0].generated)
