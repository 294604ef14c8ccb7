"""The runtime side of an MCP tool's question: pausing, answering, retrying the call, timing out and resuming.

The first round runs inside the ADK tool call (``server/toolsets.py``): the tool came back ``input_required``, the
call's placeholder pauses the run like a gated call, and :class:`ElicitationRecorder` stores the round (with the
server's ``request_state``) before the client is told. Every later step runs here, outside ADK, because ADK resumes a
call from a confirmation only once (a call that asks again while resumed would never pause): the answer retries the
MCP call itself, and the model is resumed with the call's final result as the call's function response.

    pause          text part (wire.describe_prompt) + ElicitationInterrupt data part, metadata interrupt_type elicitation
    answer         wire.parse_answer ─► store.answer (pending → answered) ─► continue
    continue       store.claim_retry (answered → retrying, committed first) ─► retry the MCP call once with
                   inputResponses + requestState ─► store.finish (→ done, the result) ─► resume
                   (the tool asked again: round n+1 stored in the same transaction, the task pauses again)
    bad message    nothing changes; the text says what was wrong, the data part repeats the question
    timeout        :class:`ElicitationSweeper` ─► internal message through the request handler ─► done with a timeout
                   result, no retry ─► resume
    cancel         the task is canceled: the open round ends canceled; the call is not retried, the model not resumed
    resume         TurnRunner.resume_call(call's function response) ─► completed, or the next pause

A gated call that was approved and then asks runs under its one claim (``ApprovalService.claim_execution``): the
retry is part of it, never a second claim, and the claim is finished (``finish_execution``) when the final result
is in. A restart finds the round where the database says: pending (answer it), answered (retried now), retrying (the
call was continued once and never reported back: not retried again), done (resumed with the recorded result).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task, TaskState

from agent_runtime.elicitations import elicitation_wire
from agent_runtime.elicitations.store import ElicitationAlreadyAnswered, ElicitationRecord, ElicitationStore
from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.pauses import flow as kernel_flow
from agent_runtime.pauses.flow import InternalSweep, KindBase, PauseRuntime, resume_tail, text_message
from agent_runtime.pauses.kind import Decision, Internal, Outcome, Report
from agent_runtime.runs import replies
from agent_runtime.runs.run_scope import RunScope

log = logging.getLogger(__name__)

INTERNAL_ELICITATION = "gatehouse.internal_elicitation"
INTERRUPT_METADATA = {"interrupt_type": elicitation_wire.INTERRUPT}
RECOVERY_GRACE_SECONDS = 30.0  # with replicas: a retry older than this was cut short (as server/executor.py)

Retry = Callable[[str | None, str, dict[str, Any], dict[str, Any], str | None], Awaitable[elicitation_wire.ToolRound]]
"""Call tool ``(server, tool, args, input_responses, request_state)`` once more (server/toolsets.py)."""
FinishExecution = Callable[[str, Any], Awaitable[object]]
"""``ApprovalService.finish_execution(call_id, result)``: a gated call's claim ends with the final result."""


class ElicitationTurns(Protocol):
    """The turn runner, as far as this flow needs it (:meth:`agent_runtime.server.turns.TurnRunner.resume_call`)."""

    async def resume_call(
        self, task_id: str, context_id: str, call_id: str, tool: str, response: dict[str, Any]
    ) -> Outcome: ...


@dataclass(frozen=True)
class InternalElicitation(Internal):
    """A round resolved inside the runtime (the timeout sweeper); only in-process code can set it."""

    request_id: str


class ElicitationFlow(KindBase[ElicitationRecord, ElicitationStore]):
    def __init__(
        self, store: ElicitationStore, turns: ElicitationTurns, retry: Retry, finish_execution: FinishExecution,
        timeout_seconds: float, *, single_process: bool,
    ) -> None:
        self._store = store
        self._turns = turns
        self._retry = retry
        self._finish_execution = finish_execution
        self._timeout = timeout_seconds
        self._single_process = single_process

    name = elicitation_wire.INTERRUPT
    internal_key = INTERNAL_ELICITATION
    internal_type = InternalElicitation

    def busy_text(self, record: ElicitationRecord) -> str:
        return (f"Task {record.task_id} of this context is waiting for an answer to {record.tool}'s question "
                f"{record.id}; answer it (same task_id) before sending a new message.")

    async def withdraw(self, task_id: str) -> bool:
        """A tool's question is open: the call (approved or not) waits for the user, it is not running. It ends canceled
        and is never retried; nothing else of the task is pending (one kind of pause per turn)."""
        if not await self.waiting(task_id):
            return False
        await self.cancel(task_id)
        return True

    async def decision(self, decision: Decision) -> None:
        d = decision  # a tool's question has no relayed requester to refuse: ``refused`` does not apply
        await self._decide(d.task, d.message, d.updater, d.internal, d.report)

    async def _decide(
        self, task: Task, message: Message, updater: TaskUpdater, internal: Internal | None, report: Report,
    ) -> None:
        rounds = await self._store.for_task(task.id)
        current = rounds[-1]
        if isinstance(internal, InternalElicitation):
            if current.id != internal.request_id or current.status != "pending":
                return  # answered meanwhile: the task is the answer's, leave it exactly as it is
            seconds = current.expires_at - current.created_at
            try:
                done = await self._store.finish(current, elicitation_wire.timeout_result(current.tool, seconds),
                                                outcome="timeout", source="timeout")
            except ElicitationAlreadyAnswered:
                return
            return await self._resume(task, done, updater, report)
        if current.status == "pending":
            data_parts = get_data_parts(message.parts)
            replayed = kernel_flow.replayed(data_parts, "responses", rounds)
            if replayed:
                return await self.still_waiting(updater, current, str(ElicitationAlreadyAnswered(replayed)))
            try:
                answers = elicitation_wire.parse_answer(data_parts, "\n".join(get_text_parts(message.parts)), current.prompt())
                current = await self._store.answer(current, {**(current.preset or {}), **answers}, "user")
            except elicitation_wire.ElicitationError as exc:
                return await self.still_waiting(updater, current, str(exc))
            except ElicitationAlreadyAnswered as exc:
                return await updater.update_status(task.status.state, message=text_message(updater, str(exc)))
        if current.status == "answered":
            return await self._continue(task, current, updater, report)
        if current.status == "retrying":
            if not self._single_process and current.updated_at > time.time() - RECOVERY_GRACE_SECONDS:
                return  # another replica is retrying it right now: write nothing, its run ends the task
            problem = ("the call was continued once with the user's answer and never reported back (the runtime "
                       "restarted while it ran); it was not run again, so whether it took effect is unknown")
            with contextlib.suppress(ElicitationAlreadyAnswered):
                current = await self._store.finish(current, elicitation_wire.failed_result(problem), source="runtime")
        await self._resume(task, current, updater, report)  # done: a restart cut the resume short

    async def _continue(self, task: Task, record: ElicitationRecord, updater: TaskUpdater, report: Report) -> None:
        """The one retry of an answered round: claimed (committed) first, then the MCP call."""
        try:
            record = await self._store.claim_retry(record)
        except ElicitationAlreadyAnswered:
            return  # another request claimed it: that request ends the task
        called = await self._retry(record.server, record.tool, record.args, record.responses or {}, record.request_state)
        if called.questions is not None:  # the tool asks again: the next round, stored with this one's end
            now = self._store.clock()
            then = ElicitationRecord(
                id=_new_id(), task_id=record.task_id, context_id=record.context_id, call_id=record.call_id,
                tool=record.tool, server=record.server, args=record.args, round=record.round + 1,
                requests=called.questions,
                preset=called.preset, request_state=called.request_state, note=_join(record.note, called.note),
                created_at=now, expires_at=now + self._timeout,
            )
            await self._store.finish(record, {"asked_again": then.id}, then=then)
            return await self.report_pause(updater, then)
        result = elicitation_wire.with_note(
            called.result or elicitation_wire.failed_result("the tool returned nothing"), called.note
        )
        done = await self._store.finish(record, result)
        await self._resume(task, done, updater, report)

    async def cancel(self, task_id: str) -> None:
        """The task was canceled: its open round ends canceled; the call is not retried, the model not resumed."""
        for record in await self._store.for_task(task_id):
            if record.status in ("pending", "answered"):
                result = elicitation_wire.failed_result("the task was canceled before the tool's question was answered")
                with contextlib.suppress(ElicitationAlreadyAnswered):
                    await self._store.finish(record, result, outcome="canceled", source="cancel")
                    await self._finish_execution(record.call_id, result)

    # --- reporting ------------------------------------------------------------------------------

    async def report_pause(self, updater: TaskUpdater, record: ElicitationRecord) -> None:
        await self.still_waiting(updater, record, elicitation_wire.describe_prompt(record.prompt()))

    async def still_waiting(self, updater: TaskUpdater, record: ElicitationRecord, text: str) -> None:
        interrupt = elicitation_wire.ElicitationInterrupt(elicitations=[record.prompt()])
        parts = [new_text_part(text), new_data_part(interrupt.model_dump(mode="json"))]
        message = updater.new_agent_message(parts, metadata=dict(INTERRUPT_METADATA))
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message, metadata=dict(INTERRUPT_METADATA))

    async def _resume(self, task: Task, record: ElicitationRecord, updater: TaskUpdater, report: Report) -> None:
        result = record.result or elicitation_wire.failed_result("no result was recorded")
        await self._finish_execution(record.call_id, result)  # a gated call's one claim ends here
        result = elicitation_wire.with_note(result, record.note)
        await replies.resuming(updater)  # WORKING: the decision is taken, the work resumes
        outcome = await self._turns.resume_call(task.id, task.context_id, record.call_id, record.tool, result)
        notes = [f"{record.id} ({record.tool}): timeout, {result.get('error', '')}."] \
            if record.outcome == "timeout" else []
        summary = {"tool": record.tool, "outcome": record.outcome, "source": record.source, "round": record.round}
        await resume_tail(updater, outcome, report, {"elicitations": {record.id: summary}}, notes)


def _new_id() -> str:
    return f"eli-{uuid.uuid4().hex[:16]}"


def _join(*notes: str) -> str:
    return " ".join(n for n in notes if n)


class ElicitationRecorder:
    """Turns the round-1 question a run paused on into a durable :class:`ElicitationRecord` (before anyone is told)."""

    def __init__(self, store: ElicitationStore, timeout_seconds: float) -> None:
        self._store = store
        self._timeout = timeout_seconds

    async def record(self, scope: RunScope, confirmation_ids: Mapping[str, str] | None = None) -> ElicitationRecord | None:
        if not scope.eliciting:
            return None
        (asked,) = scope.eliciting  # the tool refuses a second question in the same turn
        now = self._store.clock()
        record = ElicitationRecord(
            id=asked.request_id, task_id=scope.task_id, context_id=scope.context_id, call_id=asked.call_id,
            tool=asked.tool, server=asked.server, args=asked.args,
            requests={k: elicitation_wire.FormRequest.model_validate(v) for k, v in asked.requests.items()},
            preset=asked.preset, request_state=asked.request_state, note=asked.note, created_at=now,
            expires_at=now + self._timeout,
        )
        await self._store.add(record)
        return record


class ElicitationSweeper(InternalSweep[ElicitationRecord]):
    """Times out questions past ``expires_at`` server-side, through the request handler like any answer."""

    name = "gatehouse-elicitation-sweeper"

    def __init__(self, store: ElicitationStore, handler: DefaultRequestHandler, interval: float = 0.25) -> None:
        super().__init__(handler, interval)
        self._store = store

    async def due(self) -> list[ElicitationRecord]:
        return await self._store.expired()

    async def resolve(self, record: ElicitationRecord) -> None:
        seconds = record.expires_at - record.created_at
        result = elicitation_wire.timeout_result(record.tool, seconds)
        note = f"Timeout: no answer to {record.id} ({record.tool}) within {seconds:g}s; the call is not completed."
        parts = [new_text_part(note), new_data_part({"source": "timeout", "elicitation": record.id})]
        try:
            await self.send(record, f"timeout-{uuid.uuid4()}", parts, INTERNAL_ELICITATION,
                            InternalElicitation(record.id), {"gatehouse_source": "timeout"})
        finally:
            # A task that could not be resumed (canceled, say) must not be swept again and again.
            current = [r for r in await self._store.for_task(record.task_id) if r.id == record.id and r.status == "pending"]
            if current:
                with contextlib.suppress(ElicitationAlreadyAnswered):
                    await self._store.finish(current[0], result, outcome="timeout", source="timeout")


class ElicitationRuntime(PauseRuntime):
    """Everything MCP elicitation needs in one runtime: store, recorder, flow, sweeper."""

    def __init__(self, db: Database, timeout_seconds: float, fresh: FreshIds | None = None) -> None:
        self.store = ElicitationStore(db, fresh=fresh)
        self.recorder = ElicitationRecorder(self.store, timeout_seconds)
        self._timeout = timeout_seconds
        self.flow: ElicitationFlow | None = None

    def flow_for(
        self, turns: ElicitationTurns, retry: Retry, finish_execution: FinishExecution, *, single_process: bool
    ) -> ElicitationFlow:
        self.flow = ElicitationFlow(self.store, turns, retry, finish_execution, self._timeout, single_process=single_process)
        return self.flow

    def watch(self, handler: DefaultRequestHandler, interval: float) -> None:
        self.sweeper = ElicitationSweeper(self.store, handler, interval)


__all__ = [
    "INTERNAL_ELICITATION", "ElicitationFlow", "ElicitationRecorder", "ElicitationRuntime", "ElicitationSweeper",
    "InternalElicitation",
]
