"""Words for matching patient messages and rubric texts: folded, tokenised, stemmed.

Shared by the simulated patient (which facts a message asks about) and the heuristic
judge (which rubric terms a text covers), so both read words the same way.
"""

from __future__ import annotations

import re
import unicodedata

_TOKEN_RE = re.compile(r"\d+(?:\.\d+)+|[a-z0-9]+(?:'[a-z]+)*")


def fold(text: str) -> str:
    """Lower-case, accent-free text with straight apostrophes ("Día’s" -> "dia's")."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return bare.casefold().replace("\u2019", "'").replace("\u2018", "'")


def tokens(text: str) -> list[str]:
    """Words of `text`, folded; a possessive "'s" is dropped ("patient's" -> "patient")."""
    out = []
    for token in _TOKEN_RE.findall(fold(text)):
        out.append(token[:-2] if token.endswith("'s") else token)
    return out


def stem(word: str) -> str:
    """A deliberately small stemmer: plural, -ing, -ed and a final -e, so that
    "mornings"/"morning", "pharmacies"/"pharmacy", "driving"/"drive", "booked"/"book"
    compare equal. Both sides of every comparison go through it."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("ches", "shes", "sses", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    undouble = False
    if word.endswith("ing") and len(word) > 5:
        word, undouble = word[:-3], True
    elif word.endswith("ed") and not word.endswith("eed") and len(word) > 5:
        word, undouble = word[:-2], True
    if undouble and len(word) >= 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def stems(text: str) -> list[str]:
    return [stem(t) for t in tokens(text)]
