"""Rubric judging as a run ends (`app.judges.service.judge_rubrics`): only a model decides
a rubric. Without one — none configured, or it was unavailable — the check is not judged
(passed None, left out of the run's score, the detail says why) and the heuristic's
reading is information in the note, never a verdict. With no text to read it is not
judged either, and no model is paid."""

from __future__ import annotations

from typing import Any

import httpx

from app.db import Database
from app.judges.service import judge_rubrics
from app.llm.client import LlmClient
from app.scenarios.schema import RubricExpectation
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.llm.fake_llm import FakeLlm
from understudy_client.contract.runs import Evidence, ExpectationResult, Verdict

CHEN = "Practitioner/demo-canonical-prac-chen"
SCENARIO: dict[str, Any] = {
    "id": "custom.judge-service",
    "title": "Answer the patient",
    "category": "messaging",
    "modes": ["agent"],
    "brief": "{{patient.name}} ({{patient.id}}) asked whether to fast before the blood test.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Reyes", "given": ["María"]}],
        }
    ],
    "expectations": [
        {
            "id": "answered",
            "type": "resource",
            "label": "A message to the patient",
            "resourceType": "Communication",
            "where": ["recipient.where(reference = 'Patient/' + %fixture.patient).exists()"],
        }
    ],
    "oracle": [
        {
            "method": "POST",
            "path": "/Communication",
            "body": {
                "resourceType": "Communication",
                "status": "completed",
                "recipient": [{"reference": "@patient"}],
                "payload": [{"contentString": "Sí, ayuno de 10 a 12 horas."}],
            },
        }
    ],
}
# Correct, in Spanish: the heuristic finds few of the (English) rubric's terms.
REPLY = "Hola María: sí, ayune de 10 a 12 horas antes del análisis. Puede beber agua."
RUBRIC = RubricExpectation.model_validate(
    {
        "id": "tone",
        "type": "rubric",
        "label": "Answers the fasting question",
        "rubric": "The reply says to fast for 10 to 12 hours and that plain water is fine.",
        "of": ["communications"],
    }
)


async def _run(tenant: TenantHandle, text: str | None) -> dict[str, Any]:
    """A live run of the scenario; `text`, when given, written to the patient."""
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=30
    ) as client:
        imported = await client.post("/scenarios", json=SCENARIO)
        assert imported.status_code in (200, 201), imported.text
        started = await client.post("/runs", json={"scenarioId": SCENARIO["id"]})
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    if text is not None:
        patient = run["fixture"]["patient"]
        message = {
            "resourceType": "Communication",
            "status": "completed",
            "subject": {"reference": patient},
            "recipient": [{"reference": patient}],
            "sender": {"reference": CHEN},
            "payload": [{"contentString": text}],
        }
        async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as fhir:
            written = await fhir.post(f"{run['fhirBase']}/Communication", json=message)
        assert written.status_code == 201, written.text
    return run


def _verdict() -> Verdict:
    """A required check that held (weight 1) and the rubric, pending (bonus, weight 1)."""
    held = _result("answered", "A message", "resource", True, True, 1.0, "held")
    pending = _result("tone", RUBRIC.label, "rubric", False, None, 0.0, "pending")
    return Verdict(passed=True, score=1.0, expectations=[held, pending])


def _result(
    id_: str, label: str, type_: str, required: bool, passed: bool | None, score: float, detail: str
) -> ExpectationResult:
    return ExpectationResult(
        id=id_,
        label=label,
        type=type_,
        required=required,
        weight=1.0,
        passed=passed,
        score=score,
        evidence=Evidence(matches=[]),
        detail=detail,
    )


async def _judge(
    db: Database, tenant: TenantHandle, run: dict[str, Any], llm: LlmClient | None
) -> tuple[Verdict, list[tuple[str, str | None, str]]]:
    used: list[tuple[str, str | None, str]] = []
    judged = await judge_rubrics(
        db.pool,
        llm,
        tenant.id,
        run["id"],
        [RUBRIC],
        _verdict(),
        frozenset({run["fixture"]["patient"]}),
        used=used,
    )
    return judged, used


def _assert_not_judged(verdict: Verdict, detail: str) -> ExpectationResult:
    tone = verdict.expectations[1]
    assert tone.passed is None
    assert tone.detail == detail
    assert verdict.score == 1.0  # only the required check counts: the rubric is left out
    return tone


async def test_without_a_model_a_rubric_is_not_judged(
    tenant: TenantHandle, db: Database, settings: Settings
) -> None:
    run = await _run(tenant, REPLY)
    for llm_settings in (None, settings.clone(llm_base_url=None, llm_model=None)):
        async with httpx.AsyncClient() as http:
            llm = None if llm_settings is None else LlmClient(http, llm_settings, db.pool)
            judged, used = await _judge(db, tenant, run, llm)
        tone = _assert_not_judged(judged, "not judged: no model configured")
        note = tone.evidence.note or ""
        # The heuristic's reading is there for the builder, and says it is no verdict.
        assert note.startswith("heuristic reading, not a verdict (judge-heuristic/1): ")
        assert "rubric terms found" in note and "Heuristic:" not in note
        assert used == []  # no engine judged: the provenance records none


async def test_with_a_model_the_rubric_is_judged_as_before(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    run = await _run(tenant, REPLY)
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, fake_llm.settings_for(settings), db.pool)
        for score, passed, run_score in ((0.9, True, 1.0), (0.2, False, 0.5)):
            fake_llm.reply({"score": score, "reason": 'Says "ayune de 10 a 12 horas".'})
            judged, used = await _judge(db, tenant, run, llm)
            tone = judged.expectations[1]
            assert tone.passed is passed and tone.score == score
            assert tone.detail == 'Says "ayune de 10 a 12 horas".'
            note = tone.evidence.note or ""
            assert "engine llm" in note and "judge/1" in note and "heuristic" not in note
            assert judged.score == run_score  # a judged rubric counts in the score
            assert used == [("llm", fake_llm.requests[-1].model, "judge/1")]
    assert REPLY in fake_llm.requests[-1].messages[-1]["content"]


async def test_an_unavailable_model_leaves_the_rubric_not_judged_with_the_reason(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    run = await _run(tenant, REPLY)
    async with httpx.AsyncClient(timeout=10) as http:
        failing = LlmClient(http, fake_llm.settings_for(settings, llm_max_retries=0), db.pool)
        fake_llm.fail(500)
        judged, used = await _judge(db, tenant, run, failing)
        tone = judged.expectations[1]
        assert tone.passed is None and judged.score == 1.0
        assert tone.detail.startswith("not judged: the model was unavailable (")
        assert tone.detail.endswith(")") and "500" in tone.detail
        assert (tone.evidence.note or "").startswith("heuristic reading, not a verdict")
        assert used == []
        # The allowance used up is the model unavailable too, and says so.
        spent = LlmClient(http, fake_llm.settings_for(settings, llm_calls_per_hour=0), db.pool)
        judged, used = await _judge(db, tenant, run, spent)
        _assert_not_judged(
            judged,
            "not judged: the model was unavailable (allowance of 0 model calls per hour used)",
        )
        assert used == []


async def test_no_text_to_read_is_not_judged_and_no_model_is_paid(
    tenant: TenantHandle, db: Database, settings: Settings, fake_llm: FakeLlm
) -> None:
    run = await _run(tenant, None)
    async with httpx.AsyncClient(timeout=10) as http:
        llm = LlmClient(http, fake_llm.settings_for(settings), db.pool)
        judged, used = await _judge(db, tenant, run, llm)
    tone = _assert_not_judged(
        judged,
        "not judged: the system wrote no text of this kind "
        "(messages to the patient, SMS and e-mail)",
    )
    assert tone.evidence.note is None
    assert used == [] and fake_llm.requests == []


async def test_a_rubric_after_a_required_failure_is_still_skipped(
    tenant: TenantHandle, db: Database
) -> None:
    run = await _run(tenant, REPLY)
    verdict = _verdict()
    verdict.expectations[0].passed = False
    judged = await judge_rubrics(
        db.pool,
        None,
        tenant.id,
        run["id"],
        [RUBRIC],
        verdict,
        frozenset({run["fixture"]["patient"]}),
    )
    assert judged.expectations[1].passed is None
    assert judged.expectations[1].detail.startswith(
        "skipped: a required expectation already failed"
    )
    assert judged.score == 0.0
