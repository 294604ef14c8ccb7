"""``resume(task_id, resolutions, source)``: the one way a decision continues a paused task.

A2A decisions arrive as user messages and reach :class:`~agent_runtime.server.executor.GatehouseExecutor`
through the request handler. Decisions made inside the runtime (the timeout sweeper; Kubernetes
``ToolApproval`` objects and REST) go through the very same handler: :class:`Resumer` sends an internal
message on the task whose server call context carries the trusted verdicts. So every decision is
serialised with the task's other requests, written to the TaskStore by a2a-sdk's own task manager,
streamed to any client subscribed to the task, and recorded in the task history (the internal message
itself is the audit record of who decided).

:class:`GatehouseRequestHandler` is a2a-sdk's default handler with the protocol edges made exact:

- Messages to one task, and its cancel, are handled one at a time in this process. Of concurrent duplicate
  decisions exactly one is applied and every other sender is told "Already decided"; a cancel and a decision
  never interleave, so the task's final state is that of what ran (a cancel after the approved call ran is
  refused, a decision after the cancel is told "denied by cancel").
- A message to a finished task is answered with ``UnsupportedOperationError`` (JSON-RPC -32004), as the A2A
  specification requires, before a2a-sdk builds any machinery for it; the error's data says what happened
  ("Already decided: …", or that nothing was run) and the client goes on with a new task in the same context.
  The runtime's own callers (sweepers, REST and kubectl resumes) get that text as a message instead.
- A message that names a task but no context is filed under the task's context (never a new one).
- A kagent hitl/v1 decision (in the message's metadata) is added to the message as a data part, for the one parser
  of decisions; one that cannot be a decision is refused with ``InvalidParamsError`` (-32602).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.server.cluster.task_store import StoredTask
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import CancelTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError, InvalidParamsError, TaskNotCancelableError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from agent_runtime.approvals import AlreadyDecided, ApprovalService, Resolution
from agent_runtime.contract import kagent_hitl
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.server import acyclic_queues
from agent_runtime.server.batches import OUTCOME_LABEL
from agent_runtime.server.executor import (
    DECIDED_ELSEWHERE,
    INTERNAL_DECISION,
    TERMINAL_STATES,
    GatehouseExecutor,
    InternalDecision,
)
from agent_runtime.server.owners import CallerUser, acting_for, owner_name


class GatehouseRequestHandler(DefaultRequestHandler):
    """a2a-sdk's default handler, with one message (or cancel) at a time per task and exact answers for finished tasks."""

    def __init__(
        self, *args: Any, approvals: ApprovalService, kinds: PauseKinds | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        acyclic_queues.install()  # each task's queues freed when it is done, not left to the collector
        self._approvals = approvals
        self._kinds = kinds if kinds is not None else PauseKinds()  # the other kinds of paused call (pauses/)
        self._task_locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, task_id: str) -> AsyncIterator[None]:
        """Serialise the messages to one task and its cancel (a new task has no id yet: nothing to wait for)."""
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
            await self._internal_acts_for_owner(params, context)
            told = await self._admit(params, context)
            if told is not None:
                return told
            try:
                # a2a-sdk's validating decorator erases the method's type: its declared answer, stated
                result: Message | Task = await super().on_message_send(params, context)
            except UnsupportedOperationError as exc:
                return await self._finished_meanwhile(params, context, exc)
            if context.state.get(DECIDED_ELSEWHERE):
                return await self._already_decided(params)
            return result

    async def on_message_send_stream(self, params: SendMessageRequest, context: ServerCallContext) -> AsyncGenerator[Any, None]:
        async with self._one_at_a_time(params.message.task_id):
            told = await self._admit(params, context)
            if told is not None:
                yield told
                return
            stream = super().on_message_send_stream(params, context)
            try:
                async for event in stream:
                    yield event
            except UnsupportedOperationError as exc:
                yield await self._finished_meanwhile(params, context, exc)
            else:
                if context.state.get(DECIDED_ELSEWHERE):
                    yield await self._already_decided(params)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """Cancel after the task's running message, if any (one at a time): refused once an approved call of the
        pause has started (its run ends the task); else what is pending is denied ("task canceled") first, then
        a2a-sdk writes ``CANCELED`` (and stops a run in this process)."""
        async with self._one_at_a_time(params.id):
            task = await self._task(params.id, context)
            if task is not None and task.status.state in TERMINAL_STATES:
                raise TaskNotCancelableError(message=_finished_message(task), data=await self._finished_data(task))
            if task is not None and isinstance(self.agent_executor, GatehouseExecutor):
                await self.agent_executor.withdraw(task, by=owner_name(context))
            canceled: Task | None = await super().on_cancel_task(params, context)  # typed as in a2a-sdk's RequestHandler
            return canceled

    async def _internal_acts_for_owner(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        """The runtime's own messages (a question's or a tool question's timeout, a sub-agent that ended) act for the
        task's owner, as :class:`Resumer` does: the store finds a task only under its owner."""
        if isinstance(context.user, CallerUser) or self._kinds.internal_of(context.state) is None:
            return
        owner_of = getattr(self.task_store, "owner_of", None)
        if owner_of is not None and params.message.task_id:
            context.user = acting_for(await owner_of(params.message.task_id) or "")

    async def _task(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task as the caller may see it (the store is owner-scoped)."""
        found = await self.task_store.get(task_id, context)
        return found.task if isinstance(found, StoredTask) else found

    async def _admit(self, params: SendMessageRequest, context: ServerCallContext) -> Message | None:
        """Before a2a-sdk sees a message: add a kagent hitl/v1 payload as a data part; then, on an existing task, take
        the task's context id where the message has none, and refuse a finished task (``UnsupportedOperationError``;
        a message for the runtime's own callers)."""
        _lift_kagent_payload(params.message)
        task_id = params.message.task_id
        if not task_id:
            return None
        task = await self._task(task_id, context)
        if task is None:
            return None  # a2a-sdk answers "task not found"
        if not params.message.context_id:
            params.message.context_id = task.context_id
        if task.status.state in TERMINAL_STATES:
            return await self._refuse_finished(task, context)
        return None

    async def _finished_meanwhile(self, params: SendMessageRequest, context: ServerCallContext, exc: A2AError) -> Message:
        """a2a-sdk found the task finished after :meth:`_admit` (another replica finished it): release what it set up
        for the message, then answer like :meth:`_admit`."""
        task_id = params.message.task_id
        if not task_id or "terminal state" not in (exc.message or ""):
            raise exc
        active = await self._active_task_registry.get(task_id)
        if active is not None and active.is_finished:
            await active.aclose()  # its event queues' dispatcher tasks, never started for a finished task
        task = await self._task(task_id, context)
        if task is None or task.status.state not in TERMINAL_STATES:
            raise exc
        return await self._refuse_finished(task, context)

    async def _refuse_finished(self, task: Task, context: ServerCallContext) -> Message:
        data = await self._finished_data(task)
        if context.state.get(INTERNAL_DECISION) is None and self._kinds.internal_of(context.state) is None:
            raise UnsupportedOperationError(message=_finished_message(task), data=data)
        return Message(  # the runtime's own decision came too late: nothing to run, nothing to raise
            role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), task_id=task.id, context_id=task.context_id,
            parts=[new_text_part(data["explanation"])],
        )

    async def _finished_data(self, task: Task) -> dict[str, str]:
        """The data of the error for a finished task (google.rpc.ErrorInfo metadata: strings only)."""
        records = await self._approvals.for_task(task.id)
        explanation = await self._kinds.finished_text(task.id, records)  # the last pause was another kind's
        if explanation is None and records:
            explanation = str(AlreadyDecided([r for r in records if r.status != "pending"]))
        elif explanation is None:
            explanation = (f"Task {task.id} is finished ({TaskState.Name(task.status.state)}); nothing was run for "
                           "this message. Send a new message without a taskId, in the same contextId, to go on.")
        return {"taskId": task.id, "contextId": task.context_id, "state": TaskState.Name(task.status.state),
                "explanation": explanation}

    async def _already_decided(self, params: SendMessageRequest) -> Message:
        records = await self._approvals.for_task(params.message.task_id)
        return Message(
            role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), task_id=params.message.task_id,
            context_id=params.message.context_id,
            parts=[new_text_part(str(AlreadyDecided([r for r in records if r.status != "pending"])))],
        )


def _lift_kagent_payload(message: Message) -> None:
    """kagent's hitl/v1 decisions travel in the message's metadata; decisions are read from data parts by the one
    parser (:func:`agent_runtime.contract.wire.parse_payload`), so the payload is added to the message as one more data part
    (and the task history shows it there). A message that also has a data part of its own then has two, which
    decides nothing. A payload that cannot be a decision (undeclared, untyped) or that names no task is refused
    here: left in the metadata, the message's text ("Approved") would be read as the decision instead."""
    if not message.HasField("metadata"):
        return
    try:
        payload = kagent_hitl.payload_of(list(message.extensions), MessageToDict(message.metadata))
    except kagent_hitl.KagentError as exc:
        raise InvalidParamsError(message=f"{exc.problem} Nothing was decided.") from None
    if payload is None:
        return
    if not message.task_id:
        raise InvalidParamsError(message=(
            f"A hitl/v1 {payload['type']} answers a paused task: send it with that task's taskId. Nothing was decided."
        ))
    message.parts.append(new_data_part(payload))


def _finished_message(task: Task) -> str:
    return (f"Task {task.id} is in terminal state: {TaskState.Name(task.status.state)}; to go on, send a new message "
            f"without a taskId in context {task.context_id}")


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
        answer: Message | Task = await self._handler.on_message_send(SendMessageRequest(message=message), context)
        return answer


__all__ = ["GatehouseRequestHandler", "Resumer"]
