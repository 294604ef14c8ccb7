"""How the A2A executor (agent_runtime/server/executor.py) turns a decision message into resolutions.

Driven through :meth:`GatehouseExecutor.execute` as the a2a-sdk request handler calls it: a real
``RequestContext`` and an ``EventQueue`` subclass that keeps the events (the SDK's way to run an executor
outside its framework), over a real ADK runner with the scripted model, the real gate and the real approvals
table on sqlite. The gated tool is an in-process ADK ``FunctionTool``; nothing listens on a port. The pure
helpers the decision path uses (replay detection, the batch being resumed) are tested directly at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError
from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.tools import FunctionTool

from agent_runtime.approvals import ApprovalRecord, ApprovalService, Resolution, args_hash
from agent_runtime.contract import wire
from agent_runtime.contract.agent_config import (
    AgentConfig,
    ApprovalPolicy,
    CardConfig,
    McpServerConfig,
    ScriptedModel,
    ScriptedRule,
    ScriptedToolCall,
)
from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.models.scripted import ScriptedLlm
from agent_runtime.server.batches import already_decided_ids, batch_after
from agent_runtime.server.executor import INTERNAL_DECISION, GatehouseExecutor, InternalDecision
from agent_runtime.server.gate import Gate
from agent_runtime.server.sessions import DurableSessionService
from agent_runtime.server.turns import TurnRunner
from agent_runtime.telemetry.metrics import Metrics

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED
REJECTED = TaskState.TASK_STATE_REJECTED
REPLY = "done: {result}"  # the scripted model's answer once the turn's tools have run


def _delete(path: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="delete_file", args={"path": path})


def _config(**approval: Any) -> AgentConfig:
    two = ScriptedRule(match=r"delete (?P<a>\S+) and (?P<b>\S+)", tool_calls=[_delete("{a}"), _delete("{b}")], reply=REPLY)
    one = ScriptedRule(match=r"delete (?P<a>\S+)", tool_calls=[_delete("{a}")], reply=REPLY)
    files = McpServerConfig(name="files", url="http://x/mcp", tool_names=["delete_file"], require_approval=["delete_file"])
    return AgentConfig(
        name="a", model=ScriptedModel(model="s", rules=[two, one]), card=CardConfig(name="a"), mcp_servers=[files],
        approval=ApprovalPolicy(**approval),
    )


class KeptEvents(EventQueue):
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def enqueue_event(self, event: Event) -> None:
        self.events.append(event)


@dataclass
class Outcome:
    """The task's last status as the client sees it."""

    state: TaskState.ValueType
    text: str
    data: list[Any]

    def pending_ids(self) -> list[str]:
        (interrupt,) = self.data
        return [r.id for r in wire.ApprovalInterrupt.model_validate(interrupt).action_requests]


@dataclass
class Stack:
    executor: GatehouseExecutor
    approvals: ApprovalService
    ran: list[str] = field(default_factory=list)  # the paths the gated tool really deleted

    async def send(self, task_id: str, context_id: str, *, text: str = "", data: Any = None, paused: bool = False) -> Outcome:
        """One ``SendMessage``: a new task, or (``paused``) a message on the task waiting for a decision."""
        parts: list[Part] = ([new_text_part(text)] if text else []) + ([new_data_part(data)] if data is not None else [])
        message = Message(role=Role.ROLE_USER, message_id=f"m-{task_id}", task_id=task_id, context_id=context_id, parts=parts)
        task = Task(id=task_id, context_id=context_id, status=TaskStatus(state=INPUT_REQUIRED)) if paused else None
        context = RequestContext(
            ServerCallContext(), SendMessageRequest(message=message), task_id=task_id, context_id=context_id, task=task
        )
        queue = KeptEvents()
        await self.executor.execute(context, queue)
        status = [e for e in queue.events if isinstance(e, TaskStatusUpdateEvent)][-1].status
        # What a client reads: a finished turn's reply (the artifact), then the final status message's text.
        replies = [t for e in queue.events if isinstance(e, TaskArtifactUpdateEvent) for t in get_text_parts(e.artifact.parts)]
        text = "\n".join([*replies, *get_text_parts(status.message.parts)])
        return Outcome(status.state, text, get_data_parts(status.message.parts))

    async def decide(self, task_id: str, context_id: str = "c1", *, text: str = "", data: Any = None) -> Outcome:
        return await self.send(task_id, context_id, text=text, data=data, paused=True)

    async def pause(self, task_id: str, context_id: str, text: str) -> list[str]:
        outcome = await self.send(task_id, context_id, text=text)
        assert outcome.state == INPUT_REQUIRED, outcome
        ids = [r.id for r in await self.approvals.for_task(task_id)]
        assert outcome.pending_ids() == ids
        return ids

    async def statuses(self, task_id: str) -> list[tuple[str, str, str]]:
        return [(r.status, r.source, r.reason) for r in await self.approvals.for_task(task_id)]


@asynccontextmanager
async def _stack(tmp_path: Path, config: AgentConfig) -> AsyncIterator[Stack]:
    db = Database(default_database_url(tmp_path))
    approvals = ApprovalService(db)
    await approvals.create_tables()
    sessions = DurableSessionService(db)
    await sessions.create_tables()
    metrics = Metrics(config.name)
    gate = Gate(config, approvals, metrics)
    ran: list[str] = []

    def delete_file(path: str) -> str:
        """Delete the file at ``path``."""
        ran.append(path)
        return f"deleted {path}"

    assert isinstance(config.model, ScriptedModel)
    agent = LlmAgent(
        name="a", model=ScriptedLlm.from_config(config.model), tools=[FunctionTool(delete_file)],
        before_tool_callback=gate.before_tool, after_tool_callback=gate.after_tool,
    )
    runner = Runner(app_name=config.name, agent=agent, session_service=sessions, auto_create_session=True)
    turns = TurnRunner(runner, sessions, approvals, metrics, config.approval.timeout_seconds)
    executor = GatehouseExecutor(config, turns, approvals, metrics, single_process=True)
    try:
        yield Stack(executor, approvals, ran)
    finally:
        await db.dispose()


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with _stack(tmp_path, _config()) as s:
        yield s


# --- decisions that decide ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decision",
    [
        {"data": wire.approve_all()},
        {"text": "approve"},
        {"text": "Yes."},
        {"batch": {"first": "approve", "second": "approve"}},
        {"batch": [{"id": "second", "decision": "approve"}, {"id": "first", "decision": "approve"}]},
    ],
    ids=["approve-all", "word", "word-yes", "batch", "batch-list"],
)
async def test_approving_every_call_runs_each_once(stack: Stack, decision: dict[str, Any]) -> None:
    first, second = await stack.pause("t1", "c1", "delete x and y")
    if "batch" in decision:
        named = {"first": first, "second": second}
        batch = decision["batch"]
        if isinstance(batch, dict):
            decisions: Any = {named[k]: v for k, v in batch.items()}
        else:
            decisions = [{**d, "id": named[d["id"]]} for d in batch]
        decision = {"data": {"decision_type": "batch", "decisions": decisions}}
    done = await stack.decide("t1", **decision)
    assert done.state == COMPLETED and done.text == "done: deleted x; deleted y"
    assert stack.ran == ["x", "y"]
    assert await stack.statuses("t1") == [("approved", "a2a", ""), ("approved", "a2a", "")]


async def test_a_batch_decides_each_call_on_its_own(stack: Stack) -> None:
    first, second = await stack.pause("t1", "c1", "delete x and y")
    batch = wire.batch({first: True, second: False}, reasons={second: "keep y"})
    done = await stack.decide("t1", data=batch)
    assert done.state == COMPLETED and "deleted x" in done.text and "rejected by the user: keep y" in done.text
    assert stack.ran == ["x"]
    assert await stack.statuses("t1") == [("approved", "a2a", ""), ("denied", "a2a", "keep y")]


async def test_deny_all_runs_nothing(stack: Stack) -> None:
    await stack.pause("t1", "c1", "delete x and y")
    done = await stack.decide("t1", data=wire.deny_all("not today"))
    assert done.state == COMPLETED and done.text.count("rejected by the user: not today") == 2
    assert stack.ran == []
    assert await stack.statuses("t1") == [("denied", "a2a", "not today")] * 2


# --- decisions that decide nothing --------------------------------------------------------------------


async def test_a_batch_that_leaves_out_a_call_approves_nothing(stack: Stack) -> None:
    first, second = await stack.pause("t1", "c1", "delete x and y")
    still = await stack.decide("t1", data=wire.batch({first: True}))
    assert still.state == INPUT_REQUIRED and f"missing ids: {second}" in still.text and "Nothing was decided" in still.text
    assert still.pending_ids() == [first, second]  # the client is shown what still waits
    assert stack.ran == [] and await stack.statuses("t1") == [("pending", "", "")] * 2


async def test_a_decision_naming_another_tasks_requests_approves_nothing(stack: Stack) -> None:
    (mine,) = await stack.pause("t1", "c1", "delete x")
    (theirs,) = await stack.pause("t2", "c2", "delete z")
    only_theirs = await stack.decide("t1", data=wire.batch({theirs: True}))
    assert only_theirs.state == INPUT_REQUIRED
    assert f"unknown ids: {theirs}" in only_theirs.text and f"missing ids: {mine}" in only_theirs.text
    both = await stack.decide("t1", data=wire.batch({mine: True, theirs: True}))
    assert both.state == INPUT_REQUIRED and f"unknown ids: {theirs}" in both.text and both.pending_ids() == [mine]
    assert stack.ran == []
    assert await stack.statuses("t1") == await stack.statuses("t2") == [("pending", "", "")]


async def test_a_decision_sent_without_the_paused_tasks_id_is_rejected(stack: Stack) -> None:
    await stack.pause("t1", "c1", "delete x")
    rejected = await stack.send("t-new", "c1", data=wire.approve_all())
    assert rejected.state == REJECTED
    assert "There is no pending request on this task. Task t1 of this context is waiting" in rejected.text
    assert stack.ran == [] and await stack.statuses("t1") == [("pending", "", "")]


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        ({"text": "maybe later"}, "Could not read a decision from the text 'maybe later'"),
        ({"text": ""}, "The message is empty"),
        ({"data": {"decision_type": "approve", "scope": "session"}}, "Session grants are not allowed"),
        ({"data": {"decision_type": "answer", "answers": {"q": "a"}}}, "answers a hitl_request question"),
        ({"data": {"decision_type": "approve", "ids": ["x"]}}, "Malformed approve decision"),
    ],
    ids=["unreadable", "empty", "session-not-allowed", "question-answer", "malformed"],
)
async def test_an_unusable_decision_approves_nothing(stack: Stack, decision: dict[str, Any], problem: str) -> None:
    (waiting,) = await stack.pause("t1", "c1", "delete x")
    still = await stack.decide("t1", **decision)
    assert still.state == INPUT_REQUIRED and problem in still.text and still.pending_ids() == [waiting]
    assert stack.ran == [] and await stack.statuses("t1") == [("pending", "", "")]


async def test_session_scope_where_the_policy_allows_it(tmp_path: Path) -> None:
    async with _stack(tmp_path, _config(allow_session_grants=True)) as stack:
        await stack.pause("t1", "c1", "delete x")
        done = await stack.decide("t1", data=wire.approve_all("session"))
        assert done.state == COMPLETED and stack.ran == ["x"]
        assert [r.scope for r in await stack.approvals.for_task("t1")] == ["session"]


def _record(request_id: str, created: float, position: int = 0, task_id: str = "t1") -> ApprovalRecord:
    args = {"path": request_id}
    return ApprovalRecord(
        id=request_id, task_id=task_id, context_id="c1", confirmation_id=f"conf-{request_id}", call_id=f"call-{request_id}",
        tool="delete_file", server="files", args=args, args_hash=args_hash("delete_file", args), hint="gated",
        created_at=created, expires_at=created + 900, position=position,
    )


async def test_a_replayed_decision_is_told_already_decided_and_decides_nothing(stack: Stack) -> None:
    # The task paused twice: the first pause was approved (and ran); the second waits.
    await stack.approvals.add_pending([_record("apr-old", created=100.0)])
    await stack.approvals.decide("t1", {"apr-old": Resolution("approved")}, "a2a")
    await stack.approvals.add_pending([_record("apr-new", created=200.0)])
    replay = await stack.decide("t1", data=wire.batch({"apr-old": True}))
    assert replay.state == INPUT_REQUIRED and replay.pending_ids() == ["apr-new"]
    assert replay.text.startswith("Already decided: apr-old (delete_file) was approved by a2a")
    assert "Nothing was run again" in replay.text
    assert [(r.id, r.status) for r in await stack.approvals.for_task("t1")] == [("apr-old", "approved"), ("apr-new", "pending")]
    assert stack.ran == []


# --- a pause decided one request at a time; a cancel -------------------------------------------------


async def test_a_pause_decided_in_part_is_restated_with_only_what_is_pending(stack: Stack) -> None:
    """REST and kubectl decide one request; decide_one then sends an internal message with no resolutions."""
    first, second = await stack.pause("t1", "c1", "delete x and y")
    await stack.approvals.decide("t1", {first: Resolution("approved")}, "rest")
    message = Message(role=Role.ROLE_AGENT, message_id="restate", task_id="t1", context_id="c1", parts=[new_text_part("n")])
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=INPUT_REQUIRED))
    context = RequestContext(ServerCallContext(state={INTERNAL_DECISION: InternalDecision({}, "rest")}),
                             SendMessageRequest(message=message), task_id="t1", context_id="c1", task=task)
    queue = KeptEvents()
    await stack.executor.execute(context, queue)
    (update,) = [e for e in queue.events if isinstance(e, TaskStatusUpdateEvent)]
    assert update.status.state == INPUT_REQUIRED
    (data,) = get_data_parts(update.status.message.parts)
    assert [r.id for r in wire.ApprovalInterrupt.model_validate(data).action_requests] == [second]
    assert get_text_parts(update.status.message.parts) == [
        f"Recorded: {first} (delete_file) approved via rest. Still waiting for a decision on {second} (delete_file); "
        "the task resumes once every request is decided."]
    assert stack.ran == []


async def test_a_cancel_denies_what_is_pending(stack: Stack) -> None:
    await stack.pause("t1", "c1", "delete x and y")
    await stack.executor.withdraw(Task(id="t1", context_id="c1", status=TaskStatus(state=INPUT_REQUIRED)), by="alice")
    assert await stack.statuses("t1") == [("denied", "cancel", "task canceled")] * 2
    assert stack.ran == []


async def test_a_cancel_after_an_approved_call_started_is_refused(stack: Stack) -> None:
    (request_id,) = await stack.pause("t1", "c1", "delete x")
    (record,) = await stack.approvals.decide("t1", {request_id: Resolution("approved")}, "rest")
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=INPUT_REQUIRED))
    await stack.executor.withdraw(task, by="alice")  # approved, not started: nothing to withdraw, the cancel goes on
    assert (await stack.approvals.claim_execution(record.call_id, record.tool, record.args_hash)).ok
    with pytest.raises(TaskNotCancelableError) as refused:
        await stack.executor.withdraw(task, by="alice")
    assert refused.value.data is not None
    assert refused.value.data["explanation"] == (f"Not canceled: {request_id} (delete_file) was approved and has started; the "
                                                 "task ends with the model's reply to it.")
    assert await stack.statuses("t1") == [("approved", "rest", "")]


# --- the pure helpers -----------------------------------------------------------------------------------


def _message(*data: Any) -> Message:
    return Message(role=Role.ROLE_USER, message_id="m", parts=[new_data_part(d) for d in data])


def test_a_replay_is_recognised_by_the_decided_ids_it_names() -> None:
    records = [replace(_record("apr-old", 100.0), status="approved", source="a2a"), _record("apr-new", 200.0)]
    named_dict = _message({"decision_type": "batch", "decisions": {"apr-old": "approve", "apr-new": "approve", "apr-x": "deny"}})
    named_list = _message({"decision_type": "batch", "decisions": [{"id": "apr-old", "decision": "approve"}, {"id": 3}]})
    assert [r.id for r in already_decided_ids(named_dict, records)] == ["apr-old"]  # pending and unknown ids are not replays
    assert [r.id for r in already_decided_ids(named_list, records)] == ["apr-old"]
    assert already_decided_ids(_message(wire.approve_all()), records) == []  # approve-all names no id
    assert already_decided_ids(_message(["apr-old"]), records) == []
    assert already_decided_ids(Message(role=Role.ROLE_USER, message_id="m", parts=[new_text_part("apr-old")]), records) == []


def test_the_batch_resumed_is_the_latest_pause_with_the_decisions_applied() -> None:
    earlier = _record("apr-0", 100.0)
    b, a = _record("apr-b", 200.0, position=1), _record("apr-a", 200.0, position=0)
    decided_b = replace(b, status="denied", reason="no")
    batch = batch_after([earlier, b, a], [decided_b])
    assert [(r.id, r.status) for r in batch] == [("apr-a", "pending"), ("apr-b", "denied")]  # call order, earlier pause left out
    assert batch_after([], [decided_b]) == [decided_b]
