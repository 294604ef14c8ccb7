"""``resume(task_id, resolutions, source)``: the one way a decision continues a paused task.

A2A decisions arrive as user messages and reach :class:`~agent_runtime.server.executor.GatehouseExecutor`
through the request handler. Decisions made inside the runtime (the timeout sweeper; Kubernetes
``ToolApproval`` objects and REST) go through the very same handler: :class:`Resumer` sends an internal
message on the task whose server call context carries the trusted verdicts. So every decision is
serialised with the task's other requests, written to the TaskStore by a2a-sdk's own task manager,
streamed to any client subscribed to the task, and recorded in the task history (the internal message
itself is the audit record of who decided).

:class:`GatehouseRequestHandler` also answers a message sent to a finished task — a replayed decision —
with "Already decided: …" instead of a protocol error; nothing is run again. Messages to one task are
handled one at a time in this process, so of concurrent duplicate decisions exactly one is applied and every
other sender is told "Already decided" (a2a-sdk alone would hand each of them the winner's finished task).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Message, Role, SendMessageRequest, Task
from a2a.utils.errors import UnsupportedOperationError

from agent_runtime.approvals import AlreadyDecided, ApprovalService, Resolution
from agent_runtime.questions import flow as question_flow
from agent_runtime.questions.store import HitlStore
from agent_runtime.server.executor import DECIDED_ELSEWHERE, INTERNAL_DECISION, OUTCOME_LABEL, InternalDecision
from agent_runtime.server.owners import acting_for


class GatehouseRequestHandler(DefaultRequestHandler):
    """a2a-sdk's default handler, plus a clear answer for messages to finished tasks."""

    def __init__(self, *args: Any, approvals: ApprovalService, hitl: HitlStore | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._approvals = approvals
        self._hitl = hitl
        self._task_locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, task_id: str) -> AsyncIterator[None]:
        """Serialise the messages to one task (a new task has no id yet: nothing to wait for)."""
        if not task_id:
            yield
            return
        lock, users = self._task_locks.get(task_id, (asyncio.Lock(), 0))
        self._task_locks[task_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._task_locks[task_id]
            if users == 1:
                del self._task_locks[task_id]
            else:
                self._task_locks[task_id] = (lock, users - 1)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        async with self._one_at_a_time(params.message.task_id):
            try:
                result = await super().on_message_send(params, context)
            except UnsupportedOperationError as exc:
                return await self._finished(params, exc)
            if context.state.get(DECIDED_ELSEWHERE):
                return await self._already_decided(params)
            return result

    async def on_message_send_stream(self, params: SendMessageRequest, context: ServerCallContext) -> AsyncGenerator[Any, None]:
        async with self._one_at_a_time(params.message.task_id):
            stream = super().on_message_send_stream(params, context)
            try:
                async for event in stream:
                    yield event
            except UnsupportedOperationError as exc:
                yield await self._finished(params, exc)
            else:
                if context.state.get(DECIDED_ELSEWHERE):
                    yield await self._already_decided(params)

    async def _already_decided(self, params: SendMessageRequest) -> Message:
        records = await self._approvals.for_task(params.message.task_id)
        return Message(
            role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), task_id=params.message.task_id,
            context_id=params.message.context_id,
            parts=[new_text_part(str(AlreadyDecided([r for r in records if r.status != "pending"])))],
        )

    async def _finished(self, params: SendMessageRequest, exc: UnsupportedOperationError) -> Message:
        task_id = params.message.task_id
        if not task_id or "terminal state" not in (exc.message or ""):
            raise exc
        records = await self._approvals.for_task(task_id)
        questions = await self._hitl.for_task(task_id) if self._hitl is not None else []
        if questions and (not records or questions[-1].created_at > records[-1].created_at):
            text = question_flow.finished_text(questions)
        elif records:
            text = str(AlreadyDecided([r for r in records if r.status != "pending"]))
        else:
            text = f"{exc.message}. Nothing was run; start a new task for a new request."
        return Message(
            role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), task_id=task_id,
            context_id=params.message.context_id, parts=[new_text_part(text)],
        )


class Resumer:
    """Decide a paused task from inside the runtime and run it on, with no client connected, acting for the task's
    owner (``owner_of``: the task store's :meth:`~agent_runtime.server.task_store.CachedTaskStore.owner_of`)."""

    def __init__(self, handler: DefaultRequestHandler, owner_of: Callable[[str], Awaitable[str | None]]) -> None:
        self._handler = handler
        self._owner_of = owner_of

    async def resume(
        self, task_id: str, context_id: str, resolutions: dict[str, Resolution], source: str, note: str
    ) -> Message | Task:
        message = Message(
            role=Role.ROLE_AGENT,
            message_id=f"{source}-{uuid.uuid4()}",
            task_id=task_id,
            context_id=context_id,
            parts=[
                new_text_part(note),
                new_data_part({
                    "source": source,
                    "decisions": {i: {"outcome": OUTCOME_LABEL[r.status], "reason": r.reason} for i, r in resolutions.items()},
                }),
            ],
            metadata={"gatehouse_source": source},
        )
        owner = await self._owner_of(task_id) or ""
        context = ServerCallContext(user=acting_for(owner), state={INTERNAL_DECISION: InternalDecision(resolutions, source)})
        return await self._handler.on_message_send(SendMessageRequest(message=message), context)


__all__ = ["GatehouseRequestHandler", "Resumer"]
