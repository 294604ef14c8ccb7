"""Collect the garbage a burst of requests left once the runtime goes quiet.

The runtime serves with high collector thresholds (young generation every 50,000 net allocations: +6% decisions/s,
``clients/cli.py`` ``GC_THRESHOLDS``), so between collections up to that much cyclic garbage waits. Each request
leaves cycles of its own in libraries (a2a-sdk's event queues and their locks, ~45 objects a request), and at the
end of a burst what is left waits until the next requests push the counts over the thresholds. A runtime holding
paused conversations is mostly idle: measured 1 s after 1,000 pauses, a collection found 44,000 unreachable
objects (6.8 MB).

:class:`IdleCollector` looks every ``interval`` seconds at the CPU the process used since the last look and at the
collector's counts. Quiet is CPU: a runtime serving even one request every 50 ms uses a third of a core, an idle one
next to none. (The collector's own count is no sign of traffic: net allocations stand still while requests free
what they allocate.) When quiet, and there is something to find (a young collection since the last full one, or
more than ``YOUNG_WAITING`` objects in the young generation), it collects once; the counts then start again from
zero, so it does not collect again until more traffic came and went. The start-up heap is frozen (``_settle_heap``),
so a collection walks only what serving made.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

from agent_runtime.infra.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Counts = tuple[int, int, int]  # gc.get_count(): net allocations since the young collection; young, middle collections

QUIET_CPU_SHARE = 0.02  # of one core, between two looks: below it the runtime is quiet (timers, keep-alives)
YOUNG_WAITING = 2_000  # objects in the young generation worth a collection even without a young collection since


def should_collect(cpu_seconds: float, interval: float, counts: Counts) -> bool:
    """Whether to collect now: the process used less than ``QUIET_CPU_SHARE`` of a core over the last ``interval``
    seconds (``cpu_seconds``), and garbage may wait (young collections since the last full one, or a young
    generation of more than ``YOUNG_WAITING``)."""
    quiet = cpu_seconds < QUIET_CPU_SHARE * interval
    waiting = counts[1] > 0 or counts[2] > 0 or counts[0] > YOUNG_WAITING
    return quiet and waiting


class IdleCollector:
    def __init__(self, interval: float = 0.25, counts: Callable[[], Counts] = gc.get_count,
                 collect: Callable[[], int] = gc.collect, cpu: Callable[[], float] = time.process_time) -> None:
        self._interval = interval
        self._counts = counts
        self._collect = collect
        self._cpu = cpu
        self._task: asyncio.Task[None] | None = None
        self.collections = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="idle-collect")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        before = self._cpu()
        while True:
            await asyncio.sleep(self._interval)
            now = self._cpu()
            if should_collect(now - before, self._interval, self._counts()):
                found = self._collect()
                self.collections += 1
                log.debug("idle: collected %d unreachable objects", found)
                now = self._cpu()  # the collection's own CPU is not traffic
            before = now


__all__ = ["IdleCollector", "should_collect"]
