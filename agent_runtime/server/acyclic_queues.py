"""a2a-sdk's per-task event queues, freed by reference counting when their task is done (issue 40, bar 2).

Every message a2a-sdk 1.x handles builds an ``ActiveTask`` with five async queues (its request queue; the incoming
queue of the agent's event source and that of its default sink; the incoming queue of the subscribers' source and
that of the request's tap on it). Two things put them in reference cycles, so none is freed when the task is
released: they wait for the garbage collector, whose serving thresholds are high on purpose (``clients/cli.py``), and
with 1,000 paused conversations ~44,000 such objects (6.8 MB) were waiting (bench/README.md, "Issue 40, bar 2: what a
pause leaves for the collector"):

- on Python < 3.13 a2a-sdk's queues are ``culsans`` queues, and a culsans queue made without a ``sizer`` keeps its
  own bound method (``self._isize = self.__isize``): queue → method → queue. Given a plain function as the sizer
  (one per item, what the default counts) it keeps none;
- the agent's ``EventQueueSource`` and its default ``EventQueueSink`` name each other (``_default_sink`` /
  ``_parent``). The sink needs its parent only while the source lives (to leave its set of sinks, or to tap it),
  so here it holds it weakly.

:func:`install` puts both in place of a2a-sdk's own, in the two a2a-sdk modules that build them, once, before the
first request (:class:`~agent_runtime.server.resume.GatehouseRequestHandler` calls it). Behaviour is unchanged: the
same queues and the same sources, minus the references that closed the loops. No collection is triggered anywhere
(an idle collector cost ~6% CPU per pause+resume: measured and dropped). ``tests/server/test_acyclic_queues.py``
counts what a2a-sdk leaves behind after requests with the collector off; it fails if an a2a-sdk upgrade moves these
names and :func:`install` stops applying.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from a2a.server.agent_execution import active_task
from a2a.server.events import event_queue_v2


def _one_per_item(_item: object) -> int:
    """A queue item's size, as culsans's default sizer counts it (a module function: no reference to the queue)."""
    return 1


def acyclic_async_queue(maxsize: int = 0) -> Any:
    """``a2a.utils._async_queue_compat.create_async_queue`` (Python < 3.13) without the queue's cycle through its own
    sizer. From 3.13 a2a-sdk uses asyncio's own queue, which has none, and this is not installed."""
    import culsans

    return culsans.Queue(maxsize=maxsize, sizer=_one_per_item).async_q


class _WeakParent:
    """What a sink asks of its parent (``remove_sink`` when it closes, ``tap``), through a weak reference: a sink
    closed after its source is gone has nothing to leave, and a tap of it says why it cannot."""

    def __init__(self, source: event_queue_v2.EventQueueSource) -> None:
        self._source = weakref.ref(source)

    async def remove_sink(self, sink: event_queue_v2.EventQueueSink) -> None:
        source = self._source()
        if source is not None:
            await source.remove_sink(sink)

    async def tap(self, **kwargs: Any) -> event_queue_v2.EventQueueSink:
        source = self._source()
        if source is None:
            raise RuntimeError("the event source of this sink is gone: nothing to tap")
        return await source.tap(**kwargs)


class AcyclicEventQueueSource(event_queue_v2.EventQueueSource):
    """a2a-sdk's event source whose default sink holds it weakly (the source keeps the sink, not the other way)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sink = self._default_sink
        if sink is not None:
            sink._parent = _WeakParent(self)  # type: ignore[assignment]  # what a sink calls on its parent, weakly


def install() -> None:
    """Build a2a-sdk's task queues and agent event sources as above from now on (idempotent)."""
    if sys.version_info < (3, 13):
        event_queue_v2.create_async_queue = acyclic_async_queue  # type: ignore[attr-defined]
        active_task.create_async_queue = acyclic_async_queue  # type: ignore[attr-defined]
    active_task.EventQueueSource = AcyclicEventQueueSource  # type: ignore[attr-defined]


__all__ = ["AcyclicEventQueueSource", "acyclic_async_queue", "install"]
