"""When PostgreSQL or Redis is away: what counts as that, and saying so in the log once.

A backing service that stops, restarts or drops its connections is an outage, not a bug:
the API answers 503 with `Retry-After` while PostgreSQL is away (app/main.py), the job
queue skips Redis for a moment and leaves committed work to the worker's sweeps
(app/jobs.py), and the worker waits and reconnects (app/worker.py). Each logs the
outage once when it begins and once when it ends, not once per request or tick.
"""

from __future__ import annotations

import logging
import time

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# PostgreSQL: refused or dropped connections, "the database system is shutting down /
# starting up" (57P01-57P03), too many connections; Redis: its connection errors; and the
# operating system's refused, reset or timed-out sockets under either.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    TimeoutError,
)

# How long a client is told to wait before it tries again.
RETRY_AFTER_SECONDS = 2


def is_outage(exc: BaseException) -> bool:
    """Whether the error (or one it was raised from) means a backing service is away."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OUTAGE_ERRORS):
            return True
        # A pooled connection the server dropped: "connection is closed", or, when the
        # server ended the session under a query, asyncpg's confused protocol state
        # ("cannot switch to state 12; another operation (2) is in progress", asyncpg
        # issue 1069). The pool discards such a connection when it is released.
        text = str(current)
        if isinstance(current, asyncpg.InterfaceError) and "connection is closed" in text:
            return True
        if isinstance(current, asyncpg.InternalClientError) and "cannot switch to state" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


class OutageLog:
    """One warning when a service goes away and one when it is back, however many
    requests or ticks meet the outage in between."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self._since: float | None = None

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException, consequence: str) -> None:
        if self._since is None:
            self._since = time.monotonic()
            self._log.warning(
                "%s_unavailable error=%s: %s; %s",
                self._what,
                type(exc).__name__,
                exc,
                consequence,
            )

    def ok(self) -> None:
        if self._since is not None:
            self._log.warning("%s_back after %.1f s", self._what, time.monotonic() - self._since)
            self._since = None
