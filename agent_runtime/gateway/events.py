"""Resumable streams: the SSE events of recent responses, kept so that a client whose stream was cut reconnects with
``Last-Event-ID`` and gets what it missed (the MCP SDK's ``EventStore``; the Python SDK's client resumes only from a
server that sends event ids). Used on the handshake-era protocols; the 2026-07-28 protocol has no resumable streams.

In memory and bounded: a held call outlives neither a restart of the gateway nor :data:`MAX_EVENTS` later events in
this store; its client's retry of the same call finds the request then (agent_runtime/gateway/held.py)."""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

MAX_EVENTS = 10_000


class RecentEvents(EventStore):
    def __init__(self, limit: int = MAX_EVENTS) -> None:
        self._limit = limit
        self._events: OrderedDict[str, tuple[str, JSONRPCMessage | None]] = OrderedDict()  # id -> (stream, message)
        self._prefix = uuid.uuid4().hex[:12]  # ids of another process's events are never mistaken for ours
        self._count = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = f"{self._prefix}-{next(self._count)}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self._limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream, after = found[0], False
        for event_id, (stream_id, message) in list(self._events.items()):
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


__all__ = ["MAX_EVENTS", "RecentEvents"]
