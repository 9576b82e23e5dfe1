"""What the system was shown, as sentences of words: every sentence of what it read
(and of the chart as it reads now), and of what the scenario vouches for — what a care
instruction, a drug or an event named may come from."""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from app.grading.resource import ref_of
from app.grading.snapshot import RunSnapshot
from app.grading.truth.chart import words_of


def _blobs(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        if len(value) > 12 and " " in value:
            out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in ("reference", "system", "url", "id", "fullUrl"):
                _blobs(v, out)
    elif isinstance(value, list):
        for item in value:
            _blobs(item, out)
    return out


@lru_cache(maxsize=8192)
def _blob_sentences(blob: str) -> tuple[frozenset[str], ...]:
    """Each sentence's words, and its numbers as "#10" (a care instruction restated in
    other words keeps them)."""
    out = []
    for sentence in re.split(r"(?<!\d)[.!?](?!\d)|[\n;]", blob):
        ws = frozenset(words_of(sentence)) | {f"#{n}" for n in re.findall(r"\d+", sentence)}
        if ws:
            out.append(ws)
    return tuple(out)


_shown_cache: dict[int, tuple[list[Any], list[frozenset[str]], frozenset[str]]] = {}
_shown_lock = threading.Lock()


def sentence_sets(values: Any) -> tuple[list[frozenset[str]], frozenset[str]]:
    sets = [s for blob in _blobs(values, []) for s in _blob_sentences(blob)]
    return sets, frozenset().union(*sets) if sets else frozenset()


def source_sentences(snapshot: RunSnapshot) -> tuple[list[frozenset[str]], set[str]]:
    """The word sets of every sentence the system was shown (and of the chart as it reads
    now), and every word of them. What was shown is one list per snapshot that the
    check's near misses share: read once (keyed by identity, as `_source_index` is)."""
    key = id(snapshot.shown)
    with _shown_lock:
        cached = _shown_cache.get(key)
    if cached is None or cached[0] is not snapshot.shown:
        sets, words = sentence_sets(snapshot.shown)
        cached = (snapshot.shown, sets, words)
        with _shown_lock:
            while len(_shown_cache) >= 8:
                _shown_cache.pop(next(iter(_shown_cache)))
            _shown_cache[key] = cached
    if snapshot.shown:
        return cached[1], set(cached[2])
    # Without a record of what was shown (a snapshot built without it), the fixture as it
    # read before the run's writes: never the run's own texts, which would vouch for
    # themselves.
    befores = {ref_of(c): c.before for c in snapshot.changed}
    fixture = [
        befores.get(ref) or snapshot.current.get(symbol) for symbol, ref in snapshot.fixture.items()
    ]
    own_sets, own_words = sentence_sets([b for b in fixture if b])
    return own_sets, set(own_words)
