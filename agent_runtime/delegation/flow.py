"""A sub-agent's pause, followed from this agent's task: decisions forwarded, the outcome handed back to the model.

    a run pauses on a sub-agent (delegation/tool.py) ─► DelegationRecorder stores the row before the client is told
    the executor reports it as this task's pause: the sub-agent's requests, each marked {agent, task_id, path}
    a decision on this task ─► DelegationFlow.decision forwards the client's parts to the sub-agent's task, on behalf
        of the authenticated voter (relay.ON_BEHALF_OF); the sub-agent judges the human against its own approvers
        ├─ the sub-agent still waits (a vote counted, a refused decision, its next gated call) ─► this task restates it
        └─ the sub-agent's task ended ─► the row is finished (compare-and-swap) and the model is resumed with the
           sub-agent's reply as the call's result (TurnRunner.resume_call), exactly once
    decided elsewhere (the sub-agent's own timeout, kubectl, REST on the sub-agent) ─► DelegationWatcher notices on
        its next round and sends an internal message through the request handler, which follows the same path.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task, TaskState
from google.protobuf.json_format import MessageToDict

from agent_runtime.contract import kagent_hitl, wire
from agent_runtime.contract.kagent_hitl import URI as KAGENT_URI
from agent_runtime.contract.principals import Principal
from agent_runtime.delegation import relay
from agent_runtime.delegation.client import ChildStatus, SubAgentClient, SubAgentUnreachable
from agent_runtime.delegation.store import AlreadyFinished, DelegationRecord, DelegationStore
from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.pauses.flow import InternalSweep, KindBase, PauseRuntime, resume_tail
from agent_runtime.pauses.kind import Decision, Internal, Outcome, Report
from agent_runtime.runs import replies
from agent_runtime.runs.run_scope import RunScope

log = logging.getLogger(__name__)

INTERNAL_DELEGATION = "gatehouse.internal_delegation"
UNREACHABLE_GRACE_SECONDS = 60.0  # past the pause's expiry, a sub-agent still unreachable ends the call with an error
# Never passed on from a client's message: our own claims (this agent makes them), and a kagent hitl/v1 payload, which
# this agent's request handler has already added to the parts as a data part (sent twice, it would be refused there).
RESERVED_METADATA = (relay.ON_BEHALF_OF, relay.DEPTH, relay.REQUESTER, KAGENT_URI)

FinishExecution = Callable[[str, Any], Awaitable[object]]  # ApprovalService.finish_execution(call_id, result)


class DelegationTurns(Protocol):
    async def resume_call(
        self, task_id: str, context_id: str, call_id: str, tool: str, response: dict[str, Any]
    ) -> Outcome: ...


@dataclass(frozen=True)
class InternalDelegation(Internal):
    """The watcher saw the sub-agent's task change (or stay unreachable past the expiry); only in-process code sets it."""

    dropped_while_working: ClassVar[bool] = True

    delegation_id: str
    status: ChildStatus | None = None
    unreachable: str = ""


class DelegationFlow(KindBase[DelegationRecord, DelegationStore]):
    def __init__(
        self, store: DelegationStore, clients: Mapping[str, SubAgentClient], turns: DelegationTurns,
        finish_execution: FinishExecution,
    ) -> None:
        self._store = store
        self._clients = clients
        self._turns = turns
        self._finish_execution = finish_execution

    name = "delegation"  # its own pause carries the sub-agent's interrupt_type; this name is the registry's
    internal_key = INTERNAL_DELEGATION
    internal_type = InternalDelegation

    def busy_text(self, record: DelegationRecord) -> str:
        return (f"Task {record.task_id} of this context waits for the sub-agent {record.agent} ({record.id}); decide it "
                "(same task_id) before sending a new message.")

    async def withdraw(self, task_id: str) -> bool:
        """A sub-agent's pause: its task is canceled with this one."""
        if not await self.waiting(task_id):
            return False
        await self.cancel(task_id)
        return True

    async def decision(self, decision: Decision) -> None:
        d = decision
        if d.refused:  # a claim to act for someone from a caller not trusted to: never passed on
            return await self.refuse(d.task.id, d.updater, d.refused)
        await self._decide(d.task, d.message, d.updater, d.internal, d.report, d.voter)

    async def _decide(
        self, task: Task, message: Message, updater: TaskUpdater, internal: Internal | None, report: Report,
        voter: Principal,
    ) -> None:
        rows = await self._store.for_task(task.id)
        current = rows[-1]
        if isinstance(internal, InternalDelegation):
            if current.id != internal.delegation_id or not current.open:
                return  # followed meanwhile: the task belongs to whoever did
            if internal.unreachable:
                result = {"error": f"the sub-agent {current.agent} could not be reached to learn its outcome "
                                   f"({internal.unreachable}); whether it acted is unknown"}
                with contextlib.suppress(AlreadyFinished):
                    done = await self._store.finish(current, result, "unreachable")
                    await self._resume(task, done, updater, report)
                return
            status = internal.status
            if status is None:
                return
            return await self._follow(task, current, status, updater, report, quiet=True)
        if not current.open:
            return await self._resume(task, current, updater, report)  # finished, but a restart cut the resume short
        client = self._clients.get(current.tool)
        if client is None:
            return await self.still_waiting(updater, current, (
                f"The sub-agent {current.agent} is no longer configured for this agent; nothing was decided."))
        metadata = {k: v for k, v in MessageToDict(message.metadata).items() if k not in RESERVED_METADATA}
        metadata.update(relay.on_behalf_metadata(voter))
        try:
            status = await client.send(list(message.parts), metadata, task_id=current.child_task_id,
                                       context_id=current.child_context_id)
        except SubAgentUnreachable as exc:
            return await self.still_waiting(updater, current, (
                f"The decision could not be passed on to {current.agent}: {exc}. Nothing was decided; send it again."))
        await self._follow(task, current, status, updater, report)

    async def _follow(
        self, task: Task, record: DelegationRecord, status: ChildStatus, updater: TaskUpdater, report: Report,
        *, quiet: bool = False,
    ) -> None:
        if status.paused:
            expires = relay.earliest_expiry(status.pause.data) or record.expires_at
            if status.pause != record.pause or expires != record.expires_at:
                try:
                    record = await self._store.repause(record, status.pause, expires)
                except AlreadyFinished:
                    return  # the sub-agent's outcome was taken meanwhile: that request ends this task
            elif quiet:
                return
            return await self.still_waiting(updater, record, status.text)
        if status.finished or status.state == "message":
            state = "completed" if status.state == "message" else status.state
            result = relay.result_for_model(record.agent, state, status.text)
            try:
                done = await self._store.finish(record, result, state)
            except AlreadyFinished:
                return
            return await self._resume(task, done, updater, report)
        if not quiet:  # submitted or working: the sub-agent is busy with it (another replica resuming it)
            await self.still_waiting(updater, record, f"{record.agent} is working on it ({status.state}); its reply "
                                                      "will come here.")

    async def cancel(self, task_id: str) -> None:
        """This task was canceled: the sub-agent's task is canceled too (best effort) and the call ends canceled."""
        for record in await self._store.for_task(task_id):
            if not record.open:
                continue
            client = self._clients.get(record.tool)
            if client is not None:
                try:
                    await client.cancel(record.child_task_id)
                except SubAgentUnreachable as exc:
                    log.warning("could not cancel task %s of %s: %s", record.child_task_id, record.agent, exc)
            with contextlib.suppress(AlreadyFinished):
                result = {"error": "the task was canceled while the sub-agent waited"}
                await self._store.finish(record, result, "canceled")
                await self._finish_execution(record.call_id, result)

    async def refuse(self, task_id: str, updater: TaskUpdater, text: str) -> None:
        """A decision that may not be passed on (a claim to act for someone from a caller not trusted to): the pause
        stays as it was, with the reason."""
        rows = await self._store.for_task(task_id)
        await self.still_waiting(updater, rows[-1], text)

    # --- reporting ------------------------------------------------------------------------------

    async def report_pause(self, updater: TaskUpdater, record: DelegationRecord) -> None:
        await self.still_waiting(updater, record, record.pause.text)

    async def still_waiting(self, updater: TaskUpdater, record: DelegationRecord, text: str) -> None:
        pause = record.pause
        kind = pause.metadata.get("interrupt_type") or next(
            (d.get("interrupt_type") for d in pause.data if d.get("interrupt_type")), "tool_approval")
        parts = [new_text_part(f"{record.tool} (sub-agent {record.agent}): {text}" if text else record.tool)]
        parts += [new_data_part(relay.nest(d, record.tool, record.child_task_id)) for d in pause.data]
        metadata: dict[str, Any] = {"interrupt_type": kind, wire.RELAYED_PAUSE: {
            "id": record.id, "agent": record.agent, "tool": record.tool, "task_id": record.child_task_id}}
        child = pause.metadata.get(KAGENT_URI)
        # kagent's nested shape: this agent's call on top, the sub-agent's calls (the ids a decision names, forwarded
        # to it like ours) in "nested".
        kagent = kagent_hitl.nested_request(record, child) if isinstance(child, dict) else None
        if kagent is not None:
            metadata[KAGENT_URI] = kagent
        message = updater.new_agent_message(parts, metadata=metadata)
        if kagent is not None:
            message.extensions.append(KAGENT_URI)
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message,
                                    metadata={"interrupt_type": kind})

    async def _resume(self, task: Task, record: DelegationRecord, updater: TaskUpdater, report: Report) -> None:
        result = record.result or {"error": "no result was recorded"}
        await self._finish_execution(record.call_id, result)  # a gated delegation's one claim ends here
        if record.note:  # an approver edited the delegation itself: the model must know what it asked was changed
            result = {**result, "gatehouse_note": record.note}
        await replies.resuming(updater)  # WORKING: the decision is taken, the work resumes
        outcome = await self._turns.resume_call(task.id, task.context_id, record.call_id, record.tool, result)
        summary = {"tool": record.tool, "agent": record.agent, "task_id": record.child_task_id, "outcome": record.outcome}
        await resume_tail(updater, outcome, report, {"delegations": {record.id: summary}})



class DelegationRecorder:
    """Turns the sub-agent pause a run ended on into a durable :class:`DelegationRecord` (before anyone is told)."""

    def __init__(self, store: DelegationStore, timeout_seconds: float) -> None:
        self._store = store
        self._timeout = timeout_seconds

    async def record(self, scope: RunScope, confirmation_ids: Mapping[str, str] | None = None) -> DelegationRecord | None:
        if not scope.delegating:
            return None
        (paused,) = scope.delegating  # the tool refuses a second pause in the same turn
        now = self._store.clock()
        # No later than the earliest request inside it: the sub-agent decides those at their own expiry.
        expires = relay.earliest_expiry(paused.pause.data) or now + self._timeout
        record = DelegationRecord(
            id=paused.request_id, task_id=scope.task_id, context_id=scope.context_id, call_id=paused.call_id,
            tool=paused.tool, agent=paused.agent, args=paused.args, child_task_id=paused.child_task_id,
            child_context_id=paused.child_context_id, pause=paused.pause, created_at=now, expires_at=expires,
            note=paused.note,
        )
        await self._store.add(record)
        return record


class DelegationWatcher(InternalSweep[DelegationRecord]):
    """Looks at every open sub-agent task now and then: one that ended or changed without a decision passing through
    here (its own timeout, kubectl or REST on the sub-agent, an N-of-M vote cast there) is followed through the request
    handler like any decision."""

    name = "gatehouse-delegation-watcher"

    def __init__(self, store: DelegationStore, clients: Mapping[str, SubAgentClient], handler: DefaultRequestHandler,
                 interval: float) -> None:
        super().__init__(handler, interval)
        self._store = store
        self._clients = clients

    async def due(self) -> list[DelegationRecord]:
        return await self._store.waiting()

    async def resolve(self, record: DelegationRecord) -> bool:
        return await self._look(record)

    def counted(self, due: Sequence[DelegationRecord], results: Sequence[Any]) -> int:
        return sum(1 for r in results if r is True)  # the sub-agent tasks that changed

    async def _look(self, record: DelegationRecord) -> bool:
        client = self._clients.get(record.tool)
        if client is None:
            return False
        try:
            status = await client.get(record.child_task_id)
        except SubAgentUnreachable as exc:
            if time.time() < record.expires_at + UNREACHABLE_GRACE_SECONDS:
                return False
            internal = InternalDelegation(record.id, unreachable=str(exc))
        else:
            if status.paused and status.pause == record.pause:
                return False
            if not (status.paused or status.finished):
                return False
            internal = InternalDelegation(record.id, status)
        parts = [new_text_part(f"{record.agent} changed"), new_data_part({"source": "delegation", "delegation": record.id})]
        await self.send(record, f"delegation-{uuid.uuid4()}", parts, INTERNAL_DELEGATION, internal,
                        {"gatehouse_source": "delegation"})
        return True


class DelegationRuntime(PauseRuntime):
    """Everything sub-agents need in one runtime: clients, tools, store, recorder, flow, watcher."""

    def __init__(self, clients: Mapping[str, SubAgentClient], db: Database, timeout_seconds: float,
                 fresh: FreshIds | None = None) -> None:
        self.clients = dict(clients)
        self.store = DelegationStore(db, fresh=fresh)
        self.recorder = DelegationRecorder(self.store, timeout_seconds)
        self.flow: DelegationFlow | None = None

    def flow_for(self, turns: DelegationTurns, finish_execution: FinishExecution) -> DelegationFlow:
        self.flow = DelegationFlow(self.store, self.clients, turns, finish_execution)
        return self.flow

    def watch(self, handler: DefaultRequestHandler, interval: float) -> None:
        if self.clients:
            self.sweeper = DelegationWatcher(self.store, self.clients, handler, interval)

    async def close(self) -> None:
        await super().close()
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                await client.close()


__all__ = [
    "INTERNAL_DELEGATION", "DelegationFlow", "DelegationRecorder", "DelegationRuntime", "DelegationWatcher",
    "InternalDelegation",
]
