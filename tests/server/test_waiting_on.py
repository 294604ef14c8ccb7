"""``waiting_on``: what a paused task waits on, from its stored status alone (start-up recovery resumes only a
decided approval; every other pause waits for its own answer)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types import Message, Role, Task, TaskState, TaskStatus
from google.protobuf.struct_pb2 import Struct

from agent_runtime.contract import wire
from agent_runtime.server.waiting_on import Pause, Waiting, waiting_on


def _task(state: TaskState, metadata: dict[str, Any] | None = None, *data: dict[str, Any]) -> Task:
    message = Message(role=Role.ROLE_AGENT, message_id="m", parts=[new_text_part("paused"), *map(new_data_part, data)])
    if metadata is not None:
        struct = Struct()
        struct.update(metadata)
        message.metadata.CopyFrom(struct)
    return Task(id="t", context_id="c", status=TaskStatus(state=state, message=message))


def _approval(*ids: str) -> dict[str, Any]:
    return {"interrupt_type": "tool_approval", "action_requests": [
        {"id": i, "name": "delete_file", "args": {"path": "x"}, "call_id": f"call-{i}", "expires_at": "later"} for i in ids]}


INPUT = TaskState.TASK_STATE_INPUT_REQUIRED


def test_this_agents_own_approval_pause_lists_its_requests() -> None:
    task = _task(INPUT, {"interrupt_type": wire.INTERRUPT_TOOL_APPROVAL}, _approval("apr-1", "apr-2"))
    assert waiting_on(task) == Pause(Waiting.APPROVAL, frozenset({"apr-1", "apr-2"}))


def test_a_restated_approval_pause_without_a_data_part_lists_none() -> None:
    assert waiting_on(_task(INPUT, {"interrupt_type": "tool_approval"})) == Pause(Waiting.APPROVAL)


@pytest.mark.parametrize(("kind", "waiting"), [
    (wire.INTERRUPT_HITL, Waiting.QUESTION),  # the model asked the user, e.g. after an approved call
    (wire.INTERRUPT_ELICITATION, Waiting.ELICITATION),  # an approved call's tool asked
    ("something-new", Waiting.UNKNOWN),
])
def test_other_pauses_are_not_approvals(kind: str, waiting: Waiting) -> None:
    assert waiting_on(_task(INPUT, {"interrupt_type": kind}, _approval("apr-1"))).waiting is waiting


@pytest.mark.parametrize("kind", [wire.INTERRUPT_TOOL_APPROVAL, wire.INTERRUPT_HITL, wire.INTERRUPT_ELICITATION])
def test_a_relayed_sub_agent_pause_is_the_sub_agents_whatever_its_kind(kind: str) -> None:
    """A sub-agent's approval relayed by the parent carries ``tool_approval`` too: never the parent's to resume."""
    metadata = {"interrupt_type": kind, wire.RELAYED_PAUSE: {"id": "del-1", "agent": "files", "tool": "files"}}
    assert waiting_on(_task(INPUT, metadata, _approval("apr-9"))) == Pause(Waiting.SUB_AGENT)


def test_no_interrupt_type_is_unknown_never_an_approval() -> None:
    assert waiting_on(_task(INPUT)).waiting is Waiting.UNKNOWN
    assert waiting_on(_task(INPUT, {}, _approval("apr-1"))).waiting is Waiting.UNKNOWN


@pytest.mark.parametrize("state", [TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_FAILED])
def test_a_task_that_is_not_paused_waits_on_nothing(state: TaskState) -> None:
    task = _task(state, {"interrupt_type": "tool_approval"}, _approval("apr-1"))
    assert waiting_on(task) == Pause(Waiting.NOTHING)
