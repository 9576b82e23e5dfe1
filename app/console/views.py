"""View-models: plain data the templates show, made from what the services return (the
same values the REST API sends), and the template filters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

from app.runs.service import RunRow


@dataclass(frozen=True, slots=True)
class State:
    """A state as shown: an icon, a word and a CSS class (never colour alone)."""

    icon: str
    word: str
    css: str


STATES: dict[str, State] = {
    "passed": State("✓", "passed", "ok"),
    "failed": State("✗", "failed", "bad"),
    "timed_out": State("⏱", "timed out", "bad"),
    "live": State("●", "live", "live"),
    "queued": State("○", "queued", "idle"),
    "cancelled": State("–", "cancelled", "idle"),
    "errored": State("!", "errored", "warn"),
    "excluded": State("–", "excluded", "idle"),
    "holding": State("✓", "holding", "ok"),
    "not_yet": State("○", "not yet", "idle"),
    "not_judged": State("○", "not judged", "idle"),
}
UNKNOWN_STATE = State("?", "unknown", "idle")


def state_of(status: str) -> State:
    return STATES.get(status, State("?", status.replace("_", " "), "idle"))


def state_badge(status: str) -> Markup:
    """`<span class="state ok">✓ passed</span>`: the icon is decoration, the word is read."""
    state = state_of(status)
    return Markup(
        '<span class="state {css}"><span aria-hidden="true">{icon}</span> {word}</span>'
    ).format(css=state.css, icon=state.icon, word=state.word)


def when(value: datetime | None) -> Markup:
    """A time in UTC, turned into the browser's local zone by console.js (UTC on hover)."""
    if value is None:
        return Markup("–")
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{iso}" title="{text}">{text}</time>').format(
        iso=utc.isoformat().replace("+00:00", "Z"), text=text
    )


def copyable(value: Any) -> Markup:
    """An id in monospace with a copy button (the button works with console.js)."""
    text = escape(str(value))
    return Markup(
        '<code class="id">{text}</code>'
        '<button type="button" class="copy" data-copy="{text}" aria-label="Copy {text}">'
        "copy</button>"
    ).format(text=text)


FILTERS: dict[str, Any] = {"state": state_badge, "when": when, "copyable": copyable}


@dataclass(frozen=True, slots=True)
class RunLine:
    """A run in a list: what the runs list of the REST API says, in a table row."""

    id: str
    scenario_id: str
    variant: str | None
    mode: str
    label: str | None
    status: str
    score: float | None
    started_at: datetime
    finished_at: datetime | None

    @property
    def url(self) -> str:
        return f"/runs/{self.id}"


def run_line(run: RunRow) -> RunLine:
    score = run.final_verdict().score if run.status != "live" else None
    return RunLine(
        run.id,
        run.scenario_id,
        run.variant,
        run.mode,
        run.label,
        run.status,
        score,
        run.started_at,
        run.finished_at,
    )
