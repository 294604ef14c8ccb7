"""The runtime side of ``hitl_request``: pausing, answering, confirming, timing out and resuming a question.

The executor routes a message on an ``input-required`` task here when the task's pending kind is a question
(:class:`QuestionFlow` is a :class:`~agent_runtime.pauses.kind.PauseKind`; :mod:`agent_runtime.pauses.registry` routes),
and the approval path otherwise, so an approval decision never reaches a
question and an answer never reaches an approval (the pure parsers refuse the other kind as well):

    pause          text part (question_wire.describe_prompt) + QuestionInterrupt data part, metadata interrupt_type hitl_request
    answer         question_wire.apply_message ─► store.advance (compare-and-swap) ─► confirm-stage pause, or resume
    bad message    nothing changes; the text says what was wrong, the data part repeats the prompt
    replay         an answer naming a finished question of the task ─► "Already answered: …"
    timeout        :class:`QuestionSweeper` ─► internal message (:class:`InternalHitl`) through the request handler
                   ─► question_wire.on_timeout ─► resume (so the audit trail holds the runtime's own timeout message)
    resume         TurnRunner.resume_question with the recorded QuestionResult ─► completed, or the next pause

:class:`QuestionRuntime` bundles the store, the tools, the recorder, the flow and the sweeper, so the app only
has to create it, hand its parts to the agent, the turn runner and the executor, and open/close it.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any, Protocol

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task, TaskState

from agent_runtime.contract import kagent_hitl, wire
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.pauses import flow as kernel_flow
from agent_runtime.pauses.flow import InternalSweep, KindBase, PauseRuntime, resume_tail, text_message
from agent_runtime.pauses.kind import Decision, Internal, Outcome, Report
from agent_runtime.questions import question_wire
from agent_runtime.questions.store import QuestionAlreadyAnswered, QuestionRecord, QuestionStore, result_json
from agent_runtime.questions.tool import QuestionMetrics, QuestionRecorder, QuestionTool, build_tools
from agent_runtime.runs import replies
from agent_runtime.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

INTERNAL_HITL = "gatehouse.internal_hitl"
INTERRUPT_METADATA = {"interrupt_type": wire.INTERRUPT_HITL}

class QuestionTurns(Protocol):
    """The turn runner, as far as questions need it (:meth:`agent_runtime.server.turns.TurnRunner.resume_question`):
    the server runs turns and routes messages here; this package never imports it."""

    async def resume_question(
        self, task_id: str, context_id: str, confirmation_id: str, result: dict[str, Any]
    ) -> Outcome: ...


@dataclass(frozen=True)
class InternalHitl(Internal):
    """A question resolved inside the runtime (the timeout sweeper); only in-process code can set it."""

    request_id: str
    source: str = "timeout"


class QuestionFlow(KindBase[QuestionRecord, QuestionStore]):
    """The ``hitl_request`` kind of pause (:class:`agent_runtime.pauses.kind.PauseKind`)."""

    name = wire.INTERRUPT_HITL
    internal_key = INTERNAL_HITL
    internal_type = InternalHitl

    def __init__(self, store: QuestionStore, turns: QuestionTurns, metrics: QuestionMetrics | None = None) -> None:
        self._store = store
        self._turns = turns
        self._metrics = metrics

    def busy_text(self, record: QuestionRecord) -> str:
        return (f"Task {record.task_id} of this context is waiting for an answer to question {record.id} "
                "(hitl_request); answer it (same task_id) before sending a new message.")

    async def canceled(self, task_id: str) -> None:
        """After approvals were withdrawn (a started approved call refuses the cancel first): the question ends."""
        await self.cancel(task_id)

    async def decision(self, decision: Decision) -> None:
        d = decision  # a question has no relayed requester to refuse: ``refused`` does not apply
        await self._decide(d.task, d.message, d.updater, d.internal, d.report)

    async def _decide(
        self, task: Task, message: Message, updater: TaskUpdater, internal: Internal | None, report: Report,
    ) -> None:
        questions = await self._store.for_task(task.id)
        current = next((q for q in questions if q.open), None)
        if isinstance(internal, InternalHitl):
            if current is None or current.id != internal.request_id:
                return  # answered meanwhile: the task is the answer's, leave it exactly as it is
            timed_out = question_wire.on_timeout(current.state())
            try:
                done = await self._store.advance(current, replace(current.state(), stage="done"), timed_out, internal.source)
            except QuestionAlreadyAnswered:
                return
            return await self._resume(task, done, updater, report)
        if current is None:
            # Input-required with no open question: a restart cut the resume short. Finish it with the recorded result.
            return await self._resume(task, questions[-1], updater, report)
        data_parts = get_data_parts(message.parts)
        replayed = kernel_flow.replayed(data_parts, "answers", questions)
        if replayed:
            return await self.still_waiting(updater, current, str(QuestionAlreadyAnswered(replayed)))
        try:
            state, result = question_wire.apply_message(current.state(), data_parts, "\n".join(get_text_parts(message.parts)))
        except question_wire.QuestionError as exc:
            return await self.still_waiting(updater, current, str(exc))
        try:
            updated = await self._store.advance(current, state, result, "user")
        except QuestionAlreadyAnswered as exc:
            now_open = next((r for r in exc.records if r.open), None)
            if now_open is not None:
                return await self.still_waiting(updater, now_open, str(exc))
            return await updater.update_status(task.status.state, message=text_message(updater, str(exc)))
        if result is None:
            return await self.report_pause(updater, updated)  # chosen; now confirm or cancel
        await self._resume(task, updated, updater, report)

    async def cancel(self, task_id: str) -> None:
        """The task was canceled: its open question ends canceled (the model is not resumed)."""
        for record in await self._store.for_task(task_id):
            if record.open:
                result = question_wire.QuestionResult(
                    ok=False, status="canceled", confirmed=False, selected_option=None, source="user",
                    request_id=record.id, message="the task was canceled",
                )
                with contextlib.suppress(QuestionAlreadyAnswered):
                    await self._store.advance(record, replace(record.state(), stage="done"), result, "cancel")

    # --- reporting ------------------------------------------------------------------------------

    async def report_pause(self, updater: TaskUpdater, record: QuestionRecord) -> None:
        prompt = record.prompt()
        await self._input_required(updater, record, question_wire.describe_prompt(prompt))

    async def still_waiting(self, updater: TaskUpdater, record: QuestionRecord, error: str) -> None:
        await self._input_required(updater, record, error)

    async def _input_required(self, updater: TaskUpdater, record: QuestionRecord, text: str) -> None:
        prompt = record.prompt()
        interrupt = question_wire.QuestionInterrupt(requests=[prompt])
        parts = [new_text_part(text), new_data_part(interrupt.model_dump(mode="json"))]
        # The same question in kagent's hitl/v1 shape as well (docs/wire-contract.md, "kagent hitl/v1").
        metadata = {**INTERRUPT_METADATA, kagent_hitl.URI: kagent_hitl.ask_user_request(prompt)}
        message = updater.new_agent_message(parts, metadata=metadata)
        message.extensions.append(kagent_hitl.URI)
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message, metadata=dict(INTERRUPT_METADATA))

    async def _resume(self, task: Task, record: QuestionRecord, updater: TaskUpdater, report: Report) -> None:
        result = record.result
        if result is None:  # cannot happen for a finished question; never resume the model without a result
            return await updater.update_status(task.status.state, message=text_message(updater, "The question has no result."))
        if self._metrics is not None:
            self._metrics.results.labels(status=result.status, source=result.source).inc()
        payload = result_json(result)
        await replies.resuming(updater)  # WORKING: the decision is taken, the work resumes
        outcome = await self._turns.resume_question(task.id, task.context_id, record.confirmation_id, payload)
        notes = [f"{record.id} ({record.tool}): timeout, {result.message}."] if result.source == "timeout" else []
        await resume_tail(updater, outcome, report, {"hitl": {record.id: payload}}, notes)


class QuestionSweeper(InternalSweep[QuestionRecord]):
    """Resolves questions past ``expires_at`` server-side, through the request handler like any decision."""

    name = "gatehouse-hitl-sweeper"

    def __init__(self, store: QuestionStore, handler: DefaultRequestHandler, interval: float = 0.25) -> None:
        super().__init__(handler, interval)
        self._store = store

    async def due(self) -> list[QuestionRecord]:
        return await self._store.expired()

    async def resolve(self, record: QuestionRecord) -> None:
        result = question_wire.on_timeout(record.state())
        seconds = f"{record.expires_at - record.created_at:g}"
        note = f"Timeout: no answer to {record.id} within {seconds}s; {result.message}."
        parts = [new_text_part(note), new_data_part({"source": "timeout", "hitl": {record.id: result_json(result)}})]
        try:
            await self.send(record, f"timeout-{uuid.uuid4()}", parts, INTERNAL_HITL, InternalHitl(record.id),
                            {"gatehouse_source": "timeout"})
        finally:
            # A task that could not be resumed (canceled, say) must not be swept again and again.
            with contextlib.suppress(QuestionAlreadyAnswered):
                current = [r for r in await self._store.for_task(record.task_id) if r.id == record.id and r.open]
                if current:
                    await self._store.advance(current[0], replace(current[0].state(), stage="done"), result, "timeout")


class QuestionRuntime(PauseRuntime):
    """Everything hitl_request needs in one runtime: store, tools (when enabled), recorder, flow, sweeper."""

    def __init__(self, config: AgentConfig, db: Database, metrics: Metrics, fresh: FreshIds | None = None) -> None:
        self.store = QuestionStore(db, fresh=fresh)
        self.metrics = QuestionMetrics(metrics)
        self.tools: list[QuestionTool] = build_tools(config.human_tools.hitl_request, self.metrics)
        self.recorder = QuestionRecorder(self.store, config.approval.timeout_seconds)
        self.flow: QuestionFlow | None = None

    def flow_for(self, turns: QuestionTurns) -> QuestionFlow:
        self.flow = QuestionFlow(self.store, turns, self.metrics)
        return self.flow

    def watch(self, handler: DefaultRequestHandler, interval: float) -> None:
        self.sweeper = QuestionSweeper(self.store, handler, interval)


__all__ = ["INTERNAL_HITL", "InternalHitl", "QuestionFlow", "QuestionRuntime", "QuestionSweeper"]
