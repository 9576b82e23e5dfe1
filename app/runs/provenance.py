"""A run's provenance: what it was made of, recorded as it starts and completed as it is
judged (contract `Provenance`). The platform's version is read once per process."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from app.judges import engine as judge_engine
from app.patient_sim import engine as sim_engine
from understudy_client.contract.runs import (
    EngineProvenance,
    PlatformProvenance,
    Provenance,
    ScenarioProvenance,
)

PACKAGE = "understudy"


def _git_sha() -> str | None:
    """The short commit of the package's checkout when it is one, else UNDERSTUDY_GIT_SHA."""
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is not None and out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return os.environ.get("UNDERSTUDY_GIT_SHA") or None


@functools.cache
def platform() -> PlatformProvenance:
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return PlatformProvenance(version=version, git_sha=_git_sha())


def configured_patient(llm_model: str | None) -> EngineProvenance:
    if llm_model:
        return EngineProvenance(
            engine="llm", model=llm_model, prompt_version=sim_engine.PROMPT_VERSION
        )
    return EngineProvenance(engine="scripted", model=None, prompt_version=None)


def configured_judge(llm_model: str | None) -> EngineProvenance:
    if llm_model:
        return EngineProvenance(
            engine="llm", model=llm_model, prompt_version=judge_engine.PROMPT_VERSION
        )
    # No model, no judge: rubrics are not judged (runs recorded before said "heuristic").
    return EngineProvenance(engine="none", model=None, prompt_version=None)


def at_start(
    *,
    scenario_id: str,
    scenario_version: int,
    scenario_hash: str,
    revision: str | None,
    has_patient_sim: bool,
    llm_model: str | None,
    at: datetime,
) -> dict[str, Any]:
    """The provenance written with the run (its wire form, stored as JSONB)."""
    return Provenance(
        scenario=ScenarioProvenance(id=scenario_id, version=scenario_version, hash=scenario_hash),
        platform=platform(),
        revision=revision,
        patient_sim=configured_patient(llm_model) if has_patient_sim else None,
        judge=configured_judge(llm_model),
        recorded_at=at,
    ).wire()


def _distinct(engines: list[tuple[str, str | None, str | None]]) -> list[EngineProvenance]:
    seen: dict[tuple[str, str | None, str | None], None] = dict.fromkeys(engines)
    return [EngineProvenance(engine=e, model=m, prompt_version=p) for e, m, p in seen]


def judged(
    started: dict[str, Any] | None,
    *,
    patient_used: list[tuple[str, str | None, str | None]],
    judge_used: list[tuple[str, str | None, str]],
    at: datetime,
) -> dict[str, Any] | None:
    """The start's provenance completed with the engines actually used (None: the run was
    started before provenance was recorded, and stays without)."""
    if started is None:
        return None
    out = Provenance.model_validate(started)
    out.judged_at = at
    out.patient_sim_used = _distinct(patient_used)
    out.judge_used = _distinct([(e, m, p) for e, m, p in judge_used])
    return out.wire()
