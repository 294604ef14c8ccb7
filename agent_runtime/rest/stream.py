"""``GET /approvals/events``: server-sent events, one per requested or decided approval request.

An :class:`EventStream` listens to the approval events (after each commit) and hands each record to every
connected client's bounded queue; the client's response renders it (``decided_by`` looked up then) as
``event: requested|decided``, ``id: <n>`` (increasing within this runtime process) and JSON ``data``
(:class:`~agent_runtime.rest.models.ApprovalEventData`). sse-starlette sends keep-alive comments. A client
too slow to keep up with ``queue_size`` events is disconnected (it reconnects and re-lists).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.database import Database
from agent_runtime.rest.models import ApprovalEventData
from agent_runtime.rest.views import views

log = logging.getLogger(__name__)

_CLOSE = None  # queued to a client that fell behind


class EventStream:
    def __init__(self, db: Database, agent: str, queue_size: int = 1000, ping: float = 15.0) -> None:
        self._db = db
        self._agent = agent
        self._queue_size = queue_size
        self._ping = ping
        self._ids = itertools.count(1)
        self._clients: set[asyncio.Queue[tuple[int, str, ApprovalRecord] | None]] = set()

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """The approval-events listener: queue only, never wait."""
        for record in event.records:
            item = (next(self._ids), event.kind, record)
            for queue in list(self._clients):
                try:
                    queue.put_nowait(item)
                except asyncio.QueueFull:
                    log.warning("SSE client fell %d events behind; disconnecting it", self._queue_size)
                    self._clients.discard(queue)
                    queue.get_nowait()
                    queue.put_nowait(_CLOSE)

    def response(self) -> EventSourceResponse:
        queue: asyncio.Queue[tuple[int, str, ApprovalRecord] | None] = asyncio.Queue(self._queue_size)
        self._clients.add(queue)
        return EventSourceResponse(self._events(queue), ping=self._ping, headers={"Cache-Control": "no-store"})

    async def _events(self, queue: asyncio.Queue[tuple[int, str, ApprovalRecord] | None]) -> AsyncIterator[ServerSentEvent]:
        try:
            yield ServerSentEvent(comment="gatehouse approval events")  # flushes the headers at once
            while (item := await queue.get()) is not _CLOSE:
                number, kind, record = item
                (view,) = await views(self._db, [record])
                data = ApprovalEventData(event=kind, agent=self._agent, approval=view)  # type: ignore[arg-type]
                yield ServerSentEvent(data=data.model_dump_json(), event=kind, id=str(number))
        finally:
            self._clients.discard(queue)

    @property
    def clients(self) -> int:
        return len(self._clients)


__all__ = ["EventStream"]
