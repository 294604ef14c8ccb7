"""The idle collection (agent_runtime/app/idle_collect.py): garbage a burst left is collected once the runtime is
quiet, never while requests flow."""

from __future__ import annotations

import asyncio
import gc
import weakref

from agent_runtime.app.idle_collect import QUIET_CPU_SHARE, YOUNG_WAITING, IdleCollector, should_collect


def test_quiet_with_garbage_waiting_collects() -> None:
    assert should_collect(0.0, 0.25, (100, 3, 0))  # young collections since the last full one
    assert should_collect(0.001, 0.25, (YOUNG_WAITING + 1, 0, 0))  # a large young generation


def test_traffic_does_not_collect() -> None:
    # one request every 50 ms keeps a runtime at about a third of a core, whatever the collector's counts say
    assert not should_collect(0.08, 0.25, (100, 3, 0))
    assert not should_collect(QUIET_CPU_SHARE * 0.25, 0.25, (YOUNG_WAITING + 1, 2, 1))


def test_nothing_to_find_does_not_collect() -> None:
    assert not should_collect(0.0, 0.25, (120, 0, 0))  # just collected, barely anything since


def test_cycles_left_by_a_burst_are_collected_once_quiet() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    async def scenario() -> tuple[bool, int]:
        thresholds = gc.get_threshold()
        gc.set_threshold(1_000_000, 10, 10)  # nothing collects by itself meanwhile
        try:
            gc.collect()
            nodes = [Node() for _ in range(YOUNG_WAITING * 2)]
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
