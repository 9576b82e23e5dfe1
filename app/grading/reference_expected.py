"""The expected change set of `matches-reference`: the scenario's oracle replayed from the
run's own starting point (`app.grading.replay`), cached per starting point (a live run
is graded after every write, and its starting point does not change)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import orjson

from app.grading.replay import Replay, starting_point
from app.grading.snapshot import (
    ChangedResource,
    RunSnapshot,
    SentText,
)
from app.scenarios.schema import OracleCall

# Expected change sets kept per process: a live run is graded after every write, and
# its starting point does not change.
REPLAY_CACHE_SIZE = 512

_replays: OrderedDict[bytes, tuple[list[ChangedResource], set[str], list[SentText]]] = OrderedDict()
_replays_lock = threading.Lock()  # the scenario check grades in worker threads


def expected_changes(
    snapshot: RunSnapshot, oracle: list[OracleCall]
) -> tuple[RunSnapshot, list[ChangedResource], set[str], list[SentText]]:
    """The run's starting point, the changes the oracle makes from it, the resources it
    reads by id (what the reference solution looked at), and the SMS and e-mail it sends
    (captured effects)."""
    start = starting_point(snapshot)
    key = orjson.dumps(
        [
            snapshot.run_id,
            snapshot.started_at.isoformat(),
            [c.model_dump(mode="json") for c in oracle],
            start.fixture,
            start.current,
        ],
        option=orjson.OPT_SORT_KEYS,
        default=str,
    )
    with _replays_lock:
        cached = _replays.get(key)
        if cached is not None:
            _replays.move_to_end(key)
    if cached is None:
        replayed = Replay(start).run(oracle)
        read = {
            c.path.strip("/")
            for c in replayed.calls
            if c.method == "GET" and c.path.strip("/").count("/") == 1 and "$" not in c.path
        }
        cached = (replayed.changed, read, replayed.sent)
        with _replays_lock:
            _replays[key] = cached
            while len(_replays) > REPLAY_CACHE_SIZE:
                _replays.popitem(last=False)
    return start, cached[0], set(cached[1]), list(cached[2])
