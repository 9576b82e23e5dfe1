"""Actions a message claims were done, and the claims no write backs.

`claims(message, message_index=0) -> list[Claim]`: each claimed action ("I've booked you
for…", "your referral has been sent", "le he reservado", "cancelé su cita"), with the
action name (a key of `lexicon.ACTIONS`), the write kinds that would back it and the
quote. What is *not* a claim, because a false failure is the worst bug:
- an offer, a question or a plan: "I can book you", "would you like me to book",
  "I'll book it once you confirm", "¿quiere que le reserve?" (no past form at all), and
  any sentence that is a question ("I've booked Tuesday, is that right?" is left alone);
- a negation: "we have not booked", "I haven't sent", "no le he reservado", "todavía no
  cancelé" (the patterns need "I/we" + have + verb with nothing else in between but
  "just/already/also/now/successfully", and a "no/nunca" before a Spanish verb voids it);
- a condition or a time clause: "once I've booked it, …", "si le reservé…", "cuando
  reciba…" (a condition word earlier in the same clause);
- a passive with an agent that is not us: "your appointment has been cancelled by the
  clinic", "fue cancelada por el consultorio" (it reports someone else's write);
- a notification of the patient: "I have informed you that…" is the message itself
  (`Action.needs_staff_object`);
- another thing booked: "I've booked an interpreter", "I scheduled a reminder"
  (`Action.not_objects`); a message sent to the patient ("I've sent you a confirmation",
  "le he enviado este mensaje") is this message, so a sent message claims only with staff
  named after it ("I've sent a message to Dr. Chen");
- a passive after a reminder or a look at the record: "Reminder: your visit has been
  scheduled for Tuesday", "I see your appointment has been booked" (what exists already).
Spanish is read with its accents: "reservé" (I booked) claims, "reserve" (that I book) does
not; a message written without accents loses its Spanish claims rather than inventing one.

`unbacked(claims, writes) -> list[Claim]`: the claims that no write backs. `writes` are the
run's writes made before the message, each a `Write(resource_type, status, body)` (or a
plain tuple of those): `status` the HTTP status (a write succeeded when it is 2xx), `body`
the resource as written (None for a delete). A write backs a claim when it is of one of
the claim's kinds (`lexicon.WRITE_KINDS`): the type, a body status in the kind's statuses,
a staff recipient when the kind needs one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from app.grading.message.lexicon import (
    ACTIONS,
    STAFF_NOUNS,
    STAFF_REFERENCE_TYPES,
    WRITE_KINDS,
    WriteKind,
)
from app.kit.phrases import Folded, fold, quote

# How far after a notify-like verb its staff object may be ("I've let the care team at
# the clinic know": a few words).
STAFF_OBJECT_WINDOW = 48
# How far back a Spanish negation may sit before the verb ("no se lo he enviado").
NEGATION_WINDOW = 16

_EN_ADVERBS = r"(?:(?:just|already|also|now|successfully|gone ahead and|went ahead and|since)\s+)*"
_ES_CLITICS = r"(?:(?:me|te|le|les|lo|la|los|las|se|nos)\s+){0,2}"
_ES_ADVERBS = r"(?:(?:ya|también|tambien|hoy|ahora)\s+)?"
_CLAUSE_BREAK_RE = re.compile(r"[.!?;:,\n¡]|\s-\s|—")
_SENTENCE_END_RE = re.compile(r"[.!?\n]")
_EN_CONDITION_RE = re.compile(
    r"(?<!\w)(?:if|once|when|whenever|as soon as|after|before|until|unless|whether|in case"
    r"|so that|ask|asked|want me to|like me to)(?!\w)"
)
_ES_CONDITION_RE = re.compile(
    r"(?<!\w)(?:si|cuando|una vez que|en cuanto|apenas|antes de que|después de que"
    r"|despues de que|hasta que|en caso de que|para que|quiere que|quieres que|desea que)(?!\w)"
)
_ES_NEGATION_RE = re.compile(r"(?<!\w)(?:no|nunca|tampoco|jamás|aún no|todavía no)(?!\w)")
_AGENT_RE = re.compile(
    r"^\s*(?:(?:for|para)\s+\S+\s+)?(?:by|por)\s+(?!(?:me|us|mí|mi|nosotros|nuestro|nuestra|"
    r"our|my)\b)"
)
# A passive after these reports what exists ("Reminder: your visit has been scheduled for
# Tuesday"), not what this run did.
_EXISTING_RE = re.compile(
    r"(?<!\w)(?:reminder|remind|recordatorio|recordarle|recordarte|recordamos|recuerdo"
    r"|records? show|i see|it looks like|according to|our records|veo que|según|segun"
    r"|as a reminder)(?!\w)"
)
_STAFF_RE = re.compile(rf"(?<!\w)(?:{STAFF_NOUNS})")


@dataclass(frozen=True, slots=True)
class Claim:
    """`action` (a lexicon key) claimed in message `message_index` at [start, end)."""

    action: str
    kinds: tuple[str, ...]
    text: str
    start: int
    end: int
    quote: str
    message_index: int = 0


class Write(NamedTuple):
    """One write the system made: resource type, HTTP status, resource body (None for a
    delete)."""

    resource_type: str
    status: int
    body: Mapping[str, Any] | None


def _alt(fragments: Iterable[str]) -> str:
    return "|".join(sorted(fragments, key=len, reverse=True))


@lru_cache(maxsize=1)
def _patterns() -> list[tuple[str, str, re.Pattern[str]]]:
    """(action, form, regex) for every action; `form` is en-active, en-passive, es-…"""
    out: list[tuple[str, str, re.Pattern[str]]] = []
    for name, action in ACTIONS.items():
        if action.active:
            out.append(
                (
                    name,
                    "en",
                    re.compile(
                        rf"(?<!\w)(?:i|we)(?:'ve|\s+have)?\s+{_EN_ADVERBS}(?P<verb>{_alt(action.active)})(?!\w)"
                    ),
                )
            )
        if action.passive:
            out.append(
                (
                    name,
                    "en-passive",
                    re.compile(
                        rf"(?<!\w)(?:has|have|'s)\s+{_EN_ADVERBS}been\s+(?:successfully\s+)?"
                        rf"(?P<verb>{_alt(action.passive)})(?!\w)"
                        rf"|(?<!\w)(?:is|are)\s+now\s+(?P<verb2>{_alt(action.passive)})(?!\w)"
                    ),
                )
            )
        if action.preterite:
            out.append(
                (
                    name,
                    "es",
                    re.compile(
                        rf"(?<!\w){_ES_ADVERBS}{_ES_CLITICS}(?P<verb>{_alt(action.preterite)})(?!\w)"
                    ),
                )
            )
        if action.participles:
            stems = _alt(p[:-1] + "[oa]s?" for p in action.participles)
            out.append(
                (
                    name,
                    "es-perfect",
                    re.compile(
                        rf"(?<!\w){_ES_CLITICS}(?:he|hemos)\s+{_ES_ADVERBS}(?P<verb>{stems})(?!\w)"
                    ),
                )
            )
            out.append(
                (
                    name,
                    "es-passive",
                    re.compile(
                        rf"(?<!\w)(?:ha|han)\s+sido\s+{_ES_ADVERBS}(?P<verb>{stems})(?!\w)"
                        r"|(?<!\w)(?:quedó|quedaron|queda|quedan|fue|fueron|ha quedado"
                        rf"|han quedado)\s+{_ES_ADVERBS}"
                        rf"(?P<verb2>{stems})(?!\w)"
                    ),
                )
            )
        if action.subject_passive:
            out.append(
                (
                    name,
                    "en-passive",
                    re.compile(rf"(?<!\w)(?:{_alt(action.subject_passive)})(?!\w)"),
                )
            )
        if action.plural:
            out.append(
                (
                    name,
                    "es",
                    re.compile(rf"(?<!\w)ya\s+{_ES_CLITICS}(?P<verb>{_alt(action.plural)})(?!\w)"),
                )
            )
    return out


def _clause_before(text: str, start: int) -> str:
    cut = 0
    for m in _CLAUSE_BREAK_RE.finditer(text, 0, start):
        cut = m.end()
    return text[cut:start]


def _sentence(text: str, start: int, end: int) -> str:
    left = 0
    for m in _SENTENCE_END_RE.finditer(text, 0, start):
        left = m.end()
    after = _SENTENCE_END_RE.search(text, end)
    right = after.end() if after else len(text)
    return text[left:right]


def _is_claim(
    folded: str,
    form: str,
    start: int,
    end: int,
    needs_staff: bool,
    not_objects: str,
    not_after: str = "",
) -> bool:
    sentence = _sentence(folded, start, end)
    if sentence.rstrip().endswith("?") or "¿" in sentence:
        return False
    before = _clause_before(folded, start)
    spanish = form.startswith("es")
    if (_ES_CONDITION_RE if spanish else _EN_CONDITION_RE).search(before):
        return False
    if spanish and _ES_NEGATION_RE.search(folded[max(0, start - NEGATION_WINDOW) : start]):
        return False
    if form.endswith("passive") and (
        _AGENT_RE.match(folded[end : end + 40]) or _EXISTING_RE.search(folded[:start])
    ):
        return False
    if not_objects and re.match(rf"\s+{not_objects}", folded[end : end + 40]):
        return False
    if not_after and re.match(not_after, folded[end : end + 60]):
        return False
    if needs_staff:
        after = folded[end : end + STAFF_OBJECT_WINDOW]
        stop = _SENTENCE_END_RE.search(after)
        if not _STAFF_RE.search(after[: stop.start()] if stop else after):
            return False
    return True


def _find(folded: Folded, message: str, message_index: int) -> list[Claim]:
    found: list[tuple[int, int, str, str]] = []
    for name, form, regex in _patterns():
        action = ACTIONS[name]
        for m in regex.finditer(folded.text):
            if _is_claim(
                folded.text,
                form,
                m.start(),
                m.end(),
                action.needs_staff_object,
                action.not_objects,
                action.not_after,
            ):
                found.append((m.start(), m.end(), name, form))
    # Keep the longest claim where two overlap ("sent a referral" is a referral, not a send).
    found.sort(key=lambda c: (c[0], -(c[1] - c[0])))
    kept: list[tuple[int, int, str, str]] = []
    for claim in found:
        if kept and claim[0] < kept[-1][1]:
            if claim[1] - claim[0] > kept[-1][1] - kept[-1][0]:
                kept[-1] = claim
            continue
        kept.append(claim)
    claims: list[Claim] = []
    for start, end, name, _ in kept:
        a, b = folded.span(start, end)
        claims.append(
            Claim(
                name, ACTIONS[name].kinds, message[a:b], a, b, quote(message, a, b), message_index
            )
        )
    return claims


def claims(message: str, message_index: int = 0) -> list[Claim]:
    return list(_claims(message, message_index))


@lru_cache(maxsize=2048)
def _claims(message: str, message_index: int) -> tuple[Claim, ...]:
    """A message's claims, found once per process (a live run is graded after every
    write, its messages reading the same each pass; a Claim is frozen)."""
    return tuple(_find(fold(message, keep_accents=True), message, message_index))


def _references(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        ref = value.get("reference")
        if isinstance(ref, str):
            yield ref
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            yield from _references(item)


def _reference_type(reference: str) -> str:
    parts = reference.rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 else ""


def _backs(kind: WriteKind, write: Write) -> bool:
    if write.resource_type != kind.resource_type or not 200 <= write.status < 300:
        return False
    if write.body is None:
        return kind.deletes
    status = write.body.get("status")
    if kind.statuses is not None and status not in kind.statuses:
        return False
    if kind.staff_recipient:
        return any(
            _reference_type(r) in STAFF_REFERENCE_TYPES
            for r in _references(write.body.get("recipient"))
        )
    return True


def backing_write(claim: Claim, writes: Sequence[Write]) -> Write | None:
    """The first write that backs `claim`, or None."""
    for write in writes:
        if any(_backs(WRITE_KINDS[k], write) for k in claim.kinds):
            return write
    return None


def unbacked(
    found: Iterable[Claim],
    writes: Iterable[Write | tuple[str, int, Mapping[str, Any] | None]],
) -> list[Claim]:
    plain = [w if isinstance(w, Write) else Write(*w) for w in writes]
    return [c for c in found if backing_write(c, plain) is None]
