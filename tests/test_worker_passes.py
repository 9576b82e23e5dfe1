"""One grading pass per run at a time in a worker (app/worker.py `OnePassPerRun`)."""

from __future__ import annotations

import asyncio

from app.worker import OnePassPerRun


async def test_passes_of_one_run_take_turns_and_other_runs_do_not_wait() -> None:
    passes = OnePassPerRun()
    inside: list[str] = []
    most = {"a": 0, "b": 0}
    release = asyncio.Event()

    async def one(run: str) -> None:
        async with passes.hold(run):
            inside.append(run)
            most[run] = max(most[run], inside.count(run))
            await release.wait()
            inside.remove(run)

    tasks = [asyncio.create_task(one(r)) for r in ("a", "a", "a", "b")]
    await asyncio.sleep(0.01)
    assert sorted(inside) == ["a", "b"]  # the second and third pass of "a" wait
    release.set()
    await asyncio.gather(*tasks)
    assert most == {"a": 1, "b": 1}
    assert not passes._locks and not passes._waiting  # nothing kept once all are done


async def test_a_pass_that_raises_lets_the_next_one_in() -> None:
    passes = OnePassPerRun()

    async def failing() -> None:
        async with passes.hold("a"):
            raise RuntimeError("the pass failed")

    results = await asyncio.gather(failing(), failing(), return_exceptions=True)
    assert [type(r) for r in results] == [RuntimeError, RuntimeError]
    assert not passes._locks
