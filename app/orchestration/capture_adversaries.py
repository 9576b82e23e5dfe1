"""Adversaries of the SMS and e-mail a reference solution sends (captured effects,
docs/capture.md): the scenario check makes them itself, so a scenario whose checks cannot
tell who a text went to fails its check.

Mutants (must fail), for each SMS or e-mail oracle call and each other fixture patient
with a number (for an SMS) or an address (for an e-mail):
- `capture-recipient`: the same text sent to that other patient instead;
- `capture-extra`: the same text sent to that other patient too (a reminder to the
  patient who opted out of texts, a letter copied to the wrong chart).

Their text is the reference's own, so only a check that reads the recipient (the pairing
of `matches-reference`, a message check's scope, an opt-out) can catch them.

And for each integration call whose body is a JSON object (an order to a pharmacy):
- `integration-value`: a number in it doubled (90 tablets ordered as 180);
- `integration-field`: one of its fields left out (the order without its directions).

Rewrites (must pass), the same effects written another way a correct system may:
- `capture-number`: each SMS's number in another written form ("(555) 555-0142" for
  "+15555550142");
- `capture-address`: each e-mail's recipients in capitals (addresses are matched
  without case);
- `capture-json`: each integration call's JSON object with its fields in reverse order.
"""

from __future__ import annotations

from typing import Any

from app.grading.snapshot import RunSnapshot
from app.orchestration.mutants import Mutant, describe
from app.orchestration.rewrites import Rewrite
from app.scenarios.calls import capture_kind
from app.scenarios.schema import OracleCall, Scenario


def _contacts(resource: dict[str, Any], kind: str) -> list[str]:
    """A patient's numbers to text (kind "sms") or addresses to mail ("email")."""
    systems = ("phone", "sms") if kind == "sms" else ("email",)
    return [
        str(t["value"])
        for t in resource.get("telecom") or []
        if isinstance(t, dict) and t.get("system") in systems and t.get("value")
    ]


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())[-10:]


def _same(kind: str, a: str, b: str) -> bool:
    if kind == "sms":
        return bool(_digits(a)) and _digits(a) == _digits(b)
    return a.strip().lower() == b.strip().lower()


def _recipients(body: dict[str, Any]) -> list[str]:
    to = body.get("to")
    return [str(t) for t in to] if isinstance(to, list) else [str(to or "")]


def _others(before: RunSnapshot, kind: str, sent_to: list[str]) -> list[tuple[str, str]]:
    """(patient symbol, its first contact) of each fixture patient the call does not go to."""
    out = []
    for symbol, resource in before.current.items():
        if not resource or resource.get("resourceType") != "Patient":
            continue
        contacts = _contacts(resource, kind)
        if contacts and not any(_same(kind, c, s) for c in contacts for s in sent_to):
            out.append((symbol, contacts[0]))
    return out


def _numbers(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Where a JSON body holds a number (not a boolean), depth first."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _numbers(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _numbers(v, (*path, i))]
    return []


def _doubled(value: Any, path: tuple[str | int, ...]) -> Any:
    if not path:
        return value * 2
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _doubled(v, rest) if k == head else v for k, v in value.items()}
    return [_doubled(v, rest) if i == head else v for i, v in enumerate(value)]


def _integration_mutants(
    oracle: tuple[OracleCall, ...], index: int, call: OracleCall, body: dict[str, Any]
) -> list[Mutant]:
    def swapped(changed: dict[str, Any]) -> tuple[OracleCall, ...]:
        moved = OracleCall(method=call.method, path=call.path, body=changed)
        return (*oracle[:index], moved, *oracle[index + 1 :])

    out = []
    for path in _numbers(body):
        where = ".".join(str(p) for p in path)
        out.append(
            Mutant(
                "integration-value",
                f"{describe(index, call)} with {where} doubled",
                swapped(_doubled(body, path)),
                index,
            )
        )
    for key in body:
        out.append(
            Mutant(
                "integration-field",
                f"{describe(index, call)} without {key}",
                swapped({k: v for k, v in body.items() if k != key}),
                index,
            )
        )
    return out


def derive_capture_mutants(scenario: Scenario, before: RunSnapshot) -> list[Mutant]:
    out: list[Mutant] = []
    oracle = tuple(scenario.oracle)
    for index, call in enumerate(oracle):
        kind = capture_kind(call.path)
        if kind == "integration" and isinstance(call.body, dict) and call.method != "GET":
            out += _integration_mutants(oracle, index, call, call.body)
            continue
        if kind not in ("sms", "email") or not isinstance(call.body, dict):
            continue
        for symbol, contact in _others(before, kind, _recipients(call.body)):
            to: str | list[str] = contact if kind == "sms" else [contact]
            moved = OracleCall(method=call.method, path=call.path, body={**call.body, "to": to})
            what = f"sent to @{symbol} ({contact})"
            out.append(
                Mutant(
                    "capture-recipient",
                    f"{describe(index, call)} {what} instead",
                    (*oracle[:index], moved, *oracle[index + 1 :]),
                    index,
                )
            )
            out.append(
                Mutant(
                    "capture-extra",
                    f"{describe(index, call)} also {what}",
                    (*oracle[: index + 1], moved, *oracle[index + 1 :]),
                    index + 1,
                )
            )
    return out


def _reworded(kind: str, body: dict[str, Any]) -> dict[str, Any] | None:
    to = body.get("to")
    if kind == "sms" and isinstance(to, str):
        digits = "".join(c for c in to if c.isdigit())[-10:]
        if len(digits) < 10:
            return None
        return {**body, "to": f"({digits[:3]}) {digits[3:6]}-{digits[6:]}"}
    if kind == "email":
        recipients = _recipients(body)
        return {**body, "to": [r.upper() for r in recipients]}
    if kind == "integration" and len(body) > 1:
        return dict(reversed(list(body.items())))
    return None


_REWRITE_KINDS = {"sms": "capture-number", "email": "capture-address"}
_REWRITE_WHAT = {
    "sms": "with the number written another way",
    "email": "with the addresses in capitals",
    "integration": "with its JSON fields in reverse order",
}


def derive_capture_rewrites(scenario: Scenario) -> list[Rewrite]:
    out: list[Rewrite] = []
    oracle = tuple(scenario.oracle)
    for index, call in enumerate(oracle):
        kind = capture_kind(call.path)
        if kind is None or not isinstance(call.body, dict):
            continue
        body = _reworded(kind, call.body)
        if body is None:
            continue
        moved = OracleCall(method=call.method, path=call.path, body=body)
        out.append(
            Rewrite(
                _REWRITE_KINDS.get(kind, "capture-json"),
                f"{describe(index, call)} {_REWRITE_WHAT[kind]}",
                (*oracle[:index], moved, *oracle[index + 1 :]),
            )
        )
    return out
