"""Rubric judging when a run becomes final.

Each `rubric` expectation reads the text the system wrote during the run — messages to
the fixture patients, Task descriptions and notes, text/plain documents (`of` narrows
it) — and is scored by the configured model. Only a model decides a rubric: when none
judged it (none is configured, the allowance is used up, the model failed) or the system
wrote no text of the kind it reads, the check is *not judged* — passed None, left out of
the run's score, its detail saying why. The lexical heuristic's reading is then kept in
the evidence note as information, never as a verdict: a keyword count cannot tell a
correct reply (in Spanish, in other words) from a wrong one. If a required expectation
already failed, rubric checks are skipped: the run failed anyway, and no model is paid.
Rubrics are always bonus: they move the score, never the pass.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from app.fhir import service as fhir_service
from app.judges import engine
from app.llm.client import LlmClient, LlmUnavailable
from app.scenarios.schema import Expectation, RubricExpectation, walk_expectations
from understudy_client.contract.runs import Evidence, ExpectationResult, Verdict

_TYPES = {"communications": "Communication", "tasks": "Task", "documents": "DocumentReference"}


def _texts_of(resource: dict[str, Any], patients: frozenset[str]) -> list[str]:
    rtype = resource.get("resourceType")
    if rtype == "Communication":
        recipients = {str(r.get("reference", "")) for r in resource.get("recipient") or []}
        if patients and not recipients & patients:
            return []
        return [
            str(p["contentString"])
            for p in resource.get("payload") or []
            if isinstance(p, dict) and p.get("contentString")
        ]
    if rtype == "Task":
        out = [str(resource["description"])] if resource.get("description") else []
        out += [str(n["text"]) for n in resource.get("note") or [] if n.get("text")]
        return out
    if rtype == "DocumentReference":
        out = []
        for content in resource.get("content") or []:
            attachment = content.get("attachment") or {}
            if str(attachment.get("contentType", "")).startswith("text/plain") and attachment.get(
                "data"
            ):
                try:
                    out.append(base64.b64decode(attachment["data"]).decode("utf-8", "replace"))
                except ValueError:
                    continue
        return out
    return []


async def _written_texts(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    run_id: str,
    sources: list[str],
    patients: frozenset[str],
) -> list[str]:
    types = [_TYPES[s] for s in sources]
    texts: list[str] = []
    for resource in await fhir_service.written_by_run(pool, tenant_id, run_id, types):
        texts += _texts_of(orjson.loads(resource), patients)
    return texts


def _walk(expectations: list[Expectation]) -> dict[str, RubricExpectation]:
    return {e.id: e for e in walk_expectations(expectations) if isinstance(e, RubricExpectation)}


_KINDS = {
    "communications": "messages to the patient, SMS and e-mail",
    "tasks": "Task descriptions and notes",
    "documents": "text/plain documents",
}


def _kinds(rubric: RubricExpectation) -> str:
    """What the rubric reads: "messages to the patient, Task descriptions and notes"."""
    return ", ".join(_KINDS[s] for s in rubric.of)


def _reading(rubric: RubricExpectation, texts: list[str]) -> str:
    """The heuristic's account of the texts (which rubric terms they contain), as a note:
    information for the builder, never a verdict."""
    judgement = engine.heuristic_judge(rubric.rubric, texts, rubric.threshold)
    reason = judgement.reason.removeprefix("Heuristic: ")
    return f"heuristic reading, not a verdict ({judgement.prompt_version}): {reason}"


def _not_judged(result: ExpectationResult, why: str, note: str | None) -> None:
    """No model decided the rubric: passed None (left out of the run's score), the detail
    says why; `note` is the heuristic's reading, when there is text to read."""
    result.passed = None
    result.score = 0.0
    result.detail = f"not judged: {why}"
    result.evidence = Evidence(matches=[], note=note)


def _rescore(results: list[ExpectationResult]) -> float:
    graded = [r for r in results if r.passed is not None]
    total = sum(r.weight for r in graded)
    return sum(r.weight for r in graded if r.passed) / total if total else 0.0


async def judge_rubrics(
    pool: asyncpg.Pool,
    llm: LlmClient | None,
    tenant_id: uuid.UUID,
    run_id: str,
    expectations: list[Expectation],
    verdict: Verdict,
    patients: frozenset[str],
    *,
    used: list[tuple[str, str | None, str]] | None = None,
    sent: Sequence[str] = (),
) -> Verdict:
    """Judge each rubric of the verdict; `used`, when given, receives the (engine, model,
    prompt version) of each judgement made (the run's provenance records them). `sent`:
    the texts of the SMS and e-mail the run's system sent (captured, app/capture), read
    as messages by a rubric of `communications`."""
    rubrics = _walk(expectations)
    if not rubrics:
        return verdict
    required_failed = any(r.required and r.passed is False for r in verdict.expectations)
    for result in verdict.expectations:
        rubric = rubrics.get(result.id)
        if rubric is None:
            continue
        if required_failed:
            result.passed = None
            result.detail = "skipped: a required expectation already failed (no model spent)"
            continue
        texts = await _written_texts(pool, tenant_id, run_id, list(rubric.of), patients)
        if "communications" in rubric.of:
            texts += list(sent)
        if not any(t.strip() for t in texts):
            why = f"the system wrote no text of this kind ({_kinds(rubric)})"
            _not_judged(result, why, None)
            continue
        if llm is None or not llm.configured:
            _not_judged(result, "no model configured", _reading(rubric, texts))
            continue
        try:
            answer = await llm.complete_json(
                tenant_id=tenant_id,
                run_id=run_id,
                purpose="judge",
                messages=engine.llm_messages(rubric.rubric, texts),
                schema=engine.LlmJudgement,
                temperature=0.0,
            )
        except LlmUnavailable as exc:
            why = f"the model was unavailable ({exc.reason})"
            _not_judged(result, why, _reading(rubric, texts))
            continue
        judgement = engine.from_llm(answer.value, rubric.threshold, answer.model)
        if used is not None:
            used.append((judgement.engine, judgement.model, judgement.prompt_version))
        result.passed = judgement.passed
        result.score = round(judgement.score, 4)
        result.detail = judgement.reason
        result.evidence = Evidence(
            matches=[],
            note="; ".join(
                x
                for x in (
                    f"engine {judgement.engine}",
                    f"model {judgement.model}" if judgement.model else None,
                    f"prompt {judgement.prompt_version}",
                )
                if x
            ),
        )
    verdict.score = _rescore(verdict.expectations)
    return verdict
