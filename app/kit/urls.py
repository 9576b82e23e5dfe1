"""Where a FHIR base lives: the tenant's, and each run's view of it. Built here only, so
the routes, run views, webhook payloads and MCP tools cannot disagree on a URL."""

from __future__ import annotations

FHIR_PREFIX = "/api/fhir/r4"
RUNS_PREFIX = "/api/testing/runs"
EVALS_PREFIX = "/api/testing/evals"


def run_view_base(root: str, run_id: str) -> str:
    """The FHIR base of a run's view (`root` is the server's URL, or "" for a path)."""
    return f"{root}{RUNS_PREFIX}/{run_id}/fhir/r4"


def fhir_base(root: str, run_id: str | None) -> str:
    """The run's view when there is a run, else the tenant's base."""
    return run_view_base(root, run_id) if run_id is not None else root + FHIR_PREFIX


def eval_url(root: str, eval_id: str) -> str:
    """The eval in the testing API."""
    return f"{root}{EVALS_PREFIX}/{eval_id}"


def eval_page_url(root: str, eval_id: str) -> str:
    """The eval's page in the console (mounted at the root)."""
    return f"{root}/evals/{eval_id}"
