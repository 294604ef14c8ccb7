"""What every kind's flow shares: the resume tail, the sweeper (or watcher) that resolves pauses inside the runtime
through the request handler, and the runtime bundle the app opens and closes.

A kind's own steps stay in its package as hooks: the question's confirm stage, elicitation's claim-before-retry with
the next round written in the same transaction, delegation's forwarding and polling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, SendMessageRequest

from agent_runtime.infra.periodic import PeriodicSweep
from agent_runtime.pauses.kind import Internal, Outcome, Report
from agent_runtime.pauses.store import PauseStore
from agent_runtime.runs import replies

log = logging.getLogger(__name__)

R = TypeVar("R")
S = TypeVar("S", bound=PauseStore[Any])


async def resume_tail(
    updater: TaskUpdater, outcome: Outcome, report: Report, metadata: dict[str, Any], notes: Sequence[str] = (),
) -> None:
    """The end of every resume: a turn that paused again is reported by the executor; else the model's reply
    completes the task as its reply artifact (fails it when the run only erred), with the kind's ``metadata`` on the
    final status and its ``notes`` after the reply (:mod:`agent_runtime.runs.replies`)."""
    if outcome.paused:
        return await report(updater, outcome)
    text = outcome.text or ("; ".join(outcome.errors) if outcome.errors else "(no reply)")
    await replies.finish(updater, [text, *notes], failed=bool(outcome.errors and not outcome.text),
                         metadata=metadata, status_metadata={"interrupt_type": None})


def text_message(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


class KindBase(Generic[R, S]):
    """The :class:`~agent_runtime.pauses.kind.PauseKind` members every kind over a :class:`PauseStore` answers alike;
    a kind overrides what differs (``withdraw`` for a pause that ends the cancel, ``canceled`` for one ended after)."""

    _store: S

    async def open_in_context(self, context_id: str) -> list[R]:
        return await self._store.open_in_context(context_id)

    async def for_task(self, task_id: str) -> list[R]:
        return await self._store.for_task(task_id)

    async def waiting(self, task_id: str) -> bool:
        return any(r.open for r in await self._store.for_task(task_id))  # type: ignore[attr-defined]

    def finished_text(self, records: Sequence[R]) -> str:
        """What a message to a finished task whose last pause was this kind's is told: the kind's "Already …"."""
        return str(self._store.already([r for r in records if not r.open]))  # type: ignore[attr-defined]

    async def withdraw(self, task_id: str) -> bool:
        return False

    async def canceled(self, task_id: str) -> None:
        return None


def replayed(data_parts: Sequence[Any], key: str, records: Sequence[R]) -> list[R]:
    """Finished pauses of the task that an answer names again under ``key`` (a replay: told "Already …")."""
    named: set[str] = set()
    for data in data_parts:
        answers = data.get(key) if isinstance(data, dict) else None
        if isinstance(answers, dict):
            named.update(answers)
    return [r for r in records if r.id in named and not r.open]  # type: ignore[attr-defined]


class InternalSweep(PeriodicSweep, Generic[R]):
    """Every ``interval`` seconds: the pauses :meth:`due` returns are resolved one by one (:meth:`resolve`), all at
    once; a failure is logged and the next round goes on. :meth:`send` delivers an in-process verdict through the
    request handler, like any decision (serialised with the task's other messages, in its history)."""

    def __init__(self, handler: DefaultRequestHandler, interval: float) -> None:
        super().__init__(interval)
        self._handler = handler

    async def due(self) -> Sequence[R]:
        raise NotImplementedError

    async def resolve(self, record: R) -> Any:
        raise NotImplementedError

    async def sweep(self) -> int:
        due = await self.due()
        results = await asyncio.gather(*(self.resolve(r) for r in due), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.error("%s: resolving a pause failed: %r", self.name, result)
        return self.counted(due, results)

    def counted(self, due: Sequence[R], results: Sequence[Any]) -> int:
        """What a round returns (tests and logs): how many pauses were due, unless the kind counts otherwise."""
        return len(due)

    async def send(self, record: Any, message_id: str, parts: list[Part], key: str, internal: Internal,
                   metadata: dict[str, Any] | None = None) -> None:
        message = Message(role=Role.ROLE_AGENT, message_id=message_id, task_id=record.task_id,
                          context_id=record.context_id, parts=parts, metadata=metadata)
        await self._handler.on_message_send(SendMessageRequest(message=message), ServerCallContext(state={key: internal}))


class PauseRuntime:
    """A kind's parts in one runtime: its store, its flow (once the turn runner exists) and its sweeper or watcher
    (once the request handler exists); the app creates it, hands the parts on, and opens and closes it."""

    store: Any
    sweeper: PeriodicSweep | None = None

    async def open(self) -> None:
        await self.store.create_tables()
        if self.sweeper is not None:
            self.sweeper.start()

    async def close(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.stop()


__all__ = ["InternalSweep", "KindBase", "PauseRuntime", "replayed", "resume_tail", "text_message"]
