"""The run page's two views of what the agent did differently.

- The end-state diff of "Strict by default" (`matches-reference`): the grader keeps, per
  resource, the reference solution's end state beside the run's with the elements that
  differ (`app.grading.reference`, `evidence.diff`). Here each becomes a table of its
  elements side by side, element by element, the consequential differences marked,
  collateral and missing first (the grader's order), free choices with the constraints
  they met.
- The text-truth facts: each text's facts highlighted where they stand in the text, with
  their context and the check each met or broke (`app.grading.truth`, the `facts:`
  clauses).

Nothing here grades: both read the evidence the verdict (or the live grading pass) holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from app.kit import jsontext
from understudy_client.contract.runs import ExpectationResult

# A duration difference names no element of its own: it is the span's ends.
_SPAN_PATHS = ("start", "end", "minutesDuration")
_FIRST = ("resourceType", "id", "status", "intent")
KINDS = {
    "collateral": "collateral: changed, and the reference does not",
    "missing": "missing: the reference changes it, the run does not",
    "differs": "differs from the reference",
    "same": "as the reference",
}


@dataclass(frozen=True, slots=True)
class DiffRow:
    path: str
    expected: str | None  # pretty JSON; None: absent
    actual: str | None
    mark: str  # "differs" (consequential) | "other" (text differs, not graded) | ""


@dataclass(frozen=True, slots=True)
class DiffEntry:
    kind: str
    title: str
    ref: str | None
    resource_type: str
    reasons: list[str]
    rows: list[DiffRow]
    free: list[dict[str, Any]]
    differing: int

    @property
    def kind_text(self) -> str:
        return KINDS.get(self.kind, self.kind)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return jsontext.dumps(value, indent=isinstance(value, (dict, list)))


def _ordered(keys: Iterable[str]) -> list[str]:
    seen = list(dict.fromkeys(keys))
    return [k for k in _FIRST if k in seen] + [k for k in seen if k not in _FIRST]


def _rows(entry: dict[str, Any]) -> list[DiffRow]:
    expected = entry.get("expected") or {}
    actual = entry.get("actual") or {}
    paths = set(entry.get("paths") or [])
    if "duration" in paths:
        paths |= set(_SPAN_PATHS)
    one_sided = not entry.get("expected") or not entry.get("actual")
    rows = []
    for key in _ordered([*expected.keys(), *actual.keys()]):
        want, got = expected.get(key), actual.get(key)
        if key in paths or (one_sided and entry.get("kind") != "same"):
            mark = "differs"
        elif want != got and key != "id":
            mark = "other"
        else:
            mark = ""
        rows.append(
            DiffRow(
                key,
                None if key not in expected else _show(want),
                None if key not in actual else _show(got),
                mark,
            )
        )
    return rows


def _diffs_of(results: Iterable[ExpectationResult]) -> Iterable[dict[str, Any]]:
    for result in results:
        if result.type == "reference":
            yield from result.evidence.diff
        yield from _diffs_of(result.children)


def diff_entries(results: Iterable[ExpectationResult]) -> list[DiffEntry]:
    """The end-state diff of every `matches-reference` result, in the grader's order."""
    out = []
    for entry in _diffs_of(results):
        rows = _rows(entry)
        out.append(
            DiffEntry(
                kind=str(entry.get("kind", "")),
                title=str(entry.get("title", "")),
                ref=entry.get("ref"),
                resource_type=str(entry.get("resourceType", "")),
                reasons=[str(r) for r in entry.get("reasons") or []],
                rows=rows,
                free=list(entry.get("free") or []),
                differing=sum(1 for r in rows if r.mark == "differs"),
            )
        )
    return out


def highlighted(text: str, facts: list[dict[str, Any]]) -> Markup:
    """`text` with each fact marked where it stands: its kind, context and the check it
    met or broke in the mark's title, its state as a class and a symbol (never colour
    alone). Overlapping facts: the first one read keeps the span."""
    out: list[str] = []
    at = 0
    for fact in sorted(facts, key=lambda f: (int(f.get("start", 0)), -int(f.get("end", 0)))):
        start, end = int(fact.get("start", 0)), int(fact.get("end", 0))
        if start < at or end <= start or end > len(text):
            continue
        held = fact.get("holds")
        state = "bad" if held is False else "ok" if held else "unchecked"
        symbol = "✗" if held is False else "✓" if held else "·"
        why = " · ".join(
            str(p)
            for p in (
                fact.get("kind"),
                fact.get("context", "asserted"),
                (f"{fact['check']} {'holds' if held else 'fails'}" if fact.get("check") else None),
                fact.get("detail"),
            )
            if p
        )
        out.append(str(escape(text[at:start])))
        out.append(
            f'<mark class="fact {state}" data-context="{escape(fact.get("context", "asserted"))}"'
            f' title="{escape(why)}">{escape(text[start:end])}'
            f'<sup aria-label="{escape(why)}">{symbol}</sup></mark>'
        )
        at = end
    out.append(str(escape(text[at:])))
    return Markup("".join(out))
