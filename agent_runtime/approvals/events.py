"""Approval events: what the mirror, REST/SSE, webhooks and metrics hear about, after each commit.

The :class:`~agent_runtime.approvals.service.ApprovalService` publishes an event only once the change is
committed, so a listener never announces something a crash could undo. Listeners are called in order,
must be quick (queue work, don't do it inline) and can never break the decision path: an exception in a
listener is logged and swallowed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_runtime.approvals.records import ApprovalRecord

log = logging.getLogger(__name__)

EventKind = Literal["requested", "decided", "voted", "executed"]


@dataclass(frozen=True)
class ApprovalEvent:
    """``requested``: new pending records (one model turn). ``decided``: records just resolved, with source.
    ``voted``: records still pending after a vote (counted or refused), with the channel it came through.
    ``executed``: an approved call whose tool returned, with what its result said (``exec_outcome``)."""

    kind: EventKind
    records: tuple[ApprovalRecord, ...]
    source: str = ""


Listener = Callable[[ApprovalEvent], Awaitable[None] | None]


class ApprovalEvents:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def publish(self, kind: EventKind, records: Sequence[ApprovalRecord], source: str = "") -> None:
        if not records or not self._listeners:
            return
        event = ApprovalEvent(kind, tuple(records), source)
        for listener in list(self._listeners):
            try:
                result = listener(event)
                if result is not None:
                    await result
            except Exception:  # a listener must never break a decision
                log.exception("approval event listener failed on %s", kind)
