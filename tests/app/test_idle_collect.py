"""The idle collection (agent_runtime/app/idle_collect.py): garbage a burst left is collected once the runtime is
quiet, never while requests flow."""

from __future__ import annotations

import asyncio
import gc
import weakref

from agent_runtime.app.idle_collect import QUIET_ALLOCATIONS, IdleCollector, should_collect


def test_quiet_with_garbage_waiting_collects() -> None:
    assert should_collect((10_000, 3, 0), (10_050, 3, 0))  # young collections since the last full one, and quiet
    assert should_collect((QUIET_ALLOCATIONS + 10, 0, 0), (QUIET_ALLOCATIONS + 20, 0, 0))  # much young, quiet


def test_a_burst_under_way_does_not_collect() -> None:
    assert not should_collect((10_000, 3, 0), (10_000 + QUIET_ALLOCATIONS, 3, 0))  # allocating
    assert not should_collect((40_000, 3, 0), (100, 4, 0))  # a young collection in between: busy


def test_nothing_to_find_does_not_collect() -> None:
    assert not should_collect((120, 0, 0), (130, 0, 0))  # just collected, barely anything since
    assert not should_collect((0, 0, 0), (0, 0, 0))


def test_cycles_left_by_a_burst_are_collected_once_quiet() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    async def scenario() -> tuple[bool, int]:
        thresholds = gc.get_threshold()
        gc.set_threshold(1_000_000, 10, 10)  # nothing collects by itself meanwhile
        try:
            gc.collect()
            nodes = [Node() for _ in range(QUIET_ALLOCATIONS * 2)]
            probe = weakref.ref(nodes[0])
            del nodes  # garbage now: cycles wait for a collection
            idle = IdleCollector(interval=0.05)
            idle.start()
            await asyncio.sleep(0.5)
            await idle.stop()
            return probe() is None, idle.collections
        finally:
            gc.set_threshold(*thresholds)

    collected, collections = asyncio.run(scenario())
    assert collected
    assert collections == 1  # once; quiet afterwards with nothing new, it does not collect again
