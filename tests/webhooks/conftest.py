"""Fixtures of the webhook tests: a real receiver on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webhooks.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()
