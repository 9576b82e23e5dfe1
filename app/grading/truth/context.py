"""The context of each fact in a text: asserted now, negated, historical, hypothetical, or
about someone else — medspaCy's ConText (the clinical-NLP standard, a NegEx descendant)
on a blank spaCy pipeline, in English and Spanish.

`contexts(text, spans, language) -> list[str]`: for each character span of `spans` (a
fact the reader found), one of `ASSERTED`, `NEGATED`, `HISTORICAL`, `HYPOTHETICAL`,
`OTHER` (about someone else: "your mother takes 20 mg"). A span inside a question is
`HYPOTHETICAL` ("Would 9:00 on Friday work?" offers, it does not state). `SUPERSEDED` is
given later, by the checks: a fact a later message restates differently.

The rules are ConText's own English set (trigger phrases with a direction and a scope)
plus ours for what the system writes to patients and staff ("used to", "increased it
from", "instead of", "in case", "no longer"); the library ships no Spanish rules, so the
Spanish set is ours ("no", "ya no", "antes", "solía", "si", "en caso de", "su madre").
A trigger's scope is its sentence, cut short where a rule says (`max_scope`) — "increased
it from 10 mg to 20 mg" makes only the 10 mg historical.

Cost, measured with `scripts/bench_text_truth.py`: see the README ("Text truth").
Pipelines are built once per language, lazily (about 0.3 s), and shared under a lock:
spaCy's components are not documented as safe for concurrent calls.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

ASSERTED: Final = "asserted"
NEGATED: Final = "negated"
HISTORICAL: Final = "historical"
HYPOTHETICAL: Final = "hypothetical"
OTHER: Final = "other"
SUPERSEDED: Final = "superseded"

# (literal, category, direction, pattern or None, max_scope or None)
_Rule = tuple[str, str, str, list[dict[str, Any]] | None, int | None]

_CHANGE_VERBS = [
    "increased",
    "decreased",
    "raised",
    "lowered",
    "reduced",
    "changed",
    "switched",
    "adjusted",
    "moved",
    "went",
    "up",
    "down",
]

_EN_RULES: tuple[_Rule, ...] = (
    ("used to", "HISTORICAL", "FORWARD", None, 6),
    ("previously", "HISTORICAL", "BIDIRECTIONAL", None, 5),
    ("formerly", "HISTORICAL", "BIDIRECTIONAL", None, 5),
    ("former", "HISTORICAL", "FORWARD", None, 4),
    ("old", "HISTORICAL", "FORWARD", None, 3),
    ("original", "HISTORICAL", "FORWARD", None, 3),
    ("earlier", "HISTORICAL", "BIDIRECTIONAL", None, 3),
    ("last time", "HISTORICAL", "BIDIRECTIONAL", None, 6),
    ("in the past", "HISTORICAL", "BIDIRECTIONAL", None, 6),
    ("had been", "HISTORICAL", "FORWARD", None, 5),
    ("was on", "HISTORICAL", "FORWARD", None, 5),
    ("were on", "HISTORICAL", "FORWARD", None, 5),
    (
        "<change> from",
        "HISTORICAL",
        "FORWARD",
        [
            {"LOWER": {"IN": _CHANGE_VERBS}},
            {"LOWER": {"IN": ["it", "you", "this", "that", "the", "your", "dose"]}, "OP": "*"},
            {"LOWER": "from"},
        ],
        3,
    ),
    ("stopped", "HISTORICAL", "FORWARD", None, 5),
    ("discontinued", "HISTORICAL", "BIDIRECTIONAL", None, 5),
    ("no longer", "NEGATED_EXISTENCE", "FORWARD", None, None),
    ("instead of", "NEGATED_EXISTENCE", "FORWARD", None, 4),
    ("rather than", "NEGATED_EXISTENCE", "FORWARD", None, 4),
    ("not", "NEGATED_EXISTENCE", "FORWARD", None, 6),
    ("n't", "NEGATED_EXISTENCE", "FORWARD", None, 6),
    ("never", "NEGATED_EXISTENCE", "FORWARD", None, 6),
    ("in case", "HYPOTHETICAL", "FORWARD", None, None),
    ("unless", "HYPOTHETICAL", "FORWARD", None, None),
    ("should you", "HYPOTHETICAL", "FORWARD", None, None),
    ("would you like", "HYPOTHETICAL", "FORWARD", None, None),
    # "Riverside Family Health" names a clinic, not a relative.
    ("family health", "PSEUDO", "PSEUDO", None, None),
    ("family medicine", "PSEUDO", "PSEUDO", None, None),
    ("family practice", "PSEUDO", "PSEUDO", None, None),
    ("family doctor", "PSEUDO", "PSEUDO", None, None),
    ("another patient", "FAMILY", "BIDIRECTIONAL", None, None),
    ("other patient", "FAMILY", "BIDIRECTIONAL", None, None),
    (
        "your <relative>",
        "FAMILY",
        "FORWARD",
        [
            {"LOWER": {"IN": ["your", "his", "her"]}},
            {
                "LOWER": {
                    "IN": [
                        "mother",
                        "father",
                        "mom",
                        "dad",
                        "husband",
                        "wife",
                        "son",
                        "daughter",
                        "sister",
                        "brother",
                        "partner",
                        "child",
                        "spouse",
                    ]
                }
            },
        ],
        8,
    ),
    # What ends a trigger's scope: a clause that turns to the present ("…but now …").
    ("but", "TERMINATE", "TERMINATE", None, None),
    ("now", "TERMINATE", "TERMINATE", None, None),
    ("to", "TERMINATE", "TERMINATE", None, None),
)

_ES_RULES: tuple[_Rule, ...] = (
    ("no", "NEGATED_EXISTENCE", "FORWARD", None, 6),
    ("ya no", "NEGATED_EXISTENCE", "FORWARD", None, None),
    ("nunca", "NEGATED_EXISTENCE", "FORWARD", None, 6),
    ("sin", "NEGATED_EXISTENCE", "FORWARD", None, 3),
    ("en lugar de", "NEGATED_EXISTENCE", "FORWARD", None, 4),
    ("en vez de", "NEGATED_EXISTENCE", "FORWARD", None, 4),
    ("antes", "HISTORICAL", "BIDIRECTIONAL", None, 5),
    ("anteriormente", "HISTORICAL", "BIDIRECTIONAL", None, 5),
    ("solía", "HISTORICAL", "FORWARD", None, 6),
    ("solia", "HISTORICAL", "FORWARD", None, 6),
    ("anterior", "HISTORICAL", "BACKWARD", None, 3),
    ("original", "HISTORICAL", "BACKWARD", None, 3),
    ("antigua", "HISTORICAL", "BIDIRECTIONAL", None, 3),
    ("antiguo", "HISTORICAL", "BIDIRECTIONAL", None, 3),
    (
        "<cambio> de",
        "HISTORICAL",
        "FORWARD",
        [
            {
                "LOWER": {
                    "IN": [
                        "aumentó",
                        "aumento",
                        "subió",
                        "subio",
                        "bajó",
                        "bajo",
                        "cambió",
                        "cambio",
                    ]
                }
            },
            {"LOWER": {"IN": ["la", "su", "dosis", "le"]}, "OP": "*"},
            {"LOWER": "de"},
        ],
        3,
    ),
    ("si", "HYPOTHETICAL", "FORWARD", None, None),
    ("en caso de", "HYPOTHETICAL", "FORWARD", None, None),
    ("a menos que", "HYPOTHETICAL", "FORWARD", None, None),
    (
        "su <familiar>",
        "FAMILY",
        "FORWARD",
        [
            {"LOWER": {"IN": ["su", "tu"]}},
            {
                "LOWER": {
                    "IN": [
                        "madre",
                        "padre",
                        "mamá",
                        "papá",
                        "esposo",
                        "esposa",
                        "hijo",
                        "hija",
                        "hermana",
                        "hermano",
                        "pareja",
                    ]
                }
            },
        ],
        8,
    ),
    ("otro paciente", "FAMILY", "BIDIRECTIONAL", None, None),
    ("pero", "TERMINATE", "TERMINATE", None, None),
    ("ahora", "TERMINATE", "TERMINATE", None, None),
    ("a", "TERMINATE", "TERMINATE", None, None),
)

_CATEGORY: Final = {
    "NEGATED_EXISTENCE": NEGATED,
    "HISTORICAL": HISTORICAL,
    "HYPOTHETICAL": HYPOTHETICAL,
    "POSSIBLE_EXISTENCE": HYPOTHETICAL,
    "FAMILY": OTHER,
}
# Which wins when ConText gives a span more than one modifier: negation first ("not your
# old dose" is no claim of any dose), then someone else, then a condition, then the past.
_ORDER: Final = (NEGATED, OTHER, HYPOTHETICAL, HISTORICAL)

_ES_WORDS: Final = frozenset(
    [
        "el",
        "la",
        "los",
        "las",
        "de",
        "del",
        "que",
        "y",
        "en",
        "su",
        "usted",
        "para",
        "por",
        "con",
        "una",
        "un",
        "es",
        "está",
        "cita",
        "hola",
        "gracias",
        "le",
        "lo",
        "se",
        "al",
        "dosis",
        "mañana",
        "tarde",
        "doctora",
        "doctor",
        "médico",
        "favor",
        "antes",
        "ya",
        "no",
        "sí",
        "si",
        "tome",
        "tomar",
        "llame",
        "pastilla",
        "pastillas",
        "medicamento",
        "consultorio",
        "clínica",
        "reservado",
        "enviado",
    ]
)
_WORD_RE = re.compile(r"[^\W\d_]+")

_lock = threading.Lock()


def language_of(text: str) -> str:
    """ "es" when Spanish function words outnumber a sixth of the words, else "en"."""
    words = _WORD_RE.findall(text.lower())
    if not words:
        return "en"
    spanish = sum(1 for w in words if w in _ES_WORDS) + 2 * len(re.findall("[ñ¿¡]", text))
    return "es" if spanish * 6 >= len(words) else "en"


@lru_cache(maxsize=2)
def _pipeline(language: str) -> Any:
    with warnings.catch_warnings():
        # spaCy pulls Click and Weasel in as it builds a pipeline; they warn of their own
        # deprecations, which are nothing of ours.
        warnings.simplefilter("ignore")
        return _build(language)


def _build(language: str) -> Any:
    import spacy
    import spacy.tokens
    from medspacy.context import ConText, ConTextRule  # type: ignore[import-untyped]

    nlp = spacy.blank(language)  # sentences are ours (`sentences`), set on each doc
    rules = _EN_RULES if language == "en" else _ES_RULES
    context: ConText = nlp.add_pipe(
        "medspacy_context",
        config={"rules": "default" if language == "en" else None, "language_code": language},
    )
    context.add(
        [
            ConTextRule(literal, category, direction=direction, pattern=pattern, max_scope=scope)
            for literal, category, direction, pattern, scope in rules
        ]
    )
    return nlp


_ABBREV_RE = re.compile(r"(?:\b(?:Dr|Dra|Mr|Mrs|Ms|St|Sr|Sra|vs|No|approx)|\b[ap]\.m|\d)\.$", re.I)


def sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans: at . ! ? followed by a space and an upper-case letter (not after
    "Dr." or "a.m."), at a line break, or at a dash that starts a signature."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"[.!?]+(?=\s+[\"'“(¿¡A-ZÁÉÍÓÚÑ0-9])|\n+|\s[—–]\s", text):
        if m.group().startswith(".") and _ABBREV_RE.search(text[max(0, m.start() - 6) : m.end()]):
            continue
        out.append((start, m.end()))
        start = m.end()
    if start < len(text):
        out.append((start, len(text)))
    return [(a, b) for a, b in out if text[a:b].strip()]


def _question_spans(text: str) -> list[tuple[int, int]]:
    """Our sentences that ask ("… work for you?"), and a Spanish "¿…?" inside one."""
    out = [(a, b) for a, b in sentences(text) if text[a:b].rstrip().endswith("?")]
    out += [(m.start(), m.end()) for m in re.finditer(r"¿[^?]*\?", text)]
    return out


@lru_cache(maxsize=4096)
def _contexts_cached(text: str, spans: tuple[tuple[int, int], ...], language: str) -> list[str]:
    nlp = _pipeline(language)
    from spacy.tokens import Span

    with _lock:
        doc = nlp.make_doc(text)
        # Our sentences, not the sentencizer's: a line break or a signature's dash ends
        # one too ("… Riverside Family Health\nPlease double …" is two).
        starts = sorted(a for a, _ in sentences(text))
        k = 0
        for token in doc:
            first = token.i == 0
            while k < len(starts) and starts[k] <= token.idx:
                first, k = True, k + 1
            token.is_sent_start = first
        ents: list[Span] = []
        index: dict[int, int] = {}  # ent position -> spans position
        taken: set[int] = set()
        for i, (start, end) in enumerate(spans):
            span = doc.char_span(start, end, label="FACT", alignment_mode="expand")
            if span is None or any(t.i in taken for t in span):
                continue
            taken.update(t.i for t in span)
            index[len(ents)] = i
            ents.append(span)
        ents_sorted = sorted(range(len(ents)), key=lambda k: ents[k].start)
        doc.ents = [ents[k] for k in ents_sorted]
        doc = nlp.get_pipe("medspacy_context")(doc)
        found: dict[int, str] = {}
        for position, ent in enumerate(doc.ents):
            # The modifiers themselves, not the span attributes ConText sets from them:
            # those follow its `span_attrs` setting, which differs by rule set.
            kinds = {_CATEGORY.get(m.category) for m in ent._.modifiers}
            label = next((c for c in _ORDER if c in kinds), ASSERTED)
            found[index[ents_sorted[position]]] = label
    questions = _question_spans(text)
    out: list[str] = []
    for i, (start, _end) in enumerate(spans):
        label = found.get(i, ASSERTED)
        if label == ASSERTED and any(a <= start < b for a, b in questions):
            label = HYPOTHETICAL
        out.append(label)
    return out


def contexts(text: str, spans: Sequence[tuple[int, int]], language: str | None = None) -> list[str]:
    """One context per span (see the module docstring)."""
    if not spans:
        return []
    return list(_contexts_cached(text, tuple(spans), language or language_of(text)))
