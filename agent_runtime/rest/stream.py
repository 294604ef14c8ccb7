"""``GET /approvals/events``: server-sent events, one per requested or decided approval request.

An :class:`EventStream` listens to the approval events (after each commit) and hands each record to every
connected client's bounded queue; the client's response renders it (``decided_by`` looked up then) as
``event: requested|decided``, ``id: <stream>-<n>`` and JSON ``data``
(:class:`~agent_runtime.rest.models.ApprovalEventData`). ``<stream>`` names this runtime process's stream (a
random token), ``<n>`` increases within it. sse-starlette sends keep-alive comments.

Nothing is missed across a reconnect: the stream keeps its last ``keep`` events (default: two queues), and a
client that reconnects with ``Last-Event-ID`` (browsers' ``EventSource`` does it by itself) first gets the events
after that one. The first message of every connection carries the current position as an ``id`` (no data), so
even a connection that saw no event can resume. When the id cannot be resumed from -- another stream (the
runtime restarted, or it is another replica's), events no longer kept, or an id never issued -- the client gets
one ``event: reset`` (its ``data`` says why) and should list ``GET /approvals`` again, then follow. A client too
slow to keep up with ``queue_size`` events is disconnected; it reconnects and resumes like any other.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence

from sse_starlette import EventSourceResponse, ServerSentEvent

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.infra.database import Database
from agent_runtime.rest.models import ApprovalEventData, StreamReset
from agent_runtime.rest.views import views

log = logging.getLogger(__name__)

_CLOSE = None  # queued to a client that fell behind
Item = tuple[int, str, ApprovalRecord]  # (number in this stream, requested|decided, the record)


class EventStream:
    def __init__(self, db: Database, agent: str, queue_size: int = 1000, ping: float = 15.0, keep: int | None = None) -> None:
        self._db = db
        self._agent = agent
        self._queue_size = queue_size
        self._ping = ping
        self._stream = secrets.token_hex(4)
        self._last = 0  # the number of the newest event
        # What a reconnecting client may have missed: twice a queue, so a client dropped for falling a whole queue
        # behind still resumes.
        self._recent: deque[Item] = deque(maxlen=keep or 2 * queue_size)
        self._clients: set[asyncio.Queue[Item | None]] = set()

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """The approval-events listener: queue only, never wait (requests and decisions; not each vote)."""
        if event.kind in ("voted", "executed"):
            return
        for record in event.records:
            self._last += 1
            item = (self._last, event.kind, record)
            self._recent.append(item)
            for queue in list(self._clients):
                try:
                    queue.put_nowait(item)
                except asyncio.QueueFull:
                    log.warning("SSE client fell %d events behind; disconnecting it", self._queue_size)
                    self._clients.discard(queue)
                    queue.get_nowait()
                    queue.put_nowait(_CLOSE)

    def response(
        self, last_event_id: str | None = None, visible: Callable[[ApprovalRecord], bool] = lambda _: True,
    ) -> EventSourceResponse:
        """The stream from now on; with ``last_event_id``, first what came after that event (or a reset). Only events
        of requests ``visible`` admits are sent (the ids of the others are simply skipped)."""
        queue: asyncio.Queue[Item | None] = asyncio.Queue(self._queue_size)
        # Missed events and the live queue are taken in one step (no await between): no gap, no repeat.
        missed, reset = self._since(last_event_id)
        self._clients.add(queue)
        events = self._events(queue, self._last, [m for m in missed if visible(m[2])], reset, visible)
        return EventSourceResponse(events, ping=self._ping, headers={"Cache-Control": "no-store"})

    def _since(self, last_event_id: str | None) -> tuple[list[Item], str | None]:
        """The kept events after ``last_event_id``, or why the client must list again."""
        if not last_event_id:
            return [], None
        stream, _, number = last_event_id.strip().partition("-")
        if stream != self._stream or not number.isdigit():
            return [], (f"event id {last_event_id!r} is not from this stream (the runtime restarted, or this is another "
                        "replica): list GET /approvals again, then follow")
        after = int(number)
        oldest = self._recent[0][0] if self._recent else self._last + 1
        if after > self._last:
            return [], f"event id {last_event_id!r} was never sent: list GET /approvals again, then follow"
        if after < oldest - 1:
            return [], (f"the events after {last_event_id!r} are no longer kept (the last {self._recent.maxlen} are): "
                        "list GET /approvals again, then follow")
        return [item for item in self._recent if item[0] > after], None

    async def _events(
        self, queue: asyncio.Queue[Item | None], position: int, missed: Sequence[Item], reset: str | None,
        visible: Callable[[ApprovalRecord], bool],
    ) -> AsyncIterator[ServerSentEvent]:
        try:
            # Flushes the headers at once, and gives the client a position to resume from even if nothing happens.
            yield ServerSentEvent(comment="gatehouse approval events", id=self._id(position))
            if reset is not None:
                data = StreamReset(agent=self._agent, reason=reset).model_dump_json()
                yield ServerSentEvent(data=data, event="reset", id=self._id(position))
            for item in missed:
                yield await self._render(item)
            while (queued := await queue.get()) is not _CLOSE:
                if visible(queued[2]):
                    yield await self._render(queued)
        finally:
            self._clients.discard(queue)

    async def _render(self, item: Item) -> ServerSentEvent:
        number, kind, record = item
        (view,) = await views(self._db, [record])
        data = ApprovalEventData(event=kind, agent=self._agent, approval=view)  # type: ignore[arg-type]
        return ServerSentEvent(data=data.model_dump_json(), event=kind, id=self._id(number))

    def _id(self, number: int) -> str:
        return f"{self._stream}-{number}"

    @property
    def clients(self) -> int:
        return len(self._clients)


__all__ = ["EventStream"]
