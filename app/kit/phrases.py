"""Text normalisation and phrase matching for message checks (app/grading/message) and for
scenario validation (a phrase both required and forbidden), which sits below grading and
so finds it here.

`fold(text)` returns a `Folded` text: lower case (casefold), accents removed (NFKD with the
combining marks dropped, so "Mañana" folds to "manana"), every apostrophe-like character
made `'`, every dash-like character made `-`, and every run of whitespace made one space.
`Folded.origin[i]` is the index in the original text of folded character `i`, so a match
found in folded text is quoted from the message as it was written.

`fold(text, keep_accents=True)` keeps the accents (the claim and register lexicons need
them: "reservé" is a claim, "reserve" is the subjunctive of an offer; "te" is a pronoun,
"té" is tea).

A phrase is matched *as text*, not as a word: `find_phrase("free", "freedom")` matches.
That is deliberate (a forbidden "free" should also catch "free-of-charge" and "freebie");
write the shortest phrase that can only mean the thing. Word-bounded matching is
`find_word` (used by the lexicons, never by `says`/`saysAny`/`not`).

Public API:
- `fold(text, keep_accents=False) -> Folded`
- `fold_phrase(phrase) -> str`: the folded form of a phrase (what is searched for).
- `find_phrase(phrase, message, message_index=0) -> PhraseMatch | None`: the first match.
- `find_phrases(phrases, messages) -> dict[str, list[PhraseMatch]]`: every phrase mapped to
  its first match in each message it appears in (empty list: said nowhere).
- `quote(text, start, end, context=QUOTE_CONTEXT) -> str`: the span with some context, on
  one line, with "…" where it was cut.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

# Enough either side for a reader to see the sentence the phrase sits in, short enough that
# evidence naming several phrases stays readable.
QUOTE_CONTEXT = 40

_APOSTROPHES = frozenset("'`´ʹʻʼʽˈ‘’‚‛′")
_DASHES = frozenset("-‐‑‒–—―−﹣－")
_SPACE_RE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Folded:
    """Folded text; `origin[i]` is the original index of folded character `i`, and
    `origin[len(text)]` is the original length (so an end index maps too)."""

    text: str
    origin: tuple[int, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of folded span [start, end)."""
        if start >= end:
            return self.origin[start], self.origin[start]
        return self.origin[start], self.origin[end - 1] + 1


@lru_cache(maxsize=4096)
def _fold_char(char: str, keep_accents: bool) -> str:
    if char in _APOSTROPHES:
        return "'"
    if char in _DASHES:
        return "-"
    if char.isspace():
        return " "
    if char.isascii():
        return char.lower()
    if keep_accents:
        return unicodedata.normalize("NFC", char.casefold())
    decomposed = unicodedata.normalize("NFKD", char.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# Runs that need more than `str.lower()`: whitespace, anything not ASCII, the backtick.
_SPECIAL_RE = re.compile(r"\s+|[^\x00-\x7f]|`")


# Texts up to this long are folded once per process: a live run is graded after every
# write, and its messages and sources read the same from pass to pass. Longer ones (a
# source body of tens of kilobytes) are folded afresh, so the cache stays small.
FOLD_CACHED_CHARS = 4096


def fold(text: str, keep_accents: bool = False) -> Folded:
    if len(text) <= FOLD_CACHED_CHARS:
        return _fold_cached(text, keep_accents)
    return _fold(text, keep_accents)


@lru_cache(maxsize=8192)
def _fold_cached(text: str, keep_accents: bool) -> Folded:
    return _fold(text, keep_accents)


def _fold(text: str, keep_accents: bool) -> Folded:
    out: list[str] = []
    origin: list[int] = []
    previous_space = True  # also strips leading whitespace
    pos = 0
    # Plain ASCII chunks are lowered whole (one character for one): folding source bodies
    # of tens of kilobytes must stay cheap.
    for m in _SPECIAL_RE.finditer(text):
        start = m.start()
        if start > pos:
            out.append(text[pos:start].lower())
            origin.extend(range(pos, start))
            previous_space = False
        run = m.group()
        if run[0].isspace():
            if not previous_space:
                out.append(" ")
                origin.append(start)
                previous_space = True
        else:
            for piece in _fold_char(run, keep_accents):
                if piece == " ":
                    if previous_space:
                        continue
                    previous_space = True
                else:
                    previous_space = False
                out.append(piece)
                origin.append(start)
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:].lower())
        origin.extend(range(pos, len(text)))
    folded = "".join(out)
    if folded.endswith(" "):
        folded = folded[:-1]
        origin.pop()
    origin.append(len(text))
    return Folded(folded, tuple(origin))


@lru_cache(maxsize=4096)
def fold_phrase(phrase: str) -> str:
    return fold(phrase).text


def quote(text: str, start: int, end: int, context: int = QUOTE_CONTEXT) -> str:
    left = max(0, start - context)
    right = min(len(text), end + context)
    # Cut at a word boundary so the quote does not start or end mid-word.
    if left > 0:
        space = text.find(" ", left, start)
        left = space + 1 if space != -1 else left
    if right < len(text):
        space = text.rfind(" ", end, right)
        right = space if space != -1 else right
    body = _SPACE_RE.sub(" ", text[left:right]).strip()
    return ("…" if left > 0 else "") + body + ("…" if right < len(text) else "")


@dataclass(frozen=True, slots=True)
class PhraseMatch:
    """Where `phrase` was found: message `message_index`, original span [start, end),
    `matched` the text as written there and `quote` the message around it."""

    phrase: str
    message_index: int
    start: int
    end: int
    matched: str
    quote: str


def _match_at(
    phrase: str, message: str, folded: Folded, at: int, length: int, index: int
) -> PhraseMatch:
    start, end = folded.span(at, at + length)
    return PhraseMatch(phrase, index, start, end, message[start:end], quote(message, start, end))


def find_phrase(
    phrase: str, message: str, message_index: int = 0, folded: Folded | None = None
) -> PhraseMatch | None:
    needle = fold_phrase(phrase)
    if not needle:
        return None
    haystack = folded if folded is not None else fold(message)
    at = haystack.text.find(needle)
    if at == -1:
        return None
    return _match_at(phrase, message, haystack, at, len(needle), message_index)


def find_phrases(phrases: Iterable[str], messages: Sequence[str]) -> dict[str, list[PhraseMatch]]:
    folded = [fold(m) for m in messages]
    found: dict[str, list[PhraseMatch]] = {}
    for phrase in phrases:
        matches = found.setdefault(phrase, [])
        for index, message in enumerate(messages):
            match = find_phrase(phrase, message, index, folded[index])
            if match is not None:
                matches.append(match)
    return found


def find_word(word_pattern: str, folded: Folded) -> list[tuple[int, int]]:
    """Folded spans of a whole-word regex (letters on neither side)."""
    pattern = _word_regex(word_pattern)
    return [(m.start(), m.end()) for m in pattern.finditer(folded.text)]


@lru_cache(maxsize=1024)
def _word_regex(word_pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\W\d_])(?:{word_pattern})(?![^\W\d_])")
