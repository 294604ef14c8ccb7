"""The A2A ``AgentExecutor``: a new message starts a turn; a message on a paused task is a decision.

Every request ends in exactly one of these task states, with the shapes of the wire contract (docs/wire-contract.md):

- ``TASK_STATE_INPUT_REQUIRED`` — a pause (text part + ``ApprovalInterrupt`` data part, metadata
  ``interrupt_type``), or an unusable decision: the text part is ``str(DecisionError)`` (or "Already
  decided: …") and the data part still lists the pending requests, which stay as they were;
- ``TASK_STATE_WORKING`` — a decided pause runs on (then one of the others);
- ``TASK_STATE_COMPLETED`` — the model's reply, as the task's artifact (:mod:`agent_runtime.runs.replies`);
- ``TASK_STATE_REJECTED`` — a new message that cannot start a turn (a decision sent without the paused
  task's id, or a message while another task of the same context waits for a decision);
- ``TASK_STATE_CANCELED`` — a cancel, after :meth:`GatehouseExecutor.withdraw` denied what was pending (the request
  handler calls it before every cancel, one message or cancel at a time per task; it refuses the cancel once an
  approved call of the pause has started). A message to a finished task is answered by the handler
  (:mod:`agent_runtime.server.resume`); one finished by another replica meanwhile is refused here and answered the
  same way.

Decisions from inside the runtime (the timeout sweeper; REST, Kubernetes and the inbox through
:class:`~agent_runtime.server.decide_one.DecideOne`) arrive through the same path as an :class:`InternalDecision` in
the server call context, which only in-process code can set (:mod:`agent_runtime.server.resume`). A task's gated
calls of one model turn form a batch resumed as a whole (:mod:`agent_runtime.server.batches`): an A2A decision
decides all of it, an internal one may decide part, and whichever decision leaves nothing pending resumes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, Resolution
from agent_runtime.approvals.grants import GrantTerms, terms_problem
from agent_runtime.contract import edits, kagent_hitl, wire
from agent_runtime.contract.agent_config import AgentConfig
from agent_runtime.contract.authority import Vote
from agent_runtime.contract.principals import Identities, Principal
from agent_runtime.delegation import relay
from agent_runtime.pauses.kind import Decision, Internal
from agent_runtime.pauses.registry import PauseKinds
from agent_runtime.runs import replies
from agent_runtime.server import batches, delegated
from agent_runtime.server.busy import ContextGuard
from agent_runtime.server.cancel import withdraw_approvals
from agent_runtime.server.owners import TASK_DEPTH, TASK_OWNER, TASK_REQUESTER, caller, owner_name
from agent_runtime.server.turns import TurnOutcome, TurnRunner
from agent_runtime.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

INTERNAL_DECISION = "gatehouse.internal_decision"
DECIDED_ELSEWHERE = "gatehouse.decided_elsewhere"
RECOVERY_GRACE_SECONDS = 30.0
TERMINAL_STATES = frozenset({
    TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED,
})
INTERRUPT_METADATA = {"interrupt_type": wire.INTERRUPT_TOOL_APPROVAL}


class DecidedElsewhere(Exception):
    """A decision that lost to another request (another replica is resuming the task): write nothing, the winner
    owns the task; ``execute`` flags it in the call context and the request handler answers "Already decided"."""


@dataclass(frozen=True)
class InternalDecision(Internal):
    """Verdicts decided inside the runtime (trusted: only in-process code builds a ServerCallContext)."""

    resolutions: dict[str, Resolution]
    source: str
    dropped_while_working: ClassVar[bool] = True


class GatehouseExecutor(AgentExecutor):
    def __init__(
        self, config: AgentConfig, turns: TurnRunner, approvals: ApprovalService, metrics: Metrics, *, single_process: bool,
        approval_name: Callable[[str], str | None] | None = None,
        owner_of: Callable[[str], Awaitable[str | None]] | None = None, kinds: PauseKinds | None = None,
    ) -> None:
        """``single_process``: no other replica can work on a task (sqlite), so a stalled resume is finished at once.
        ``approval_name``: the ToolApproval name of a request, where approvals are mirrored to Kubernetes. ``kinds``:
        the other kinds of paused call (questions, tools' questions, sub-agents' pauses), asked in their order."""
        self._single_process = single_process
        self._kinds = kinds if kinds is not None else PauseKinds()
        self._identities = Identities.of(config.access.identities)
        self._guard = ContextGuard(approvals, owner_of=owner_of, kinds=self._kinds)
        self._config = config
        self._turns = turns
        self._approvals = approvals
        self._metrics = metrics
        self._approval_name = approval_name or (lambda _request_id: None)  # e.g. the mirrored ToolApproval
        self._owner_of = owner_of  # a task's owner (the task store), to keep other principals' questions out of sight

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id and context.context_id
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        task = context.current_task
        state = context.call_context.state if context.call_context else {}
        internal: Internal | None = state.get(INTERNAL_DECISION) or self._kinds.internal_of(state)
        # The run acts for the task's owner: a2a-sdk found the task under this principal (server/owners.py); a task a
        # parent agent delegated here also for the human it relays (server/delegated.py).
        owner = TASK_OWNER.set(owner_name(context.call_context))
        requester, depth = delegated.of_task(task)
        requester_token, depth_token = TASK_REQUESTER.set(requester), TASK_DEPTH.set(depth)
        try:
            await self._execute(context, task, message, updater, internal, event_queue)
        except DecidedElsewhere:
            if context.call_context is not None:
                context.call_context.state[DECIDED_ELSEWHERE] = True
        finally:
            TASK_OWNER.reset(owner)
            TASK_REQUESTER.reset(requester_token)
            TASK_DEPTH.reset(depth_token)

    async def _execute(
        self, context: RequestContext, task: Task | None, message: Message, updater: TaskUpdater,
        internal: Internal | None, event_queue: EventQueue,
    ) -> None:
        assert context.task_id and context.context_id
        if task is None:
            new = new_task_from_user_message(message)
            try:
                started = delegated.start(message, caller(context.call_context), self._config, self._identities)
            except relay.DelegationRefused as exc:
                await event_queue.enqueue_event(new)
                return await updater.reject(_text(updater, str(exc)))
            if started:
                new.metadata.update(started)
                TASK_REQUESTER.set(started.get(relay.REQUESTER, ""))
                TASK_DEPTH.set(started.get(relay.DEPTH, 0))
            await event_queue.enqueue_event(new)
            await self._new_turn(context.task_id, context.context_id, message, updater)
        elif task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._decision(task, message, updater, internal, caller(context.call_context))
        elif task.status.state in TERMINAL_STATES:
            # Finished meanwhile (another replica decided it): write nothing; the handler answers "Already decided".
            raise UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {TaskState.Name(task.status.state)}")
        elif internal is not None and internal.dropped_while_working:
            return  # submitted/working: someone else is on it; an internal decision changes nothing here
        else:
            records = await self._approvals.for_task(task.id)
            if self._stalled(records):
                return await self._recover(task, records, updater)
            if records and not any(r.status == "pending" for r in records):
                raise DecidedElsewhere  # being resumed (by another replica): write nothing
            state = TaskState.Name(task.status.state)
            await updater.update_status(
                task.status.state, message=_text(updater, f"This task is not waiting for a decision ({state}).")
            )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Only the ``CANCELED`` status: a2a-sdk stops the run held in this process, and the request handler has
        withdrawn what was pending (:meth:`withdraw`) before every cancel, also where no run is held here."""
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def withdraw(self, task: Task, *, by: str) -> None:
        """Before ``task`` is canceled (by ``by``): deny its pending requests ("task canceled") and end its open
        question; or refuse the cancel (``TaskNotCancelableError``) when an approved call of its latest pause has
        started, because that run ends the task with the model's reply.

        Each request's decision is the arbiter: one decided before the cancel is not withdrawn (its call runs, unless
        the task is canceled before the run starts: then nothing runs and the task says ``CANCELED``), one the cancel
        denied first answers a later decision with "Already decided: … denied by cancel"."""
        if await self._kinds.withdraw(task.id):
            return  # a kind's pause was the task's (a sub-agent's, a tool's question): ended by the kind
        await withdraw_approvals(self._approvals, self._metrics, task, by)
        await self._kinds.canceled(task.id)  # the open question, after a started approved call refused the cancel

    # --- a new turn -----------------------------------------------------------------------------

    async def _new_turn(self, task_id: str, context_id: str, message: Message, updater: TaskUpdater) -> None:
        refusal = await self._guard.refusal(context_id, TASK_OWNER.get(), message)
        if refusal:
            return await updater.reject(_text(updater, refusal))
        text = "\n".join(get_text_parts(message.parts)).strip()
        try:
            outcome = await self._turns.new_turn(task_id, context_id, text)
        except Exception as exc:
            log.exception("agent run failed (task %s)", task_id)
            return await updater.failed(_text(updater, f"The agent failed: {type(exc).__name__}: {exc}"))
        await self._report(updater, outcome)

    # --- a decision -----------------------------------------------------------------------------

    async def _decision(
        self, task: Task, message: Message, updater: TaskUpdater, internal: Internal | None, voter: Principal,
    ) -> None:
        records = await self._approvals.for_task(task.id)
        refused = ""
        if internal is None:
            try:
                voter = delegated.voter(message, voter, self._config, self._identities)
            except relay.DelegationRefused as exc:
                refused = str(wire.DecisionError(str(exc)))
        kind = await self._kinds.route(task.id, records, internal)
        if kind is not None:  # another kind's pause is the task's (pauses/registry.py): the kind decides
            return await kind.decision(Decision(task, message, updater, internal, self._report, voter, refused))
        if refused and any(r.status == "pending" for r in records):
            return await self._still_waiting(updater, [r for r in records if r.status == "pending"], refused)
        pending = [r for r in records if r.status == "pending"]
        if isinstance(internal, InternalDecision) and not internal.resolutions:
            # "Resume what is recorded": requests were decided one by one (REST, kubectl; see decide_one). While some
            # are still pending, the pause is restated with only those (what GetTask and subscribers see).
            if records and not pending:
                await self._recover(task, records, updater)
            elif pending:
                batch = batches.batch_after(records, [])
                decided = [r for r in batch if r.status != "pending"]
                still = [r for r in batch if r.status == "pending"]
                text = batches.partly_decided(decided, still) if decided else batches.waiting_for(still)
                await self._still_waiting(updater, still, text)
            return
        if isinstance(internal, InternalDecision):
            return await self._internal_decision(task, records, pending, updater, internal)
        try:
            verdicts = wire.parse_decision(
                get_data_parts(message.parts),
                "\n".join(get_text_parts(message.parts)),
                [r.id for r in pending],
                allow_session=self._config.approval.allow_session_grants,
            )
        except wire.DecisionError as exc:
            if self._stalled(records):  # decided by another channel, or a restart cut the resume short
                return await self._recover(task, records, updater, note=batches.decided_elsewhere(records))
            if not pending and records:
                raise DecidedElsewhere from None  # a duplicate that lost the race (to another replica)
            replayed = batches.already_decided_ids(message, records)
            error = str(AlreadyDecided(replayed)) if replayed else str(exc)
            return await self._still_waiting(updater, pending, error)
        votes = {
            i: Vote(voter.id, voter.groups, "approve" if v.approved else "deny", v.reason, "a2a", voter.seen_as)
            for i, v in verdicts.items()
        }
        scope = next((v.scope for v in verdicts.values() if v.approved), "once")
        glob = next((v.grant for v in verdicts.values() if v.grant is not None), None)
        terms = GrantTerms(glob.argument, glob.glob) if glob is not None else None
        problem = next((p for r in pending if terms and verdicts[r.id].approved and (p := terms_problem(terms, r.args))), "")
        if problem:
            return await self._still_waiting(updater, pending, str(wire.DecisionError(problem[0].upper() + problem[1:] + ".")))
        try:
            plans = batches.plan_edits(self._config, pending, {i: v.args for i, v in verdicts.items() if v.args is not None})
        except edits.EditRefused as exc:
            return await self._still_waiting(updater, pending, str(wire.DecisionError(str(exc))))
        try:
            voted = await self._approvals.vote(
                task.id, votes, scope=scope, grant=terms, grant_ttl=self._config.approval.grant_ttl_seconds, edits=plans,
            )
        except AlreadyDecided as exc:
            pending = await self._approvals.for_task(task.id, pending_only=True)  # what is left after the winner
            if pending:
                return await self._still_waiting(updater, pending, str(exc))
            raise DecidedElsewhere from None
        decided = [v.record for v in voted if v.decided]
        self._count(decided, "a2a")
        batch = batches.batch_after(records, decided)
        still = [r for r in batch if r.status == "pending"]
        if still:  # not final yet (more approvals needed, a refused vote) or partly decided elsewhere
            return await self._still_waiting(updater, still, batches.votes_text(voted, still, set(plans)))
        await self._resume(task, batch, updater)

    async def _internal_decision(
        self, task: Task, records: list[ApprovalRecord], pending: list[ApprovalRecord], updater: TaskUpdater,
        internal: InternalDecision,
    ) -> None:
        """A decision the runtime itself made (the timeout sweeper, a cancel): no person, no votes."""
        try:
            decided = await self._approvals.decide(task.id, internal.resolutions, internal.source, known=pending)
        except AlreadyDecided:
            return  # another channel decided first: the task is theirs, leave it exactly as it is
        self._count(decided, internal.source)
        batch = batches.batch_after(records, decided)
        still = [r for r in batch if r.status == "pending"]
        if still:  # an internal channel decided part of the batch: resume once none is pending
            return await self._still_waiting(updater, still, batches.partly_decided(decided, still))
        await self._resume(task, batch, updater)

    def _count(self, decided: list[ApprovalRecord], source: str) -> None:
        self._metrics.pending.dec(len(decided))
        for r in decided:
            self._metrics.decisions.labels(outcome=batches.OUTCOME_LABEL[r.status], source=source).inc()

    async def _resume(self, task: Task, decided: list[ApprovalRecord], updater: TaskUpdater, note: str = "") -> None:
        await replies.resuming(updater)  # WORKING; durable, so other replicas know this task is being resumed
        try:
            outcome = await self._turns.resume_turn(task.id, task.context_id, decided)
        except Exception as exc:
            log.exception("agent run failed (task %s)", task.id)
            metadata = {"decisions": batches.decisions_metadata(decided)}
            text = f"The agent failed after the decision: {type(exc).__name__}: {exc}"
            return await updater.failed(_text(updater, text, metadata))
        await self._report(updater, outcome, decided, note)

    def _stalled(self, records: list[ApprovalRecord]) -> bool:
        """Decided, but the task never finished: another channel decided it, or the runtime that applied the
        decision died on the way.

        With one process that is certain whenever it is seen (requests of one task never overlap here);
        with replicas, only once the decision is older than :data:`RECOVERY_GRACE_SECONDS`.
        """
        if not records or any(r.status == "pending" for r in records):
            return False
        if self._single_process:
            return True
        return max(r.decided_at or 0.0 for r in records) < time.time() - RECOVERY_GRACE_SECONDS

    async def _recover(self, task: Task, records: list[ApprovalRecord], updater: TaskUpdater, note: str = "") -> None:
        """Finish a stalled resume with the recorded decisions (an approved call that started is not rerun)."""
        last = max(r.created_at for r in records)
        await self._resume(task, [r for r in records if r.created_at == last], updater, note)

    async def _still_waiting(self, updater: TaskUpdater, pending: list[ApprovalRecord], error: str) -> None:
        parts = [new_text_part(error)]
        metadata: dict[str, Any] = dict(INTERRUPT_METADATA)
        if pending:
            interrupt = wire.ApprovalInterrupt(action_requests=await self._action_requests(pending))
            parts.append(new_data_part(interrupt.model_dump(mode="json")))
            metadata[kagent_hitl.URI] = kagent_hitl.tool_approval_request(interrupt.action_requests)
        message = updater.new_agent_message(parts, metadata=metadata)
        if pending:
            message.extensions.append(kagent_hitl.URI)  # kagent's clients read the payload only where it is declared
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message, metadata=dict(INTERRUPT_METADATA))

    # --- reporting ------------------------------------------------------------------------------

    async def _action_requests(self, records: list[ApprovalRecord]) -> list[wire.ActionRequest]:
        with_approvers = [r.id for r in records if r.approvers is not None]
        votes = await self._approvals.counted_votes(with_approvers) if with_approvers else {}
        return [
            r.action_request(votes.get(r.id, ()), editable=edits.editable(self._config, r.server, r.tool, r.requested_args))
            .model_copy(update={"approval": self._approval_name(r.id)})
            for r in records
        ]

    async def _report(
        self, updater: TaskUpdater, outcome: TurnOutcome, decided: list[ApprovalRecord] | None = None, note: str = ""
    ) -> None:
        if outcome.pause is not None:  # the turn paused on another kind (it recorded the pause): the kind says it
            return await self._kinds.named(outcome.pause.kind).report_pause(updater, outcome.pause.record)
        if outcome.paused:
            requests = await self._action_requests(outcome.requests)
            interrupt = wire.ApprovalInterrupt(action_requests=requests)
            parts = [new_text_part(wire.describe_requests(requests)), new_data_part(interrupt.model_dump(mode="json"))]
            # The same pause in kagent's hitl/v1 shape as well, whether or not this caller asked for the extension:
            # the stored task is what every later reader sees (docs/wire-contract.md, "kagent hitl/v1").
            pause = {**INTERRUPT_METADATA, kagent_hitl.URI: kagent_hitl.tool_approval_request(requests)}
            message = updater.new_agent_message(parts, metadata=pause)
            message.extensions.append(kagent_hitl.URI)
            await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message, metadata=dict(INTERRUPT_METADATA))
            return
        text = outcome.text or ("; ".join(outcome.errors) if outcome.errors else "(no reply)")
        timed_out = [r for r in decided or [] if r.status == "expired" or r.source == "timeout"]
        texts = [note, text, batches.timeout_note(timed_out) if timed_out else ""]
        metadata = {"decisions": batches.decisions_metadata(decided)} if decided else None
        status_metadata = {"interrupt_type": None} if decided else None
        await replies.finish(updater, texts, failed=bool(outcome.errors and not outcome.text), metadata=metadata,
                               status_metadata=status_metadata)


def _text(updater: TaskUpdater, text: str, metadata: dict[str, Any] | None = None) -> Message:
    return updater.new_agent_message([new_text_part(text)], metadata=metadata)


__all__ = [
    "DECIDED_ELSEWHERE",
    "INTERNAL_DECISION",
    "DecidedElsewhere",
    "GatehouseExecutor",
    "InternalDecision",
]
