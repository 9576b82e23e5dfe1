"""Spanish register: a message meant for `usted` must not use `tú` forms, and back.

`register_violations(message, register) -> list[RegisterViolation]` with `register` "usted"
or "tu": every whole word of the other register, with its span and a quote. Words are
read in lower case with their accents ("té", tea, is not "te"; "tú" and "tu" are both
informal). `le`, `les`, `su`, `sus` are never counted: they are as often the third person
("su cita con la doctora"). Neither are third-person verb forms ("puede", "quiere"): they
fit "usted" and "él/ella" alike.

Left out on purpose: `consigo`, which is as often "I get" ("te consigo una cita") as
"with yourself"; and `ustedes`. In Latin American Spanish it is the only plural "you",
informal as much as formal, so a tú-register message may well say it.

Public API: `INFORMAL_WORDS`, `FORMAL_WORDS` (the lists), `register_violations`,
`RegisterViolation(word, start, end, quote)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from app.kit.phrases import fold, quote

Register = Literal["usted", "tu"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Pronouns and possessives of tú, and its unambiguous verb forms (second-person singular
# present, preterite, imperative with an enclitic, subjunctive) of the verbs staff use.
INFORMAL_WORDS: frozenset[str] = _words(
    """
    tú tu tus ti te contigo tuyo tuya tuyos tuyas vos
    eres estás tienes puedes quieres necesitas prefieres sabes vienes debes vas haces
    recuerdas deseas llegas sientes confirmas avisas escribes
    podrías querrías tendrías deberías
    puedas quieras tengas necesites prefieras vengas llegues sientas confirmes llames
    fuiste tuviste pudiste llamaste pediste
    avísame llámanos llámame escríbenos escríbeme dime cuéntame confírmame contéstame
    recuérdame dinos avísanos háblanos pásate
    """
)
FORMAL_WORDS: frozenset[str] = _words(
    """
    usted ud ud. vd vd. suyo suya suyos suyas
    avíseme llámenos llámeme escríbanos escríbame dígame cuénteme confírmeme contésteme
    díganos avísenos háblenos pásese
    """
)

_WORD_RE = re.compile(r"[^\W\d_]+\.?")


@dataclass(frozen=True, slots=True)
class RegisterViolation:
    word: str  # as written
    start: int
    end: int
    quote: str


def register_violations(message: str, register: Register) -> list[RegisterViolation]:
    forbidden = INFORMAL_WORDS if register == "usted" else FORMAL_WORDS
    folded = fold(message, keep_accents=True)
    found: list[RegisterViolation] = []
    for m in _WORD_RE.finditer(folded.text):
        word = m.group()
        if word not in forbidden:
            word = word.rstrip(".")
            if word not in forbidden:
                continue
        start, end = folded.span(m.start(), m.start() + len(word))
        found.append(RegisterViolation(message[start:end], start, end, quote(message, start, end)))
    return found
