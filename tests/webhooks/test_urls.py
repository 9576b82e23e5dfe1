"""Webhook URLs: private addresses refused when the deployment says so, resolved without
blocking the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.errors import Unprocessable
from app.webhooks.service import check_url


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://localhost:9/", "http://[::1]/"])
async def test_private_addresses_are_refused_when_not_allowed(url: str) -> None:
    with pytest.raises(Unprocessable, match="private address"):
        await check_url(url, allow_private=False)
    assert await check_url(url, allow_private=True) == url


async def test_resolving_does_not_block_the_loop() -> None:
    """While a URL is checked, other tasks keep running (the resolver is off the loop)."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    with pytest.raises(Unprocessable):
        await check_url("http://localhost:9/", allow_private=False)
    ticker.cancel()
    assert ticks > 0, f"no other task ran in {time.perf_counter() - started:.3f} s"
